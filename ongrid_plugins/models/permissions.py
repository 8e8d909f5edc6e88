"""Who may call what: tool classes, permission modes, verdicts, decisions and personas.

The gate (``gate/decision.py``) reads these; its table maps a class and a mode to a verdict.

May import: :mod:`.base`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from enum import StrEnum
from typing import Any

import attrs

from .base import JSON, strs

__all__ = ["Decision", "PermissionMode", "Persona", "ToolClass", "Verdict"]


class ToolClass(StrEnum):
    """What a tool may do, and so what a persona needs to call it."""

    SAFE = "safe"
    """Read-only: no side effects on the host or any system."""
    MUTATING = "mutating"
    """Creates or updates state; reversible."""
    DANGEROUS = "dangerous"
    """Irreversible: deletes, restarts, runs arbitrary code."""

    @classmethod
    def parse(cls, value: object) -> ToolClass:
        """Accept both dialects: safe/mutating/dangerous and read/write/destructive.

        An empty string or None means ``safe``. Anything else raises ``ValueError``
        with the accepted spellings.
        """
        if value is None or value == "":
            return cls.SAFE
        if isinstance(value, str) and value in _CLASS_ALIASES:
            return _CLASS_ALIASES[value]
        accepted = ", ".join(sorted(_CLASS_ALIASES))
        message = f"must be one of {accepted} (got {value!r})"
        raise ValueError(message)


_CLASS_ALIASES = {
    "safe": ToolClass.SAFE,
    "read": ToolClass.SAFE,
    "mutating": ToolClass.MUTATING,
    "write": ToolClass.MUTATING,
    "dangerous": ToolClass.DANGEROUS,
    "destructive": ToolClass.DANGEROUS,
}


class PermissionMode(StrEnum):
    """A persona's permission mode (the spec's agent persona format)."""

    READ_ONLY = "read-only"
    MUTATING_WITH_CONFIRM = "mutating-with-confirm"
    DUAL_SIGN_REQUIRED = "dual-sign-required"


class Verdict(StrEnum):
    """One permission vote. Ordered: a stricter verdict always wins."""

    ALLOW = "allow"
    CONFIRM = "confirm"
    DUAL_SIGN = "dual_sign"
    DENY = "deny"

    @property
    def rank(self) -> int:
        """Strictness: allow 0 < confirm 1 < dual_sign 2 < deny 3."""
        return _VERDICT_RANK[self]

    @property
    def needs(self) -> str:
        """What a call with this verdict needs, in the words every listing uses."""
        return _VERDICT_NEEDS[self]


_VERDICT_RANK = {Verdict.ALLOW: 0, Verdict.CONFIRM: 1, Verdict.DUAL_SIGN: 2, Verdict.DENY: 3}
_VERDICT_NEEDS = {
    Verdict.ALLOW: "-",
    Verdict.CONFIRM: "confirmation",
    Verdict.DUAL_SIGN: "two-person approval",
    Verdict.DENY: "denied",
}


@attrs.frozen
class Persona:
    """Who is asking: decides which classes of tools may run, and how."""

    name: str
    permission_mode: PermissionMode = attrs.field(converter=PermissionMode)  # "read-only" works too
    description: str = ""
    tools: tuple[str, ...] = attrs.field(default=("*",), converter=strs)
    """Allow-list of tool-name globs."""
    disallowed_tools: tuple[str, ...] = attrs.field(default=(), converter=strs)
    """Deny-list of tool-name globs; deny wins over allow."""
    path: str = ""
    """The persona file, empty for built-ins."""
    extra: Mapping[str, Any] = attrs.field(factory=dict)
    """Front-matter keys this package does not know (``model``, ``color``...), kept verbatim."""
    instructions: str = ""
    """The Markdown body of the persona file (its system prompt), empty for built-ins."""

    def to_dict(self) -> JSON:
        """A JSON-ready dict (``personas --json``)."""
        return {
            "name": self.name,
            "description": self.description,
            "permission_mode": self.permission_mode.value,
            "tools": list(self.tools),
            "disallowed_tools": list(self.disallowed_tools),
            "path": self.path,
            "builtin": not self.path,
            "extra": dict(self.extra),
        }


@attrs.frozen
class Decision:
    """One permission vote, or the combined decision of the gate."""

    verdict: Verdict
    reason: str
    plugin: str = "ongrid.gate"

    @classmethod
    def strictest(cls, decisions: Iterable[Decision]) -> Decision:
        """The strictest vote (deny > dual_sign > confirm > allow); ties keep the first."""
        best: Decision | None = None
        for decision in decisions:
            if best is None or decision.verdict.rank > best.verdict.rank:
                best = decision
        if best is None:
            message = "no permission decision was made"
            raise ValueError(message)
        return best

    def to_dict(self) -> JSON:
        """A JSON-ready dict."""
        return {"verdict": self.verdict.value, "reason": self.reason, "plugin": self.plugin}
