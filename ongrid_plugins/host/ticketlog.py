"""Two-person ticket decisions made through a host, and the audit log rows that record them.

Every decision on a ticket is a row of the host's hash-chained log, whichever surface
made it: approvals and rejections (:meth:`SkillHost.approve`, the CLI, REST, the
console), refused attempts to approve (``approval_refused``: the requester signing
their own ticket, one person twice, a third approval, a persona that may not sign),
and, on a server that keeps the tickets of other hosts (``POST /v1/approvals``,
``POST /v1/approvals/{id}/claim``), the request that opened a ticket
(``needs_approval``), its spending (``claim``) and a refused spend
(``ticket_refused``). Rows are written only while the ``audit`` plugin is enabled.

Layering: the host stage, below the host: it may import the values and the gate; the host
and the servers call it with a :class:`~ongrid_plugins.host.hostlike.TicketHost`, and it never
imports the host, not even for a type.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from ..errors import ApprovalError, AuditError
from ..models import Outcome

if TYPE_CHECKING:
    from ..gate.tickets import Ticket
    from .hostlike import TicketHost

__all__ = ["approve", "record", "refused_approval", "reject"]

logger = logging.getLogger("ongrid_plugins.audit")

#: Refusals that say nothing about a ticket: there is none, or the store cannot be read.
_NO_TICKET = frozenset({"unknown", "store"})


def record(
    host: TicketHost, ticket: Ticket, outcome: Outcome, by: str, note: str = "", **fields: Any
) -> None:
    """Chain ``by``'s ``outcome`` on ``ticket`` in ``host``'s audit log (see
    :meth:`~ongrid_plugins.audit.AuditLog.record_ticket`); nothing when the log is disabled.

    :raises AuditError: the row cannot be written.
    """
    log = host._audited()
    if log is not None:
        log.record_ticket(ticket, outcome, by, note, **fields)


def approve(
    host: TicketHost, ticket_id: str, *, approver: str, note: str = "", sop: str | None = None
) -> Ticket:
    """:meth:`SkillHost.approve`: the store's approval, and its row -- or the refusal's."""
    from ..gate.approvals import verify_with_plugins

    verify = verify_with_plugins(host.pm)
    try:
        ticket = host.approvals.approve(ticket_id, approver=approver, note=note, sop=sop, verify=verify)
    except ApprovalError as exc:
        if exc.reason not in _NO_TICKET:
            refused_approval(host, ticket_id, approver, note, str(exc))
        raise
    record(host, ticket, Outcome.APPROVAL, approver, note)  # the decision in the tamper-evident record
    return ticket


def reject(host: TicketHost, ticket_id: str, *, approver: str, note: str = "") -> Ticket:
    """:meth:`SkillHost.reject`: the store's rejection, and its row."""
    ticket = host.approvals.reject(ticket_id, approver=approver, note=note)
    record(host, ticket, Outcome.REJECTION, approver, note)
    return ticket


def refused_approval(host: TicketHost, ticket_id: str, by: str, note: str, error: str) -> None:
    """Chain ``by``'s refused attempt to approve ``ticket_id`` (``error``: why it was refused).

    Nothing for a ticket that does not exist. The refusal stands whatever happens here: a
    row that cannot be written is logged as an error, not raised over the refusal.
    """
    if host._audited() is None:
        return
    try:
        ticket = host.approvals.ticket(ticket_id)
        record(host, ticket, Outcome.APPROVAL_REFUSED, by, note, error=error)
    except ApprovalError:
        return
    except AuditError as exc:
        logger.error(
            "audit log: the refused approval of ticket %s by %s is not recorded: %s", ticket_id, by, exc
        )
