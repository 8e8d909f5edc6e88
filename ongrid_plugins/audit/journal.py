"""The audit log's journal: the calls a process started or finished but has not chained yet.

Each audit log object appends to its own file,
``<state>/audit-inflight/<pid>-<start>-<n>@<host>.journal`` (``start`` is the
process's start time in clock ticks, so a reused pid names a different file;
``n`` tells apart the logs of several hosts in one process), one line per
event, each a single ``write()``:

* ``S <call_id> <row>`` before the call runs (what is known then);
* ``F <call_id> <row>`` when it is over: the columns known only then (outcome, ticket...)
  when this file holds the call's ``S`` line, else the complete row; read back, an ``F``
  row is laid over the ``S`` row before it;
* ``E <call_id> ...`` once those rows are in the SQLite chain.

A ``write()`` to an ``O_APPEND`` file survives the process being killed (it is
in the page cache) and costs a few microseconds where an SQLite commit costs a
hundred or more, so the call path only writes here and a writer thread chains
the rows in batches. When a process is gone, the next process that opens the
log on the same machine chains what its journal still holds — finished calls
with their outcome, started ones as ``interrupted`` — skipping any call already
in the chain (:func:`ongrid_plugins.audit.chain.recover`), and removes the file.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import threading
import weakref
from collections.abc import Iterator
from typing import Any

import attrs

from .._sqlite import access_error, file_mode

__all__ = ["HOST", "JOURNAL_DIR", "PID", "Journal", "JournalFile", "alive", "journal_files", "pid_start"]

JOURNAL_DIR = "audit-inflight"
SUFFIX = ".journal"


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

    @property
    def name(self) -> str:
        """The file name (unique per process and machine)."""
        return os.path.basename(self.path)


class Journal:
    """This process's journal file, opened on first use and re-opened after a fork."""

    def __init__(self, folder: str) -> None:
        """Journal into ``folder``; nothing is created until the first call."""
        self.folder = folder
        self._lock = threading.Lock()
        self._fd = -1
        self._owner = (0, "")
        self._active: set[str] = set()
        self._path = ""
        self._finalizer: Any = None  # weakref.finalize closing the fd if the journal is dropped

    def started(self, call_id: str, row: dict[str, Any]) -> None:
        """Record that ``call_id`` is about to run; raises ``OSError`` when it cannot."""
        self._append("S", call_id, row)

    def finished(self, call_id: str, row: dict[str, Any], later: tuple[str, ...] = ()) -> None:
        """Record ``call_id``'s complete row; raises ``OSError`` when it cannot.

        ``later``: the columns set after the call's ``S`` line; when this file holds that
        line, only they are written (the rest is read back from it).
        """
        if later:
            with self._lock:
                if call_id in self._active and self._fd >= 0 and self._owner[0] == PID.pid:
                    delta = {key: row.get(key) for key in later}
                    _write_all(self._fd, f"F {call_id} {_encode(delta)}\n".encode())
                    return
        self._append("F", call_id, row)

    def chained(self, call_ids: list[str]) -> None:
        """Record that these calls' rows are in the chain (best effort: a failure is harmless).

        When nothing is left in flight or unchained, the file says nothing a
        recovery would need: it is closed and removed (and made anew by the next call).
        """
        with self._lock:
            ours = [c for c in call_ids if c in self._active]
            if not ours or self._fd < 0 or self._owner[0] != PID.pid:
                return
            self._active.difference_update(ours)
            if not self._active:
                self._close(remove=True)
                return
            with contextlib.suppress(OSError):
                _write_all(self._fd, "".join(f"E {c}\n" for c in ours).encode())

    def _close(self, remove: bool) -> None:
        with contextlib.suppress(OSError):
            if remove:
                os.unlink(self._path)
            os.close(self._fd)
        if self._finalizer is not None:
            self._finalizer.detach()
        self._fd = -1

    def _append(self, kind: str, call_id: str, row: dict[str, Any]) -> None:
        line = f"{kind} {call_id} {_encode(row)}\n".encode()
        with self._lock:
            fd = self._open()
            _write_all(fd, line)
            self._active.add(call_id)

    def _open(self) -> int:
        owner = PID.ident
        if self._fd >= 0 and self._owner[0] == owner[0]:
            return self._fd
        if self._fd >= 0:  # a forked child: the parent's file is not ours (keep it)
            self._close(remove=False)
            self._active.clear()
        self._owner = owner
        number = next(_numbers)
        self._path = os.path.join(self.folder, f"{owner[0]}-{owner[1]}-{number}@{HOST}{SUFFIX}")
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC
        try:
            os.makedirs(self.folder, mode=0o700, exist_ok=True)
            # 0660 in a group-shared folder, so another member's host can recover it after a crash
            mode = file_mode(self.folder)
            self._fd = os.open(self._path, flags, mode)
            os.fchmod(self._fd, mode)  # past the umask
        except PermissionError as exc:
            raise access_error(self._path, exc) from None
        self._finalizer = weakref.finalize(self, _close_fd, self._fd)
        return self._fd


def journal_files(folder: str) -> Iterator[JournalFile]:
    """Every readable journal in ``folder``; unreadable or foreign files are skipped."""
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
            with open(path, encoding="utf-8", errors="replace") as f:
                calls = _open_calls(f)
        except OSError:
            continue
        yield JournalFile(path, *parsed, open_calls=tuple(calls))


def _parse_name(name: str) -> tuple[int, str, str] | None:
    if not name.endswith(SUFFIX) or "@" not in name:
        return None
    ident, host = name[: -len(SUFFIX)].split("@", 1)
    pid, _, rest = ident.partition("-")
    start = rest.split("-")[0]
    return (int(pid), start, host) if pid.isdigit() else None


def _open_calls(lines: Any) -> list[tuple[str, dict[str, Any], bool]]:
    calls: dict[str, tuple[dict[str, Any], bool]] = {}
    for line in lines:
        kind, _, rest = line.rstrip("\n").partition(" ")
        call_id, _, data = rest.partition(" ")
        if kind in ("S", "F") and call_id:
            try:
                row = json.loads(data)
            except ValueError:  # a line cut short by a crash: the call id is still known
                row = None
            if isinstance(row, dict):
                if kind == "F" and call_id in calls:  # the columns known at the end, over the start
                    row = {**calls[call_id][0], **row}
                calls[call_id] = (row, kind == "F")
            elif call_id not in calls:
                calls[call_id] = ({}, False)
        elif kind == "E":
            calls.pop(call_id, None)
    return [(call_id, row, finished) for call_id, (row, finished) in calls.items()]


def _close_fd(fd: int) -> None:
    with contextlib.suppress(OSError):
        os.close(fd)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


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


class Process:
    """This process's pid and start time, re-read after a fork (``PID.pid``, ``PID.start``).

    Read on every call (four times), so kept rather than asked of the kernel each time
    (``getpid`` is a system call): a fork through :func:`os.fork` forgets it in the child.
    """

    def __init__(self) -> None:
        self._ident = (-1, "")
        if hasattr(os, "register_at_fork"):
            os.register_at_fork(after_in_child=self._forget)

    def _forget(self) -> None:
        self._ident = (-1, "")

    @property
    def ident(self) -> tuple[int, str]:
        """(pid, start time in clock ticks since boot) of the calling process, read together."""
        ident = self._ident
        if ident[0] == -1:
            pid = os.getpid()
            ident = self._ident = (pid, pid_start(pid))  # one assignment: threads see both or neither
        return ident

    @property
    def pid(self) -> int:
        """The pid of the calling process."""
        return self.ident[0]

    @property
    def start(self) -> str:
        """Its start time in clock ticks since boot (empty without /proc)."""
        return self.ident[1]


HOST = os.uname().nodename
# One encoder for every line (json.dumps with options builds a new one per call).
_encode = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode
_numbers = itertools.count(1)
PID = Process()
