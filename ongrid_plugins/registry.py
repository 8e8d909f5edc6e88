"""The shared registry: immutable snapshots swapped atomically.

Every loader feeds one :class:`RegistryBuilder`; a finished load becomes a
:class:`Snapshot` that never changes. :class:`Registry` holds the current one
and swaps in a new one on reload with a single reference assignment, so a call
in flight keeps the snapshot (and the tool) it started with.

Skills and tools share one namespace: a skill claims its own name and the
names of its tools (a skill may have a tool of its own name), and the first
skill to claim a name keeps it.
"""

from __future__ import annotations

import difflib
import threading
from collections.abc import Mapping
from types import MappingProxyType

import attrs

from .errors import UnknownSkill
from .models import Skill, Tool, ToolClass

__all__ = ["Registry", "RegistryBuilder", "Snapshot"]


@attrs.frozen
class Snapshot:
    """One consistent view of every registered skill and tool."""

    skills: Mapping[str, Skill] = attrs.field(factory=lambda: MappingProxyType({}))
    tools: Mapping[str, Tool] = attrs.field(factory=lambda: MappingProxyType({}))

    def get(self, name: str) -> Tool:
        """The tool called ``name``; raises :class:`UnknownSkill` with suggestions."""
        try:
            return self.tools[name]
        except KeyError:
            close = difflib.get_close_matches(name, list(self.tools), n=3, cutoff=0.75)
            raise UnknownSkill(name, close) from None

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
        """Register ``skill``; return the clashing name instead if one is taken."""
        names = [skill.name, *(tool.name for tool in skill.tools)]
        for name in names:
            owner = self._owner.get(name)
            if owner is not None:
                return name
        if len(set(names[1:])) != len(names) - 1:
            return next(n for n in names[1:] if names[1:].count(n) > 1)
        for name in names:
            self._owner[name] = skill.name
        self._skills[skill.name] = skill
        for tool in skill.tools:
            self._tools[tool.name] = tool
        return None

    def build(self) -> Snapshot:
        """Freeze what was collected."""
        return Snapshot(MappingProxyType(dict(self._skills)), MappingProxyType(dict(self._tools)))


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
