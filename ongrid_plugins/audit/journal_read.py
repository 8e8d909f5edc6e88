"""Reading the journals in ``audit-inflight`` back, for recovery and ``audit verify``.

The folder is written by every process that uses the log -- in a group-shared state
folder (:mod:`ongrid_plugins.statedir`), by every member of the group -- so nothing in
it is trusted as it is:

* an entry is opened with ``O_NOFOLLOW|O_NONBLOCK`` and read only when ``fstat`` says it
  is a regular file (a FIFO would block every host, ``/dev/zero`` exhaust its memory);
  anything else is skipped with a warning naming it, as it cannot hold calls;
* at most :data:`MAX_BYTES` are read; a bigger file is reported, not read;
* every line's values must have the type their column has, its call id its own, and
  its outcome one a call can have: a journal never holds an ``approval`` or
  ``rejection`` row (those are chained directly, :meth:`.log.AuditLog.record_ticket`).

A file that breaks these rules gets a :attr:`JournalFile.problem`, and recovery refuses
to go on (:func:`.chain.recover` raises, naming the file and the fix) rather than chain
or drop what it holds. A line that is not JSON at all is what a crash can leave (a
write cut short): its call is kept as interrupted, as before.

What this cannot catch: a member of the group who writes a well-formed journal of
plausible *call* rows under a dead pid gets them chained as they are (any caller, any
outcome of a call), with a valid hash -- and an HMAC when the log is keyed, since the
recovering host computes it. Such rows can never back a ticket (that takes ``approval``
rows), but they are only as trustworthy as the group (docs/audit.md).
"""

from __future__ import annotations

import logging
import os
import stat
from collections.abc import Iterator
from typing import Any

import attrs

from ..models import Outcome
from ..userfiles import file_kind
from .journal import END_COLUMNS, START_COLUMNS, SUFFIX

__all__ = ["MAX_BYTES", "JournalFile", "journal_files"]

logger = logging.getLogger("ongrid_plugins.audit")

MAX_BYTES = 256 * 1024 * 1024
"""The most a journal is read: far above what a process leaves (rows are chained within
~50 ms and the writer holds at most ~10,000 back), far below what a host can hold."""

_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
_NUMBER = (int, float)
_TYPES: dict[str, tuple[type, ...]] = {
    **dict.fromkeys(("time", "duration"), _NUMBER),
    **dict.fromkeys(("pid", "result_size", "exit_code", "signal"), (int,)),
    **dict.fromkeys(
        (
            *("call_id", "tool", "tool_class", "persona", "caller", "args", "args_digest", "redacted"),
            *("hostname", "sandbox", "skill_digest", "ticket", "approvers", "verdict", "reason"),
            *("plugin", "outcome", "error", "stderr_tail", "result_digest", "remote"),
        ),
        (str,),
    ),
}
#: The outcomes a call's row can have: never a ticket decision.
CALL_OUTCOMES = frozenset(o.value for o in Outcome) - {Outcome.APPROVAL.value, Outcome.REJECTION.value}


class Damaged(ValueError):
    """A journal line that no version of this program writes."""


@attrs.frozen
class JournalFile:
    """One process's journal, read back: the calls it started and never ended."""

    path: str
    pid: int
    pid_start: str
    host: str
    open_calls: tuple[tuple[str, dict[str, Any], bool], ...]
    """(call_id, row, finished) of every call not yet chained, in order: ``finished``
    says whether ``row`` is complete (``F``) or only what was known before the call (``S``)."""
    problem: str = ""
    """Why this file cannot be recovered (``open_calls`` is then empty), or ``""``."""

    @property
    def name(self) -> str:
        """The file name (unique per process and machine)."""
        return os.path.basename(self.path)


def journal_files(folder: str) -> Iterator[JournalFile]:
    """Every journal in ``folder``: its open calls, or the problem that keeps them unread.

    Entries that are not regular files are skipped (logged); unreadable ones too.
    """
    try:
        names = sorted(os.listdir(folder))
    except OSError:
        return
    for name in names:
        parsed = _parse_name(name)
        if parsed is None:
            continue
        path = os.path.join(folder, name)
        try:
            calls = _open_calls(_read(path).splitlines())
        except OSError as exc:
            logger.warning("audit log: skipping %s in the journal folder: %s", path, exc.strerror or exc)
            continue
        except Damaged as exc:  # too big, or a row no process writes: recovery stops, naming it
            yield JournalFile(path, *parsed, open_calls=(), problem=str(exc))
            continue
        yield JournalFile(path, *parsed, open_calls=tuple(calls))


def _read(path: str) -> str:
    """The regular file ``path``, never followed through a link, up to :data:`MAX_BYTES`.

    :raises OSError: not a regular file, too big, or unreadable.
    """
    fd = os.open(path, _FLAGS)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(0, f"not a regular file (it is {file_kind(st.st_mode)})")
        if st.st_size > MAX_BYTES:
            raise Damaged(f"it holds {st.st_size} bytes, more than the {MAX_BYTES} a journal may")
        chunks: list[bytes] = []
        left = MAX_BYTES
        while left > 0 and (chunk := os.read(fd, min(left, 1 << 20))):
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks).decode("utf-8", errors="replace")
    finally:
        os.close(fd)


def _parse_name(name: str) -> tuple[int, str, str] | None:
    if not name.endswith(SUFFIX) or "@" not in name:
        return None
    ident, host = name[: -len(SUFFIX)].split("@", 1)
    pid, _, rest = ident.partition("-")
    start = rest.split("-")[0]
    return (int(pid), start, host) if pid.isdigit() and pid.isascii() else None


def _open_calls(lines: list[str]) -> list[tuple[str, dict[str, Any], bool]]:
    calls: dict[str, tuple[dict[str, Any], bool]] = {}
    for number, line in enumerate(lines, 1):
        kind, _, rest = line.partition(" ")
        call_id, _, data = rest.partition(" ")
        if kind in ("S", "F") and call_id:
            try:
                row = _row(kind, data)
                if row is not None:
                    _check(row, call_id)
            except Damaged as exc:
                raise Damaged(f"line {number} ({kind} {call_id[:40]}): {exc}") from None
            if row is not None:
                if kind == "F" and call_id in calls:  # the columns known at the end, over the start
                    row = {**calls[call_id][0], **row}
                # finished when complete: an end line over a start line cut short stays interrupted
                calls[call_id] = (row, kind == "F" and "tool" in row)
            elif call_id not in calls:  # a line cut short by a crash: the call id is still known
                calls[call_id] = ({}, False)
        elif kind == "E":
            calls.pop(call_id, None)
    return [(call_id, row, finished) for call_id, (row, finished) in calls.items()]


def _row(kind: str, data: str) -> dict[str, Any] | None:
    """The columns a line's JSON holds: a list of :data:`START_COLUMNS` / :data:`END_COLUMNS`
    (an older version's object, as it is); None for a line that is not JSON (cut short) or
    not of this version's shape.

    :raises Damaged: JSON no version writes.
    """
    import json

    try:
        value = json.loads(data)
    except (ValueError, RecursionError):
        return None
    if isinstance(value, dict):
        return value
    columns = START_COLUMNS if kind == "S" else END_COLUMNS
    if isinstance(value, list) and len(value) == len(columns):
        return dict(zip(columns, value, strict=True))
    return None  # another version's line: the call id is still known (chained as interrupted)


def _check(row: dict[str, Any], call_id: str) -> None:
    """:raises Damaged: ``row`` is not what a process journals for its call ``call_id``."""
    for column, value in row.items():
        types = _TYPES.get(column)
        if types is None:
            raise Damaged(f"no row has a column {column[:40]!r}")
        if value is not None and (not isinstance(value, types) or isinstance(value, bool)):
            raise Damaged(f"its {column} is a {type(value).__name__}, not a {types[0].__name__}")
    if row.get("call_id") not in (None, call_id):
        raise Damaged("its row is of another call")
    if row.get("outcome") is not None and row["outcome"] not in CALL_OUTCOMES:
        raise Damaged(f"a journal holds calls, and {row['outcome'][:40]!r} is not the outcome of one")
