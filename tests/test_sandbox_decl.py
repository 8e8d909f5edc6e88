"""The ``sandbox`` declaration: read strictly in skill.json and SKILL.md, published in both schemas.

Every sample is written to a real manifest in ``tmp_path`` and checked through the
same ``validate`` path the CLI uses (real loaders, real files), so each refusal is
asserted with its code, its JSON pointer and its message.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from clirun import run
from jsonschema import Draft202012Validator

from ongrid_plugins import Settings, SkillHost
from ongrid_plugins.catalog.validate import FileReport, validate_paths
from ongrid_plugins.commands.scaffold import scaffold
from ongrid_plugins.discovery.roots import builtin_skills_dir
from ongrid_plugins.models import Problem, SandboxDecl, SandboxLimits
from ongrid_plugins.settings import MAX_SANDBOX_LIMITS
from ongrid_plugins.testing import make_skill, make_skill_md

REPO = Path(__file__).resolve().parent.parent
SCHEMAS = REPO / "ongrid_plugins" / "schemas"
SKILL_SCHEMA = Draft202012Validator(json.loads((SCHEMAS / "skill.schema.json").read_text()))
SKILL_MD_SCHEMA = Draft202012Validator(json.loads((SCHEMAS / "skill-md.schema.json").read_text()))
FORMATS = ("json", "md")

# -------------------------------------------------------------------------
# Samples: (declaration, code, pointer under the declaration, message part)
# -------------------------------------------------------------------------

NOT_A_MAPPING = ["yes", [], None, 3, True, ["/var/log"]]
NOT_A_BOOL = ["yes", "true", 1, 0, None, [], {}]
NOT_A_LIST = ["/var/log", {}, None, 1, True]
NOT_A_PATH_STRING = [3, None, True, ["/x"], {"a": 1}, 1.5]
BAD_PATHS = [
    ("", "is empty"),
    ("relative/dir", "must be an absolute path or start with ~/"),
    ("./here", "must be an absolute path or start with ~/"),
    ("~", "must be an absolute path or start with ~/"),
    ("~root/.ssh", "must be an absolute path or start with ~/"),
    (" /var/log", "must be an absolute path or start with ~/"),
    ("~/../etc", "must not hold a .. component"),
    ("/var/../etc/shadow", "must not hold a .. component"),
    ("/var/log/..", "must not hold a .. component"),
    ("/a\0b", "holds a NUL byte"),
    ("/" + "a" * 4100, "is longer than 4096 characters"),
    ("/a" * 65, "has more than 64 components"),
    ("~" + "/a" * 65, "has more than 64 components"),
]
BAD_LIMIT_TYPES = [True, False, 1.5, 64.0, "64", None, [], {}]
BAD_LIMIT_VALUES = [0, -1, -(10**12)]

BAD: list[tuple[Any, str, str, str]] = [
    *[(raw, "wrong_type", "", "must be") for raw in NOT_A_MAPPING],
    *[({"network": v}, "wrong_type", "/network", "must be true or false") for v in NOT_A_BOOL],
    *[({key: v}, "wrong_type", f"/{key}", "of paths") for key in ("read", "write") for v in NOT_A_LIST],
    *[({"write": [v]}, "wrong_type", "/write/0", "must be a path string") for v in NOT_A_PATH_STRING],
    *[({"read": ["/ok", p]}, "bad_sandbox_path", "/read/1", m) for p, m in BAD_PATHS],
    ({"write": [f"/srv/{i}" for i in range(65)]}, "too_many_paths", "/write", "at most 64"),
    *[({"limits": v}, "wrong_type", "/limits", "limit names to numbers") for v in ("64", [], None, 3)],
    *[
        ({"limits": {name: v}}, "wrong_type", f"/limits/{name}", "must be a whole number")
        for name in MAX_SANDBOX_LIMITS
        for v in BAD_LIMIT_TYPES
    ],
    *[
        ({"limits": {name: v}}, "limit_out_of_range", f"/limits/{name}", "must be at least 1")
        for name in MAX_SANDBOX_LIMITS
        for v in BAD_LIMIT_VALUES
    ],
    *[
        ({"limits": {name: cap + 1}}, "limit_above_cap", f"/limits/{name}", f"cap of {cap}")
        for name, cap in MAX_SANDBOX_LIMITS.items()
    ],
    ({"limits": {"memory_mb": 10**30}}, "limit_above_cap", "/limits/memory_mb", "cap of 65536"),
]

GOOD: list[tuple[Any, SandboxDecl]] = [
    ({}, SandboxDecl()),
    ({"network": False}, SandboxDecl(network=False)),
    ({"network": True, "read": [], "write": []}, SandboxDecl(network=True)),
    ({"read": ["/var/log", "/var/log/", "/var//log"]}, SandboxDecl(read=["/var/log"])),
    ({"write": ["//srv/app/./cache"]}, SandboxDecl(write=["/srv/app/cache"])),
    ({"write": ["/srv/a..b/..c", "/srv/données x"]}, SandboxDecl(write=["/srv/a..b/..c", "/srv/données x"])),
    ({"read": [f"/srv/{i}" for i in range(64)]}, SandboxDecl(read=[f"/srv/{i}" for i in range(64)])),
    ({"read": ["/a" * 64]}, SandboxDecl(read=["/a" * 64])),
    ({"limits": {}}, SandboxDecl()),
    ({"limits": dict.fromkeys(MAX_SANDBOX_LIMITS, 1)}, SandboxDecl(limits=SandboxLimits(1, 1, 1, 1, 1))),
    ({"limits": dict(MAX_SANDBOX_LIMITS)}, SandboxDecl(limits=SandboxLimits(**MAX_SANDBOX_LIMITS))),
]


def write_skill(root: Path, fmt: str, sandbox: Any, name: str = "probe", cls: str = "mutating") -> Path:
    """A manifest of one exec tool whose skill-level declaration is ``sandbox``."""
    if fmt == "json":
        return make_skill(root, name, sandbox=sandbox, **{"class": cls}) / "skill.json"
    tool = {"name": name, "impl": "exec:run.sh", "class": cls, "description": "d"}
    folder = make_skill_md(
        root,
        name,
        tools=[tool],
        metadata={"ongrid": {"sandbox": sandbox}},
        files={"run.sh": "#!/bin/sh\necho '{}'\n"},
    )
    return folder / "SKILL.md"


def prefix(fmt: str) -> str:
    return "/sandbox" if fmt == "json" else "/metadata/ongrid/sandbox"


def check(make_host: Any, path: Path) -> FileReport:
    host = make_host(path.parent.parent)
    [report] = validate_paths([str(path)], host.pm, host.settings)
    return report


def errors(report: FileReport) -> list[Problem]:
    return report.errors


# -------------------------------------------------------------------------
# Refusals: every wrong type, missing, huge or hostile value, both formats
# -------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize(("sandbox", "code", "pointer", "part"), BAD, ids=[repr(b[0])[:50] for b in BAD])
def test_a_broken_declaration_is_an_error_with_its_pointer(
    make_host: Any, root: Path, fmt: str, sandbox: Any, code: str, pointer: str, part: str
) -> None:
    report = check(make_host, write_skill(root, fmt, sandbox))
    assert not report.ok
    [error] = errors(report)
    assert (error.code, error.pointer) == (code, prefix(fmt) + pointer)
    assert part in error.message
    assert error.path.endswith("skill.json" if fmt == "json" else "SKILL.md")


@pytest.mark.parametrize("fmt", FORMATS)
def test_error_messages_say_what_where_and_what_to_do(make_host: Any, root: Path, fmt: str) -> None:
    sandbox = {"network": "yes", "write": "/var/cache/app", "limits": {"memory_mb": 64.0}}
    report = check(make_host, write_skill(root, fmt, sandbox))
    found = {p.pointer.rpartition("/")[2]: p for p in errors(report)}
    label = "sandbox" if fmt == "json" else "metadata.ongrid.sandbox"
    assert found["network"].message == f'"{label}.network" must be true or false (got a string "yes")'
    assert found["network"].hint == "write true or false without quotes"
    kind = "an array" if fmt == "json" else "a list"
    assert (
        found["write"].message == f'"{label}.write" must be {kind} of paths (got a string "/var/cache/app")'
    )
    assert found["write"].hint == 'write a list, even of one path: ["/var/cache/app"]'
    assert (
        found["memory_mb"].message == f'"{label}.limits.memory_mb" must be a whole number (got a number 64.0)'
    )
    assert found["memory_mb"].hint == "write a number from 1 to 65536 without quotes"


def test_a_null_declaration_is_refused_with_the_empty_mapping_as_the_fix(make_host: Any, root: Path) -> None:
    folder = make_skill_md(
        root, "empty", raw="---\nname: empty\ndescription: d\nmetadata:\n  ongrid:\n    sandbox:\n---\n"
    )
    [error] = errors(check(make_host, folder / "SKILL.md"))
    assert error.message == '"metadata.ongrid.sandbox" must be a mapping of what the skill needs (got null)'
    assert error.hint == "use {} to declare that it needs nothing beyond its class"


@pytest.mark.parametrize("fmt", FORMATS)
def test_all_errors_of_a_declaration_are_reported_at_once(make_host: Any, root: Path, fmt: str) -> None:
    sandbox = {"network": 1, "read": ["rel", 3, "/a/../b"], "limits": {"processes": 0, "open_files": "9"}}
    report = check(make_host, write_skill(root, fmt, sandbox))
    pointers = [p.pointer.removeprefix(prefix(fmt)) for p in errors(report)]
    assert pointers == [
        "/network",
        "/read/0",
        "/read/1",
        "/read/2",
        "/limits/processes",
        "/limits/open_files",
    ]


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_broken_declaration_rejects_that_skill_only(
    make_host: Any, root: Path, fmt: str, caplog: pytest.LogCaptureFixture
) -> None:
    write_skill(root, fmt, {"write": ["var/cache"]}, name="broken")
    write_skill(root, fmt, {"write": ["/var/cache/fine"]}, name="fine")
    host = make_host(root)
    with caplog.at_level(logging.WARNING, logger="ongrid_plugins.loader"):
        report = host.load()
    assert [t.name for t in host.tools()] == ["fine"]
    [event] = report.errors
    assert (event.outcome, event.skill) == ("build_error", "broken")
    label = "sandbox" if fmt == "json" else "metadata.ongrid.sandbox"
    assert f'"{label}.write[0]" must be an absolute path or start with ~/ (got "var/cache")' in event.message
    assert any(r.getMessage().startswith('skill loader: build "broken": ') for r in caplog.records)


# -------------------------------------------------------------------------
# What is accepted, and how it is normalised
# -------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize(("sandbox", "expected"), GOOD, ids=[repr(g[0])[:50] for g in GOOD])
def test_a_valid_declaration_loads_normalised(
    make_host: Any, root: Path, fmt: str, sandbox: Any, expected: SandboxDecl
) -> None:
    write_skill(root, fmt, sandbox)
    host = make_host(root)
    host.load()
    assert host.report.errors == []
    assert host.get("probe").sandbox == expected


@pytest.mark.parametrize("fmt", FORMATS)
def test_without_a_declaration_the_tool_has_none(make_host: Any, root: Path, fmt: str) -> None:
    if fmt == "json":
        make_skill(root, "probe")
    else:
        make_skill_md(
            root, "probe", tools=[{"name": "probe", "impl": "exec:run.sh"}], files={"run.sh": "#!/bin/sh\n"}
        )
    host = make_host(root)
    host.load()
    assert host.get("probe").sandbox is None
    assert host.get("probe").extra == {}


@pytest.mark.parametrize("fmt", FORMATS)
def test_tilde_paths_expand_against_the_home_of_the_user_running_the_host(
    make_host: Any, root: Path, tmp_path: Path, fmt: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "operator-home"
    monkeypatch.setenv("HOME", str(home))
    write_skill(root, fmt, {"read": ["~/.config/app"], "write": ["~/", "~/.cache/app/"]})
    host = make_host(root)
    host.load()
    declared = host.get("probe").sandbox
    assert declared is not None
    assert declared.read == (f"{home}/.config/app",)
    assert declared.write == (str(home), f"{home}/.cache/app")


def test_a_tilde_path_without_a_home_folder_is_refused(
    make_host: Any, root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", "relative-home")  # expanduser then gives a relative path
    [error] = errors(check(make_host, write_skill(root, "json", {"write": ["~/x"]})))
    assert error.code == "bad_sandbox_path"
    assert "the user running the host has no home folder" in error.message


# -------------------------------------------------------------------------
# The host's own folders: never declared, whichever way they are reached
# -------------------------------------------------------------------------


def hidden_cases(tmp_path: Path) -> list[tuple[str, str, str]]:
    state, config, cache = tmp_path / ".ongrid-state", tmp_path / ".ongrid-config", tmp_path / ".ongrid-cache"
    return [
        (str(state), "is inside", "state"),
        (f"{state}/approvals.db", "is inside", "state"),
        (f"{state}/journal/", "is inside", "state"),
        (str(config), "is inside", "config"),
        (f"{config}/tokens.json", "is inside", "config"),
        (f"{cache}/verdicts", "is inside", "cache"),
    ]


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("key", ["read", "write"])
def test_a_path_that_holds_the_hosts_state_is_accepted_and_granted_without_it(
    make_host: Any, tmp_path: Path, fmt: str, key: str
) -> None:
    root = tmp_path / "skills"
    box = tmp_path / "box"
    manifest = write_skill(root, fmt, {key: [str(box)]})
    host = make_host(root, state_dir=str(box / "state"), cache_dir=str(box / "cache"))
    [report] = validate_paths([str(manifest)], host.pm, host.settings)
    assert report.errors == []


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("key", ["read", "write"])
def test_no_path_may_be_inside_the_hosts_state_config_or_cache(
    make_host: Any, tmp_path: Path, fmt: str, key: str
) -> None:
    root = tmp_path / "skills"
    for index, (path, relation, kind) in enumerate(hidden_cases(tmp_path)):
        manifest = write_skill(root, fmt, {key: [path]}, name=f"s{index}")
        [error] = errors(check(make_host, manifest))
        assert error.code == "sandbox_path_hidden", path
        assert error.pointer == f"{prefix(fmt)}/{key}/0"
        assert f" {relation} the host's {kind} folder " in error.message, (path, error.message)
        assert error.hint == "declare a folder of the skill's own instead"


def test_a_symlink_to_the_state_folder_is_refused_as_the_state_folder(make_host: Any, tmp_path: Path) -> None:
    state = tmp_path / ".ongrid-state"
    state.mkdir()
    (tmp_path / "innocent").symlink_to(state)
    (tmp_path / "parent-link").symlink_to(tmp_path)
    root = tmp_path / "skills"
    for name, path in [
        ("a", tmp_path / "innocent"),
        ("b", tmp_path / "innocent" / "sub"),
    ]:
        [error] = errors(check(make_host, write_skill(root, "json", {"write": [str(path)]}, name=name)))
        assert error.code == "sandbox_path_hidden"
        assert f"{path}, really " in error.message


@pytest.mark.parametrize("key", ["read", "write"])
def test_a_persona_folder_is_refused_as_the_hosts_own(make_host: Any, tmp_path: Path, key: str) -> None:
    """The attack: a mutating skill declaring ONGRID_PERSONAS_DIRS as a write path turned a
    read-only persona into a dual-sign-required one."""
    personas = tmp_path / "etc-personas"
    personas.mkdir()
    root = tmp_path / "skills"
    manifest = write_skill(root, "json", {key: [str(personas / "auditor.md")]})
    host = make_host(root, persona_dirs=(str(personas),))
    [report] = validate_paths([str(manifest)], host.pm, host.settings)
    [error] = report.errors
    assert error.code == "sandbox_path_hidden"
    assert "inside the host's persona folder" in error.message, error.message


def test_a_persona_folder_is_hidden_from_every_call() -> None:
    from ongrid_plugins import Settings
    from ongrid_plugins.executors.confine.profile import hidden_paths

    settings = Settings(persona_dirs=("/srv/ongrid-personas",), include_defaults=False)
    assert "/srv/ongrid-personas" in hidden_paths(settings)


def test_the_refusal_follows_the_configured_folders(make_host: Any, tmp_path: Path) -> None:
    root = tmp_path / "skills"
    elsewhere = tmp_path / "var-lib-ongrid"
    manifest = write_skill(root, "json", {"write": [str(elsewhere / "x"), str(tmp_path / ".ongrid-state")]})
    host = make_host(root, state_dir=str(elsewhere), cache_dir=None)
    [report] = validate_paths([str(manifest)], host.pm, host.settings)
    [error] = report.errors
    assert error.pointer == "/sandbox/write/0"  # the default state folder is free to declare now


def test_a_skill_may_declare_its_own_folders_beside_the_hosts(make_host: Any, tmp_path: Path) -> None:
    root = tmp_path / "skills"
    siblings = [
        str(tmp_path / ".ongrid-state-other"),
        str(tmp_path / ".ongrid-cache2"),
        str(tmp_path / "app"),
    ]
    write_skill(root, "json", {"write": siblings})
    host = make_host(root)
    host.load()
    assert host.get("probe").sandbox == SandboxDecl(write=siblings)


@pytest.mark.parametrize("fmt", FORMATS)
def test_no_skill_may_write_where_skills_are_loaded_from(make_host: Any, tmp_path: Path, fmt: str) -> None:
    """Writing a root would let a skill plant a skill, or rewrite its own checked entry."""
    root = tmp_path / "skills"
    other = tmp_path / "other-root"
    other.mkdir()
    targets = [
        (str(root / "probe"), "is inside"),  # its own folder
        (str(root / "probe" / "run.sh"), "is inside"),  # its own entry
        (str(root), "is inside"),
        (str(other / "planted"), "is inside"),  # another configured root
        (str(tmp_path / ".ongrid-user-skills"), "is inside"),
        (str(tmp_path / ".ongrid-system-skills" / "x"), "is inside"),
        (builtin_skills_dir(), "is inside"),
        (os.path.dirname(builtin_skills_dir()), "holds"),
    ]
    for path, relation in targets:
        manifest = write_skill(root, fmt, {"write": [path]})
        host = make_host(root, other)
        [report] = validate_paths([str(manifest)], host.pm, host.settings)
        [error] = report.errors
        assert error.code == "sandbox_path_skill_root", path
        assert f"{relation} the skill root " in error.message, (path, error.message)
        assert error.hint == "declare a folder outside every skill root"


def test_a_skill_may_still_declare_reading_a_skill_root(make_host: Any, root: Path) -> None:
    write_skill(root, "json", {"read": [str(root)]})
    host = make_host(root)
    host.load()
    assert host.get("probe").sandbox == SandboxDecl(read=[str(root)])


# -------------------------------------------------------------------------
# Limits against the operator's caps
# -------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_limit_above_the_operators_cap_names_the_cap_and_the_variable(
    make_host: Any, root: Path, fmt: str
) -> None:
    caps = Settings.from_env({"ONGRID_SANDBOX_LIMITS": "memory_mb=512,processes=16"}).sandbox_caps
    manifest = write_skill(root, fmt, {"limits": {"memory_mb": 600, "processes": 16, "cpu_seconds": 86400}})
    host = make_host(root, sandbox_caps=caps)
    [report] = validate_paths([str(manifest)], host.pm, host.settings)
    [error] = report.errors
    assert (error.code, error.pointer) == ("limit_above_cap", prefix(fmt) + "/limits/memory_mb")
    assert "is 600, above the operator's cap of 512 (ONGRID_SANDBOX_LIMITS)" in error.message
    assert (
        error.hint
        == "ask for at most 512, or have the operator raise the cap: ONGRID_SANDBOX_LIMITS=memory_mb=600"
    )


def test_a_limit_beyond_any_cap_is_not_told_to_raise_the_cap(make_host: Any, root: Path) -> None:
    [error] = errors(check(make_host, write_skill(root, "json", {"limits": {"open_files": 10**30}})))
    assert error.hint == "ask for at most 65536"


def test_limits_at_the_cap_load(make_host: Any, root: Path) -> None:
    write_skill(root, "json", {"limits": {"memory_mb": 512}})
    host = make_host(root, sandbox_caps={**MAX_SANDBOX_LIMITS, "memory_mb": 512})
    host.load()
    declared = host.get("probe").sandbox
    assert declared is not None and declared.limits == SandboxLimits(memory_mb=512)


# -------------------------------------------------------------------------
# Unknown keys: warned with the closest known one, ignored, never fatal
# -------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize(
    ("sandbox", "pointer", "closest"),
    [
        ({"netwrk": True}, "/netwrk", "network"),
        ({"writes": ["/srv/x"]}, "/writes", "write"),
        ({"limit": {}}, "/limit", "limits"),
        ({"limits": {"memory": 64}}, "/limits/memory", "memory_mb"),
        ({"limits": {"memory-mb": 64}}, "/limits/memory-mb", "memory_mb"),
        ({"limits": {"procs": 4}}, "/limits/procs", "processes"),
        ({"limits": {"open_file": 4}}, "/limits/open_file", "open_files"),
    ],
)
def test_an_unknown_key_is_warned_with_the_closest_known_one(
    make_host: Any, root: Path, fmt: str, sandbox: dict[str, Any], pointer: str, closest: str
) -> None:
    report = check(make_host, write_skill(root, fmt, sandbox))
    assert report.ok
    [warning] = [p for p in report.problems if p.code == "unknown_field"]
    assert warning.level == "warning" and warning.pointer == prefix(fmt) + pointer
    assert f'— did you mean "{closest}"?' in warning.message


def test_an_unknown_key_far_from_every_known_one_gets_the_list(make_host: Any, root: Path) -> None:
    report = check(make_host, write_skill(root, "json", {"gpu": 1}))
    [warning] = report.problems
    assert warning.message == 'unknown field "gpu" in "sandbox" is ignored'
    assert warning.hint == "known fields: network, read, write, limits"


def test_a_flood_of_unknown_keys_is_warned_about_sixteen_times_and_counted(
    make_host: Any, root: Path
) -> None:
    flood = {f"key{i}": i for i in range(20_000)}
    report = check(make_host, write_skill(root, "json", {"network": True, "limits": dict(flood)} | flood))
    assert report.ok
    top = [p for p in report.problems if not p.pointer.startswith("/sandbox/limits")]
    limits = [p for p in report.problems if p.pointer.startswith("/sandbox/limits")]
    assert len(top) == len(limits) == 17
    assert top[-1].message == '"sandbox" has 19984 more unknown fields; all are ignored'
    assert limits[-1].message == '"sandbox.limits" has 19984 more unknown fields; all are ignored'


def test_the_declared_parts_survive_an_unknown_key(make_host: Any, root: Path) -> None:
    write_skill(root, "json", {"network": True, "nework": False})
    host = make_host(root)
    host.load()
    assert host.get("probe").sandbox == SandboxDecl(network=True)
    assert "sandbox" not in host.get("probe").extra


# -------------------------------------------------------------------------
# SKILL.md: the tool's declaration wins over the skill's, entirely
# -------------------------------------------------------------------------

TOOL_WINS = """\
---
name: reports
description: Fetch and store reports.
metadata:
  ongrid:
    sandbox: {network: true, write: [/srv/reports], limits: {processes: 8}}
tools:
  - name: fetch_report
    impl: exec:run.sh
    class: read
  - name: store_report
    impl: exec:run.sh
    class: write
    sandbox:
      limits: {memory_mb: 256}
  - name: offline_report
    impl: exec:run.sh
    sandbox: {}
---
"""


def test_a_tools_declaration_replaces_the_skills_whole(make_host: Any, root: Path) -> None:
    make_skill_md(root, "reports", raw=TOOL_WINS, files={"run.sh": "#!/bin/sh\necho '{}'\n"})
    host = make_host(root)
    host.load()
    skill_level = SandboxDecl(network=True, write=["/srv/reports"], limits=SandboxLimits(processes=8))
    assert host.get("fetch_report").sandbox == skill_level
    assert host.get("store_report").sandbox == SandboxDecl(limits=SandboxLimits(memory_mb=256))
    assert host.get("offline_report").sandbox == SandboxDecl()
    assert "sandbox" not in host.get("store_report").extra


def test_a_broken_tool_declaration_names_the_tool_and_rejects_the_skill(make_host: Any, root: Path) -> None:
    raw = TOOL_WINS.replace("limits: {memory_mb: 256}", "network: 'on'")
    folder = make_skill_md(root, "reports", raw=raw, files={"run.sh": "#!/bin/sh\necho '{}'\n"})
    [error] = errors(check(make_host, folder / "SKILL.md"))
    assert error.pointer == "/tools/1/sandbox/network"
    assert error.message == '"tools[1].sandbox.network" must be true or false (got a string "on")'


def test_a_broken_skill_declaration_rejects_the_skill_even_when_every_tool_has_its_own(
    make_host: Any, root: Path
) -> None:
    tools = [{"name": "a", "impl": "exec:run.sh", "sandbox": {}}]
    folder = make_skill_md(
        root,
        "s",
        tools=tools,
        metadata={"ongrid": {"sandbox": {"read": "/x"}}},
        files={"run.sh": "#!/bin/sh\n"},
    )
    [error] = errors(check(make_host, folder / "SKILL.md"))
    assert error.pointer == "/metadata/ongrid/sandbox/read"


def test_a_skill_declaration_also_covers_native_tools(make_host: Any, root: Path) -> None:
    tools = [{"name": "probe", "impl": "builtin:nowhere.probe"}]
    make_skill_md(root, "s", tools=tools, metadata={"ongrid": {"sandbox": {"network": True}}})
    host = make_host(root)
    host.load()
    assert host.get("probe").sandbox == SandboxDecl(network=True)


def test_yaml_booleans_are_booleans_but_quoted_ones_are_strings(make_host: Any, root: Path) -> None:
    for name, value, ok in [
        ("a", "yes", True),
        ("b", "on", True),
        ("c", "'yes'", False),
        ("d", '"true"', False),
    ]:
        front = f"name: {name}\ndescription: d\nmetadata:\n  ongrid:\n    sandbox: {{network: {value}}}\n"
        raw = f"---\n{front}---\n"
        folder = make_skill_md(root, name, raw=raw)
        assert check(make_host, folder / "SKILL.md").ok is ok, value


# -------------------------------------------------------------------------
# The published schemas accept and refuse what the loader does
# -------------------------------------------------------------------------


def schema_blind(decl: Any) -> bool:
    """What a schema cannot tell from 64: 64.0 (the host's folders and lowered caps are left out too)."""
    limits = decl.get("limits") if isinstance(decl, dict) else None
    return isinstance(limits, dict) and any(isinstance(v, float) and v.is_integer() for v in limits.values())


def parity_samples() -> list[tuple[Any, bool]]:
    samples = [(decl, True) for decl, _expected in GOOD]
    samples += [(decl, False) for decl, _c, _p, _m in BAD]
    samples += [({"netwrk": 1, "limits": {"gpu": "x"}}, True)]  # unknown keys: warnings only
    return [(decl, ok) for decl, ok in samples if not schema_blind(decl)]


@pytest.mark.parametrize(
    ("sandbox", "loads"), parity_samples(), ids=[repr(s[0])[:50] for s in parity_samples()]
)
def test_skill_schema_json_agrees_with_the_loader(
    make_host: Any, root: Path, sandbox: Any, loads: bool
) -> None:
    manifest = {"name": "probe", "description": "d", "entry": "run.sh", "sandbox": sandbox}
    assert SKILL_SCHEMA.is_valid(manifest) is loads
    assert check(make_host, write_skill(root, "json", sandbox)).ok is loads


@pytest.mark.parametrize(
    ("sandbox", "loads"), parity_samples(), ids=[repr(s[0])[:50] for s in parity_samples()]
)
def test_skill_md_schema_json_agrees_with_the_loader(
    make_host: Any, root: Path, sandbox: Any, loads: bool
) -> None:
    at_skill = {
        "name": "probe",
        "metadata": {"ongrid": {"sandbox": sandbox}},
        "tools": [{"name": "t", "impl": "exec:run.sh"}],
    }
    at_tool = {"name": "probe", "tools": [{"name": "t", "impl": "exec:run.sh", "sandbox": sandbox}]}
    assert SKILL_MD_SCHEMA.is_valid(at_skill) is loads
    assert SKILL_MD_SCHEMA.is_valid(at_tool) is loads
    assert check(make_host, write_skill(root, "md", sandbox)).ok is loads


def test_the_two_schemas_share_one_definition_of_the_declaration() -> None:
    json_defs = json.loads((SCHEMAS / "skill.schema.json").read_text())["$defs"]
    md_defs = json.loads((SCHEMAS / "skill-md.schema.json").read_text())["$defs"]
    assert json_defs == md_defs
    limits = json_defs["sandbox"]["properties"]["limits"]["properties"]
    assert {name: limit["maximum"] for name, limit in limits.items()} == MAX_SANDBOX_LIMITS
    Draft202012Validator.check_schema(json.loads((SCHEMAS / "skill-md.schema.json").read_text()))


def test_the_schemas_cannot_see_64_0_but_the_loader_refuses_it(make_host: Any, root: Path) -> None:
    manifest = {
        "name": "probe",
        "description": "d",
        "entry": "run.sh",
        "sandbox": {"limits": {"processes": 64.0}},
    }
    assert SKILL_SCHEMA.is_valid(manifest)
    assert not check(make_host, write_skill(root, "json", manifest["sandbox"])).ok


def test_every_shipped_skill_md_front_matter_validates_against_its_schema() -> None:
    from ongrid_plugins.loaders.frontmatter import parse_yaml, split

    files = [*REPO.glob("ongrid_plugins/skills/*/SKILL.md"), *REPO.glob("plugins/*/*/*/SKILL.md")]
    assert len(files) >= 4
    for path in files:
        document = split(path.read_text())
        assert document.front is not None
        data, _quoted = parse_yaml(document.front, document.front_line)
        errors_found = [e.message for e in SKILL_MD_SCHEMA.iter_errors(data)]
        assert not errors_found, (path, errors_found)


# -------------------------------------------------------------------------
# validate reports each tool's declaration
# -------------------------------------------------------------------------


def test_validate_prints_each_declaration_as_loaded(
    capsys: pytest.CaptureFixture[str], root: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "h"))
    sandbox = {"network": True, "write": ["~/.cache/app"], "limits": {"memory_mb": 64}}
    folder = write_skill(root, "json", sandbox).parent
    plain = make_skill(root, "plain")
    code, out, _err = run(capsys, "validate", str(folder), str(plain))
    assert code == 0
    assert f"  sandbox of probe: network; write {tmp_path}/h/.cache/app; limits memory_mb=64\n" in out
    assert "sandbox of plain" not in out
    code, out, _err = run(capsys, "validate", "--json", str(folder), str(plain))
    files = {Path(f["path"]).parent.name: f for f in json.loads(out)["files"]}
    assert files["probe"]["sandbox"] == {"probe": {**sandbox, "write": [f"{tmp_path}/h/.cache/app"]}}
    assert files["plain"]["sandbox"] == {"plain": None}


# -------------------------------------------------------------------------
# What ships: the example packs, the scaffolds, entries run through a descriptor
# -------------------------------------------------------------------------


def test_the_example_packs_declare_what_they_need(make_host: Any) -> None:
    host = make_host()
    reports = validate_paths(
        [str(REPO / "plugins" / "ongrid-pack-disk"), str(REPO / "plugins" / "ongrid-pack-netcheck")],
        host.pm,
        host.settings,
    )
    declared = {tool: decl for r in reports for tool, decl in r.sandbox.items()}
    assert declared == {
        "cache_report": None,  # read-only: needs nothing
        "disk_cleaner": {"write": [os.path.expanduser("~/.cache"), "/var/cache"]},
        "tcp_probe": {"network": True},
        "http_probe": {"network": True},
        "dns_lookup": {"network": True},
    }


def test_the_builtin_skills_are_read_only_natives_that_declare_nothing(make_host: Any) -> None:
    host = make_host(include_defaults=True)
    host.load()
    builtin = [t for t in host.tools() if t.skill in ("disk_usage", "host_files", "system_info")]
    assert len(builtin) == 4
    assert {(t.tool_class.value, t.kind, t.sandbox) for t in builtin} == {("safe", "native", None)}


@pytest.mark.parametrize("fmt", FORMATS)
def test_the_scaffolds_show_where_the_declaration_goes(
    make_host: Any, tmp_path: Path, fmt: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "h"))
    folder = scaffold("greet", str(tmp_path / "skills"), fmt=fmt)
    host = make_host(tmp_path / "skills")
    host.load()
    if fmt == "json":
        assert json.loads((folder / "skill.json").read_text())["sandbox"] == {}
        assert host.get("greet").sandbox == SandboxDecl()
        return
    manifest = folder / "SKILL.md"
    assert host.get("greet").sandbox is None  # the declaration is a comment until the author needs it
    manifest.write_text(manifest.read_text().replace("    # sandbox: ", "    sandbox: "))
    host.reload()
    assert host.get("greet").sandbox == SandboxDecl(
        network=True, write=[f"{tmp_path}/h/.cache/myapp"], limits=SandboxLimits(memory_mb=256)
    )


def test_no_shipped_python_entry_finds_its_folder_with_abspath_of_file() -> None:
    entries = [
        *REPO.glob("ongrid_plugins/skills/*/*.py"),
        *REPO.glob("plugins/*/*/*/run.py"),
    ]
    assert entries
    for path in entries:
        text = path.read_text()
        assert "abspath(__file__)" not in text and "dirname(__file__)" not in text, path


def run_through_a_descriptor(entry: Path, args: dict[str, Any]) -> subprocess.CompletedProcess[str]:
    """Run a Python entry as the confined executor will: its name is /proc/self/fd/N."""
    fd = os.open(entry, os.O_RDONLY)
    try:
        return subprocess.run(
            [sys.executable, f"/proc/self/fd/{fd}"],
            input=json.dumps(args),
            capture_output=True,
            text=True,
            pass_fds=(fd,),
            cwd="/",
            timeout=30,
            check=False,
        )
    finally:
        os.close(fd)


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc")
def test_the_disk_pack_entries_work_when_run_through_a_descriptor(tmp_path: Path) -> None:
    pack = REPO / "plugins" / "ongrid-pack-disk" / "ongrid_pack_disk"
    (tmp_path / "cache").mkdir()
    (tmp_path / "cache" / "old.bin").write_bytes(b"x" * 10)
    for name in ("cache_report", "disk_cleaner"):
        done = run_through_a_descriptor(pack / name / "run.py", {"path": str(tmp_path / "cache")})
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["path"] == str(tmp_path / "cache")


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc")
def test_abspath_of_file_breaks_when_run_through_a_descriptor(tmp_path: Path) -> None:
    """The attack on the old spelling: a helper one folder up (as in the disk pack) is lost.

    Python resolves the script's own folder for ``sys.path[0]``, but ``__file__`` stays
    ``/proc/self/fd/N``: ``abspath`` then points into ``/proc/self``.
    """
    (tmp_path / "helper.py").write_text("VALUE = 1\n")
    (tmp_path / "skill").mkdir()
    for spelling, works in (("realpath", True), ("abspath", False)):
        entry = tmp_path / "skill" / f"run_{spelling}.py"
        entry.write_text(
            "import json, os, sys\n"
            f"sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.{spelling}(__file__))))\n"
            "import helper\nprint(json.dumps({'file': __file__, 'value': helper.VALUE}))\n"
        )
        done = run_through_a_descriptor(entry, {})
        assert (done.returncode == 0) is works, done.stderr
        if works:
            assert json.loads(done.stdout)["file"].startswith("/proc/self/fd/")
        else:
            assert "ModuleNotFoundError: No module named 'helper'" in done.stderr


def test_a_host_with_declared_skills_still_starts_when_every_declaration_is_broken(tmp_path: Path) -> None:
    root = tmp_path / "skills"
    for index, (decl, _code, _pointer, _part) in enumerate(BAD[:20]):
        write_skill(root, "json" if index % 2 else "md", decl, name=f"bad{index}")
    host = SkillHost(
        Settings(
            skill_dirs=[str(root)],
            include_defaults=False,
            load_entry_points=False,
            state_dir=str(tmp_path / "state"),
            config_dir=str(tmp_path / "config"),
            cache_dir=None,
        )
    )
    report = host.load()
    assert report.registered == 0 and len(report.errors) == 20
