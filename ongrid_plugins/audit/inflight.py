"""The calls a process has started and not chained yet: the ``inflight`` table of ``audit.db``.

``ongrid_before_call`` commits a row here (the columns known before the call runs,
with the process's pid, start time and machine) before the call starts;
``ongrid_after_call`` chains the call's complete row and deletes this one in a
single transaction. So at every moment a call is either in flight here or in the
chain, never both and never neither, whatever happens to its process.

When a process is gone (its pid no longer names the process that started at the
same clock tick), the next process that opens the log on the same machine chains
what it left here as ``interrupted`` (:func:`recover`). Calls of another machine
are left for that machine to judge.

The database is written by every process that uses the log -- in a group-shared
state folder (:mod:`ongrid_plugins.commands.statedir`), by every member of the group -- so a
row read back here is checked (each column of its kind) before it is chained.

May import what :mod:`.chain` may, and :mod:`.chain`.
"""

from __future__ import annotations

import json
import logging
import os
from typing import TYPE_CHECKING, Any

from ..errors import AuditError
from ..models import JSON, Outcome
from .chain import append

if TYPE_CHECKING:
    import sqlite3

__all__ = ["HOST", "START_COLUMNS", "alive", "inflight", "pid_start", "recover", "started"]

logger = logging.getLogger("ongrid_plugins.audit")

HOST = os.uname().nodename

#: The columns of an in-flight row: what is known of a call before it runs.
START_COLUMNS = (
    "time", "call_id", "tool", "tool_class", "persona", "caller", "args", "args_digest",
    "redacted", "pid", "hostname", "sandbox", "skill_digest", "ticket", "approvers",
)  # fmt: skip

_NUMBER = (int, float)
_TYPES: dict[str, tuple[type, ...]] = {
    **dict.fromkeys(("time",), _NUMBER),
    **dict.fromkeys(("pid",), (int,)),
    **dict.fromkeys(set(START_COLUMNS) - {"time", "pid"}, (str,)),
}


def started(conn: sqlite3.Connection, call_id: str, row: dict[str, Any], ident: tuple[int, str]) -> None:
    """Record that ``call_id`` is about to run (inside the caller's write transaction)."""
    conn.execute(
        "INSERT OR REPLACE INTO inflight (call_id, pid, pid_start, host, row) VALUES (?, ?, ?, ?, ?)",
        (call_id, ident[0], ident[1], HOST, json.dumps(row, ensure_ascii=False, default=repr)),
    )


def recover(conn: sqlite3.Connection, key: bytes | None = None) -> int:
    """Chain, as ``interrupted``, the in-flight calls of dead processes on this machine.

    Runs inside the caller's write transaction; a call already in the chain is only
    removed from the table. Returns the number of rows chained.

    :raises AuditError: an in-flight row holds what no process writes (which call, and what).
    """
    count = 0
    rows = conn.execute("SELECT call_id, pid, pid_start, host, row FROM inflight ORDER BY rowid").fetchall()
    for call_id, pid, start, host, text in rows:
        if host != HOST or alive(pid, start):
            continue
        if not conn.execute("SELECT 1 FROM entries WHERE call_id = ?", (call_id,)).fetchone():
            append(conn, _interrupted(call_id, _checked(call_id, text), pid), key)
            count += 1
        conn.execute("DELETE FROM inflight WHERE call_id = ?", (call_id,))
    return count


def _checked(call_id: str, text: str) -> dict[str, Any]:
    """The in-flight row ``text`` of ``call_id``, each column of its kind.

    :raises AuditError: anything else (no process writes it: damaged, or written by someone else).
    """
    try:
        row = json.loads(text)
    except (TypeError, ValueError, RecursionError):
        row = None
    if not isinstance(row, dict):
        row, problem = {}, "it is not a JSON object"
    else:
        problem = ""
    for column, value in row.items():
        types = _TYPES.get(column)
        if types is None:
            problem = f"no row has a column {column[:40]!r}"
        elif value is not None and (not isinstance(value, types) or isinstance(value, bool)):
            problem = f"its {column} is a {type(value).__name__}, not a {types[0].__name__}"
    if not problem and row.get("call_id") not in (None, call_id):
        problem = "its row is of another call"
    if problem:
        raise AuditError(
            f"the in-flight call {call_id[:60]!r} of the audit log cannot be recovered: {problem}; no "
            "version of ongrid-skills writes that, so it was damaged or written by someone else. Delete it "
            "from the inflight table (keep a copy of the database, and find out who wrote it), then run "
            "this again"
        )
    return row


def _interrupted(call_id: str, row: dict[str, Any], pid: int) -> dict[str, Any]:
    row = dict(row, call_id=call_id, tool=row.get("tool") or "?", time=row.get("time") or 0.0)
    row.update(
        outcome=Outcome.INTERRUPTED,
        error=f"the host process {pid} ended before the outcome of this call was recorded",
        duration=0.0,
        stderr_tail="[]",
        result_size=0,
        result_digest="",
    )
    logger.warning("audit log: call %s of %s was interrupted (pid %s)", call_id, row["tool"], pid)
    return row


def inflight(conn: sqlite3.Connection) -> list[JSON]:
    """The calls started and not chained yet, by any process on any machine."""
    found = []
    for call_id, pid, start, host, text in conn.execute(
        "SELECT call_id, pid, pid_start, host, row FROM inflight ORDER BY rowid"
    ):
        try:
            row = json.loads(text)
        except (TypeError, ValueError, RecursionError):
            row = None
        row = row if isinstance(row, dict) else {}
        found.append(
            {
                "call_id": call_id,
                "tool": row.get("tool"),
                "started": row.get("time"),
                "pid": pid,
                "host": host,
                "alive": alive(pid, start) if host == HOST else None,
            }
        )
    return found


def pid_start(pid: int) -> str:
    """The process's start time in clock ticks since boot: with the pid, it names one process."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read().decode("ascii", "replace")
    except OSError:
        return ""
    fields = stat[stat.rfind(")") + 2 :].split()
    return fields[19] if len(fields) > 19 else ""


def alive(pid: int, started: str) -> bool:
    """True while the process ``pid`` that started at ``started`` (clock ticks) still runs."""
    if os.path.isdir("/proc/self"):
        current = pid_start(pid)
        return bool(current) and (not started or current == started)
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True
