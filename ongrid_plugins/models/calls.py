"""One call: the request the gate and executors see, its events, and its result.

May import: :mod:`.base`, :mod:`.permissions`, :mod:`.tools`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from enum import StrEnum
from typing import Any

import attrs

from .base import JSON, strs
from .permissions import Decision, Persona
from .tools import Tool

__all__ = ["CallRequest", "CallResult", "Event", "EventCallback", "Outcome", "RemoteRun"]

EventCallback = Callable[["Event"], None]


class Outcome(StrEnum):
    """What became of a call attempt, as its result's ``status`` and its audit row's ``outcome``.

    Each member equals the string the audit log has always stored (``Outcome.OK == "ok"``),
    so rows, hashes and filters are byte-identical whether a caller passes a member or a string.
    """

    OK = "ok"
    FAILED = "failed"
    """The skill ran and failed (or the executor raised)."""
    TIMED_OUT = "timed_out"
    INVALID_ARGUMENTS = "invalid_arguments"
    DENIED = "denied"
    NEEDS_CONFIRMATION = "needs_confirmation"
    NEEDS_APPROVAL = "needs_approval"
    TICKET_REFUSED = "ticket_refused"
    UNAVAILABLE = "unavailable"
    ABORTED = "aborted"
    """An ``ongrid_before_call`` hook raised."""
    CANCELLED = "cancelled"
    INTERRUPTED = "interrupted"
    """The host process ended before the call's outcome was recorded (found at recovery)."""
    APPROVAL = "approval"
    """Not a call: an approver signed a two-person ticket."""
    REJECTION = "rejection"
    """Not a call: an approver rejected a two-person ticket."""
    CLAIM = "claim"
    """Not a call: a host that runs the call itself spent a two-person ticket kept on a server."""
    APPROVAL_REFUSED = "approval_refused"
    """Not a call: an attempt to approve a two-person ticket was refused (its own requester, twice...)."""


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
    approvers: tuple[str, ...] = attrs.field(default=(), converter=strs)
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
    stderr_tail: tuple[str, ...] = attrs.field(default=(), converter=strs)
    """The last lines the skill wrote to stderr."""
    call_id: str = ""
    status: str = ""
    """An :class:`Outcome` (ok, failed, timed_out, invalid_arguments, denied,
    needs_confirmation, needs_approval, ticket_refused, unavailable, aborted or
    cancelled); empty means derive it from ``ok``."""
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
            return Outcome.OK
        return Outcome.TIMED_OUT if self.timed_out else Outcome.FAILED

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
