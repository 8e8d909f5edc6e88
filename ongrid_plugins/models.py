"""Value objects shared by the loaders, the registry, the gate and the executors.

All of them are frozen attrs classes built from checked data (loaders check raw
input first, then build these); none is ever built with ``Model(**raw)``.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from enum import StrEnum
from typing import Any, Literal

import attrs

__all__ = [
    "Activation",
    "CallRequest",
    "CallResult",
    "Decision",
    "Event",
    "LoadEvent",
    "LoadReport",
    "PermissionMode",
    "Persona",
    "Problem",
    "RemoteRun",
    "Requirements",
    "SandboxDecl",
    "SandboxLimits",
    "Skill",
    "SkillRoot",
    "Tool",
    "ToolClass",
    "Verdict",
    "args_digest",
    "canonical_json",
    "digest_json",
]

JSON = dict[str, Any]
EventCallback = Callable[["Event"], None]


def _strs(value: Iterable[str]) -> tuple[str, ...]:
    return tuple(value)


def _problems(value: Iterable[Problem]) -> tuple[Problem, ...]:
    return tuple(value)


def _tools(value: Iterable[Tool]) -> tuple[Tool, ...]:
    return tuple(value)


def _events(value: Iterable[LoadEvent]) -> tuple[LoadEvent, ...]:
    return tuple(value)


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
    read: tuple[str, ...] = attrs.field(default=(), converter=_strs)
    write: tuple[str, ...] = attrs.field(default=(), converter=_strs)
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
    env_allow: tuple[str, ...] = attrs.field(default=(), converter=_strs)
    """Names of the host environment variables the child receives; nothing else."""
    impl: str | None = None
    """``builtin:<key>`` for native tools."""
    when_to_use: str = ""
    confirmation_required: bool = False
    """Ask for a confirmation even when the class alone would not."""
    provenance: str = ""
    display_name: str = ""
    unavailable: tuple[str, ...] = attrs.field(default=(), converter=_strs)
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


@attrs.frozen
class Activation:
    """When a skill is mounted for a conversation (see ``SkillHost.resolve``)."""

    mode: str = "always"
    """``always`` (the default) or ``keyword``; any other mode behaves as ``always``."""
    keywords: tuple[str, ...] = attrs.field(default=(), converter=_strs)
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

    os: tuple[str, ...] = attrs.field(default=(), converter=_strs)
    """Operating systems it is for (``linux``, ``darwin``, ``windows``); empty means any."""
    bins: tuple[str, ...] = attrs.field(default=(), converter=_strs)
    """Executables that must all be on ``PATH``."""
    any_bins: tuple[tuple[str, ...], ...] = attrs.field(default=(), converter=_groups)
    """Groups of executables: at least one of each group must be on ``PATH``."""
    env: tuple[str, ...] = attrs.field(default=(), converter=_strs)
    """Environment variables that must be set and non-empty."""
    config: tuple[str, ...] = attrs.field(default=(), converter=_strs)
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
    unavailable: tuple[str, ...] = attrs.field(default=(), converter=_strs)
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
    roots: tuple[str, ...] = attrs.field(default=(), converter=_strs)
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


@attrs.frozen
class Persona:
    """Who is asking: decides which classes of tools may run, and how."""

    name: str
    permission_mode: PermissionMode
    description: str = ""
    tools: tuple[str, ...] = attrs.field(default=("*",), converter=_strs)
    """Allow-list of tool-name globs."""
    disallowed_tools: tuple[str, ...] = attrs.field(default=(), converter=_strs)
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


@attrs.frozen
class Event:
    """Something that happened during a call, streamed to ``on_event`` as it happens."""

    kind: str
    """``start``, ``stderr`` (one log line of the skill), ``progress`` or ``exit``."""
    tool: str
    call_id: str
    data: Any = None
    time: float = attrs.field(factory=time.time)

    def to_dict(self) -> JSON:
        """A JSON-ready dict."""
        return attrs.asdict(self)


@attrs.frozen(eq=False)
class CallRequest:
    """One call attempt, as the gate, the executors and the call hooks see it."""

    tool: Tool
    args: Mapping[str, Any]
    """The arguments after defaults were filled in and the schema was checked."""
    persona: Persona
    call_id: str
    args_digest: str
    """sha256 of the canonical JSON of ``args``: what a confirmation is bound to."""
    args_json: str = ""
    """The canonical JSON text of ``args``: exactly what a subprocess reads on stdin."""
    caller: str = ""
    """Identity of whoever asked (a user, a token's identity, a model session)."""
    confirm: bool | str = False
    """True, or the ``args_digest`` the confirmation was given for (then it must match)."""
    ticket: str | None = None
    """The two-person ticket this call executes (or, once refused, the ticket it opened)."""
    approvers: tuple[str, ...] = attrs.field(default=(), converter=_strs)
    """Who approved ``ticket``; set by the host once the ticket is claimed for this call."""
    on_event: EventCallback | None = None
    timeout: float | None = None
    sandbox: Any = None
    """The call's confinement profile (``executors.confine.Profile``), computed by the host
    before the gate runs and bound into the audit row and any ticket; None lets the
    executor compute it."""
    """Overrides the tool's timeout for this call (never longer than the tool's)."""

    def emit(self, kind: str, data: Any = None) -> None:
        """Send an event to the caller's ``on_event`` callback, if there is one.

        A callback that raises is logged and does not disturb the call.
        """
        if self.on_event is None:
            return
        try:
            self.on_event(Event(kind, self.tool.name, self.call_id, data))
        except Exception:
            logging.getLogger(__name__).exception("on_event callback failed for %s", self.tool.name)


@attrs.frozen
class RemoteRun:
    """Where a worker ran a call (set by the remote executor, docs/remote.md)."""

    queue: str
    task_id: str
    """The Celery task id the host sent the call as."""
    worker: str = ""
    """The worker that took the call; empty when none did (a timeout on an unserved queue)."""
    worker_digest: str = ""
    """The worker's own content digest of the tool; empty when it did not answer."""

    def to_dict(self) -> JSON:
        """A JSON-ready dict (the audit row's ``remote`` column)."""
        return attrs.asdict(self)


@attrs.frozen
class CallResult:
    """What a call returned. ``ok=False`` for skill-level failures."""

    tool: str
    ok: bool
    value: Any = None
    """The JSON object the skill printed (also kept on failure when it parsed)."""
    error: str | None = None
    """Why the call failed, ready to show to a user or a model."""
    exit_code: int | None = None
    signal: int | None = None
    timed_out: bool = False
    duration: float = 0.0
    """Seconds from start to exit."""
    stderr_tail: tuple[str, ...] = attrs.field(default=(), converter=_strs)
    """The last lines the skill wrote to stderr."""
    call_id: str = ""
    status: str = ""
    """ok, failed, timed_out, invalid_arguments, denied, needs_confirmation,
    needs_approval, ticket_refused, unavailable, aborted or cancelled; empty means
    derive it from ``ok``."""
    decision: Decision | None = None
    """The gate's decision for this call."""
    remote: RemoteRun | None = None
    """The worker, queue and task of a call a worker ran; None for a local call."""

    @property
    def outcome(self) -> str:
        """``status``, or ``ok``/``failed``/``timed_out`` when no status was set."""
        if self.status:
            return self.status
        if self.ok:
            return "ok"
        return "timed_out" if self.timed_out else "failed"

    def to_dict(self) -> JSON:
        """A JSON-ready dict (``run --json``)."""
        return {
            "tool": self.tool,
            "ok": self.ok,
            "status": self.outcome,
            "value": self.value,
            "error": self.error,
            "exit_code": self.exit_code,
            "signal": self.signal,
            "timed_out": self.timed_out,
            "duration": round(self.duration, 6),
            "stderr_tail": list(self.stderr_tail),
            "call_id": self.call_id,
            "decision": self.decision.to_dict() if self.decision else None,
        }


def canonical_json(value: Any) -> str:
    """The canonical JSON text of a value: sorted keys, no spaces, UTF-8 kept."""
    return _canonical(value)


# ``json.dumps`` with any non-default option builds a new encoder on every call (a few
# microseconds, several times per call): one encoder, same options, same text.
_canonical = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
).encode


def args_digest(tool: str, args: Mapping[str, Any]) -> str:
    """sha256 over the tool name and the canonical JSON of its arguments."""
    return digest_json(tool, canonical_json(args))


def digest_json(tool: str, canonical_args: str) -> str:
    """:func:`args_digest` from arguments already in canonical JSON text."""
    return hashlib.sha256((tool + "\0" + canonical_args).encode("utf-8")).hexdigest()
