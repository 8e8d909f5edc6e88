"""A tool, the one function a model sees, and the sandbox it declares.

May import: :mod:`.base`, :mod:`.permissions`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import attrs

from .base import JSON, strs
from .permissions import ToolClass

__all__ = ["LIMIT_NAMES", "SandboxDecl", "SandboxLimits", "Tool"]


LIMIT_NAMES = ("processes", "memory_mb", "cpu_seconds", "file_size_mb", "open_files")
"""The keys of ``sandbox.limits``, in the order they are reported."""


@attrs.frozen
class SandboxLimits:
    """Resource limits of a call; ``None`` means "the operator's default"."""

    processes: int | None = None
    """Processes and threads the call may have at once (the entry included)."""
    memory_mb: int | None = None
    cpu_seconds: int | None = None
    file_size_mb: int | None = None
    """Largest file the call may write."""
    open_files: int | None = None

    def to_dict(self) -> JSON:
        """Only the limits that are set."""
        return {name: getattr(self, name) for name in LIMIT_NAMES if getattr(self, name) is not None}


@attrs.frozen
class SandboxDecl:
    """What a skill declares it needs from its sandbox (skill.json ``sandbox``).

    ``read`` and ``write`` are absolute paths (``~/`` already expanded against the
    invoking user's home by the loader); ``network`` is ``None`` when not declared.
    """

    network: bool | None = None
    read: tuple[str, ...] = attrs.field(default=(), converter=strs)
    write: tuple[str, ...] = attrs.field(default=(), converter=strs)
    limits: SandboxLimits = attrs.field(factory=SandboxLimits)

    def to_dict(self) -> JSON:
        """The declaration as the manifest would spell it (unset parts left out)."""
        out: JSON = {}
        if self.network is not None:
            out["network"] = self.network
        if self.read:
            out["read"] = list(self.read)
        if self.write:
            out["write"] = list(self.write)
        limits = self.limits.to_dict()
        if limits:
            out["limits"] = limits
        return out


@attrs.frozen(eq=False)
class Tool:
    """A callable tool: what the model sees as one function."""

    name: str
    """Unique key, lower_snake; the function name on the model side."""
    description: str
    schema: Mapping[str, Any]
    """JSON Schema of the arguments object."""
    tool_class: ToolClass
    skill: str
    """Name of the skill that declared it."""
    source: str
    """The manifest file it was declared in."""
    kind: str
    """``subprocess`` or ``native`` (or whatever a third-party executor handles)."""
    category: str = "external"
    timeout: float = 30.0
    """Seconds before the call is killed and reported as timed out."""
    entry: str | None = None
    """Canonical path of the executable (subprocess tools)."""
    entry_declared: str | None = None
    """The entry as the manifest wrote it; re-resolved and re-checked at every call."""
    cwd: str | None = None
    """Working directory of the child: the manifest's folder."""
    root: str = ""
    """Canonical allow-list root the entry must stay under."""
    env_allow: tuple[str, ...] = attrs.field(default=(), converter=strs)
    """Names of the host environment variables the child receives; nothing else."""
    impl: str | None = None
    """``builtin:<key>`` for native tools."""
    when_to_use: str = ""
    confirmation_required: bool = False
    """Ask for a confirmation even when the class alone would not."""
    provenance: str = ""
    display_name: str = ""
    unavailable: tuple[str, ...] = attrs.field(default=(), converter=strs)
    """Why the tool cannot run here; empty when it can."""
    extra: Mapping[str, Any] = attrs.field(factory=dict)
    """Unknown manifest keys, kept verbatim."""
    native: Callable[..., Any] | None = attrs.field(default=None, repr=False)
    """The Python implementation of a ``builtin:`` tool, bound at load time."""
    sandbox: SandboxDecl | None = None
    """The tool's ``sandbox`` declaration (the tool's own, else its skill's); None when absent."""
    digest: str = ""
    """The content digest of the tool's skill (see :attr:`Skill.digest`); empty until the catalog set it."""
    entry_digest: str = ""
    """sha256 of the entry's bytes when the skill was loaded; the call re-checks it (empty: not checked)."""

    @property
    def available(self) -> bool:
        """True when nothing the tool needs is missing."""
        return not self.unavailable

    def to_dict(self) -> JSON:
        """A JSON-ready summary (``show --json``)."""
        return {
            "name": self.name,
            "description": self.description,
            "class": self.tool_class.value,
            "category": self.category,
            "skill": self.skill,
            "kind": self.kind,
            "schema": self.schema,
            "timeout_seconds": int(self.timeout) if self.timeout.is_integer() else self.timeout,
            "entry": self.entry,
            "impl": self.impl,
            "env_allow": list(self.env_allow),
            "when_to_use": self.when_to_use,
            "confirmation_required": self.confirmation_required,
            "source": self.source,
            "provenance": self.provenance,
            "available": self.available,
            "unavailable": list(self.unavailable),
            "extra": dict(self.extra),
            "digest": self.digest,
        }
