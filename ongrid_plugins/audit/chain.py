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
import json
import logging
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs

from ..models import JSON, Outcome, canonical_json
from ..schema.redact import SECRET_NAMES, has_secrets, needs_redaction, redact, redact_lines, redact_text
from ..sidetable import SideTable
from .journal import END_COLUMNS, HOST, PID, alive, journal_files

if TYPE_CHECKING:
    import sqlite3

    from ..models import CallRequest, CallResult

__all__ = [
    "ADDED_COLUMNS",
    "BODY_COLUMNS",
    "COLUMNS",
    "FINISH_COLUMNS",
    "GENESIS",
    "HEAD_COLUMNS",
    "JSON_COLUMNS",
    "SCHEMA",
    "TAIL_COLUMNS",
    "Prepared",
    "Started",
    "append",
    "append_many",
    "append_prepared",
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
_ADDED = frozenset(column for _table, column, _decl in ADDED_COLUMNS)
_LATER = frozenset(COLUMNS.index(column) for column in _ADDED)
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


#: A row ready to chain: its values in ``COLUMNS[1:-1]`` order (``seq`` and ``prev_hash``
#: are the chain's), and the canonical JSON that :func:`row_hash` hashes between those two
#: (:func:`finish_row` makes both), or None to serialise the values here.
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
            prev = hashlib.sha256(f'[{seq},{middle},"{prev}"]'.encode()).hexdigest()
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
    """``INSERT ... VALUES (...), (...)`` of ``rows``, :data:`CHUNK` rows a statement."""
    for start in range(0, len(rows), CHUNK):
        chunk = rows[start : start + CHUNK]
        conn.execute(sql[0] + ",".join([sql[1]] * len(chunk)), list(itertools.chain.from_iterable(chunk)))


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
    return hashlib.sha256(_canonical(kept).encode("utf-8")).hexdigest()


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
#
# A call's row is made in two steps, each serialised once: :func:`start_row` before the
# call (the columns known then, their canonical JSON, and the journal's ``S`` line) and
# :func:`finish_row` after it (the rest, the ``F`` line, and the canonical JSON of the
# whole row between ``seq`` and ``prev_hash``, joined from the texts of both steps), so
# the writer thread hashes the row without serialising it again. Canonical JSON of a
# list of scalars is the canonical JSON of each, joined by commas: the joined text is
# byte for byte what :func:`row_hash` would hash.

#: The columns :func:`start_row` fills, in ``COLUMNS`` order: before the body.
HEAD_COLUMNS = COLUMNS[1:10]
#: The columns :func:`finish_row` fills: the body, then ``remote`` after the tail.
BODY_COLUMNS = COLUMNS[10:23]
#: The columns that are the same for every call of a tool in a process.
TAIL_COLUMNS = COLUMNS[23:27]
#: The columns an attempt's row gets when it is over: what the journal's ``F`` line holds.
FINISH_COLUMNS = END_COLUMNS


class Started:
    """What ``ongrid_before_call`` knows of a call's row (:func:`start_row`)."""

    __slots__ = ("head", "head_text", "line", "tail")

    def __init__(self, head: list[Any], head_text: str | None, tail: _Tail, line: str) -> None:
        self.head = head
        """The values of :data:`HEAD_COLUMNS`."""
        self.head_text = head_text
        """Their canonical JSON (a list), or None when they have none (then the writer serialises)."""
        self.tail = tail
        self.line = line
        """The journal's ``S`` line: a JSON list of :data:`~.journal.START_COLUMNS`."""


class _Tail:
    """The :data:`TAIL_COLUMNS` of a tool's calls in this process, and their texts."""

    __slots__ = ("hashed", "line", "pid", "values")

    def __init__(self, values: list[Any]) -> None:
        self.values = values
        self.pid = values[0]
        # Hashed, an added column that is None is left out (see row_hash).
        kept = [
            v for v, column in zip(values, TAIL_COLUMNS, strict=True) if v is not None or column not in _ADDED
        ]
        self.hashed = _canonical_inner(kept)
        self.line = _lenient(values)[1:-1]


def start_row(request: CallRequest, started: float) -> Started:
    """The columns known before the call runs (also what the journal keeps for recovery)."""
    tool = request.tool
    args: Any = request.args
    redacted: list[str] = []
    secret = _HAS_SECRETS.get(id(tool))
    if secret is None:
        secret = _HAS_SECRETS.put(tool, has_secrets(tool.schema))
    if secret or (_may_name_secret(request.args_json) and needs_redaction(tool.schema, args, secret)):
        args, redacted = redact(tool.schema, args)
    head = [
        started,
        request.call_id,
        tool.name,
        tool.tool_class.value,
        request.persona.name,
        request.caller,
        # args_json is the canonical JSON of args already: nothing to serialise again
        dumps(args) if redacted or not request.args_json else request.args_json,
        "" if redacted else request.args_digest,
        dumps(redacted) if redacted else "[]",
    ]
    tail = _tail(request)
    head_text = _canonical_text(head)
    ticket = _NO_TICKET if request.ticket is None and not request.approvers else _ticket_text(request)
    line = f"{(head_text or _lenient(head))[:-1]},{tail.line},{ticket}]"
    return Started(head, head_text, tail, line)


_NO_TICKET = 'null,"[]"'
"""``ticket`` and ``approvers`` of a call without a ticket, as the ``S`` line ends."""


def _ticket_text(request: CallRequest) -> str:
    return _lenient([request.ticket, approvers_json(request.approvers)])[1:-1]


def _tail(request: CallRequest) -> _Tail:
    """The tail of ``request``'s row, made once per tool, profile and process.

    A tool's profile is one object for all its calls (the host computes it once per
    settings), so the tail is remembered beside the tool with the profile it was made from.
    """
    tool, profile = request.tool, request.sandbox
    known = _TAILS.get(id(tool))
    pid = PID.pid
    if known is not None and known[0] is profile and known[1].pid == pid:
        return known[1]
    tail = _Tail([pid, HOST, _sandbox(profile), tool.digest])
    _TAILS.put(tool, (profile, tail))  # holding the profile keeps its identity unique
    return tail


#: The tail of a tool's rows, and the profile it was made with, by tool identity.
_TAILS: SideTable[tuple[Any, _Tail]] = SideTable()


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
    return _SECRET_NAME_IN(folded) is not None


_SECRET_NAME_IN = re.compile("|".join(map(re.escape, SECRET_NAMES))).search


def approvers_json(approvers: Sequence[str]) -> str:
    """The ``approvers`` column: canonical JSON of the list (most calls have none)."""
    return dumps(list(approvers)) if approvers else "[]"


def _sandbox(profile: Any) -> str | None:
    """The profile the call ran under (or ``unconfined`` and why), as canonical JSON."""
    return None if profile is None else dumps(profile.to_dict())


def dumps(value: Any) -> str:
    """Canonical JSON, and never an exception: what cannot be JSON is kept as its repr."""
    try:
        return _canonical(value)
    except (TypeError, ValueError, RecursionError):
        return json.dumps(repr(value)[:MAX_TEXT])


def _canonical_text(values: list[Any]) -> str | None:
    """The canonical JSON of ``values``, or None when they have none (a NaN, an object)."""
    try:
        return _canonical(values)
    except (TypeError, ValueError, RecursionError):
        return None


def _fast_canonical() -> Callable[[Any], str]:
    """:func:`~ongrid_plugins.models.canonical_json`, calling the C encoder it runs directly.

    ``JSONEncoder.encode`` makes a new C encoder object on every call, which costs as
    much as encoding a row's few values: the audit log serialises four lists a call.
    Same encoder, same options, so the same text (checked here, else the plain one),
    except that a cycle is a ``RecursionError`` instead of a ``ValueError``.
    """
    try:
        from json import encoder

        def default(value: Any) -> Any:
            raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")

        c_encoder = encoder.c_make_encoder(  # type: ignore[attr-defined]
            None, default, encoder.encode_basestring, None, ":", ",", True, False, False
        )

        def fast(value: Any) -> str:
            return "".join(c_encoder(value, 0))

        sample = [1.5, 2**70, -0.0, 'é\n"\u2028', None, True, {"b": [{}], "a": 1}, Outcome.OK]
        if fast(sample) == canonical_json(sample) and fast("x") == canonical_json("x"):
            return fast
    except Exception:  # another Python's json module: the plain encoder
        logger.debug("audit log: the C JSON encoder cannot be called directly", exc_info=True)
    return canonical_json


_canonical = _fast_canonical()


def _canonical_inner(values: list[Any]) -> str | None:
    text = _canonical_text(values)
    return None if text is None else text[1:-1]


# The journal's lines are JSON whatever the values: what has none is kept as its repr.
_lenient = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), default=repr).encode


def finish_row(
    start: Started, request: CallRequest, result: CallResult, duration: float
) -> tuple[Prepared, str]:
    """The whole row of an attempt that is over: ``(prepared row, the journal's F line)``."""
    decision = result.decision
    text = dumps(result.value) if result.value is not None else ""
    data = text.encode("utf-8")
    remote = dumps(result.remote.to_dict()) if result.remote is not None else None
    body = [
        decision.verdict.value if decision else "",
        decision.reason if decision else "",
        decision.plugin if decision else "",
        result.outcome,
        clip(redact_text(result.error)) if result.error else None,
        result.exit_code,
        result.signal,
        float(duration),
        dumps([clip(line) for line in redact_lines(map(str, result.stderr_tail))][-STDERR_LINES:])
        if result.stderr_tail
        else "[]",
        len(data),
        hashlib.sha256(data).hexdigest() if data else "",
        request.ticket,
        approvers_json(request.approvers),
        remote,  # the F line ends with it; in the row it comes after the tail
    ]
    body_text = _canonical_text(body)
    tail = start.tail
    values = [*start.head, *body[:-1], *tail.values, remote]
    middle = None
    if start.head_text is not None and body_text is not None and tail.hashed is not None:
        if remote is None:  # an added column, left out of the hash: drop the ",null" before "]"
            inner, after = body_text[1:-6], ""
        else:
            after = f",{_canonical(remote)}"
            inner = body_text[1 : -len(after) - 1]
        middle = f"{start.head_text[1:-1]},{inner},{tail.hashed}{after}"
    return (values, middle), body_text or _lenient(body)


def clip(text: str) -> str:
    return text if len(text) <= MAX_TEXT else text[: MAX_TEXT - 3] + "..."
