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
import hmac
import itertools
import logging
import os
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs

from ..errors import AuditError
from ..models import JSON, Outcome, canonical_json, sha256_hex
from .journal import HOST, alive
from .journal_read import journal_files

if TYPE_CHECKING:
    import sqlite3


__all__ = [
    "ADDED_COLUMNS",
    "COLUMNS",
    "GENESIS",
    "JSON_COLUMNS",
    "SCHEMA",
    "Prepared",
    "append",
    "append_many",
    "append_prepared",
    "canonical",
    "check_head",
    "check_macs",
    "inflight",
    "recover",
    "row_hash",
    "row_mac",
    "walk",
]

logger = logging.getLogger("ongrid_plugins.audit")

STDERR_LINES = 20
MAX_TEXT = 2000
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
    "sandbox",
    "skill_digest",
    "remote",
    "prev_hash",
)
JSON_COLUMNS = ("args", "redacted", "stderr_tail", "approvers")
#: Columns added after the first release, ``(table, column, declaration)``: an older
#: database gets them with ``ALTER TABLE``, and a row where one is NULL (written before
#: it existed) is hashed without it, so old chains still verify (and a value once
#: hashed cannot be nulled).
ADDED_COLUMNS = (
    ("entries", "sandbox", "TEXT"),
    ("entries", "skill_digest", "TEXT"),
    ("entries", "remote", "TEXT"),
)
_ADDED = frozenset(column for _table, column, _decl in ADDED_COLUMNS)
_LATER = frozenset(COLUMNS.index(column) for column in _ADDED)
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
CREATE INDEX IF NOT EXISTS entries_call_id ON entries (call_id);
CREATE INDEX IF NOT EXISTS entries_ticket ON entries (ticket) WHERE ticket IS NOT NULL;
CREATE TABLE IF NOT EXISTS macs (seq INTEGER PRIMARY KEY, mac TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS digest_key (id INTEGER PRIMARY KEY CHECK (id = 1), key TEXT NOT NULL);
"""


#: A row ready to chain: its values in ``COLUMNS[1:-1]`` order (``seq`` and ``prev_hash``
#: are the chain's), and the canonical JSON that :func:`row_hash` hashes between those two
#: (:func:`.rows.finish_row` makes both), or None to serialise the values here.
Prepared = tuple[list[Any], str | None]


def append(conn: sqlite3.Connection, row: Mapping[str, Any], key: bytes | None = None) -> int:
    """Chain ``row`` after the current head (the caller holds a write transaction).

    With ``key`` (``ONGRID_AUDIT_KEY_FILE``), the row's HMAC goes into ``macs``.
    """
    return append_many(conn, [row], key)


def append_many(conn: sqlite3.Connection, rows: Sequence[Mapping[str, Any]], key: bytes | None = None) -> int:
    """Chain ``rows``, in order, after the current head; returns the last ``seq``.

    The same rows and hashes as :func:`append` once per row (see :func:`append_prepared`).
    """
    return append_prepared(conn, [([row.get(c) for c in _MIDDLE], None) for row in rows], key)


def append_prepared(conn: sqlite3.Connection, rows: Sequence[Prepared], key: bytes | None = None) -> int:
    """Chain prepared ``rows``, in order, after the current head; returns the last ``seq``.

    The head is read once and written once; the rows go in by :data:`CHUNK` a
    statement (each statement is one trip out of Python, where one per row handed
    the GIL to the calling threads and waited for it again, row after row).
    """
    head = conn.execute("SELECT seq, hash FROM head WHERE id = 1").fetchone()
    seq, prev = (head[0], head[1]) if head else (0, GENESIS)
    entries: list[list[Any]] = []
    macs: list[tuple[int, str]] = []
    for values, middle in rows:
        seq += 1
        row = [seq, *values, prev]
        if middle is None:
            prev = row_hash(row)
        else:  # what row_hash(row) computes, without serialising the values again
            prev = sha256_hex(f'[{seq},{middle},"{prev}"]')
        row.append(prev)
        entries.append(row)
        if key is not None:
            macs.append((seq, row_mac(key, prev)))
    if not entries:
        return seq
    _insert(conn, _INSERT_ENTRIES, entries)
    conn.execute("INSERT OR REPLACE INTO head (id, seq, hash) VALUES (1, ?, ?)", (seq, prev))
    if macs:
        _insert(conn, _INSERT_MACS, macs)
    return seq


_MIDDLE = COLUMNS[1:-1]
#: Rows per INSERT statement: 32 rows of 30 values stay under the 999 parameters of the
#: oldest SQLite Python supports.
CHUNK = 32
_INSERT_ENTRIES = (
    f"INSERT INTO entries ({', '.join(COLUMNS)}, hash) VALUES ",
    f"({', '.join('?' * (len(COLUMNS) + 1))})",
)
_INSERT_MACS = ("INSERT OR REPLACE INTO macs (seq, mac) VALUES ", "(?, ?)")


def _insert(conn: sqlite3.Connection, sql: tuple[str, str], rows: Sequence[Sequence[Any]]) -> None:
    """``INSERT ... VALUES (...), (...)`` of ``rows``, :data:`CHUNK` rows a statement.

    A None goes in as a NaN where SQLite stores a bound NaN as NULL (:func:`_null`): the
    same NULL, but Python's ``sqlite3`` binds a None through its adaptation protocol (a
    failed ``__adapt__`` look-up that formats an AttributeError and drops it), ~1 us a
    value and four in a common row, where a float is bound as it is.
    """
    null = _NULL if _NULL is not _UNKNOWN else _null(conn)
    for start in range(0, len(rows), CHUNK):
        chunk = rows[start : start + CHUNK]
        values = itertools.chain.from_iterable(chunk)
        params = list(values) if null is None else [null if v is None else v for v in values]
        conn.execute(sql[0] + ",".join([sql[1]] * len(chunk)), params)


_UNKNOWN = object()
_NULL: Any = _UNKNOWN
"""What :func:`_insert` binds for a None: a NaN, or None itself (not asked yet: ``_UNKNOWN``)."""


def _null(conn: sqlite3.Connection) -> float | None:
    """A NaN if this process's SQLite stores a bound NaN as NULL (it has for every release
    Python supports, ``sqlite3VdbeMemSetDouble``), else None; asked once a process."""
    global _NULL
    nan = float("nan")
    null = nan if conn.execute("SELECT ? IS NULL", (nan,)).fetchone()[0] == 1 else None
    _NULL = null
    return null


def row_mac(key: bytes, digest: str) -> str:
    """HMAC-SHA256 of a row's hash under the audit key."""
    return hmac.new(key, digest.encode("ascii"), hashlib.sha256).hexdigest()


def check_macs(conn: sqlite3.Connection, key: bytes) -> tuple[int | None, str]:
    """``(first bad seq, problem)`` of the keyed chain, ``(None, "")`` when every row verifies.

    Rows written before the key was configured carry no HMAC; from the first row that
    has one, every row must have one, and each must match.
    """
    keyed = False
    count = 0
    for seq, digest, mac in conn.execute(
        "SELECT e.seq, e.hash, m.mac FROM entries e LEFT JOIN macs m ON m.seq = e.seq ORDER BY e.seq"
    ):
        count += 1
        if mac is None:
            if keyed:
                return seq, f"row {seq} has no HMAC: it was written or rewritten without the audit key"
            continue
        keyed = True
        if not hmac.compare_digest(mac, row_mac(key, digest)):
            return seq, f"row {seq} has a wrong HMAC: the chain was recomputed without the audit key"
    if count and not keyed:
        return (
            1,
            "no row carries an HMAC although an audit key is configured: the chain may have been rewritten",
        )
    return None, ""


#: The canonical JSON of a value (:func:`~ongrid_plugins.models.canonical_json`).
canonical = canonical_json


_SANDBOX, _DIGEST, _REMOTE = (COLUMNS.index(c) for c in ("sandbox", "skill_digest", "remote"))
_HEX = frozenset("0123456789abcdef")


def _shifted(row: Sequence[Any]) -> str:
    """Why a row's later columns do not hold what each holds, or ``""``.

    The hash leaves a NULL later column out (rows older than it hash as they did), so a
    value moved from one later column into another NULL one hashes the same; each must
    then be of its own kind: a sandbox profile, a skill digest, a remote record.
    """
    sandbox, digest, remote = row[_SANDBOX], row[_DIGEST], row[_REMOTE]
    if digest is not None and not _is_digest(digest):
        return "its skill_digest column does not hold a skill digest"
    if sandbox is not None and not _has_key(sandbox, '"confined":'):
        return "its sandbox column does not hold a sandbox profile"
    if remote is not None and not _has_key(remote, '"queue":'):
        return "its remote column does not hold a remote record"
    return ""


def _has_key(text: Any, key: str) -> bool:
    """Whether ``text`` is a JSON object with the member ``key`` names, read as the rows write
    it (canonical JSON: no blank before the colon). A string value cannot hold the key's
    unescaped quotes, so a value that merely mentions the name does not count; parsing
    every row's JSON made ``verify`` 10% slower."""
    return isinstance(text, str) and text.startswith("{") and key in text


def _is_digest(value: Any) -> bool:
    """A skill's digest as rows hold it: 64 hex digits (``sha256:`` before them), or nothing."""
    if not isinstance(value, str):
        return False
    text = value.removeprefix("sha256:")
    return value == "" or (len(text) == 64 and _HEX.issuperset(text))


def row_hash(values: Sequence[Any]) -> str:
    """sha256 over the canonical JSON of a row's columns (``COLUMNS`` order, ``prev_hash`` last)."""
    kept = [value for i, value in enumerate(values) if value is not None or i not in _LATER]
    return sha256_hex(canonical(kept))


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
        elif shifted := _shifted(row):
            problem = f"row {seq} was edited: {shifted}"
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


def recover(conn: sqlite3.Connection, folder: str, key: bytes | None = None) -> tuple[int, list[str]]:
    """Chain what the journals of dead processes in ``folder`` still hold.

    Finished calls are chained with their outcome, started ones as
    ``interrupted``; a call already in the chain (its writer committed but did
    not get to mark it) is skipped. Returns the number of rows chained and the
    journal files to remove once the caller's transaction has committed.

    :raises AuditError: a dead process's journal holds what no process writes (a row of
        the wrong shape or type, of another process, or a ticket decision): which file, and
        to move it aside (:mod:`.journal_read`).
    """
    done: list[str] = []
    count = 0
    for journal in journal_files(folder):
        if journal.host != HOST or alive(journal.pid, journal.pid_start):
            continue
        if journal.problem:
            raise _damaged(journal.path, journal.problem)
        done.append(journal.path)
        for call_id, row, finished in journal.open_calls:
            if conn.execute("SELECT 1 FROM entries WHERE call_id = ?", (call_id,)).fetchone():
                continue
            append(
                conn, dict(row, call_id=call_id) if finished else _interrupted(call_id, row, journal.pid), key
            )
            count += 1
    return count, done


def _damaged(path: str, problem: str) -> AuditError:
    folder = os.path.dirname(path)
    return AuditError(
        f"the audit journal {path} cannot be recovered: {problem}; no version of ongrid-skills "
        f"writes that, so it was damaged or written by someone else. Move it out of {folder} "
        "(keep it, and find out who wrote it: it may hold calls the log lacks), then run this again"
    )


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


def inflight(folder: str) -> list[JSON]:
    """The calls started and not recorded yet, from every journal in ``folder``."""
    return [
        {
            "call_id": call_id,
            "tool": row.get("tool"),
            "started": row.get("time"),
            "pid": journal.pid,
            "host": journal.host,
            "alive": alive(journal.pid, journal.pid_start) if journal.host == HOST else None,
        }
        for journal in journal_files(folder)
        for call_id, row, _finished in journal.open_calls
    ]
