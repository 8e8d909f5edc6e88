"""Built-in plugin ``audit``: a tamper-evident, append-only log of every call attempt.

One row per attempt — run, failed, denied, invalid, needing a confirmation or
an approval — in ``<state_dir>/audit.db`` (SQLite, WAL). Each row stores the
hash of the row before it and its own hash over all its columns, so
:meth:`AuditLog.verify` finds the first row that was edited, deleted, inserted
or moved. Arguments are stored with secrets redacted (:mod:`ongrid_plugins.schema.redact`).

Why a per-host object: the hooks need the host's state dir, and hooks are
called without settings. ``audit`` is a per-host built-in plugin: it has its
place in ``BUILTIN_PLUGINS`` like every built-in (so ``ONGRID_DISABLE_PLUGINS=audit``
blocks it, and ``ongrid-skills plugins`` shows it), and what is registered there
is the host's own :class:`AuditLog`, whose methods are the hooks (the host hands
it to ``get_plugin_manager(per_host=...)``). A module never holds per-host state.

Crash safety: ``ongrid_before_call`` commits the attempt to the ``inflight``
table (:mod:`.inflight`) before anything runs; ``ongrid_after_call`` chains the
complete row and removes the in-flight one in a single SQLite transaction
(``BEGIN IMMEDIATE``: read the head, insert the row with its ``prev_hash``,
commit), so a row is in the chain as soon as the call returns, concurrent writers
(threads share the process's connection under a lock, processes take SQLite's
write lock) append one after the other, and nothing is ever half-written. If a
process dies, the next process that opens the log on the same machine chains
what it left in flight as ``interrupted``.

Failing closed: when the log cannot be opened or written, the
failure is logged as an error and — unless ``Settings.audit_fail_closed`` is
off — mutating and dangerous calls are refused with
:class:`~ongrid_plugins.errors.AuditError` before they start, until rows can be
written again. Safe calls still run.
"""

from __future__ import annotations

import logging
import os
import time
from typing import TYPE_CHECKING, Any

import attrs

from ..core import _sqlite
from ..errors import AuditError, ConfigError
from ..hookspecs import hookimpl
from ..models import Outcome, ToolClass
from .chain import COLUMNS, Walk, append, check_head, check_macs, walk
from .decisions import digest_key, ticket_problem, ticket_row, trust_row
from .entries import (
    OUTCOMES,
    AuditEntry,
    UnreadableLog,
    VerifyReport,
    _anchor_problem,
    _missing,
    check_anchor,
    read_key,
)
from .headfile import read_head, write_head
from .inflight import inflight, recover
from .rows import finish_row, start_row
from .store import Store

if TYPE_CHECKING:
    import pluggy

    from ..gate.tickets import Ticket
    from ..models import CallRequest, CallResult
    from ..settings import Settings

__all__ = ["DB_NAME", "PLUGIN_NAME", "AuditLog", "warn_if_disabled"]

logger = logging.getLogger("ongrid_plugins.audit")

PLUGIN_NAME = "audit"
DB_NAME = "audit.db"
HEAD_NAME = "audit-head.json"


class AuditLog:
    """The audit log of one state dir; as a plugin, it records every call of its host."""

    def __init__(self, path: str, *, fail_closed: bool = True, key_file: str | None = None) -> None:
        """Open (lazily) the log at ``path``; nothing is touched until the first use.

        :param key_file: A file holding the audit key (``ONGRID_AUDIT_KEY_FILE``): every
            row then carries an HMAC, and :meth:`verify` checks them.
        """
        self.path = path
        self.fail_closed = fail_closed
        self.key: bytes | None = None
        self.key_error: ConfigError | None = None
        """Why the key in ``key_file`` cannot be used: the host still starts, but nothing is
        recorded (risky calls are refused when failing closed) and :meth:`verify` raises it."""
        try:
            self.key = read_key(key_file) if key_file else None
        except ConfigError as exc:
            self.key_error = exc
        self._store = Store(path, self.key, self.key_error)
        self._transaction = self._store.transaction
        self._started: dict[str, tuple[float, dict[str, Any]]] = {}
        self._failures = 0

    @classmethod
    def for_settings(cls, settings: Settings) -> AuditLog:
        """The log of a host: ``audit.db`` in ``settings.state_dir``."""
        path = os.path.join(settings.state_dir, DB_NAME)
        return cls(path, fail_closed=settings.audit_fail_closed, key_file=settings.audit_key_file)

    def __repr__(self) -> str:
        return f"<AuditLog {self.path}>"

    # ------------------------------------------------------------------ hooks

    @hookimpl(tryfirst=True)
    def ongrid_before_call(self, request: CallRequest) -> None:
        """Record the attempt as in flight before anything runs; refuse risky calls the log cannot record."""
        try:
            if self.key_error is not None:  # rows without their HMAC would not verify
                raise ConfigError(str(self.key_error))
            # To the microsecond, as rows have always kept it.
            start = start_row(request, time.time_ns() // 1000 / 1e6)
            self._started[request.call_id] = (time.monotonic(), start)
            self._store.start(request.call_id, start)
        except Exception as exc:
            self._failed("record", request, exc)
            if self.fail_closed and request.tool.tool_class is not ToolClass.SAFE:
                message = (
                    f"the audit log {self.path} cannot record the call to {request.tool.name!r} ({exc}); "
                    f"{request.tool.tool_class.value} calls are refused until it can "
                    "(ONGRID_AUDIT_FAIL_CLOSED=0 runs them unrecorded)"
                )
                raise AuditError(message) from exc

    @hookimpl(tryfirst=True)
    def ongrid_after_call(self, request: CallRequest, result: CallResult) -> None:
        """Chain the attempt's complete row and drop its in-flight record, in one transaction.

        A failure is logged as an error (the call already happened) and the row is kept
        to be chained by the next write; meanwhile its in-flight record (if it was made)
        stands for it, so a process that dies then still leaves the call in the log, as
        interrupted. While rows cannot be written, mutating and dangerous calls are refused
        (when failing closed: ``ongrid_before_call`` cannot write either).
        """
        begun = self._started.pop(request.call_id, None)
        if self.key_error is not None:  # not recorded: ongrid_before_call said why
            return
        if begun is None:  # no before_call (another plugin's before_call failed first)
            begun = (time.monotonic(), start_row(request, time.time_ns() // 1000 / 1e6))
        mono, start = begun
        row = finish_row(start, request, result, result.duration or (time.monotonic() - mono))
        try:
            self._store.chain(row)
        except Exception as exc:
            self._failed("chain the outcome of", request, exc)

    def flush(self, timeout: float | None = 30.0) -> bool:
        """Chain the rows a failed write left behind; False while they cannot be written.

        Every other row is in the chain when its call returns. ``timeout`` is kept for
        callers of older versions (the write waits for SQLite's lock as any write does).
        """
        if not self._store.backlog:
            return True
        try:
            with self._transaction():
                pass  # chains the backlog
        except Exception as exc:
            waiting = len(self._store.backlog)
            logger.error("audit log: cannot chain %d row(s) in %s: %s", waiting, self.path, exc)
            return False
        return True

    @property
    def write_failures(self) -> int:
        """Writes that failed since this object was created."""
        return self._failures

    def _failed(self, what: str, request: CallRequest, exc: Exception) -> None:
        self._failures += 1
        logger.error(
            "audit log: cannot %s the call to %s (call %s) in %s: %s: %s",
            what,
            request.tool.name,
            request.call_id,
            self.path,
            type(exc).__name__,
            exc,
        )

    # ------------------------------------------------------------------ reading

    def entries(
        self,
        *,
        tool: str | None = None,
        outcome: str | None = None,
        since: int | None = None,
        last: int | None = None,
        limit: int | None = None,
        caller: str | None = None,
        start: float | None = None,
        end: float | None = None,
        call_id: str | None = None,
    ) -> list[AuditEntry]:
        """Rows in order; ``since`` = only rows after that seq, ``last`` = only the final N.

        ``caller`` keeps one identity's rows, ``call_id`` one call's; ``start`` and ``end`` (seconds since the
        epoch) keep the attempts that started in ``[start, end)``. Reading never creates
        the log: with no ``audit.db`` yet there are no rows.

        :raises ConfigError: ``outcome`` is not one of :data:`OUTCOMES`.
        """
        if outcome is not None and outcome not in OUTCOMES:
            message = f"unknown outcome {outcome!r}; use one of {', '.join(OUTCOMES)}"
            raise ConfigError(message)
        where: list[str] = []
        params: list[Any] = []
        for column, value in (("tool", tool), ("outcome", outcome), ("caller", caller), ("call_id", call_id)):
            if value is not None:
                where.append(f"{column} = ?")
                params.append(value)
        if since is not None:
            where.append("seq > ?")
            params.append(since)
        if start is not None:
            where.append("time >= ?")
            params.append(start)
        if end is not None:
            where.append("time < ?")
            params.append(end)
        clause = f" WHERE {' AND '.join(where)}" if where else ""
        order, count = ("DESC", last) if last is not None else ("ASC", limit)
        sql = f"SELECT {', '.join(COLUMNS)}, hash FROM entries{clause} ORDER BY seq {order}"
        self.flush()
        if count is not None:
            sql += f" LIMIT {int(count)}"
        if not self._exists():
            return []
        with self._transaction(write=False) as conn:
            rows = conn.execute(sql, params).fetchall()
        entries = [AuditEntry.from_row(r) for r in rows]
        return entries[::-1] if last is not None else entries

    def tail(self, n: int = 10) -> list[AuditEntry]:
        """The last ``n`` rows, oldest first."""
        return self.entries(last=n)

    def verify(self, anchor: str | None = None) -> VerifyReport:
        """Check the whole chain; name the first row that does not verify.

        :param anchor: A row hash recorded earlier (``head`` of a past report),
            or a unique prefix of at least :data:`MIN_ANCHOR` hex digits of one:
            the chain must still contain it, so history before it cannot have
            been rewritten wholesale.
        :raises ConfigError: ``anchor`` cannot be a row hash (a usage error, checked first).
        """
        if anchor is not None:
            check_anchor(anchor)
        if self.key_error is not None:
            raise ConfigError(str(self.key_error))
        self.flush()
        try:
            report, keyed, flying = self._walk()
        except UnreadableLog as exc:
            return VerifyReport(ok=False, entries=0, problem=exc.problem)
        if report.ok and keyed[1]:
            report = attrs.evolve(report, ok=False, first_bad=keyed[0], problem=keyed[1])
        if report.ok and anchor is not None:
            problem = _anchor_problem(anchor, report.seen)
            if problem and not report.count:
                problem = f"the log is empty, but the anchor {anchor} was recorded from it: rows are missing"
            if problem:
                report = attrs.evolve(report, ok=False, problem=problem)
        recorded = self.recorded_head()
        if report.ok and recorded is not None and recorded["hash"] not in report.seen:
            report = attrs.evolve(report, ok=False, problem=_missing(report.count, recorded))
        return VerifyReport(
            ok=report.ok,
            entries=report.count,
            first_bad=report.first_bad,
            problem=report.problem,
            head=report.last_hash,
            inflight=flying,
        )

    def _walk(self) -> tuple[Walk, tuple[int | None, str], list[dict[str, Any]]]:
        """The chain walked and its head checked, the keyed chain's ``(first bad, problem)``, and
        the calls in flight."""
        if not self._exists():  # reading never creates the log: an empty chain
            return check_head(walk(iter(())), None), (None, ""), []
        with self._transaction(write=False) as conn:
            # SQLite's own check first: a damaged index reads as fewer rows, or as none.
            damage = [" ".join(str(row[0]).split()) for row in conn.execute("PRAGMA quick_check(3)")]
            if damage != ["ok"]:
                raise UnreadableLog(self.path, "SQLite's quick_check: " + "; ".join(damage)[:300])
            report = walk(conn.execute(f"SELECT {', '.join(COLUMNS)}, hash FROM entries ORDER BY seq"))
            head = conn.execute("SELECT seq, hash FROM head WHERE id = 1").fetchone()
            keyed = check_macs(conn, self.key) if self.key is not None and report.ok else (None, "")
            flying = inflight(conn)
        return check_head(report, head), keyed, flying

    # ------------------------------------------------------------------ tickets

    def ticket_problem(self, ticket: Ticket) -> str | None:
        """Why this chain does not back spending ``ticket`` now, or None.

        Every approver the approvals database names must have an ``approval`` row for it here,
        and no row may show it already spent: a row added to, or a status reset in, the approvals
        database alone does not make a ticket runnable; nor does another arguments digest than its
        opening call and approvals recorded.
        """
        self.flush(timeout=5.0)  # the rows of calls that ran; a log that cannot write refuses them anyway
        rows: list[tuple[str, str, str, str]] = []
        key = None
        if self._exists():
            with self._transaction(write=False) as conn:
                query = "SELECT outcome, caller, approvers, args_digest FROM entries WHERE ticket = ?"
                rows = conn.execute(query + " ORDER BY seq", (ticket.id,)).fetchall()
                key = digest_key(conn, create=False)
        return ticket_problem(self.path, ticket, rows, key)

    def record_ticket(self, ticket: Ticket, outcome: Outcome, by: str, note: str = "", **fields: Any) -> int:
        """Chain a ticket decision (``approval`` or ``rejection``) by ``by``; return its row number.

        The row names the ticket, its tool, persona and arguments (already redacted
        on the ticket), who decided (``caller``), their note (``reason``) and the
        approvers so far, so who approved or rejected a ticket is in the
        tamper-evident record, not only in the approvals database. Arguments that held
        a secret keep a keyed digest only (:mod:`.decisions`). ``fields`` set other columns
        (:func:`.decisions.ticket_row`).

        :raises AuditError: the row cannot be written (the decision itself is kept).
        """
        self.flush()
        try:
            with self._transaction() as conn:
                seq = append(conn, ticket_row(conn, ticket, outcome, by, note, **fields), self.key)
            return seq
        except Exception as exc:
            self._failures += 1
            message = (
                f"the audit log {self.path} cannot record the {outcome} of ticket {ticket.id} "
                f"by {by} ({type(exc).__name__}: {exc}); the {outcome} itself is kept"
            )
            logger.error("audit log: %s", message)
            raise AuditError(message) from exc

    def record_trust(self, outcome: str, pack: str, by: str, note: str = "", **facts: Any) -> int:
        """Chain a trust decision about ``pack`` by ``by`` (:func:`.decisions.trust_row`); its row number.

        :raises AuditError: the row cannot be written.
        """
        self.flush()
        try:
            with self._transaction() as conn:
                seq = append(conn, trust_row(outcome, pack, by, note, **facts), self.key)
            return seq
        except Exception as exc:
            self._failures += 1
            message = f"the audit log {self.path} cannot record {outcome} of pack {pack} ({exc})"
            logger.error("audit log: %s", message)
            raise AuditError(message) from exc

    def _exists(self) -> bool:
        """Whether there is anything to read (reading never creates the log)."""
        return _sqlite.state_exists(self.path)

    @property
    def head_path(self) -> str:
        """Where :meth:`record_head` keeps the last verified head, next to the log."""
        return os.path.join(os.path.dirname(self.path) or ".", HEAD_NAME)

    def record_head(self) -> VerifyReport:
        """Verify the log and, if it is sound, write its head next to it (``audit-head.json``).

        From then on :meth:`verify` refuses a log that no longer holds that row (an
        emptied, deleted or truncated log). Copy the head elsewhere too: whoever can
        delete the log can delete this file.

        :raises AuditError: the head cannot be written (:func:`.headfile.write_head`).
        """
        report = self.verify()
        if report.ok and report.entries:
            write_head(self.head_path, {"seq": report.entries, "hash": report.head, "time": time.time()})
        return report

    def recorded_head(self) -> dict[str, Any] | None:
        """The head :meth:`record_head` wrote (``seq``, ``hash``, ``time``), or None."""
        return read_head(self.head_path)

    # ------------------------------------------------------------------ recovery

    def recover(self) -> int:
        """Chain, as ``interrupted``, the open calls of dead processes on this machine; return how many.

        Runs by itself whenever a process opens the log; call it to recover now.
        """
        with self._transaction() as conn:
            return recover(conn, self.key)

    # ------------------------------------------------------------------ sqlite

    def close(self) -> None:
        """Chain what a failed write left behind and close this process's connection (it reopens on
        the next use)."""
        self.flush()
        self._store.close()


def warn_if_disabled(pm: pluggy.PluginManager) -> bool:
    """Whether ``ONGRID_DISABLE_PLUGINS`` blocks ``audit``; if so, log a warning.

    Unrecorded calls should never go unnoticed.
    """
    if pm.is_blocked(PLUGIN_NAME):
        logger.warning("audit log: disabled by ONGRID_DISABLE_PLUGINS; calls are not recorded")
        return True
    return False
