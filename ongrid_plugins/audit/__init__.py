"""Stage ``audit``: the tamper-evident, append-only record of every call attempt.

One row per attempt, and per ticket decision, in ``<state_dir>/audit.db``,
each row hash-chained to the one before it (:mod:`.chain`) in one SQLite
transaction per row; a call is recorded as in flight before it runs
(:mod:`.inflight`), so a process that dies mid-call leaves it as ``interrupted``.
:class:`AuditLog` (:mod:`.log`) is the built-in plugin ``audit``, one object per
host, whose ``ongrid_before_call`` / ``ongrid_after_call`` hooks record the calls
(their rows made by :mod:`.rows`) and refuse risky ones it cannot record.
:mod:`.entries` holds what readers get back: rows and verify reports.
See ``docs/audit.md``.

May import: the value modules (``errors``, ``models``, ``hookspecs``,
``settings``, ``_sqlite``, ``forksafe``) and the schema stage
(``redact``); the gate's ticket values for typing only. Never the host, the executors
or a surface.

``ongrid_plugins.audit`` is the documented import path: the names below stay
importable from here.
"""

from __future__ import annotations

from .chain import COLUMNS, GENESIS, row_hash
from .entries import MIN_ANCHOR, OUTCOMES, AuditEntry, VerifyReport
from .log import DB_NAME, PLUGIN_NAME, AuditLog, warn_if_disabled

__all__ = [
    "COLUMNS",
    "DB_NAME",
    "GENESIS",
    "MIN_ANCHOR",
    "OUTCOMES",
    "PLUGIN_NAME",
    "AuditEntry",
    "AuditLog",
    "VerifyReport",
    "row_hash",
    "warn_if_disabled",
]
