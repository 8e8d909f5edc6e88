"""What a load makes: roots, skills with their activation and requirements, problems and reports.

May import: :mod:`.base`, :mod:`.tools`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Literal

import attrs

from .base import JSON, strs
from .tools import Tool

__all__ = ["Activation", "LoadEvent", "LoadReport", "Problem", "Requirements", "Skill", "SkillRoot"]


def _problems(value: Iterable[Problem]) -> tuple[Problem, ...]:
    return tuple(value)


def _tools(value: Iterable[Tool]) -> tuple[Tool, ...]:
    return tuple(value)


def _events(value: Iterable[LoadEvent]) -> tuple[LoadEvent, ...]:
    return tuple(value)


@attrs.frozen
class Problem:
    """One finding about a manifest: an error rejects it, a warning does not."""

    level: Literal["error", "warning"]
    """``error`` or ``warning``."""
    code: str
    """A stable identifier such as ``unknown_field`` or ``entry_escapes_root``."""
    message: str
    """What is wrong, in a sentence."""
    path: str = ""
    """The file the problem is in."""
    pointer: str = ""
    """JSON pointer into the manifest (``/timeout_seconds``), empty for the whole file."""
    hint: str = ""
    """What to do about it."""

    @property
    def said(self) -> str:
        """The message with its fix (``message — hint``): what ``validate`` and the load log both say."""
        return f"{self.message} — {self.hint}" if self.hint else self.message

    def __str__(self) -> str:
        where = self.path + (f"#{self.pointer}" if self.pointer else "")
        text = f"{where}: {self.message}" if where else self.message
        return f"{text} ({self.hint})" if self.hint else text

    def to_dict(self) -> JSON:
        """A JSON-ready dict (for ``--json`` output)."""
        return attrs.asdict(self)


@attrs.frozen
class SkillRoot:
    """An allow-listed directory that loaders may read manifests from."""

    path: str
    """The directory as configured."""
    source: str = "settings"
    """Where it came from: settings, env, builtin, system, user or pack."""
    provenance: str = ""
    """Shown in listings for skills found here (a pack's ``dist version``); the path if empty."""
    required: bool = True
    """False for default roots that may simply not exist (no warning when missing)."""
    real: str = ""
    """The canonical path (symlinks resolved); set by the walker before loaders see it."""

    @property
    def label(self) -> str:
        """The provenance shown to users."""
        return self.provenance or self.real or self.path


@attrs.frozen
class Activation:
    """When a skill is mounted for a conversation (see ``SkillHost.resolve``)."""

    mode: str = "always"
    """``always`` (the default) or ``keyword``; any other mode behaves as ``always``."""
    keywords: tuple[str, ...] = attrs.field(default=(), converter=strs)
    """For ``keyword`` mode: case-insensitive substrings of the user's message."""

    def match(self, query: str) -> str | None:
        """Why the skill is mounted for ``query`` (``always``, ``keyword "disk"``), or None."""
        if self.mode != "keyword":
            return "always"
        lowered = query.casefold()
        for keyword in self.keywords:
            if keyword and keyword.casefold() in lowered:
                return f'keyword "{keyword}"'
        return None

    def to_dict(self) -> JSON:
        """A JSON-ready dict."""
        return {"mode": self.mode, "keywords": list(self.keywords)}


def _groups(value: Iterable[Iterable[str]]) -> tuple[tuple[str, ...], ...]:
    return tuple(tuple(group) for group in value)


@attrs.frozen
class Requirements:
    """What a skill needs from the machine; checked at every load (empty: nothing)."""

    os: tuple[str, ...] = attrs.field(default=(), converter=strs)
    """Operating systems it is for (``linux``, ``darwin``, ``windows``); empty means any."""
    bins: tuple[str, ...] = attrs.field(default=(), converter=strs)
    """Executables that must all be on ``PATH``."""
    any_bins: tuple[tuple[str, ...], ...] = attrs.field(default=(), converter=_groups)
    """Groups of executables: at least one of each group must be on ``PATH``."""
    env: tuple[str, ...] = attrs.field(default=(), converter=strs)
    """Environment variables that must be set and non-empty."""
    config: tuple[str, ...] = attrs.field(default=(), converter=strs)
    """Dotted configuration keys that must be set (see ``docs/skill-md.md``)."""
    min_version: str = ""
    """The oldest ongrid-plugins version the skill works with."""
    hints: Mapping[str, str] = attrs.field(factory=dict)
    """How to install a missing executable, by name (openclaw ``install`` labels)."""

    @property
    def empty(self) -> bool:
        """True when the skill needs nothing."""
        return not (self.os or self.bins or self.any_bins or self.env or self.config or self.min_version)

    def to_dict(self) -> JSON:
        """A JSON-ready dict."""
        return {
            "os": list(self.os),
            "bins": list(self.bins),
            "any_bins": [list(group) for group in self.any_bins],
            "env": list(self.env),
            "config": list(self.config),
            "min_version": self.min_version,
        }


_ALWAYS = Activation()
_NOTHING_REQUIRED = Requirements()


@attrs.frozen(eq=False)
class Skill:
    """A loaded skill: one manifest and the tools it declares."""

    name: str
    description: str
    format: str
    """``skill.json`` or ``SKILL.md``."""
    path: str
    """The manifest file."""
    root: SkillRoot
    tools: tuple[Tool, ...] = attrs.field(default=(), converter=_tools)
    category: str = "external"
    display_name: str = ""
    when_to_use: str = ""
    warnings: tuple[Problem, ...] = attrs.field(default=(), converter=_problems)
    extra: Mapping[str, Any] = attrs.field(factory=dict)
    """Everything else the manifest said, unknown keys included."""
    unavailable: tuple[str, ...] = attrs.field(default=(), converter=strs)
    version: str = ""
    # Shared immutable defaults: building two objects per skill.json skill
    # would cost more than the rest of the Skill together.
    activation: Activation = attrs.field(default=_ALWAYS)
    requires: Requirements = attrs.field(default=_NOTHING_REQUIRED)
    model_invocable: bool = True
    """False for skills only a user may invoke (``disable-model-invocation``): never resolved."""
    notices: tuple[Problem, ...] = attrs.field(default=(), converter=_problems)
    """Findings about what surrounds the skill (its pack), reported once in the load report."""
    digest: str = ""
    """sha256 over the canonical list of the skill's files (see ``docs/catalog.md``); set by the catalog."""
    stale: str = ""
    """Why this is the last good version kept after its manifest broke (hot reload); empty when current."""

    @property
    def provenance(self) -> str:
        """Where it came from: a pack's distribution and version, else its root."""
        return self.root.label

    @property
    def available(self) -> bool:
        """True when nothing the skill needs is missing."""
        return not self.unavailable

    def to_dict(self) -> JSON:
        """A JSON-ready summary."""
        return {
            "name": self.name,
            "display_name": self.display_name or self.name,
            "description": self.description,
            "format": self.format,
            "path": self.path,
            "category": self.category,
            "when_to_use": self.when_to_use,
            "provenance": self.provenance,
            "available": self.available,
            "unavailable": list(self.unavailable),
            "tools": [t.name for t in self.tools],
            "warnings": [w.to_dict() for w in self.warnings],
            "extra": dict(self.extra),
            "version": self.version,
            "activation": self.activation.to_dict(),
            "requires": self.requires.to_dict(),
            "model_invocable": self.model_invocable,
            "digest": self.digest,
            "stale": self.stale,
        }


@attrs.frozen
class LoadEvent:
    """What happened to one manifest or root during a load."""

    path: str
    outcome: str
    """registered, duplicate, parse_error, build_error, skipped, root_skipped, warning."""
    message: str = ""
    skill: str = ""

    def to_dict(self) -> JSON:
        """A JSON-ready dict."""
        return attrs.asdict(self)


@attrs.frozen
class LoadReport:
    """The result of a load: how many skills were registered, and why not the others."""

    registered: int
    events: tuple[LoadEvent, ...] = attrs.field(converter=_events)
    roots: tuple[str, ...] = attrs.field(default=(), converter=strs)
    """The canonical roots that were walked, in order."""

    def by_outcome(self, outcome: str) -> list[LoadEvent]:
        """The events with this outcome."""
        return [e for e in self.events if e.outcome == outcome]

    @property
    def errors(self) -> list[LoadEvent]:
        """Manifests that were rejected (parse or build errors)."""
        return [e for e in self.events if e.outcome in ("parse_error", "build_error")]

    def to_dict(self) -> JSON:
        """A JSON-ready dict."""
        return {
            "registered": self.registered,
            "roots": list(self.roots),
            "events": [e.to_dict() for e in self.events],
        }
