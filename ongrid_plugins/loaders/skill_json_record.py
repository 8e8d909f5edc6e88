"""The one constructor of a ``skill.json`` skill, and its plain record for the load cache.

:func:`make_skill` builds the skill of a checked manifest (:mod:`.skill_json`
calls it after its checks); :func:`skill_record` turns such a skill into plain
values the load cache (:mod:`ongrid_plugins.loadcache`) can ``marshal``, and
:func:`skill_from_record` builds the same skill back from them, with its schema
decoded on first read (:class:`RecordedTool`).

It may import the core values (``models``) and :mod:`.skill_json_parse`.
"""

from __future__ import annotations

import marshal
from collections.abc import Mapping
from typing import Any

from ..models import Problem, SandboxDecl, Skill, SkillRoot, Tool, ToolClass
from ..models.fastinit import fast_init
from .skill_json_parse import MANIFEST_NAME

__all__ = ["CLASSES", "RecordedTool", "SkillRecord", "make_skill", "skill_from_record", "skill_record"]

CLASSES = {
    "": ToolClass.SAFE,
    "safe": ToolClass.SAFE,
    "mutating": ToolClass.MUTATING,
    "dangerous": ToolClass.DANGEROUS,
}


def make_skill(
    path: str,
    root: SkillRoot,
    name: str,
    description: str,
    schema: Mapping[str, Any],
    tool_class: ToolClass,
    category: str,
    timeout: float,
    entry: str,
    declared: str,
    env_allow: tuple[str, ...],
    extra: dict[str, Any],
    sandbox: SandboxDecl | None,
    warnings: list[Problem] | tuple[Problem, ...],
    tool_type: type[Tool] = Tool,
) -> Skill:
    """The skill of a checked manifest: the one constructor of a built and of a cached one.

    The same values as ``Tool(name=name, ..., kind="subprocess", ...)`` and
    ``Skill(..., format="skill.json", tools=(tool,), ...)`` would hold, built
    through :func:`~ongrid_plugins.models.fastinit.fast_init` (a tenth of a cold
    load went to the two class calls); ``tests/test_skill_json_record.py``
    holds them to the constructors' over generated trees and hostile manifests.
    """
    new_tool = _NEW_TOOL if tool_type is Tool else _recorded_tool if tool_type is RecordedTool else None
    if new_tool is None:
        new_tool = fast_init(tool_type, *_TOOL_FIELDS)
    tool = new_tool(
        name, description, schema, tool_class, name, path, "subprocess", category, timeout, entry, declared,
        path.rpartition("/")[0], root.real, env_allow, root.label, extra, sandbox,
    )  # fmt: skip
    skill: Skill = _NEW_SKILL(
        name, description, MANIFEST_NAME, path, root, (tool,), category, warnings, extra
    )
    return skill


#: The fields :func:`make_skill` sets, in the order it passes them (every other one is its default).
_TOOL_FIELDS = (
    "name", "description", "schema", "tool_class", "skill", "source", "kind", "category", "timeout", "entry",
    "entry_declared", "cwd", "root", "env_allow", "provenance", "extra", "sandbox",
)  # fmt: skip
_SKILL_FIELDS = ("name", "description", "format", "path", "root", "tools", "category", "warnings", "extra")
_NEW_TOOL = fast_init(Tool, *_TOOL_FIELDS)
_NEW_SKILL = fast_init(Skill, *_SKILL_FIELDS)


#: What the load cache keeps of a built skill: plain values only (``marshal``-able).
SkillRecord = tuple[
    str, str, bytes, str, str, float, str, str, tuple[str, ...], "bytes | None", tuple[Any, ...]
]


def skill_record(skill: Skill, warnings: tuple[Problem, ...] | None = None) -> SkillRecord | None:
    """The skill as plain values for the load cache; None when it must be built every time.

    Only what this loader built from the manifest's bytes and its entry alone: a
    skill with a ``sandbox`` declaration (whose paths are resolved), notices or
    anything another plugin added is never recorded. ``warnings`` are the
    skill's as the loader made them (default: its own now).
    """
    if skill.format != MANIFEST_NAME or skill.notices or len(skill.tools) != 1:
        return None
    tool = skill.tools[0]
    declared = tool.entry_declared
    if tool.sandbox is not None or tool.native is not None or tool.kind != "subprocess":
        return None
    if not isinstance(declared, str) or not tool.entry or tool.unavailable or skill.unavailable:
        return None
    schema, extra = tool.schema, skill.extra
    if type(schema) is not dict or type(extra) is not dict or tool.extra is not extra:
        return None
    shown = skill.warnings if warnings is None else warnings
    problems = tuple((w.level, w.code, w.message, w.path, w.pointer, w.hint) for w in shown)
    return (
        skill.name,
        skill.description,
        marshal.dumps(schema, 4),
        tool.tool_class.value,
        skill.category,
        tool.timeout,
        tool.entry,
        declared,
        tool.env_allow,
        marshal.dumps(extra, 4) if extra else None,
        problems,
    )


def skill_from_record(record: SkillRecord, path: str, root: SkillRoot) -> Skill:
    """The skill :func:`skill_record` recorded, built as :func:`build_skill` builds it.

    Its tool's schema is decoded when first read (most loads never read most
    schemas). Raises ``TypeError``, ``ValueError`` or ``KeyError`` for a record of
    the wrong shape (a cache of another version): the caller loads cold then.
    """
    name, description, schema, tool_class, category, timeout, entry, declared, env_allow, extra, warnings = (
        record
    )
    if type(schema) is not bytes or type(name) is not str or type(env_allow) is not tuple:
        raise TypeError("not a skill record")
    skill = make_skill(
        path, root, name, description, _UNREAD, CLASSES[tool_class], category, timeout, entry, declared,
        env_allow, marshal.loads(extra) if extra is not None else {},
        None, tuple(Problem(*w) for w in warnings), RecordedTool,
    )  # fmt: skip
    tool = skill.tools[0]
    _SCHEMA.__delete__(tool)
    _BLOB.__set__(tool, schema)
    return skill


_UNREAD: Mapping[str, Any] = {}
_SCHEMA: Any = Tool.__dict__["schema"]  # the slot behind Tool.schema


class RecordedTool(Tool):
    """A :class:`~ongrid_plugins.models.Tool` rebuilt from the load cache.

    The same value in every field; ``schema`` is kept as the ``marshal`` bytes of
    the checked schema until it is first read, then decoded once (a fresh dict
    per tool, as a parse makes). Everything else is the Tool's own.
    """

    __slots__ = ("_schema_bytes",)
    _schema_bytes: bytes

    @property
    def schema(self) -> Mapping[str, Any]:
        """JSON Schema of the arguments object (decoded from the cache on first read)."""
        try:
            value: Mapping[str, Any] = _SCHEMA.__get__(self)
        except AttributeError:
            value = marshal.loads(self._schema_bytes)
            _SCHEMA.__set__(self, value)
        return value

    @schema.setter
    def schema(self, value: Mapping[str, Any]) -> None:
        _SCHEMA.__set__(self, value)


_BLOB: Any = RecordedTool.__dict__["_schema_bytes"]
_recorded_tool = fast_init(RecordedTool, *_TOOL_FIELDS)
