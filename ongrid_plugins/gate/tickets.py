"""Approval tickets as values, and the rules a ticket is held to.

A :class:`Ticket` is what the two-person approval of a dangerous call is about:
the exact tool, arguments digest, persona, sandbox profile and skill digest it
was opened for, its approvals so far and its status. The rules here are pure
functions of a ticket (who may approve it, whether it covers a call, why it is
closed); :class:`~ongrid_plugins.gate.approvals.ApprovalStore` applies them
inside its transactions. See ``docs/approvals.md``.
"""

from __future__ import annotations

import datetime
import json
import os
from collections.abc import Callable, Iterable, Mapping
from enum import StrEnum
from typing import Any

import attrs

from ..core.identity import identity_key, identity_problem, normalize_identity
from ..errors import ApprovalError
from ..models import JSON

__all__ = [
    "REQUIRED_APPROVALS",
    "STATUSES",
    "Approval",
    "Ticket",
    "TicketStatus",
    "VerifyApproval",
    "os_identity",
]

REQUIRED_APPROVALS = 2


class TicketStatus(StrEnum):
    """Where a ticket is in its life; equal to its stored string (``"approved"``)."""

    PENDING = "pending"
    APPROVED = "approved"
    REJECTED = "rejected"
    EXECUTED = "executed"
    EXPIRED = "expired"  # never stored: a pending or approved ticket past its expiry reads as expired


STATUSES = tuple(status.value for status in TicketStatus)
_OPEN = (TicketStatus.PENDING, TicketStatus.APPROVED)


VerifyApproval = Callable[["Ticket", "Approval"], "str | None"]
"""Returns the name of whoever refuses the approval, or None to let it through."""


@attrs.frozen
class Approval:
    """One approver's signature on a ticket."""

    approver: str
    note: str = ""
    sop: str | None = None
    """A reference to the SOP document the approver followed (a URL, a document id)."""
    time: float = 0.0

    def to_dict(self) -> JSON:
        """A JSON-ready dict."""
        return {"approver": self.approver, "note": self.note, "sop": self.sop, "time": _iso(self.time)}


def _approvals(value: Any) -> tuple[Approval, ...]:
    return tuple(value)


@attrs.frozen
class Ticket:
    """A request for two-person approval of one exact call."""

    id: str
    tool: str
    args_digest: str
    """sha256 of the tool name and canonical arguments: the call the approvals are for."""
    persona: str
    requester: str
    required: int = REQUIRED_APPROVALS
    approvals: tuple[Approval, ...] = attrs.field(default=(), converter=_approvals)
    status: TicketStatus = attrs.field(default=TicketStatus.PENDING, converter=TicketStatus)
    """pending, approved, rejected, executed or expired (a :class:`TicketStatus`, equal to its string)."""
    created: float = 0.0
    expires: float = 0.0
    rejected_by: str | None = None
    note: str = ""
    """Why it was rejected (the rejecter's note)."""
    args: Mapping[str, Any] = attrs.field(factory=dict)
    """The call's arguments with secrets redacted, for approvers to read."""
    tool_class: str = ""
    reason: str = ""
    """Why the gate asked for approval."""
    executed: float | None = None
    executed_by: str | None = None
    call_id: str | None = None
    """The call that executed it (its audit log row)."""
    profile: str = ""
    """Digest of the sandbox profile the call was requested under: a changed profile needs a new ticket."""
    skill_digest: str = ""
    """The skill's content digest when the ticket was opened; execution needs the same (empty: unbound)."""

    @property
    def approvers(self) -> tuple[str, ...]:
        """Who approved, in order."""
        return tuple(a.approver for a in self.approvals)

    @property
    def is_open(self) -> bool:
        """Still pending or approved-but-not-executed, and not expired."""
        return self.status in _OPEN

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Ticket:
        """The ticket of its JSON form (:meth:`to_dict`, as the REST API sends it)."""
        approvals = [
            Approval(a["approver"], a.get("note", ""), a.get("sop"), _timestamp(a.get("time")))
            for a in data.get("approvals", [])
        ]
        return cls(
            id=data["id"],
            tool=data["tool"],
            args_digest=data["args_digest"],
            persona=data["persona"],
            requester=data["requester"],
            required=int(data.get("required", REQUIRED_APPROVALS)),
            approvals=approvals,
            status=data["status"],
            created=_timestamp(data.get("created")),
            expires=_timestamp(data.get("expires")),
            rejected_by=data.get("rejected_by"),
            note=data.get("note", ""),
            args=data.get("args", {}),
            tool_class=data.get("tool_class", ""),
            reason=data.get("reason", ""),
            executed=_timestamp(data.get("executed")) or None,
            executed_by=data.get("executed_by"),
            call_id=data.get("call_id"),
            profile=data.get("profile", ""),
            skill_digest=data.get("skill_digest", ""),
        )

    @classmethod
    def from_row(cls, row: Mapping[str, Any], approvals: Iterable[Approval], now: float) -> Ticket:
        """The ticket a ``tickets`` row describes at time ``now``.

        The row's columns are :data:`~ongrid_plugins.gate.approvals._TICKET_COLUMNS`.
        """
        fields = dict(row)
        fields["args"] = json.loads(fields["args"])
        if fields["status"] in _OPEN and now >= fields["expires"]:
            fields["status"] = TicketStatus.EXPIRED
        return cls(approvals=tuple(approvals), **fields)

    def next_step(self) -> str:
        """What the requester does next, in one sentence (the hint of ``ApprovalRequired``)."""
        expires = self.to_dict()["expires"]
        again = f"the same call again with ticket={self.id!r} (--ticket {self.id}) before {expires}"
        if self.status == TicketStatus.APPROVED:
            return f"ticket {self.id} is approved by {', '.join(self.approvers)}: run {again}"
        return (
            f"ticket {self.id} has {len(self.approvals)} of {self.required} approvals: two people other "
            f"than {self.requester} approve it with `ongrid-skills approvals approve {self.id}`, then run "
            f"{again}"
        )

    def to_dict(self) -> JSON:
        """A JSON-ready dict (``approvals show --json``)."""
        data = attrs.asdict(self, recurse=False)
        data.update(
            approvals=[a.to_dict() for a in self.approvals],
            approvers=list(self.approvers),
            args=dict(self.args),
            created=_iso(self.created),
            expires=_iso(self.expires),
            executed=_iso(self.executed) if self.executed else None,
        )
        return data


def os_identity() -> str:
    """The OS user running this process, from the real uid (not ``$USER``, which anyone can set)."""
    try:
        import pwd

        return pwd.getpwuid(os.getuid()).pw_name
    except (ImportError, KeyError, OSError):
        return f"uid:{os.getuid()}" if hasattr(os, "getuid") else "unknown"


def _check_approvable(ticket: Ticket, approver: str) -> None:
    if not ticket.is_open:
        raise _closed(ticket)
    if ticket.status == TicketStatus.APPROVED:
        message = (
            f"ticket {ticket.id} already has its {ticket.required} approvals ({', '.join(ticket.approvers)})"
        )
        raise ApprovalError("already_approved", ticket.id, message)
    if _key(approver) == _key(ticket.requester):
        message = (
            f"{approver} requested ticket {ticket.id} and cannot approve it: "
            f"two people other than the requester must approve"
        )
        raise ApprovalError("own_ticket", ticket.id, message)
    if _key(approver) in {_key(a) for a in ticket.approvers}:
        message = f"{approver} already approved ticket {ticket.id}: a second, different approver is needed"
        raise ApprovalError("duplicate_approver", ticket.id, message)


def _check_matches(ticket: Ticket, tool: str, args_digest: str, persona: str, profile: str = "") -> None:
    if ticket.tool != tool:
        detail = f"it is for tool {ticket.tool!r}, not {tool!r}"
    elif ticket.persona != persona:
        detail = f"it is for persona {ticket.persona!r}, not {persona!r}"
    elif ticket.args_digest != args_digest:
        detail = "the arguments differ from the ones it was approved for; changed arguments need a new ticket"
    elif ticket.profile != profile:
        detail = (
            "the tool's sandbox profile changed since it was requested "
            f"({ticket.profile[:12] or 'none'} -> {profile[:12] or 'none'}); "
            "a changed profile needs a new ticket"
        )
    else:
        return
    message = f"ticket {ticket.id} does not cover this call: {detail} (call without a ticket to open one)"
    raise ApprovalError("mismatch", ticket.id, message)


def _check_skill(ticket: Ticket, skill_digest: str | None) -> None:
    if not ticket.skill_digest or skill_digest is None or skill_digest == ticket.skill_digest:
        return
    message = f"the skill changed since approval (digest {ticket.skill_digest} -> {skill_digest})"
    raise ApprovalError("skill_changed", ticket.id, message)


def _check_spendable(ticket: Ticket, required: int) -> None:
    """An approved ticket's approvals, checked again as it is spent: the approvals database
    is a file, and a row added or changed by hand (a self-approval, one person twice, an
    invented name) must not let the call run."""
    requester = _key(ticket.requester)
    keys = [_key(a) for a in ticket.approvers]
    needed = max(ticket.required, required, REQUIRED_APPROVALS)
    if requester in keys:
        problem = f"its requester {ticket.requester} is listed among its approvers"
    elif len(set(keys)) != len(keys):
        problem = f"one approver is listed twice ({', '.join(ticket.approvers)})"
    elif len(keys) < needed:
        problem = f"it is marked approved with {len(keys)} approval(s), {needed} are needed"
    else:
        odd = [a for a in ticket.approvers if identity_problem(a) is not None or normalize_identity(a) != a]
        if not odd:
            return
        problem = f"approver {odd[0]!r} is not an identity ongrid-skills would have accepted"
    raise forged(ticket.id, problem + "; its approvals were changed outside ongrid-skills")


def forged(ticket_id: str, problem: str) -> ApprovalError:
    """The refusal of a ticket whose record does not hold up (``problem`` says how)."""
    advice = "Open a new ticket, and check who can write the state dir"
    return ApprovalError("forged", ticket_id, f"ticket {ticket_id} cannot run: {problem}. {advice}")


def _closed(ticket: Ticket) -> ApprovalError:
    if ticket.status == TicketStatus.REJECTED:
        why = f": {ticket.note}" if ticket.note else ""
        message = f"ticket {ticket.id} was rejected by {ticket.rejected_by}{why}; it is dead, open a new one"
    elif ticket.status == TicketStatus.EXECUTED:
        message = (
            f"ticket {ticket.id} already ran at {_iso(ticket.executed)} (call {ticket.call_id}); "
            "a ticket executes once"
        )
    elif ticket.status == TicketStatus.EXPIRED:
        message = f"ticket {ticket.id} expired at {_iso(ticket.expires)}; open a new one"
    elif len(ticket.approvals) >= ticket.required:  # only a hand-edited database gets here
        message = f"ticket {ticket.id} has its approvals but is {ticket.status}, not approved; it cannot run"
    else:
        message = (
            f"ticket {ticket.id} has {len(ticket.approvals)} of its {ticket.required} approvals; "
            f"it cannot run yet (`ongrid-skills approvals approve {ticket.id}`)"
        )
        return ApprovalError("not_approved", ticket.id, message)
    return ApprovalError(ticket.status, ticket.id, message)


def _identity(name: object, ticket_id: str) -> str:
    """The approver's name, normalised (NFKC, no invisible characters); refused when empty,
    holding control characters or mixing scripts (``bоb`` with a Cyrillic ``о``)."""
    if not isinstance(name, str) or not normalize_identity(name):
        message = f"an approver identity is needed to approve or reject ticket {ticket_id} (got {name!r})"
        raise ApprovalError("no_identity", str(ticket_id), message)
    problem = identity_problem(name)
    if problem is not None:
        raise ApprovalError("no_identity", str(ticket_id), f"{problem} (ticket {ticket_id})")
    return normalize_identity(name)


def _key(identity: str) -> str:
    return identity_key(identity)


def _timestamp(text: Any) -> float:
    """The epoch seconds of an ISO 8601 time as :func:`_iso` writes it (0.0 for none)."""
    if not text:
        return 0.0
    return datetime.datetime.fromisoformat(str(text).replace("Z", "+00:00")).timestamp()


def _iso(ts: float | None) -> str:
    if not ts:
        return ""
    return (
        datetime.datetime.fromtimestamp(ts, datetime.UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
    )
