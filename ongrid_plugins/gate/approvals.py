"""The two-person approval ticket store for dangerous calls, kept in SQLite in the state dir.

The life of a ticket::

    host.call("wipe", args, persona="admin")          -> ApprovalRequired(ticket=<pending>)
    host.approve(ticket.id, approver="bob")            -> 1 of 2
    host.approve(ticket.id, approver="carol")          -> approved
    host.call("wipe", args, persona="admin", ticket=ticket.id)   -> runs, once

Rules (each enforced here, inside one ``BEGIN IMMEDIATE`` transaction, so two
processes racing on the same ticket are serialised by SQLite):

* two distinct approvers, neither of them the requester (identities compare by
  :func:`~ongrid_plugins.core.identity.identity_key`: NFKC, case-folded, invisible
  characters removed; names mixing scripts, like ``bоb`` with a Cyrillic ``о``,
  are refused);
* a ticket is bound to the exact tool, arguments digest and persona it was
  opened for: any difference at execution is a ``mismatch`` (changed
  arguments need a new ticket);
* and to the skill's content digest when it was opened: if the skill's files
  differ at execution, the call is refused with ``skill_changed``, "the skill
  changed since approval (digest A -> B)";
* it expires ``Settings.approval_ttl`` seconds (15 min) after it was opened,
  approved or not; a rejected ticket is dead; it executes once (claiming it
  marks it ``executed`` before the tool starts, so a crash never re-opens it);
* every ``ongrid_verify_approval`` plugin may refuse an approval.

The same requester repeating the same request (tool, digest, persona) while a
ticket for it is still open gets that ticket back instead of a new one, so a
model retrying in a loop does not bury approvers in duplicates.

``sqlite3`` is imported on first use.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import time
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from ..core import _sqlite
from ..core.echo import MAX_ECHO, echo
from ..core.hooks import hooks
from ..core.identity import identity_problem, normalize_identity
from ..errors import ApprovalError
from .tickets import (
    _OPEN,
    REQUIRED_APPROVALS,
    STATUSES,
    Approval,
    Ticket,
    TicketStatus,
    VerifyApproval,
    _check_approvable,
    _check_matches,
    _check_skill,
    _check_spendable,
    _closed,
    _identity,
    _key,
    forged,
)

if TYPE_CHECKING:
    import sqlite3

    import pluggy

    from ..settings import Settings

__all__ = ["DB_NAME", "ApprovalStore", "verify_with_plugins"]

logger = logging.getLogger("ongrid_plugins.approvals")

DB_NAME = "approvals.db"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS tickets (
    id TEXT PRIMARY KEY,
    tool TEXT NOT NULL,
    args_digest TEXT NOT NULL,
    persona TEXT NOT NULL,
    requester TEXT NOT NULL,
    required INTEGER NOT NULL,
    status TEXT NOT NULL,
    created REAL NOT NULL,
    expires REAL NOT NULL,
    rejected_by TEXT,
    note TEXT NOT NULL DEFAULT '',
    args TEXT NOT NULL DEFAULT '{}',
    tool_class TEXT NOT NULL DEFAULT '',
    reason TEXT NOT NULL DEFAULT '',
    executed REAL,
    executed_by TEXT,
    call_id TEXT,
    profile TEXT NOT NULL DEFAULT '',
    skill_digest TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS tickets_request ON tickets (requester, tool, args_digest, persona, status);
CREATE TABLE IF NOT EXISTS approvals (
    ticket_id TEXT NOT NULL REFERENCES tickets (id),
    approver_key TEXT NOT NULL,
    approver TEXT NOT NULL,
    note TEXT NOT NULL DEFAULT '',
    sop TEXT,
    time REAL NOT NULL,
    PRIMARY KEY (ticket_id, approver_key)
);
"""

#: The ``tickets`` columns a :class:`Ticket` is read from (every field but ``approvals``).
_TICKET_COLUMNS = (
    "id", "tool", "args_digest", "persona", "requester", "required", "status", "created", "expires",
    "rejected_by", "note", "args", "tool_class", "reason", "executed", "executed_by", "call_id", "profile",
    "skill_digest",
)  # fmt: skip
_SELECT_TICKET = f"SELECT {', '.join(_TICKET_COLUMNS)} FROM tickets WHERE id = ?"

#: Columns added after the first release: ``(table, column, declaration)``, added to older databases.
_ADDED_COLUMNS = (
    ("tickets", "profile", "TEXT NOT NULL DEFAULT ''"),
    ("tickets", "skill_digest", "TEXT NOT NULL DEFAULT ''"),
)


class ApprovalStore:
    """The ticket database: ``<state_dir>/approvals.db``. Safe across threads and processes."""

    def __init__(
        self,
        path: str,
        *,
        ttl: float = 15 * 60.0,
        required: int = REQUIRED_APPROVALS,
        clock: Callable[[], float] = time.time,
        witness: Callable[[Ticket], str | None] | None = None,
        max_open: int = 20,
    ) -> None:
        """Open (lazily) the database at ``path``; nothing is touched until the first use.

        :param witness: Asked as an approved ticket is spent: why the tamper-evident record
            does not back it (a host passes its audit log's ``ticket_problem``), or None.
        :param max_open: Open tickets one requester may hold at once (``ONGRID_MAX_OPEN_TICKETS``).
        """
        self.path = path
        self.max_open = max_open
        self.ttl = ttl
        self.required = required
        self._clock = clock
        self._ready = False
        self.witness = witness

    @classmethod
    def for_settings(
        cls, settings: Settings, witness: Callable[[Ticket], str | None] | None = None
    ) -> ApprovalStore:
        """The store of a host: ``approvals.db`` in ``settings.state_dir``, ``approval_ttl`` expiry."""
        path = os.path.join(settings.state_dir, DB_NAME)
        return cls(path, ttl=settings.approval_ttl, witness=witness, max_open=settings.max_open_tickets)

    def __repr__(self) -> str:
        return f"<ApprovalStore {self.path}>"

    # ------------------------------------------------------------------ reading

    def ticket(self, ticket_id: str) -> Ticket:
        """The ticket ``ticket_id``; raises ``ApprovalError(reason="unknown")``, exit code 4 (not found).

        A call that presents an unknown ticket is refused by :meth:`claim` instead (exit 3, denied).
        """
        if not _sqlite.state_exists(self.path):  # reading never creates the database
            raise _unknown(ticket_id, not_found=True)
        with self._read() as conn:
            if conn.execute(_SELECT_TICKET, (str(ticket_id),)).fetchone() is None:
                raise _unknown(ticket_id, not_found=True)
            return self._load(conn, ticket_id, self._clock())

    def tickets(self, status: str | None = None) -> list[Ticket]:
        """Every ticket, newest first; with ``status``, only those in that state right now."""
        if status is not None and status not in STATUSES:
            message = f"unknown ticket status {status!r}; use one of {', '.join(STATUSES)}"
            raise ApprovalError("unknown", "", message)
        now = self._clock()
        if not _sqlite.state_exists(self.path):  # reading never creates the database
            return []
        with self._read() as conn:
            ids = [row[0] for row in conn.execute("SELECT id FROM tickets ORDER BY created DESC, id")]
            tickets = [self._load(conn, i, now) for i in ids]
        return [t for t in tickets if status is None or t.status == status]

    # ------------------------------------------------------------------ writing

    def open_ticket(
        self,
        *,
        tool: str,
        args_digest: str,
        persona: str,
        requester: str,
        args: Mapping[str, Any],
        tool_class: str = "",
        reason: str = "",
        profile: str = "",
        skill_digest: str = "",
        call_args: Mapping[str, Any] | None = None,
    ) -> Ticket:
        """A ticket for this call: the requester's open one for the same call, else a new one.

        ``profile`` and ``skill_digest`` bind it to the sandbox profile and to the skill's
        files as they are now. ``args`` are the redacted arguments approvers read.
        ``call_args`` (the call's own, unredacted) are not kept here; a store on a server
        (``approvals_client``) sends them so the server works out the digest and the
        redaction itself.
        """
        problem = identity_problem(requester)
        if problem is not None:
            raise ApprovalError("no_identity", "", f"no ticket can be opened: {problem}")
        requester = normalize_identity(requester)
        now = self._clock()
        with self._write() as conn:
            row = conn.execute(
                "SELECT id FROM tickets WHERE requester = ? AND tool = ? AND args_digest = ? AND persona = ?"
                " AND profile = ? AND skill_digest = ? AND status IN (?, ?) AND expires > ?"
                " ORDER BY created DESC LIMIT 1",
                (requester, tool, args_digest, persona, profile, skill_digest, *_OPEN, now),
            ).fetchone()
            if row is not None:
                return self._load(conn, row[0], now)
            self._check_cap(conn, requester, now)
            ticket_id = os.urandom(8).hex()
            conn.execute(
                "INSERT INTO tickets (id, tool, args_digest, persona, requester, required, status, created,"
                " expires, args, tool_class, reason, profile, skill_digest)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    ticket_id,
                    tool,
                    args_digest,
                    persona,
                    requester,
                    self.required,
                    TicketStatus.PENDING,
                    now,
                    now + self.ttl,
                    json.dumps(dict(args), sort_keys=True, ensure_ascii=False),
                    tool_class,
                    reason,
                    profile,
                    skill_digest,
                ),
            )
            return self._load(conn, ticket_id, now)

    def _check_cap(self, conn: sqlite3.Connection, requester: str, now: float) -> None:
        """Refuse a new ticket to a requester who holds :attr:`max_open` open ones already."""
        (held,) = conn.execute(
            "SELECT COUNT(*) FROM tickets WHERE requester = ? AND status IN (?, ?) AND expires > ?",
            (requester, *_OPEN, now),
        ).fetchone()
        if held >= self.max_open:
            message = (
                f"{requester} already has {held} open tickets, the most one requester may hold "
                f"(ONGRID_MAX_OPEN_TICKETS={self.max_open}); wait for them to be approved, rejected, "
                "run or expire, or withdraw one"
            )
            raise ApprovalError("too_many_open", "", message)

    def approve(
        self,
        ticket_id: str,
        *,
        approver: str,
        note: str = "",
        sop: str | None = None,
        verify: VerifyApproval | None = None,
    ) -> Ticket:
        """Record ``approver``'s approval; the ticket is ``approved`` once it has ``required`` of them.

        ``verify`` (the ``ongrid_verify_approval`` plugins) may refuse it. Raises
        :class:`ApprovalError` naming the rule that refused.
        """
        approver = _identity(approver, ticket_id)
        ticket = self.ticket(ticket_id)
        approval = Approval(approver, note, sop, self._clock())
        _check_approvable(ticket, approver)
        if verify is not None:
            refused_by = verify(ticket, approval)
            if refused_by:
                message = f"the approval of ticket {ticket_id} by {approver} was refused by {refused_by}"
                raise ApprovalError("hook_refused", ticket_id, message)
        now = self._clock()
        with self._write() as conn:
            ticket = self._load(conn, ticket_id, now)
            _check_approvable(ticket, approver)  # again: someone may have been faster
            conn.execute(
                "INSERT INTO approvals (ticket_id, approver_key, approver, note, sop, time)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (ticket_id, _key(approver), approver, note, sop, now),
            )
            if len(ticket.approvals) + 1 >= ticket.required:
                conn.execute("UPDATE tickets SET status = ? WHERE id = ?", (TicketStatus.APPROVED, ticket_id))
            ticket = self._load(conn, ticket_id, now)
        logger.info("approvals: %s approved ticket %s (%s)", approver, ticket_id, ticket.status)
        return ticket

    def reject(self, ticket_id: str, *, approver: str, note: str = "") -> Ticket:
        """Kill the ticket (anyone may, the requester included, to withdraw it)."""
        approver = _identity(approver, ticket_id)
        self.ticket(ticket_id)  # an unknown ticket is refused before the database is created
        now = self._clock()
        with self._write() as conn:
            ticket = self._load(conn, ticket_id, now)
            if not ticket.is_open:
                raise _closed(ticket)
            conn.execute(
                "UPDATE tickets SET status = ?, rejected_by = ?, note = ? WHERE id = ?",
                (TicketStatus.REJECTED, approver, note, ticket_id),
            )
            ticket = self._load(conn, ticket_id, now)
        logger.info("approvals: %s rejected ticket %s", approver, ticket_id)
        return ticket

    def claim(
        self,
        ticket_id: str,
        *,
        tool: str,
        args_digest: str,
        persona: str,
        caller: str,
        call_id: str,
        profile: str = "",
        skill_digest: str | None = None,
    ) -> Ticket:
        """Mark an approved ticket executed by this call, or raise why it may not run.

        Exactly one of any number of racing claims succeeds: the check and the
        update happen in one write transaction. ``skill_digest`` is the skill's
        digest now; a ticket bound to another one is refused (``skill_changed``).
        """
        now = self._clock()
        witnessed = self._witnessed(ticket_id, now)  # before the write lock: it reads another database
        with self._write() as conn:
            ticket = self._load(conn, ticket_id, now)
            _check_matches(ticket, tool, args_digest, persona, profile)
            _check_skill(ticket, skill_digest)
            if ticket.status != TicketStatus.APPROVED:
                raise _closed(ticket)
            _check_spendable(ticket, self.required)
            if self.witness is not None and witnessed != (
                ticket.approvers,
                ticket.args_digest,
                ticket.expires,
            ):
                message = f"ticket {ticket_id} changed while it was being checked; run the call again"
                raise ApprovalError("not_approved", ticket_id, message)
            updated = conn.execute(
                "UPDATE tickets SET status = ?, executed = ?, executed_by = ?, call_id = ?"
                " WHERE id = ? AND status = ?",
                (TicketStatus.EXECUTED, now, caller, call_id, ticket_id, TicketStatus.APPROVED),
            ).rowcount
            if updated != 1:  # cannot happen inside BEGIN IMMEDIATE; refuse rather than run twice
                raise _closed(self._load(conn, ticket_id, now))
            ticket = self._load(conn, ticket_id, now)
        logger.info("approvals: ticket %s executed by %s (call %s)", ticket_id, caller, call_id)
        return ticket

    def _witnessed(self, ticket_id: str, now: float) -> tuple[tuple[str, ...], str, float] | None:
        """The approvers, arguments digest and expiry of the approved ticket that :attr:`witness`
        vouched for (None: nothing asked, the ticket is not approved yet); raises ``forged``
        when it does not vouch."""
        if self.witness is None:
            return None
        with self._read() as conn:
            seen = self._load(conn, ticket_id, now)
        if seen.status != TicketStatus.APPROVED:
            return None
        _check_spendable(seen, self.required)  # the rules first: their refusal says more
        problem = self.witness(seen)
        if problem:
            raise forged(ticket_id, problem)
        return seen.approvers, seen.args_digest, seen.expires

    # ------------------------------------------------------------------ sqlite

    def _load(self, conn: sqlite3.Connection, ticket_id: str, now: float) -> Ticket:
        row = conn.execute(_SELECT_TICKET, (str(ticket_id),)).fetchone()
        if row is None:
            raise _unknown(ticket_id)
        approvals = [
            Approval(approver, note, sop, when)
            for approver, note, sop, when in conn.execute(
                "SELECT approver, note, sop, time FROM approvals WHERE ticket_id = ? ORDER BY time, rowid",
                (ticket_id,),
            )
        ]
        return Ticket.from_row(dict(zip(_TICKET_COLUMNS, row, strict=True)), approvals, now)

    @contextlib.contextmanager
    def _read(self) -> Iterator[sqlite3.Connection]:
        with self._connection() as conn:
            conn.execute("BEGIN")
            try:
                yield conn
            finally:
                conn.rollback()

    @contextlib.contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        with self._connection() as conn:
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
            except BaseException:
                conn.rollback()
                raise
            conn.commit()

    @contextlib.contextmanager
    def _connection(self) -> Iterator[sqlite3.Connection]:
        import sqlite3

        try:
            conn = self._connect(sqlite3)
        except sqlite3.Error as exc:
            raise self._store_error(exc) from exc
        try:
            yield conn
        except sqlite3.Error as exc:
            raise self._store_error(exc) from exc
        finally:
            conn.close()

    def _connect(self, sqlite3: Any) -> Any:
        # Approvals are rare and losing one could re-open an executed ticket: fsync each commit.
        conn = _sqlite.connect(
            self.path,
            "" if self._ready else _SCHEMA,
            synchronous="FULL",
            added=() if self._ready else _ADDED_COLUMNS,
        )
        self._ready = True
        return conn

    def _store_error(self, exc: Exception) -> ApprovalError:
        message = f"the approval database {self.path} cannot be used: {exc}"
        if _sqlite.access_problem(self.path):  # a permission problem: name the file and the fix
            message = f"the approval database cannot be used: {_sqlite.access_error(self.path, exc)}"
        logger.error("approvals: %s", message)
        return ApprovalError("store", "", message)


def verify_with_plugins(pm: pluggy.PluginManager) -> VerifyApproval:
    """A ``verify`` callback asking every ``ongrid_verify_approval`` plugin, naming the first to refuse.

    Anything but ``True`` or ``None`` refuses (fail closed), and so does a plugin that raises.
    """

    def verify(ticket: Ticket, approval: Approval) -> str | None:
        for plugin, vote, exc in hooks(pm).verify_approval(ticket=ticket, approval=approval):
            if exc is not None:
                logger.error("approvals: plugin %s failed to verify an approval", plugin, exc_info=exc)
                return f"plugin {plugin} (it raised {type(exc).__name__}: {exc})"
            if vote is not None and vote is not True:
                return f"plugin {plugin}"
        return None

    return verify


def _unknown(ticket_id: str, *, not_found: bool = False) -> ApprovalError:
    """The error for a ticket id no ticket has (an empty id said as such, not as ``''``)."""
    shown = echo(str(ticket_id)) if ticket_id else "with an empty id"  # a 5,000-character id is cut
    message = f"no approval ticket {shown} (see `ongrid-skills approvals list`)"
    return ApprovalError("unknown", str(ticket_id)[:MAX_ECHO], message, not_found=not_found)
