"""An audit row in the making: the columns of a call attempt, each serialised once.

A call's row is made in two steps: :func:`start_row` before the call (the columns
known then, their canonical JSON, and the journal's ``S`` line) and
:func:`finish_row` after it (the rest, the ``F`` line, and the canonical JSON of
the whole row between ``seq`` and ``prev_hash``, joined from the texts of both
steps), so the writer thread hashes the row without serialising it again.
Canonical JSON of a list of scalars is the canonical JSON of each, joined by
commas: the joined text is byte for byte what :func:`~.chain.row_hash` hashes
(and ``verify`` hashes again from the stored values).

May import what :mod:`.chain` may, and :mod:`.chain` and :mod:`.journal`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..models import sha256_hex
from ..schema.redact import (
    SECRET_NAMES,
    has_secrets,
    needs_redaction,
    redact,
    redact_lines,
    redact_text,
    scrub_values,
)
from ..sidetable import SideTable
from .chain import _ADDED, COLUMNS, MAX_TEXT, STDERR_LINES, Prepared, canonical
from .journal import END_COLUMNS, HOST, PID

if TYPE_CHECKING:
    from ..models import CallRequest, CallResult

__all__ = [
    "BODY_COLUMNS",
    "FINISH_COLUMNS",
    "HEAD_COLUMNS",
    "TAIL_COLUMNS",
    "Started",
    "approvers_json",
    "clip",
    "dumps",
    "finish_row",
    "start_row",
]

#: Whether a tool's schema marks any argument secret, by tool identity (read on every call).
_HAS_SECRETS: SideTable[bool] = SideTable()

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
    """The columns known before the call runs (also what the journal keeps for recovery).

    The head is made in C where ``_speedups`` was built, for a tool whose schema marks no
    secret and arguments whose text is ASCII and names none (:func:`_may_name_secret`):
    the same values and text (``tests/test_audit_rows_c.py``). Every other head, with its
    redaction, is made by :func:`_head`.
    """
    tool = request.tool
    secret = _HAS_SECRETS.get(id(tool))
    if secret is None:
        secret = _HAS_SECRETS.put(tool, has_secrets(tool.schema))
    made = _START(started, request) if _START is not None and not secret else None
    head, head_text = made if made is not None else _head(request, started, secret)
    tail = _tail(request)
    ticket = _NO_TICKET if request.ticket is None and not request.approvers else _ticket_text(request)
    line = f"{(head_text or _lenient(head))[:-1]},{tail.line},{ticket}]"
    return Started(head, head_text, tail, line)


def _head(request: CallRequest, started: float, secret: bool) -> tuple[list[Any], str | None]:
    """:data:`HEAD_COLUMNS` and their canonical text (None when they have none), in Python."""
    tool = request.tool
    args: Any = request.args
    redacted: list[str] = []
    if secret or (_may_name_secret(request.args_json) and needs_redaction(tool.schema, args, secret)):
        args, redacted = redact(tool.schema, args)
    head = [
        started,
        request.call_id,
        tool.name,
        tool.tool_class._value_,  # an enum's value without its descriptor's two Python frames
        request.persona.name,
        request.caller,
        # args_json is the canonical JSON of args already: nothing to serialise again
        dumps(args) if redacted or not request.args_json else request.args_json,
        "" if redacted else request.args_digest,
        dumps(redacted) if redacted else "[]",
    ]
    return head, _canonical_text(head)


_START: Any = None


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
        return canonical(value)
    except (TypeError, ValueError, RecursionError):
        return json.dumps(repr(value)[:MAX_TEXT])


def _canonical_text(values: list[Any]) -> str | None:
    """The canonical JSON of ``values``, or None when they have none (a NaN, an object)."""
    try:
        return canonical(values)
    except (TypeError, ValueError, RecursionError):
        return None


def _canonical_inner(values: list[Any]) -> str | None:
    text = _canonical_text(values)
    return None if text is None else text[1:-1]


# The journal's lines are JSON whatever the values: what has none is kept as its repr.
_lenient = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), default=repr).encode


def finish_row(
    start: Started, request: CallRequest, result: CallResult, duration: float
) -> tuple[Prepared, str]:
    """The whole row of an attempt that is over: ``(prepared row, the journal's F line)``.

    Made in C where ``_speedups`` was built, for the common row (a decision, no error,
    stderr, remote run or approvers; values canonical JSON has text for): the same
    values and texts, byte for byte (``tests/test_audit_rows_c.py``), without ~150
    bytecodes between two spawns. Every other row is made by :func:`_finish_row`.
    """
    if _FINISH is not None:
        tail = start.tail
        made: tuple[Prepared, str] | None = _FINISH(
            start.head,
            start.head_text,
            tail.values,
            tail.hashed,
            request.ticket,
            request.approvers,
            result,
            duration,
        )
        if made is not None:
            return made
    return _finish_row(start, request, result, duration)


_FINISH: Any = None


def _stderr(start: Started, request: CallRequest, tail: Any) -> list[str]:
    """The stderr lines of a row: secret shapes redacted, and the values redacted from the
    arguments (the head's ``redacted`` column names them) wherever a line repeats them."""
    lines = redact_lines(map(str, tail))
    if start.head[8] == "[]":  # HEAD_COLUMNS[8], "redacted": nothing was taken out
        return lines
    return scrub_values(lines, request.args, redact(request.tool.schema, request.args)[0])


def _finish_row(
    start: Started, request: CallRequest, result: CallResult, duration: float
) -> tuple[Prepared, str]:
    """:func:`finish_row` in Python: every row."""
    decision = result.decision
    text = dumps(result.value) if result.value is not None else ""
    # surrogatepass: a value holding a lone surrogate (an executor that did not refuse one)
    # still gets its row; strict UTF-8 would raise here and the row would be lost.
    data = text.encode("utf-8", "surrogatepass")
    remote = dumps(result.remote.to_dict()) if result.remote is not None else None
    body = [
        decision.verdict._value_ if decision else "",  # as tool_class above
        decision.reason if decision else "",
        decision.plugin if decision else "",
        str(result.outcome),  # a plain str: SQLite's module adapts a str subclass (two raised
        # AttributeErrors a row, in the writer thread)
        clip(redact_text(result.error)) if result.error else None,
        result.exit_code,
        result.signal,
        float(duration),
        dumps([clip(line) for line in _stderr(start, request, result.stderr_tail)][-STDERR_LINES:])
        if result.stderr_tail
        else "[]",
        len(data),
        sha256_hex(data) if data else "",
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
            after = f",{canonical(remote)}"
            inner = body_text[1 : -len(after) - 1]
        middle = f"{start.head_text[1:-1]},{inner},{tail.hashed}{after}"
    return (values, middle), body_text or _lenient(body)


def clip(text: str) -> str:
    return text if len(text) <= MAX_TEXT else text[: MAX_TEXT - 3] + "..."
