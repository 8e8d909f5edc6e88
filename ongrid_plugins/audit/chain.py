"""The audit log's storage: the hash chain and its verification (recovery: :mod:`.inflight`).

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
import logging
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs

from ..models import canonical_json, sha256_hex

if TYPE_CHECKING:
    import sqlite3


__all__ = [
    "ADDED_COLUMNS",
    "COLUMNS",
    "GENESIS",
    "JSON_COLUMNS",
    "SCHEMA",
    "append",
    "canonical",
    "check_head",
    "check_macs",
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
CREATE TABLE IF NOT EXISTS inflight (
    call_id TEXT PRIMARY KEY, pid INTEGER NOT NULL, pid_start TEXT NOT NULL,
    host TEXT NOT NULL, row TEXT NOT NULL
);
"""


def append(conn: sqlite3.Connection, row: Mapping[str, Any], key: bytes | None = None) -> int:
    """Chain ``row`` after the current head (the caller holds a write transaction); its ``seq``.

    With ``key`` (``ONGRID_AUDIT_KEY_FILE``), the row's HMAC goes into ``macs``.
    """
    head = conn.execute("SELECT seq, hash FROM head WHERE id = 1").fetchone()
    seq, prev = (head[0] + 1, head[1]) if head else (1, GENESIS)
    values = [seq, *(row.get(column) for column in COLUMNS[1:-1]), prev]
    digest = row_hash(values)
    conn.execute(_INSERT, (*values, digest))
    conn.execute("INSERT OR REPLACE INTO head (id, seq, hash) VALUES (1, ?, ?)", (seq, digest))
    if key is not None:
        conn.execute("INSERT OR REPLACE INTO macs (seq, mac) VALUES (?, ?)", (seq, row_mac(key, digest)))
    return seq


_INSERT = f"INSERT INTO entries ({', '.join(COLUMNS)}, hash) VALUES ({', '.join('?' * (len(COLUMNS) + 1))})"


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
