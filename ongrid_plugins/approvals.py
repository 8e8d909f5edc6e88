"""The documented import path of the two-person approval tickets: ``ongrid_plugins.approvals``.

The code lives in the gate stage: the store in :mod:`ongrid_plugins.gate.approvals`,
the ticket values and their rules in :mod:`ongrid_plugins.gate.tickets`. This module
only re-exports their public names, so ``from ongrid_plugins.approvals import Ticket``
(as ``docs/approvals.md`` and ``docs/hooks.md`` show) keeps working. It imports
nothing but those two modules.
"""

from __future__ import annotations

from .gate.approvals import DB_NAME, ApprovalStore, verify_with_plugins
from .gate.tickets import (
    REQUIRED_APPROVALS,
    STATUSES,
    Approval,
    Ticket,
    TicketStatus,
    VerifyApproval,
    os_identity,
)

__all__ = [
    "DB_NAME",
    "REQUIRED_APPROVALS",
    "STATUSES",
    "Approval",
    "ApprovalStore",
    "Ticket",
    "TicketStatus",
    "VerifyApproval",
    "os_identity",
    "verify_with_plugins",
]
