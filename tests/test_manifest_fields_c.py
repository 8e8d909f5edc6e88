"""The compiled field checks of a skill.json build the skill the Python checks build.

``_speedups.manifest_fields`` vouches for a manifest whose fields are plain (or says None),
and ``skill_json.build_skill`` then checks only the schema and the entry. Every case here
builds the manifest twice, with the compiled checks and with ``_PLAIN`` switched off, and
compares the skill, or the error and every problem, over generated manifests whose fields
are drawn from valid, borderline and hostile values, with real entry files beside them.
"""

from __future__ import annotations

import gc
import os
import sys
from pathlib import Path
from typing import Any

import attrs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ongrid_plugins.errors import ManifestBuildError
from ongrid_plugins.loaders import skill_json
from ongrid_plugins.models import SkillRoot, ToolClass
from ongrid_plugins.settings import Settings

_speedups = pytest.importorskip("ongrid_plugins._speedups", reason="the compiled helpers are not built")

FIELDS = skill_json._compiled_fields()
MANY = settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])

NAMES = ["ok_name", "a", "a" * 64, "a" * 65, "", "  ", "Bad", "a-b", "a b", "a\n", "\u0661", "\xfc", "_9"]
NAMES += [5, None, ["a"]]
DESCRIPTIONS = ["Does a thing.", "", "   ", "\u2003", "\x1c\x1f", " x ", "\u2003y", 3, None, ["d"]]
DESCRIPTIONS += ["\u200b\u200b", "\u200bx", "\x01", "\ufeff\u2003", "\u00ad"]
ENTRIES = [
    "run.sh", "missing.sh", "noexec.sh", "link.sh", "folder", "hard.sh", "setuid.sh", "sub/run.sh",
    "./run.sh", ".", "..", " run.sh", "run.sh\x00", "", "  ", "/bin/sh", 7, None,
]  # fmt: skip
ENVS = [["PATH"], [], ["PATH", "HOME", "PATH"], ["A", "B", "A"], ["_"], ["_1"], ["1A"], ["A-B"], ["\xc9"],
        [3], ["PATH", None], "PATH", {"PATH": 1}, None, ["a" * 300]]  # fmt: skip
TIMEOUTS = [0, 1, 60, 86400, 86401, -1, True, False, 1.0, 2**70, -(2**70), "10", None]
CLASSES = ["", "safe", "mutating", "dangerous", "SAFE", "unsafe", 1, None]
CATEGORIES = ["ops", "", "  ", 3, None, "\u2003"]
SCHEMAS = [
    {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]},
    {"properties": {"n": {"type": "integer", "default": 3, "minimum": 1}}},
    {"properties": {"n": {"type": "integer", "default": "three"}}},
    {"type": "object", "properties": {"a": {"type": "nope"}}},
    {"type": "array"},
    {"properties": {"p": {"type": "string", "pattern": "(a+)+$"}}},
    [],
    "object",
]
EXTRAS: list[dict[str, Any]] = [
    {"$schema": "https://json-schema.org/draft/2020-12/schema"},
    {"unknown_field": 1},
    {"nmae": "typo"},
    {"sandbox": {}},
    {"sandbox": {"network": True}},
]
#: Each field: absent (the sentinel), or one of its values.
ABSENT = object()


def field(values: list[Any], plain: object = ABSENT) -> st.SearchStrategy[Any]:
    """Mostly ``plain``, so that one odd value is often the manifest's only one; else absent
    or one of ``values``."""
    return st.one_of(st.just(plain), st.just(plain), st.just(plain), st.just(ABSENT), st.sampled_from(values))


MANIFESTS = st.fixed_dictionaries(
    {
        "name": field(NAMES, "ok_name"),
        "description": field(DESCRIPTIONS, "Does a thing."),
        "entry": field(ENTRIES, "run.sh"),
        "env_allow": field(ENVS),
        "timeout_seconds": field(TIMEOUTS),
        "class": field(CLASSES),
        "category": field(CATEGORIES),
        "schema": field(SCHEMAS),
    }
).flatmap(
    lambda fields: st.one_of(st.just({}), st.just({}), st.sampled_from(EXTRAS)).map(
        lambda extra: {**{k: v for k, v in fields.items() if v is not ABSENT}, **extra}
    )
)


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A skill folder holding every kind of entry the manifests name."""
    root = tmp_path_factory.mktemp("root")
    skill = root / "skill"
    skill.mkdir()
    for name, mode in (("run.sh", 0o755), ("noexec.sh", 0o644), ("setuid.sh", 0o4755), ("hard.sh", 0o755)):
        (skill / name).write_text("#!/bin/sh\necho '{}'\n")
        os.chmod(skill / name, mode)
    os.link(skill / "hard.sh", root / "hard-link-outside")
    (skill / "link.sh").symlink_to("run.sh")
    (skill / "folder").mkdir()
    (skill / "sub").mkdir()
    (skill / "sub" / "run.sh").write_text("#!/bin/sh\n")
    os.chmod(skill / "sub" / "run.sh", 0o755)
    return skill


def build(data: dict[str, Any], folder: Path, compiled: bool, settings: Settings | None) -> object:
    """The skill, or the error and problems, of ``data`` as the manifest in ``folder``."""
    saved = skill_json._PLAIN
    skill_json._PLAIN = FIELDS if compiled else None
    root = SkillRoot(str(folder.parent), source="settings", real=str(folder.parent))
    try:
        return values(skill_json.build_skill(dict(data), str(folder / "skill.json"), root, settings))
    except ManifestBuildError as exc:
        return ("error", exc.name, exc.message, exc.problems, exc.entry)
    finally:
        skill_json._PLAIN = saved


def values(value: Any) -> object:
    """Every field of a skill and of its tools, with its type (a tool compares by identity)."""
    if isinstance(value, tuple):
        return tuple(values(item) for item in value)
    if not attrs.has(type(value)):
        return (type(value), value)
    return (type(value), [(f.name, values(getattr(value, f.name))) for f in attrs.fields(type(value))])


def test_the_loader_uses_the_compiled_checks_where_they_are_built() -> None:
    assert FIELDS is not None
    assert skill_json._PLAIN is not None
    assert type(skill_json._PLAIN).__name__ == "builtin_function_or_method"


@MANY
@given(MANIFESTS, st.booleans())
def test_any_manifest_builds_the_same_skill_or_error_both_ways(
    folder: Path, data: dict[str, Any], with_settings: bool
) -> None:
    chosen = Settings(default_timeout=12.5, cache_dir="") if with_settings else None
    assert build(data, folder, True, chosen) == build(data, folder, False, chosen)


def test_a_plain_manifest_gets_its_fields_from_the_compiled_checks(folder: Path) -> None:
    data = {
        "name": "probe",
        "description": "Probe.",
        "entry": "run.sh",
        "env_allow": ["PATH", "HOME", "PATH"],
        "timeout_seconds": 0,
        "category": "",
        "$schema": "x",
    }
    assert FIELDS(data) == ("probe", "Probe.", "run.sh", ("PATH", "HOME"), 0, ToolClass.SAFE, "external")
    chosen = Settings(default_timeout=7.0, cache_dir="")
    assert build(data, folder, True, chosen) == build(data, folder, False, chosen)
    root = SkillRoot(str(folder.parent), source="settings", real=str(folder.parent))
    tool = skill_json.build_skill(data, str(folder / "skill.json"), root, chosen).tools[0]
    assert (tool.timeout, tool.env_allow, tool.category, tool.entry) == (
        7.0,
        ("PATH", "HOME"),
        "external",
        str(folder / "run.sh"),
    )


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({"name": "a" * 65}, "a name longer than the limit"),
        ({"name": "Ab"}, "an upper-case name"),
        ({"name": "\u0661"}, "a non-ASCII digit"),
        ({"description": "\u2003\x1c"}, "a description of whitespace"),
        ({"description": "\u200b\u2060"}, "a description of invisible characters"),
        ({"entry": "sub/run.sh"}, "an entry in a sub-folder"),
        ({"entry": ".."}, "the parent folder"),
        ({"entry": "a\x00b"}, "a NUL"),
        ({"env_allow": ["1A"]}, "a variable name starting with a digit"),
        ({"env_allow": ("PATH",)}, "a tuple, not a list"),
        ({"timeout_seconds": True}, "a bool"),
        ({"timeout_seconds": 86401}, "a timeout past the limit"),
        ({"timeout_seconds": -1}, "a negative timeout"),
        ({"timeout_seconds": 2**70}, "an int past a C long long"),
        ({"timeout_seconds": -(2**70)}, "an int below a C long long"),
        ({"class": "SAFE"}, "an unknown class"),
        ({"category": None}, "a category that is not a str"),
        ({"sandbox": {}}, "a sandbox declaration"),
        ({"other": 1}, "an unknown field"),
    ],
)
def test_a_field_that_is_not_plain_is_left_to_the_python_checks(change: dict[str, Any], why: str) -> None:
    data = {"name": "ok", "description": "d", "entry": "run.sh", **change}
    assert FIELDS({"name": "ok", "description": "d", "entry": "run.sh"}) is not None
    assert FIELDS(data) is None, why


def test_env_allow_past_the_cap_is_left_to_the_python_checks_and_many_names_are_checked_quickly() -> None:
    import time

    plain = {"name": "ok", "description": "d", "entry": "run.sh"}
    names = [f"V{i}" for i in range(skill_json.MAX_ENV_ALLOW)]
    fields = FIELDS({**plain, "env_allow": [*names, *names]})
    assert fields is not None and fields[3] == tuple(names)  # distinct names count, in order
    assert FIELDS({**plain, "env_allow": [*names, "EXTRA"]}) is None
    many = [f"V{i}" for i in range(100_000)]
    started = time.monotonic()
    assert FIELDS({**plain, "env_allow": many}) is None
    assert time.monotonic() - started < 0.5


def test_what_is_not_a_plain_dict_of_str_keys_is_left_to_the_python_checks() -> None:
    class Dict(dict[str, Any]):
        pass

    class Str(str):
        pass

    plain = {"name": "ok", "description": "d", "entry": "run.sh"}
    assert FIELDS(Dict(plain)) is None
    assert FIELDS([("name", "ok")]) is None
    assert FIELDS({**plain, 1: "x"}) is None
    assert FIELDS({**plain, "name": Str("ok")}) is None
    assert FIELDS({**plain, "class": Str("safe")}) is None
    assert FIELDS({**plain, "env_allow": [Str("PATH")]}) is None
    for missing in plain:
        assert FIELDS({k: v for k, v in plain.items() if k != missing}) is None


def test_a_config_of_the_wrong_shape_is_refused() -> None:
    with pytest.raises(TypeError, match="config is"):
        _speedups.manifest_fields(("name",))
    with pytest.raises(TypeError, match="config is"):
        _speedups.manifest_fields((set(), {}, 64, 86400))


def test_the_checks_keep_no_reference() -> None:
    manifests = [
        {"name": "ok", "description": "d", "entry": "run.sh", "env_allow": ["A", "B", "A"], "class": "safe"},
        {"name": "ok", "description": "d", "entry": "run.sh", "env_allow": ["A", "1B"]},
        {"name": "Bad", "description": "d", "entry": "run.sh"},
    ]
    for data in manifests:
        FIELDS(data)
    gc.collect()
    counts = [[sys.getrefcount(v) for v in data.values()] for data in manifests]
    for _ in range(300):
        for data in manifests:
            FIELDS(data)
    assert [[sys.getrefcount(v) for v in data.values()] for data in manifests] == counts
