"""Settings from the environment, the published skill.json schema, and registry snapshots."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ongrid_plugins import ConfigError, Settings, Skill, SkillRoot, Tool, ToolClass, UnknownSkill
from ongrid_plugins.discovery.registry import Registry, RegistryBuilder

SCHEMA_FILE = Path(__file__).resolve().parent.parent / "ongrid_plugins" / "schemas" / "skill.schema.json"


def test_from_env_reads_every_variable(tmp_path: Path) -> None:
    env = {
        "ONGRID_SKILLS_EXTERNAL_DIRS": "/a:/b",
        "ONGRID_DISABLE_PLUGINS": "x, y ,",
        "ONGRID_TRACE_PLUGINS": "yes",
        "ONGRID_STRICT": "1",
        "ONGRID_STDOUT_CAP": "1024",
        "ONGRID_KILL_GRACE": "0.5",
        "ONGRID_CACHE_DIR": "off",
        "ONGRID_STATE_DIR": str(tmp_path / "state"),
        "ONGRID_CONFIG_DIR": str(tmp_path / "config"),
        "ONGRID_USER_SKILLS_DIR": str(tmp_path / "user"),
        "ONGRID_SYSTEM_SKILLS_DIR": str(tmp_path / "system"),
    }
    s = Settings.from_env(env)
    assert (s.env_dirs, s.disable_plugins, s.trace_plugins, s.strict) == (
        ("/a", "/b"),
        ("x", "y"),
        True,
        True,
    )
    assert (s.stdout_cap, s.kill_grace, s.cache_dir) == (1024, 0.5, None)
    assert s.state_dir == str(tmp_path / "state") and s.user_skills_dir == str(tmp_path / "user")
    assert s.system_skills_dir == str(tmp_path / "system")


def test_keyword_overrides_win_over_the_environment() -> None:
    s = Settings.from_env({"ONGRID_STDOUT_CAP": "1024"}, stdout_cap=2048, include_defaults=False)
    assert (s.stdout_cap, s.include_defaults) == (2048, False)


def test_defaults_come_from_platformdirs(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    s = Settings.from_env({})
    assert s.user_skills_dir == str(tmp_path / "data" / "ongrid" / "skills")
    assert s.cache_dir == str(tmp_path / "cache" / "ongrid")
    assert Settings().system_skills_dir == "/etc/ongrid/skills"


@pytest.mark.parametrize("cap", [0, -1, True, "16", 1.5])
def test_stdout_cap_must_be_a_positive_int(cap: Any) -> None:
    with pytest.raises(ConfigError, match="stdout_cap must be a positive number of bytes"):
        Settings(stdout_cap=cap)


@pytest.mark.parametrize(
    ("name", "raw", "rule"),
    [
        ("ONGRID_BROKER_TIMEOUT", "x", "> 0"),  # said ">= 0", and then refused 0
        ("ONGRID_BROKER_TIMEOUT", "0", "> 0"),
        ("ONGRID_BROKER_TIMEOUT", "-1", "> 0"),
        ("ONGRID_APPROVAL_TTL", "soon", "> 0"),
        ("ONGRID_APPROVAL_TTL", "0", "> 0"),
        ("ONGRID_KILL_GRACE", "x", ">= 0"),
        ("ONGRID_KILL_GRACE", "inf", ">= 0"),
    ],
)
def test_a_bad_number_of_seconds_is_refused_with_the_rule_that_refused_it(
    name: str, raw: str, rule: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        Settings.from_env({name: raw})
    assert str(caught.value) == f"{name} must be a number of seconds {rule}, got {raw!r}"


def test_zero_is_a_grace_but_not_a_broker_timeout() -> None:
    assert Settings.from_env({"ONGRID_KILL_GRACE": "0"}).kill_grace == 0
    assert Settings.from_env({"ONGRID_BROKER_TIMEOUT": "0.5"}).broker_timeout == 0.5


@pytest.mark.parametrize("name", ["ONGRID_STATE_DIR", "ONGRID_CACHE_DIR", "ONGRID_CONFIG_DIR"])
@pytest.mark.parametrize("raw", ["relative/state", "./state", "~/state"])
def test_a_relative_state_cache_or_config_dir_is_refused_naming_the_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, raw: str
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    with pytest.raises(ConfigError) as caught:
        Settings.from_env({name: raw})
    meant = {"relative/state": tmp_path / "relative" / "state", "./state": tmp_path / "state"}.get(
        raw, tmp_path / "home" / "state"
    )
    assert str(caught.value) == (
        f"{name} must be an absolute path (a relative one moves with the working directory), "
        f"got {raw!r}: give an absolute path, e.g. {meant}"
    )


def test_a_relative_state_dir_stops_the_cli_with_a_config_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from clirun import run

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ONGRID_STATE_DIR", "relative/state")
    code, out, err = run(capsys, "--no-defaults", "audit", "list")
    assert (code, out) == (2, "")
    assert err.startswith("ERROR: ONGRID_STATE_DIR must be an absolute path ")
    assert not (tmp_path / "relative").exists()


def _skill(name: str, *tools: str) -> Skill:
    root = SkillRoot("/r", real="/r")
    made = [
        Tool(
            name=t,
            description=t,
            schema={},
            tool_class=ToolClass.SAFE,
            skill=name,
            source="/r/x",
            kind="native",
        )
        for t in tools
    ]
    return Skill(name=name, description=name, format="test", path=f"/r/{name}", root=root, tools=made)


def test_skills_and_tools_share_one_namespace_first_one_wins() -> None:
    builder = RegistryBuilder()
    assert builder.add(_skill("files", "tail_file", "files")) is None
    assert builder.add(_skill("tail_file")) == "tail_file"
    assert builder.add(_skill("other", "files")) == "files"
    assert builder.add(_skill("twice", "a", "a")) == "a"
    snap = builder.build()
    assert list(snap.skills) == ["files"] and sorted(snap.tools) == ["files", "tail_file"]


def test_snapshots_are_immutable_and_swapped_whole() -> None:
    builder = RegistryBuilder()
    builder.add(_skill("one", "one"))
    registry = Registry()
    first = registry.snapshot
    registry.swap(builder.build())
    assert list(first.tools) == [] and list(registry.snapshot.tools) == ["one"]
    with pytest.raises(TypeError):
        registry.snapshot.tools["x"] = None  # type: ignore[index]
    with pytest.raises(UnknownSkill, match="did you mean 'one'"):
        registry.snapshot.get("onee")


def test_listing_is_sorted_and_filters_by_class_and_category() -> None:
    builder = RegistryBuilder()
    for name in ("zeta", "alpha", "mid"):
        builder.add(_skill(name, name))
    snap = builder.build()
    assert [t.name for t in snap.list_tools()] == ["alpha", "mid", "zeta"]
    assert snap.list_tools(tool_class="mutating") == []
    assert [t.name for t in snap.list_tools(category="external", tool_class="read")] == [
        "alpha",
        "mid",
        "zeta",
    ]


def test_the_published_schema_is_valid_and_agrees_with_the_loader_on_types() -> None:
    from jsonschema import Draft202012Validator

    schema = json.loads(SCHEMA_FILE.read_text())
    Draft202012Validator.check_schema(schema)
    validator = Draft202012Validator(schema)
    good = {
        "name": "disk_cleaner",
        "description": "d",
        "entry": "run.sh",
        "env_allow": ["PATH"],
        "timeout_seconds": 60,
        "class": "mutating",
        "category": "ops",
        "schema": {"type": "object", "properties": {}},
    }
    assert validator.is_valid(good)
    for field, bad in [
        ("name", "Bad-Name"),
        ("timeout_seconds", "30"),
        ("timeout_seconds", -1),
        ("timeout_seconds", True),
        ("env_allow", ["A-B"]),
        ("class", "Safe"),
        ("schema", {"type": "string"}),
        ("description", " "),
    ]:
        assert not validator.is_valid({**good, field: bad}), (field, bad)
    for missing in ("name", "description", "entry"):
        assert not validator.is_valid({k: v for k, v in good.items() if k != missing})
