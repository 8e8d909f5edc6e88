"""The skill.json skill built through ``fast_init`` is the one the public constructors build.

``skill_json_record.make_skill`` sets every slot of its ``Tool`` and ``Skill`` through the
slots' own descriptors (:mod:`ongrid_plugins.models.fastinit`) instead of calling the
classes. The old way is written out here (``_by_constructors``: the keyword calls
``make_skill`` made before) and compared with the new one field by field, value and type,
over a generated tree (the benchmark's generator: broken manifests included), the
example pack's skills, a cached reload, and hostile values; and ``fast_init`` refuses every
class it could not build exactly as its ``__init__`` does.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import attrs
import pytest

from ongrid_plugins.loader import load
from ongrid_plugins.loaders.skill_json_record import RecordedTool, make_skill, skill_from_record, skill_record
from ongrid_plugins.models import Problem, SandboxDecl, SandboxLimits, Skill, SkillRoot, Tool, ToolClass
from ongrid_plugins.models.fastinit import fast_init
from ongrid_plugins.plugins import get_plugin_manager
from ongrid_plugins.settings import Settings

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "benchmarks" / "baselines"))

import gen_tree  # noqa: E402


def _by_constructors(skill: Skill) -> Skill:
    """The skill as ``make_skill`` built it with the public constructors (keyword calls)."""
    tool = skill.tools[0]
    root = skill.root
    rebuilt = Tool(
        name=skill.name,
        description=skill.description,
        schema=tool.schema,
        tool_class=tool.tool_class,
        skill=skill.name,
        source=skill.path,
        kind="subprocess",
        category=skill.category,
        timeout=tool.timeout,
        entry=tool.entry,
        cwd=skill.path.rpartition("/")[0],
        root=root.real,
        env_allow=list(tool.env_allow),  # the converter's job, as before
        entry_declared=tool.entry_declared,
        provenance=root.label,
        extra=skill.extra,
        sandbox=tool.sandbox,
    )
    return Skill(
        name=skill.name,
        description=skill.description,
        format="skill.json",
        path=skill.path,
        root=root,
        tools=[rebuilt],
        category=skill.category,
        warnings=list(skill.warnings),
        extra=skill.extra,
    )


def _fields(value: Any) -> list[tuple[str, type, Any]]:
    return [(f.name, type(getattr(value, f.name)), getattr(value, f.name)) for f in attrs.fields(type(value))]


def assert_same(built: Skill, reference: Skill) -> None:
    """Same class, and every field equal with the same type (tools: field by field too)."""
    assert type(built) is type(reference) is Skill
    for (name, kind, value), (_, ref_kind, ref_value) in zip(_fields(built), _fields(reference), strict=True):
        assert kind is ref_kind, name
        if name != "tools":
            assert value == ref_value, name
    [tool], [ref_tool] = built.tools, reference.tools
    assert type(tool) is Tool
    assert _fields(tool) == _fields(ref_tool)
    assert repr(built) == repr(reference)
    for one, other in ((built, reference), (tool, ref_tool)):
        assert _outcome(one.to_dict) == _outcome(other.to_dict)


def _outcome(call: Any) -> tuple[str, Any]:
    try:
        return "ok", call()
    except Exception as exc:  # a hostile value breaks both the same way
        return "raised", type(exc)


def _load(root: Path, tmp_path: Path, *, cache: bool = False) -> list[Skill]:
    settings = Settings(
        skill_dirs=(str(root),),
        include_defaults=False,
        load_entry_points=False,
        cache_dir=str(tmp_path / "c"),
    )
    snapshot, _report = load(get_plugin_manager(settings), settings, cache=cache)
    return list(snapshot.skills.values())


def test_a_generated_tree_loads_the_skills_the_constructors_build(tmp_path: Path) -> None:
    root = tmp_path / "tree"
    summary = gen_tree.generate(str(root), 240, broken_frac=0.1, seed=14)
    skills = _load(root, tmp_path)
    assert len(skills) == summary["valid"] > 200
    for skill in skills:
        assert_same(skill, _by_constructors(skill))


def test_the_example_packs_skills_load_as_the_constructors_build_them(tmp_path: Path) -> None:
    skills = _load(REPO / "plugins" / "ongrid-pack-disk" / "ongrid_pack_disk", tmp_path)
    assert len(skills) == 2 and {s.format for s in skills} == {"skill.json"}
    for skill in skills:
        assert_same(skill, _by_constructors(skill))


def test_a_skill_rebuilt_from_its_cache_record_keeps_every_value(tmp_path: Path) -> None:
    root = tmp_path / "tree"
    gen_tree.generate(str(root), 30, broken_frac=0.0, seed=3)
    for skill in _load(root, tmp_path):
        record = skill_record(skill)
        assert record is not None
        cached = skill_from_record(record, skill.path, skill.root)
        tool = cached.tools[0]
        assert type(tool) is RecordedTool
        assert tool.schema == skill.tools[0].schema  # decoded on first read
        plain = attrs.evolve(cached, tools=[attrs.evolve(skill.tools[0])])
        assert_same(plain, _by_constructors(skill))
        assert _fields(tool) == _fields(skill.tools[0])


HOSTILE: list[dict[str, Any]] = [
    {"name": "", "description": "", "schema": {}, "extra": {}},
    {
        "name": "x" * 200,
        "description": "\u202e\x00\ud800 bidi, NUL, a lone surrogate",
        "extra": {"k": [1, {}]},
    },
    {"name": "n", "description": "d", "schema": {"type": "object", "properties": {"a": {}}}, "extra": None},
    {
        "name": "s",
        "description": "d",
        "sandbox": SandboxDecl(network=False, read=["/a"], limits=SandboxLimits(5)),
    },
]


@pytest.mark.parametrize("case", HOSTILE, ids=["empty", "odd_text", "extra_none", "sandbox"])
def test_hostile_values_are_kept_as_the_constructors_keep_them(case: dict[str, Any]) -> None:
    root = SkillRoot("/r", source="pack", provenance="pack 1.0", real="/real/r")
    warnings = [Problem("warning", "unknown_field", 'unknown field "x"', "/real/r/s/skill.json", "/x")]
    name, description, schema = case["name"], case["description"], case.get("schema", {})
    skill = make_skill(
        "/real/r/s/skill.json", root, name, description, schema, ToolClass.DANGEROUS, "ops", 0.5,
        "/real/r/s/run.sh", "run.sh", ("PATH", "HOME"), case.get("extra", {}), case.get("sandbox"), warnings,
    )  # fmt: skip
    assert_same(skill, _by_constructors(skill))
    assert skill.extra is skill.tools[0].extra  # one dict shared, as before
    assert skill.warnings == tuple(warnings) and type(skill.warnings) is tuple


def test_a_built_tool_is_as_frozen_as_a_constructed_one() -> None:
    root = SkillRoot("/r", real="/r")
    skill = make_skill(
        "/r/s/skill.json", root, "s", "d", {}, ToolClass.SAFE, "c", 1.0, "/r/s/e", "e", (), {}, None, []
    )
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        skill.tools[0].name = "other"  # type: ignore[misc]
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        skill.name = "other"  # type: ignore[misc]
    assert json.dumps(skill.to_dict())


def test_fast_init_fills_defaults_factories_and_converters_as_init_does() -> None:
    build = fast_init(Skill, "name", "description", "format", "path", "root", "warnings")
    root = SkillRoot("/r")
    one, two = (build("n", "d", "f", "/p", root, iter([])) for _ in range(2))
    assert_fields = _fields(one)
    assert assert_fields == _fields(Skill(name="n", description="d", format="f", path="/p", root=root))
    assert one.extra == {} and one.extra is not two.extra  # a factory is called for each object


def test_fast_init_refuses_what_it_could_not_build_as_the_class_would() -> None:
    @attrs.frozen
    class Checked:
        x: int = attrs.field(validator=attrs.validators.instance_of(int))

    @attrs.frozen
    class After:
        x: int

        def __attrs_post_init__(self) -> None:
            pass

    @attrs.frozen
    class Selfish:
        x: int
        y: int = attrs.field(default=attrs.Factory(lambda self: self.x, takes_self=True))

    @attrs.frozen(slots=False)
    class NoSlots:
        x: int

    @attrs.frozen
    class Before:
        x: int

        def __attrs_pre_init__(self) -> None:
            pass

    @attrs.frozen(init=False)
    class OwnInit:
        x: int

        def __init__(self, x: int) -> None:
            self.__attrs_init__(x * 2)  # type: ignore[attr-defined]  # attrs adds it

    @attrs.frozen
    class Clash:
        _fastinit_new: int = 0

    for cls, names, words in [
        (Checked, ("x",), "validators"),
        (After, ("x",), "__attrs_post_init__"),
        (Selfish, ("x",), "factory taking self"),
        (NoSlots, ("x",), "not a slot"),
        (Before, ("x",), "__attrs_pre_init__"),
        (OwnInit, ("x",), "its own"),
        (Clash, (), "keeps for itself"),
        (Tool, ("name",), "has no default"),
        (Tool, ("name", "colour"), "no field 'colour'"),
    ]:
        with pytest.raises(TypeError, match=words):
            fast_init(cls, *names)


def test_fast_init_skips_a_post_init_check_only_when_the_caller_says_it_checked() -> None:
    """``checked=True`` builds a class whose ``__attrs_post_init__`` only checks: the
    same object as the class call, without the check (the caller's promise)."""
    from ongrid_plugins.executors._spec import ProcessSpec

    build = fast_init(ProcessSpec, "argv", "cwd", "env", "stdin", "timeout", "exec_fd", checked=True)
    fast = build(("/bin/true",), "/", {"A": "1"}, b"{}", 5.0, 7)
    slow = ProcessSpec(argv=("/bin/true",), cwd="/", env={"A": "1"}, stdin=b"{}", timeout=5.0, exec_fd=7)
    assert fast == slow
    assert fast.stdout_cap == 16 * 1024 * 1024 and fast.kill_grace == 2.0 and fast.confine is None
    assert build(("relative",), "/", {}, b"", -1.0, None).timeout == -1.0  # no check: the caller's job
    with pytest.raises(ValueError, match="absolute path"):
        ProcessSpec(argv=("relative",), cwd="/", env={}, stdin=b"", timeout=1.0)

    @attrs.frozen
    class Before:
        x: int

        def __attrs_pre_init__(self) -> None:
            pass

    with pytest.raises(TypeError, match="__attrs_pre_init__"):
        fast_init(Before, "x", checked=True)  # a pre-init is never skipped
