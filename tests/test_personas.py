"""Persona files: parsing, discovery order, broken files, reserved names, and their use in calls."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest

from ongrid_plugins import (
    ConfigError,
    ConfirmationRequired,
    PermissionDenied,
    PermissionMode,
    Persona,
    Settings,
    UnknownPersona,
)
from ongrid_plugins.cli import main
from ongrid_plugins.gate import personas
from ongrid_plugins.gate.persona_lookup import PersonaLookup
from ongrid_plugins.gate.personas import PersonaFileError, discover, looks_like_path, read_persona
from ongrid_plugins.testing import isolated_settings, make_skill

ONCALL = """---
name: oncall
description: Night shift. Restarts things, never deletes them.
permission_mode: mutating-with-confirm
tools: ["svc_*", "look"]
disallowed_tools: svc_delete, svc_purge
model: opus
color: blue
since: 2024-05-01
---
You are the on-call assistant.

Be careful.
"""


def write(folder: Path, name: str, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path


def persona_text(name: str, mode: str = "read-only", **extra: str) -> str:
    lines = [f"name: {name}", f"permission_mode: {mode}", *(f"{k}: {v}" for k, v in extra.items())]
    return "---\n" + "\n".join(lines) + "\n---\nbody\n"


# ---------------------------------------------------------------- one file


def test_a_persona_file_keeps_every_field_and_the_unknown_keys(tmp_path: Path) -> None:
    persona = read_persona(write(tmp_path, "oncall.md", ONCALL))
    assert persona.name == "oncall"
    assert persona.permission_mode is PermissionMode.MUTATING_WITH_CONFIRM
    assert persona.description == "Night shift. Restarts things, never deletes them."
    assert persona.tools == ("svc_*", "look")
    assert persona.disallowed_tools == ("svc_delete", "svc_purge")
    assert persona.extra == {"model": "opus", "color": "blue", "since": "2024-05-01"}
    assert persona.instructions == "You are the on-call assistant.\n\nBe careful."
    assert persona.path == str(tmp_path / "oncall.md")
    json.dumps(persona.to_dict())  # YAML dates and such are kept as JSON-ready text


def test_defaults_are_least_privilege_mode_and_every_tool(tmp_path: Path) -> None:
    persona = read_persona(write(tmp_path, "p.md", "---\nname: plain\n---\n"))
    assert (persona.permission_mode, persona.tools, persona.disallowed_tools) == (
        PermissionMode.READ_ONLY,
        ("*",),
        (),
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("name: x\n", "starts with a '---' line"),
        ("---\nname: x\n", "not closed by a '---' line"),
        (
            "---\nname: x: y\n---\n",
            "not valid YAML: mapping values are not allowed in this context (line 2, column 8)",
        ),
        ("---\n- a\n- b\n---\n", "must be a mapping"),
        ("---\ndescription: no name\n---\n", "'name' is a required property"),
        ("---\nname: Has Spaces\n---\n", "name: 'Has Spaces' does not match"),
        ("---\nname: x\npermission_mode: root\n---\n", "permission_mode: 'root' is not one of"),
        ("---\nname: x\ntools: 5\n---\n", "tools: 5 is not valid"),
        ("---\nname: viewer\n---\n", "'viewer' is a built-in persona and built-in names are reserved"),
    ],
    ids=[
        "no_front_matter",
        "unclosed",
        "yaml",
        "not_mapping",
        "no_name",
        "bad_name",
        "mode",
        "tools",
        "builtin",
    ],
)
def test_a_broken_file_says_what_is_wrong(tmp_path: Path, text: str, message: str) -> None:
    path = write(tmp_path, "bad.md", text)
    with pytest.raises(PersonaFileError) as info:
        read_persona(path)
    assert message in str(info.value)
    assert info.value.path == str(path)


def test_names_and_paths_are_told_apart() -> None:
    assert not looks_like_path("oncall")
    assert looks_like_path("./oncall.md") and looks_like_path("oncall.md") and looks_like_path("/etc/p")


# ---------------------------------------------------------------- discovery


def test_discovery_order_first_name_wins_broken_and_reserved_files_are_skipped(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    config = tmp_path / "config"
    write(first, "a.md", persona_text("ops", "mutating-with-confirm"))
    write(second, "b.md", persona_text("ops", "dual-sign-required"))
    write(second, "broken.md", "---\nname: [\n---\n")
    write(second, "README.md", "# not a persona")
    write(config / "personas", "admin.md", persona_text("admin", "read-only"))
    write(config / "personas", "lead.md", persona_text("lead", "dual-sign-required"))
    settings = Settings(persona_dirs=(str(first), str(second), "relative/dir"), config_dir=str(config))
    with caplog.at_level(logging.INFO, logger="ongrid_plugins.personas"):
        catalog = discover(settings)
    assert sorted(catalog.personas) == ["lead", "ops"]
    assert catalog.personas["ops"].path == str(first / "a.md")
    messages = [r.getMessage() for r in caplog.records]
    assert (
        f'persona loader: persona "ops" already defined by {first / "a.md"}, skipping {second / "b.md"}'
        in messages
    )
    assert any(
        m.startswith(f"persona loader: parse {second / 'broken.md'}: the front matter is not valid YAML")
        for m in messages
    )
    assert any("'admin' is a built-in persona" in m for m in messages)
    assert any("'relative/dir' is not an absolute path" in m for m in messages)
    assert not any("README" in m for m in messages)
    assert len(catalog.problems) == 4
    assert catalog.names() == ["admin", "lead", "operator", "ops", "viewer"]


def test_the_personas_dirs_variable_is_split_like_the_skill_dirs(tmp_path: Path) -> None:
    settings = Settings.from_env({"ONGRID_PERSONAS_DIRS": f"{tmp_path}/a:{tmp_path}/b,{tmp_path}/c"})
    assert settings.persona_dirs == (f"{tmp_path}/a", f"{tmp_path}/b", f"{tmp_path}/c")


# ---------------------------------------------------------------- the host


@pytest.fixture
def host_with_personas(make_host: Any, root: Path, tmp_path: Path) -> Any:
    make_skill(root, "look")
    make_skill(root, "svc_restart", class_="mutating")
    make_skill(root, "svc_delete", class_="mutating")
    make_skill(root, "wipe", class_="dangerous")
    write(tmp_path / ".ongrid-config" / "personas", "oncall.md", ONCALL)
    return make_host(root)


def test_host_resolves_builtin_file_path_and_object_personas(host_with_personas: Any, tmp_path: Path) -> None:
    host = host_with_personas
    assert host.persona("viewer").permission_mode is PermissionMode.READ_ONLY
    assert host.persona("oncall").path.endswith("oncall.md")
    path = write(tmp_path / "elsewhere", "solo.md", persona_text("solo", "dual-sign-required"))
    assert host.persona(str(path)).name == "solo"
    custom = Persona("custom", PermissionMode.READ_ONLY)
    assert host.persona(custom) is custom
    assert [p.name for p in host.personas()] == ["viewer", "operator", "admin", "oncall"]


def test_an_unknown_persona_is_an_error_listing_the_known_ones(host_with_personas: Any) -> None:
    with pytest.raises(
        UnknownPersona, match="unknown persona 'root'; known personas: admin, oncall, operator, viewer"
    ):
        host_with_personas.call("look", persona="root")
    with pytest.raises(ConfigError, match="persona file"):
        host_with_personas.call("look", persona="/nonexistent/p.md")


def test_a_file_added_later_is_found_without_a_reload(host_with_personas: Any, tmp_path: Path) -> None:
    host = host_with_personas
    with pytest.raises(UnknownPersona):
        host.persona("late")
    write(tmp_path / ".ongrid-config" / "personas", "late.md", persona_text("late"))
    assert host.persona("late").name == "late"


def test_a_file_persona_gates_calls_by_its_globs_and_mode(host_with_personas: Any) -> None:
    host = host_with_personas
    assert [t.name for t in host.tools("oncall")] == ["look", "svc_restart"]
    assert host.call("look", persona="oncall").ok
    with pytest.raises(ConfirmationRequired):
        host.call("svc_restart", persona="oncall")
    assert host.call("svc_restart", persona="oncall", confirm=True).ok
    with pytest.raises(PermissionDenied, match="persona oncall does not allow tool svc_delete"):
        host.call("svc_delete", persona="oncall", confirm=True)
    with pytest.raises(PermissionDenied, match="persona oncall does not allow tool wipe"):
        host.call("wipe", persona="oncall")


# ---------------------------------------------------------------- CLI


def test_cli_personas_lists_and_shows_what_each_tool_needs(
    host_with_personas: Any, root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    monkeypatch.setenv("ONGRID_CONFIG_DIR", str(tmp_path / ".ongrid-config"))
    base = ["--no-defaults", "--dirs", str(root)]
    assert main([*base, "personas", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [p["name"] for p in data["items"]] == ["viewer", "operator", "admin", "oncall"]
    admin = data["items"][2]
    assert {t["name"]: t["needs"] for t in admin["tools_allowed"]} == {
        "look": "-",
        "svc_delete": "confirmation",
        "svc_restart": "confirmation",
        "wipe": "two-person approval",
    }
    assert main([*base, "personas", "oncall"]) == 0
    out = capsys.readouterr().out
    assert "permission mode:  mutating-with-confirm" in out
    assert "svc_restart  mutating  confirmation" in out and "wipe" not in out
    assert main([*base, "list", "--persona", "admin"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:3] == ["NAME", "CLASS", "NEEDS"]
    assert lines[-1].split()[:4] == ["wipe", "dangerous", "two-person", "approval"]
    assert main([*base, "list", "--persona", "viewer", "--json"]) == 0
    items = json.loads(capsys.readouterr().out)["items"]
    assert [(i["name"], i["needs"]["verdict"]) for i in items] == [("look", "allow")]
    assert main([*base, "personas", "nobody"]) == 2
    assert "unknown persona 'nobody'" in capsys.readouterr().err


def test_isolated_settings_keep_persona_files_under_tmp(tmp_path: Path) -> None:
    settings = isolated_settings(tmp_path)
    assert settings.config_dir.startswith(str(tmp_path)) and settings.persona_dirs == ()


# ---------------------------------------------------------------- warnings


def test_a_misspelt_key_is_warned_about_with_the_known_key(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = write(tmp_path, "night.md", "---\nname: night\npermision_mode: dual-sign-required\n---\n")
    with caplog.at_level(logging.WARNING, logger="ongrid_plugins.personas"):
        persona = read_persona(path)
    assert persona.permission_mode is PermissionMode.READ_ONLY
    assert persona.extra == {"permision_mode": "dual-sign-required"}
    assert [r.getMessage() for r in caplog.records] == [
        f'persona loader: persona file {path}: unknown key "permision_mode" — did you mean '
        '"permission_mode"? (without it the persona is read-only)'
    ]


def test_a_path_or_key_cannot_forge_a_persona_loader_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    forged = 'persona loader: registered persona "root" from /etc'
    folder = tmp_path / ("p\n" + forged)
    write(
        folder,
        "ops.md",
        '---\nname: ops\n"evil\\n' + forged.replace('"', '\\"') + '": 1\npermision_mode: x\n---\n',
    )
    write(folder, "bad.md", "---\nname: [\n---\n")
    settings = Settings(persona_dirs=(str(folder),), config_dir=str(tmp_path / "config"))
    with caplog.at_level(logging.DEBUG, logger="ongrid_plugins.personas"):
        discover(settings)
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 4, lines  # registered, unknown key, misspelt key, parse
    assert all(char.isprintable() for line in lines for char in line), lines
    assert any('unknown key "evil\\x0apersona loader' in line for line in lines)


def test_a_persona_file_with_keys_that_read_as_one_is_refused(tmp_path: Path) -> None:
    path = write(tmp_path, "p.md", "---\nname: p\nyes: 1\ntrue: 2\n---\n")
    with pytest.raises(PersonaFileError, match=r'duplicate key "true" .*as "yes", the same key once read'):
        read_persona(path)


def test_agent_file_keys_are_kept_without_a_warning(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="ongrid_plugins.personas"):
        read_persona(write(tmp_path, "oncall.md", ONCALL))
    assert caplog.records == []


def test_a_reserved_name_file_is_warned_about_once_per_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "personas"
    viewer = write(folder, "viewer.md", persona_text("viewer", "dual-sign-required"))
    write(folder, "night.md", "---\nname: night\npermision_mode: admin\n---\n")
    monkeypatch.setenv("ONGRID_PERSONAS_DIRS", str(folder))
    monkeypatch.setenv("ONGRID_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("ONGRID_CACHE_DIR", "off")  # no memory across commands (see test_cli_usability)
    for argv in (["personas"], ["personas", "night"], ["list", "--persona", "night"]):
        monkeypatch.setattr(personas, "_warned", set())  # each command is a process of its own
        assert main(["--no-defaults", "--dirs", str(tmp_path), *argv]) == 0
        err = capsys.readouterr().err
        assert err.count(f"parse {viewer}: 'viewer' is a built-in persona") == 1, argv
        assert err.count('unknown key "permision_mode"') == 1, argv
    main(["--no-defaults", "--dirs", str(tmp_path), "personas"])
    assert "WARNING" not in capsys.readouterr().err  # same process, files unchanged: said already
    # A changed file is a new warning.
    viewer.write_text(persona_text("viewer", "read-only") + "changed\n")
    main(["--no-defaults", "--dirs", str(tmp_path), "personas"])
    assert capsys.readouterr().err.count("'viewer' is a built-in persona") == 1


def test_a_persona_whose_file_is_invalid_is_reported_with_the_file_and_its_problem(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--persona weird` with an invalid weird.md used to say only "unknown persona", and the
    warning about the file had already been counted as shown: the reason was nowhere."""
    config = tmp_path / "config"
    (config / "personas").mkdir(parents=True)
    weird = config / "personas" / "weird.md"
    weird.write_text("---\nname: weird\npermission_mode: godmode\n---\n")
    root = tmp_path / "skills"
    make_skill(root, "good_one")
    monkeypatch.setenv("ONGRID_CONFIG_DIR", str(config))
    monkeypatch.setenv("ONGRID_STATE_DIR", str(tmp_path / "state"))
    for _ in range(2):  # the second time the load warning is held back as already shown
        code = main(["--no-defaults", "--dirs", str(root), "run", "good_one", "{}", "--persona", "weird"])
        assert code == 2
        err = capsys.readouterr().err
        assert f"ERROR: persona 'weird' could not be loaded: persona file {weird}: " in err
        assert "godmode" in err.split("ERROR:", 1)[1]
        assert err.rstrip().endswith("known personas: admin, operator, viewer")
    with pytest.raises(UnknownPersona, match=r"^unknown persona 'other'; known"):
        PersonaLookup().resolve("other", isolated_settings(tmp_path, root, config_dir=str(config)))
