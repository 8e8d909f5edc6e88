"""Two-person ticket decisions made through a host, and the audit log rows that record them.

Every decision on a ticket is a row of the host's hash-chained log, whichever surface
made it: approvals and rejections (:meth:`SkillHost.approve`, the CLI, REST, the
console), and, on a server that keeps the tickets of other hosts
(``POST /v1/approvals``, ``POST /v1/approvals/{id}/claim``), the request that opened a
ticket (``needs_approval``), its spending (``claim``) and a refused spend
(``ticket_refused``). Rows are written only while the ``audit`` plugin is enabled.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .gate.tickets import Ticket
    from .host import SkillHost
    from .models import Outcome

__all__ = ["record"]


def record(host: SkillHost, ticket: Ticket, outcome: Outcome, by: str, note: str = "", **fields: Any) -> None:
    """Chain ``by``'s ``outcome`` on ``ticket`` in ``host``'s audit log (see
    :meth:`~ongrid_plugins.audit.AuditLog.record_ticket`); nothing when the log is disabled.

    :raises AuditError: the row cannot be written.
    """
    log = host._audited()
    if log is not None:
        log.record_ticket(ticket, outcome, by, note, **fields)
