"""The audit log's storage: the hash chain, its verification, and crash recovery.

Kept apart from :mod:`ongrid_plugins.audit` (the plugin and its public API) so
each stays readable. Everything here works on an open ``sqlite3`` connection
inside a transaction the caller holds.

A row's hash is sha256 over the canonical JSON of all its columns in
:data:`COLUMNS` order, ``prev_hash`` (the previous row's hash) included, so
changing, removing, inserting or moving any row breaks either its own hash or
the link from the row after it. The ``head`` table remembers the last row so
removing rows at the end shows too.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import socket
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs

from .models import JSON, canonical_json

if TYPE_CHECKING:
    import sqlite3

__all__ = [
    "COLUMNS",
    "GENESIS",
    "JSON_COLUMNS",
    "SCHEMA",
    "append",
    "check_head",
    "inflight_dict",
    "recover",
    "row_hash",
    "walk",
]

logger = logging.getLogger("ongrid_plugins.audit")

GENESIS = "0" * 64
"""The ``prev_hash`` of the first row."""

#: Every column of a row, in the order they are hashed (``hash`` itself excluded).
COLUMNS = (
    "seq",
    "time",
    "call_id",
    "tool",
    "tool_class",
    "persona",
    "caller",
    "args",
    "args_digest",
    "redacted",
    "verdict",
    "reason",
    "plugin",
    "outcome",
    "error",
    "exit_code",
    "signal",
    "duration",
    "stderr_tail",
    "result_size",
    "result_digest",
    "ticket",
    "approvers",
    "pid",
    "hostname",
    "prev_hash",
)
JSON_COLUMNS = ("args", "redacted", "stderr_tail", "approvers")
_REQUIRED = ("time", "call_id", "tool", "prev_hash")
SCHEMA = f"""
CREATE TABLE IF NOT EXISTS entries (
    seq INTEGER PRIMARY KEY,
    {", ".join(c + " NOT NULL" if c in _REQUIRED else c for c in COLUMNS[1:])},
    hash TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS head (
    id INTEGER PRIMARY KEY CHECK (id = 1), seq INTEGER NOT NULL, hash TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS inflight (
    call_id TEXT PRIMARY KEY,
    started REAL NOT NULL,
    pid INTEGER NOT NULL,
    pid_start TEXT NOT NULL,
    hostname TEXT NOT NULL,
    row TEXT NOT NULL
);
"""


def append(conn: sqlite3.Connection, row: Mapping[str, Any]) -> int:
    """Chain ``row`` after the current head (the caller holds a write transaction)."""
    head = conn.execute("SELECT seq, hash FROM head WHERE id = 1").fetchone()
    seq, prev = (head[0] + 1, head[1]) if head else (1, GENESIS)
    values = [row.get(c) for c in COLUMNS]
    values[0], values[-1] = seq, prev
    digest = row_hash(values)
    conn.execute(
        f"INSERT INTO entries ({', '.join(COLUMNS)}, hash) VALUES ({', '.join('?' * (len(COLUMNS) + 1))})",
        (*values, digest),
    )
    conn.execute("INSERT OR REPLACE INTO head (id, seq, hash) VALUES (1, ?, ?)", (seq, digest))
    return seq


def row_hash(values: Sequence[Any]) -> str:
    """sha256 over the canonical JSON of a row's columns (``COLUMNS`` order, ``prev_hash`` last)."""
    return hashlib.sha256(canonical_json(list(values)).encode("utf-8")).hexdigest()


# ---------------------------------------------------------------------- verify


@attrs.frozen
class Walk:
    ok: bool = True
    count: int = 0
    first_bad: int | None = None
    problem: str = ""
    last_seq: int = 0
    last_hash: str = GENESIS
    seen: frozenset[str] = frozenset()


def walk(rows: Iterator[Sequence[Any]]) -> Walk:
    count, last_seq, last_hash = 0, 0, GENESIS
    seen: set[str] = set()
    for row in rows:
        seq, prev, stored = row[0], row[len(COLUMNS) - 1], row[len(COLUMNS)]
        problem = ""
        if row_hash(row[: len(COLUMNS)]) != stored:
            problem = f"row {seq} was edited or moved: its contents do not match its hash"
        elif seq != last_seq + 1:
            missing = f"{last_seq + 1}" if seq == last_seq + 2 else f"{last_seq + 1}..{seq - 1}"
            problem = f"row {seq}: row {missing} is missing (deleted)"
        elif prev != last_hash:
            problem = f"row {seq} does not follow row {last_seq}: a row was inserted, removed or replaced"
        if problem:
            return Walk(False, count, seq, problem, last_seq, last_hash, frozenset(seen))
        count, last_seq, last_hash = count + 1, seq, stored
        seen.add(stored)
    return Walk(True, count, None, "", last_seq, last_hash, frozenset(seen))


def check_head(walk: Walk, head: Sequence[Any] | None) -> Walk:
    if not walk.ok:
        return walk
    if head is None:
        if walk.count:
            return attrs.evolve(walk, ok=False, first_bad=1, problem="the head record is missing")
        return walk
    seq, digest = head
    if seq > walk.last_seq:
        problem = f"rows {walk.last_seq + 1}..{seq} after the last row were deleted (the head says {seq})"
        return attrs.evolve(walk, ok=False, first_bad=walk.last_seq + 1, problem=problem)
    if seq != walk.last_seq or digest != walk.last_hash:
        problem = f"row {seq} is not the head the log recorded: rows were appended around the writer"
        return attrs.evolve(walk, ok=False, first_bad=seq, problem=problem)
    return walk


# ---------------------------------------------------------------------- recovery


def recover(conn: sqlite3.Connection) -> int:
    rows = conn.execute(
        "SELECT call_id, started, pid, pid_start, row FROM inflight WHERE hostname = ? ORDER BY started",
        (HOST,),
    ).fetchall()
    recovered = 0
    for call_id, _started, pid, pid_start, text in rows:
        if _alive(pid, pid_start):
            continue
        row = json.loads(text)
        row.update(
            outcome="interrupted",
            error=f"the host process {pid} ended before the outcome of this call was recorded",
            duration=0.0,
            stderr_tail="[]",
            result_size=0,
            result_digest="",
        )
        seq = append(conn, row)
        conn.execute("DELETE FROM inflight WHERE call_id = ?", (call_id,))
        logger.warning("audit log: call %s of %s was interrupted (row %s)", call_id, row.get("tool"), seq)
        recovered += 1
    return recovered


def inflight_dict(row: Sequence[Any]) -> JSON:
    call_id, started, pid, pid_start, hostname, text = row
    data = json.loads(text)
    alive = _alive(pid, pid_start) if hostname == HOST else None
    return {
        "call_id": call_id,
        "tool": data.get("tool"),
        "started": started,
        "pid": pid,
        "host": hostname,
        "alive": alive,
    }


def _pid_start(pid: int) -> str:
    """The process's start time in clock ticks since boot: with the pid, it names one process."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read().decode("ascii", "replace")
    except OSError:
        return ""
    fields = stat[stat.rfind(")") + 2 :].split()
    return fields[19] if len(fields) > 19 else ""


def _alive(pid: int, pid_start: str) -> bool:
    if os.path.isdir("/proc/self"):
        current = _pid_start(pid)
        return bool(current) and (not pid_start or current == pid_start)
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


class _Process:
    """This process's pid and start time, re-read after a fork."""

    def __init__(self) -> None:
        self._pid = -1
        self._start = ""

    @property
    def pid(self) -> int:
        self._refresh()
        return self._pid

    @property
    def start(self) -> str:
        self._refresh()
        return self._start

    def _refresh(self) -> None:
        if self._pid != os.getpid():
            self._pid = os.getpid()
            self._start = _pid_start(self._pid)


HOST = socket.gethostname()
PID = _Process()
