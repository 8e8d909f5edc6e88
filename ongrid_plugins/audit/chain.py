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
import json
import logging
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs

from ..models import JSON, Outcome, canonical_json
from ..schema.redact import SECRET_NAMES, has_secrets, needs_redaction, redact, redact_lines, redact_text
from ..sidetable import SideTable
from .journal import HOST, PID, alive, journal_files

if TYPE_CHECKING:
    import sqlite3

    from ..models import CallRequest, CallResult

__all__ = [
    "ADDED_COLUMNS",
    "COLUMNS",
    "FINISH_COLUMNS",
    "GENESIS",
    "JSON_COLUMNS",
    "SCHEMA",
    "append",
    "append_many",
    "check_head",
    "check_macs",
    "dumps",
    "finish_row",
    "inflight",
    "recover",
    "row_hash",
    "row_mac",
    "start_row",
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
_LATER = frozenset(COLUMNS.index(column) for _table, column, _decl in ADDED_COLUMNS)
_REQUIRED = ("time", "call_id", "tool", "prev_hash")
#: Whether a tool's schema marks any argument secret, by tool identity (read on every call).
_HAS_SECRETS: SideTable[bool] = SideTable()
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
CREATE TABLE IF NOT EXISTS macs (seq INTEGER PRIMARY KEY, mac TEXT NOT NULL);
"""


def append(conn: sqlite3.Connection, row: Mapping[str, Any], key: bytes | None = None) -> int:
    """Chain ``row`` after the current head (the caller holds a write transaction).

    With ``key`` (``ONGRID_AUDIT_KEY_FILE``), the row's HMAC goes into ``macs``.
    """
    return append_many(conn, [row], key)


def append_many(conn: sqlite3.Connection, rows: Sequence[Mapping[str, Any]], key: bytes | None = None) -> int:
    """Chain ``rows``, in order, after the current head; returns the last ``seq``.

    The same rows and hashes as :func:`append` once per row, in three statements
    for the whole batch (the head is read once, and written once at the end).
    """
    head = conn.execute("SELECT seq, hash FROM head WHERE id = 1").fetchone()
    seq, prev = (head[0], head[1]) if head else (0, GENESIS)
    entries: list[list[Any]] = []
    macs: list[tuple[int, str]] = []
    for row in rows:
        seq += 1
        values = [row.get(c) for c in COLUMNS]
        values[0], values[-1] = seq, prev
        prev = row_hash(values)
        values.append(prev)
        entries.append(values)
        if key is not None:
            macs.append((seq, row_mac(key, prev)))
    if not entries:
        return seq
    conn.executemany(_INSERT, entries)
    conn.execute("INSERT OR REPLACE INTO head (id, seq, hash) VALUES (1, ?, ?)", (seq, prev))
    if macs:
        conn.executemany("INSERT OR REPLACE INTO macs (seq, mac) VALUES (?, ?)", macs)
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


def row_hash(values: Sequence[Any]) -> str:
    """sha256 over the canonical JSON of a row's columns (``COLUMNS`` order, ``prev_hash`` last)."""
    kept = [value for i, value in enumerate(values) if value is not None or i not in _LATER]
    return hashlib.sha256(canonical_json(kept).encode("utf-8")).hexdigest()


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


def recover(conn: sqlite3.Connection, folder: str, key: bytes | None = None) -> tuple[int, list[str]]:
    """Chain what the journals of dead processes in ``folder`` still hold.

    Finished calls are chained with their outcome, started ones as
    ``interrupted``; a call already in the chain (its writer committed but did
    not get to mark it) is skipped. Returns the number of rows chained and the
    journal files to remove once the caller's transaction has committed.
    """
    done: list[str] = []
    count = 0
    for journal in journal_files(folder):
        if journal.host != HOST or alive(journal.pid, journal.pid_start):
            continue
        done.append(journal.path)
        for call_id, row, finished in journal.open_calls:
            if conn.execute("SELECT 1 FROM entries WHERE call_id = ?", (call_id,)).fetchone():
                continue
            append(
                conn, dict(row, call_id=call_id) if finished else _interrupted(call_id, row, journal.pid), key
            )
            count += 1
    return count, done


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


# ---------------------------------------------------------------------- rows


def start_row(request: CallRequest, started: float) -> dict[str, Any]:
    """The columns known before the call runs (also what the journal keeps for recovery)."""
    tool = request.tool
    args: Any = request.args
    redacted: list[str] = []
    secret = _HAS_SECRETS.get(id(tool))
    if secret is None:
        secret = _HAS_SECRETS.put(tool, has_secrets(tool.schema))
    if secret or (_may_name_secret(request.args_json) and needs_redaction(tool.schema, args, secret)):
        args, redacted = redact(tool.schema, args)
    return {
        "time": started,
        "call_id": request.call_id,
        "tool": tool.name,
        "tool_class": tool.tool_class.value,
        "persona": request.persona.name,
        "caller": request.caller,
        # args_json is the canonical JSON of args already: nothing to serialise again
        "args": dumps(args) if redacted or not request.args_json else request.args_json,
        "args_digest": "" if redacted else request.args_digest,
        "redacted": dumps(redacted) if redacted else "[]",
        "ticket": request.ticket,
        "approvers": approvers_json(request.approvers),
        "skill_digest": tool.digest,
        "pid": PID.pid,
        "hostname": HOST,
        "sandbox": _sandbox(request),
    }


def _may_name_secret(text: str) -> bool:
    """False when no key of the arguments whose canonical JSON is ``text`` can be a secret's name.

    A secret's name (:data:`~ongrid_plugins.schema.redact.SECRET_NAMES`) is a suffix of the
    key folded (case, ``-`` and ``_`` dropped), and JSON escapes no letter, so it is then a
    substring of the whole text folded alike; a text that holds none cannot name a secret,
    and the walk over the arguments is skipped. Without the text (``""``), walk.
    """
    if not text:
        return True
    folded = (text.lower() if text.isascii() else text.casefold()).replace("-", "").replace("_", "")
    return any(name in folded for name in SECRET_NAMES)


def approvers_json(approvers: Sequence[str]) -> str:
    """The ``approvers`` column: canonical JSON of the list (most calls have none)."""
    return dumps(list(approvers)) if approvers else "[]"


def _sandbox(request: CallRequest) -> str | None:
    """The profile the call ran under (or ``unconfined`` and why), as canonical JSON.

    A tool's profile is one object for all its calls (the host computes it once per
    settings), so its text is remembered here, keyed by the object it was made from.
    """
    profile = request.sandbox
    if profile is None:
        return None
    known = _sandbox_texts.get(id(profile))
    if known is not None and known[0] is profile:
        return known[1]
    text = dumps(profile.to_dict())
    if len(_sandbox_texts) >= 1024:
        _sandbox_texts.clear()
    _sandbox_texts[id(profile)] = (profile, text)  # holding the profile keeps its id unique
    return text


_sandbox_texts: dict[int, tuple[Any, str]] = {}


def dumps(value: Any) -> str:
    """Canonical JSON, and never an exception: what cannot be JSON is kept as its repr."""
    try:
        return canonical_json(value)
    except (TypeError, ValueError, RecursionError):
        return json.dumps(repr(value)[:MAX_TEXT])


#: The columns an attempt's row gets when it is over (``ongrid_after_call``): what the
#: journal's ``F`` line holds beside its ``S`` line.
FINISH_COLUMNS = (
    "ticket",
    "approvers",
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
    "remote",
)


def finish_row(row: dict[str, Any], result: CallResult, duration: float) -> dict[str, Any]:
    decision = result.decision
    text = dumps(result.value) if result.value is not None else ""
    data = text.encode("utf-8")
    row.update(
        verdict=decision.verdict.value if decision else "",
        reason=decision.reason if decision else "",
        plugin=decision.plugin if decision else "",
        outcome=result.outcome,
        error=clip(redact_text(result.error)) if result.error else None,
        exit_code=result.exit_code,
        signal=result.signal,
        duration=float(duration),
        stderr_tail=dumps([clip(line) for line in redact_lines(map(str, result.stderr_tail))][-STDERR_LINES:])
        if result.stderr_tail
        else "[]",
        result_size=len(data),
        result_digest=hashlib.sha256(data).hexdigest() if data else "",
        remote=dumps(result.remote.to_dict()) if result.remote is not None else None,
    )
    return row


def clip(text: str) -> str:
    return text if len(text) <= MAX_TEXT else text[: MAX_TEXT - 3] + "..."
