"""The shared registry: immutable snapshots swapped atomically.

Every loader feeds one :class:`RegistryBuilder`; a finished load becomes a
:class:`Snapshot` that never changes. :class:`Registry` holds the current one
and swaps in a new one on reload with a single reference assignment, so a call
in flight keeps the snapshot (and the tool) it started with.

Skills and tools share one namespace: a skill claims its own name and the
names of its tools (a skill may have a tool of its own name), and the first
skill to claim a name keeps it. The namespace compares names by :func:`spelling`: an
Agent Skills name keeps its hyphens (``mcp-builder``) while tool names are
``[a-z0-9_]+``, so ``mcp-builder`` and ``mcp_builder`` are one name, and every
lookup accepts either.
"""

from __future__ import annotations

import difflib
import threading
from collections.abc import Mapping
from types import MappingProxyType

import attrs

from ..errors import ConfigError, UnknownSkill
from ..models import Skill, Tool, ToolClass

__all__ = ["Registry", "RegistryBuilder", "Snapshot", "spelling"]


def spelling(name: str) -> str:
    """The spelling two names clash on and lookups match by: hyphens read as underscores."""
    return name.replace("-", "_")


@attrs.frozen
class Snapshot:
    """One consistent view of every registered skill and tool."""

    skills: Mapping[str, Skill] = attrs.field(factory=lambda: MappingProxyType({}))
    tools: Mapping[str, Tool] = attrs.field(factory=lambda: MappingProxyType({}))

    aliases: Mapping[str, str] = attrs.field(factory=lambda: MappingProxyType({}))
    """:func:`spelling` -> skill name, for the skills whose name is not its own spelling."""

    def get(self, name: str) -> Tool:
        """The tool called ``name`` (either spelling); raises :class:`UnknownSkill` saying what to do."""
        try:
            tool = self.tools.get(name)
        except TypeError:  # unhashable: a list, a dict
            tool = None
        if tool is not None:
            return tool
        if type(name) is not str:
            raise ConfigError(f"a tool name must be a string, got {type(name).__name__}")
        tool = self.tools.get(spelling(name))
        if tool is not None:
            return tool
        skill = self.find_skill(name)
        if skill is not None:
            raise UnknownSkill(name, [t.name for t in skill.tools], skill=skill.name)
        raise UnknownSkill(name, self.suggestions(name))

    def find_skill(self, name: str) -> Skill | None:
        """The skill called ``name`` in either spelling, or None."""
        found = self.skills.get(name)
        if found is None:
            key = spelling(name)
            found = self.skills.get(self.aliases.get(key, key))
        return found

    def suggestions(self, name: str) -> list[str]:
        """Up to three registered skill or tool names close to ``name``, prompt skills included."""
        names = {spelling(n).lower(): n for n in [*self.skills, *self.tools]}  # MCP-Builder finds mcp-builder
        close = difflib.get_close_matches(spelling(name).lower(), list(names), n=3, cutoff=0.75)
        return sorted({names[c] for c in close})

    def list_tools(
        self,
        *,
        category: str | None = None,
        tool_class: ToolClass | str | None = None,
        include_unavailable: bool = False,
    ) -> list[Tool]:
        """Tools sorted by name, optionally filtered by category and class."""
        wanted = ToolClass.parse(tool_class) if tool_class else None
        return [
            tool
            for name, tool in sorted(self.tools.items())
            if (category is None or tool.category == category)
            and (wanted is None or tool.tool_class is wanted)
            and (include_unavailable or tool.available)
        ]

    def list_skills(self) -> list[Skill]:
        """Skills sorted by name."""
        return [skill for _name, skill in sorted(self.skills.items())]


@attrs.define
class RegistryBuilder:
    """Collects skills during a load; first one of a name wins."""

    _skills: dict[str, Skill] = attrs.field(factory=dict)
    _tools: dict[str, Tool] = attrs.field(factory=dict)
    _owner: dict[str, str] = attrs.field(factory=dict)

    def add(self, skill: Skill) -> str | None:
        """Register ``skill``; return the clashing name (as ``skill`` spells it) if one is taken."""
        names = [skill.name, *(tool.name for tool in skill.tools)]
        keys = [spelling(name) for name in names]
        for name, key in zip(names, keys, strict=True):
            if key in self._owner:
                return name
        if len(set(keys[1:])) != len(keys) - 1:
            return next(n for n, k in zip(names[1:], keys[1:], strict=True) if keys[1:].count(k) > 1)
        for key in keys:
            self._owner[key] = skill.name
        self._skills[skill.name] = skill
        for tool in skill.tools:
            self._tools[tool.name] = tool
        return None

    def build(self) -> Snapshot:
        """Freeze what was collected."""
        aliases = {spelling(name): name for name in self._skills if "-" in name}  # spelling() changes it
        return Snapshot(
            MappingProxyType(dict(self._skills)),
            MappingProxyType(dict(self._tools)),
            MappingProxyType(aliases),
        )


class Registry:
    """Holds the current snapshot; readers never lock, writers swap under a lock."""

    def __init__(self, snapshot: Snapshot | None = None) -> None:
        self._snapshot = snapshot or Snapshot()
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        snap = self._snapshot
        return f"<Registry skills={len(snap.skills)} tools={len(snap.tools)}>"

    @property
    def snapshot(self) -> Snapshot:
        """The current snapshot; take it once per operation for a consistent view."""
        return self._snapshot

    def swap(self, snapshot: Snapshot) -> Snapshot:
        """Make ``snapshot`` current; return the previous one."""
        with self._lock:
            previous, self._snapshot = self._snapshot, snapshot
        return previous
