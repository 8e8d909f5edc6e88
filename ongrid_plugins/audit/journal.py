"""The audit log's journal: the calls a process started or finished but has not chained yet.

Each audit log object appends to its own file,
``<state>/audit-inflight/<pid>-<start>-<n>@<host>.journal`` (``start`` is the
process's start time in clock ticks, so a reused pid names a different file;
``n`` tells apart the logs of several hosts in one process), one line per
event, each a single ``write()``:

* ``S <call_id> <values>`` before the call runs: what is known then, a JSON list
  of the :data:`START_COLUMNS`;
* ``F <call_id> <values>`` when it is over: the columns known only then (outcome,
  ticket...), a JSON list of the :data:`END_COLUMNS`, laid over the ``S`` line
  before it (the file always holds one: :meth:`Journal.finished` writes both when
  it does not);
* ``E <call_id> ...`` once those rows are in the SQLite chain.

When every call it holds is chained, the file is emptied (``ftruncate``), not
removed: making and removing a file on every call cost ~60 us of the kernel's
time, a tenth of a call. An empty journal holds nothing to recover; it is
removed when the log is closed or its process exits, and a crash leaves at most
an empty file, which the next recovery removes.

Lines of older versions hold JSON objects instead (``{"column": value, ...}``; an
``F`` object without an ``S`` line is the complete row); a process that recovers a
journal left by an older one reads both.

A ``write()`` to an ``O_APPEND`` file survives the process being killed (it is
in the page cache) and costs a microsecond or two where an SQLite commit costs a
hundred or more, so the call path only writes here and a writer thread chains
the rows in batches. When a process is gone, the next process that opens the
log on the same machine chains what its journal still holds — finished calls
with their outcome, started ones as ``interrupted`` — skipping any call already
in the chain (:func:`ongrid_plugins.audit.chain.recover`), and removes the file.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import itertools
import os
import stat
import threading
import weakref
from typing import Any

from .._sqlite import access_error, file_mode
from ..models.base import compiled

__all__ = [
    "END_COLUMNS",
    "HOST",
    "JOURNAL_DIR",
    "PID",
    "START_COLUMNS",
    "Journal",
    "alive",
    "pid_start",
]

JOURNAL_DIR = "audit-inflight"
SUFFIX = ".journal"
#: The values of an ``S`` line, in order: the row's columns known before the call runs.
START_COLUMNS = (
    "time",
    "call_id",
    "tool",
    "tool_class",
    "persona",
    "caller",
    "args",
    "args_digest",
    "redacted",
    "pid",
    "hostname",
    "sandbox",
    "skill_digest",
    "ticket",
    "approvers",
)
#: The values of an ``F`` line, in order: the columns an attempt's row gets when it is over.
END_COLUMNS = (
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
    "remote",
)


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
        _JOURNALS.add(self)

    def _forked(self) -> None:
        """In a new child, at once: drop the parent's descriptor before its number can be reused."""
        self._lock = threading.Lock()  # a parent thread may have held it at the fork
        if self._fd >= 0:
            self._close(remove=False)
        self._active.clear()

    def started(self, call_id: str, values: str) -> None:
        """Record that ``call_id`` is about to run (``values``: the ``S`` line's JSON list).

        :raises OSError: the line cannot be written.
        """
        line = f"S {call_id} {values}\n".encode()
        with self._lock:
            _write_all(self._open(), line)
            self._active.add(call_id)

    def finished(self, call_id: str, values: str, start: str) -> None:
        """Record that ``call_id`` is over (``values``: the ``F`` line's JSON list).

        ``start`` is its ``S`` line's list, written too when this file does not hold
        that line (no ``ongrid_before_call``, or a fork in between).

        :raises OSError: the line cannot be written.
        """
        with self._lock:
            if call_id in self._active and self._fd >= 0 and self._owner[0] == PID.pid:
                _write_all(self._fd, f"F {call_id} {values}\n".encode())
                return
            _write_all(self._open(), f"S {call_id} {start}\nF {call_id} {values}\n".encode())
            self._active.add(call_id)

    def chained(self, call_ids: list[str]) -> None:
        """Record that these calls' rows are in the chain (best effort: a failure is harmless).

        When nothing is left in flight or unchained, the file says nothing a
        recovery would need: it is emptied, and the next call appends to it again.
        """
        with self._lock:
            if self._owner[0] != PID.pid:
                return
            ours = [c for c in call_ids if c in self._active]
            self._active.difference_update(ours)  # chained is chained, the file open or not
            if not ours or self._fd < 0:
                return
            with contextlib.suppress(OSError):
                if self._active:
                    _write_all(self._fd, "".join(f"E {c}\n" for c in ours).encode())
                elif os.fstat(self._fd).st_nlink == 0:  # removed under us: the next call makes anew
                    self._close(remove=False)
                else:
                    os.ftruncate(self._fd, 0)  # O_APPEND: the next line goes at offset 0

    def close(self) -> None:
        """Close and remove the file when it holds nothing to recover (it reopens on the next call).

        With calls in flight it stays open: their ``F`` lines must follow their ``S`` lines
        in one file, or a recovery would take a finished call for an interrupted one.
        """
        with self._lock:
            if self._fd >= 0 and self._owner[0] == PID.pid and not self._active:
                self._close(remove=True)

    def _close(self, remove: bool) -> None:
        if self._finalizer is not None:
            self._finalizer.detach()
        _close_fd(self._fd, self._path if remove else "")
        self._fd = -1

    def _open(self) -> int:
        owner = PID.ident
        if self._fd >= 0 and self._owner[0] == owner[0]:
            # Idle, it may have been removed (or its folder) under us: a line written to
            # it then would be lost to a recovery, so the next call makes it anew.
            if self._active or os.fstat(self._fd).st_nlink:
                return self._fd
            self._close(remove=False)
        elif self._fd >= 0:  # a forked child: the parent's file is not ours (keep it)
            self._close(remove=False)
            self._active.clear()
        self._owner = owner
        number = next(_numbers)
        self._path = os.path.join(self.folder, f"{owner[0]}-{owner[1]}-{number}@{HOST}{SUFFIX}")
        # Never through a link, never blocking on a FIFO planted under this name (a shared
        # folder is written by the whole group): only a regular file is written to.
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK
        try:
            os.makedirs(self.folder, mode=0o700, exist_ok=True)
            # 0660 in a group-shared folder, so another member's host can recover it after a crash
            mode = file_mode(self.folder)
            self._fd = os.open(self._path, flags, mode)
            if not stat.S_ISREG(os.fstat(self._fd).st_mode):
                os.close(self._fd)
                self._fd = -1
                raise OSError(errno.EEXIST, "not a regular file: move it out of the folder", self._path)
            os.fchmod(self._fd, mode)  # past the umask
        except PermissionError as exc:
            raise access_error(self._path, exc, state_dir=os.path.dirname(self.folder)) from None
        # Dropped: closed, and removed if it is empty and this process made it. Not at exit:
        # the writer chains what is pending then, and closes the journal after that itself
        # (closed first, its number could be reused by the log's own files).
        self._finalizer = weakref.finalize(self, _close_fd, self._fd, self._path, owner[0])
        self._finalizer.atexit = False
        return self._fd


#: Every journal of this process, so a forked child drops their descriptors at once.
_JOURNALS: weakref.WeakSet[Journal] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for journal in list(_JOURNALS):
        journal._forked()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def _close_fd(fd: int, remove: str = "", pid: int = -1) -> None:
    """Close ``fd``; first unlink ``remove`` if given, when the file is empty (and, with
    ``pid``, only in that process: a forked child never removes its parent's journal)."""
    with contextlib.suppress(OSError):
        if remove and (pid < 0 or pid == os.getpid()) and os.fstat(fd).st_size == 0:
            os.unlink(remove)
    with contextlib.suppress(OSError):
        os.close(fd)


def _write_all_python(fd: int, data: bytes) -> None:
    """Write all of ``data``, keeping the GIL for the first (usually only) ``write()``.

    An append of a line to a local file only copies it into the page cache (the
    state folder is local: SQLite's WAL mode, which the log runs in, does not work
    over a network filesystem), so handing the GIL to another thread and waiting to
    get it back costs more than the write itself: two round trips a call otherwise.
    Where it was built, the compiled ``_speedups.write_all`` is used instead: no ctypes, and
    the GIL kept for every write of the line (a local file's writes do not block).
    """
    quick = _quick_write()
    written = quick(fd, data, len(data)) if quick is not None else -1
    if written == len(data):
        return
    view = memoryview(data)[max(written, 0) :]
    while view:  # the rest, or the error (and a retry after EINTR), the usual way
        view = view[os.write(fd, view) :]


@functools.cache
def _quick_write() -> Any:
    """libc's ``write`` through ``ctypes.PyDLL`` (which keeps the GIL), or None without one."""
    try:
        import ctypes

        # No argtypes: ctypes' default conversions (int, bytes to char *) are right
        # here and skip a from_param per argument; a line is far below 2**31 bytes.
        return ctypes.PyDLL(None).write
    except (ImportError, OSError, AttributeError):
        return None


#: Write all of a line to the journal, the GIL held: ``_speedups.write_all`` where it was
#: built, else :func:`_write_all_python`.
_write_all: Any = compiled("write_all") or _write_all_python


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

    Read on every call (five times), so kept rather than asked of the kernel each time
    (``getpid`` is a system call): a fork through :func:`os.fork` forgets it in the child.
    """

    __slots__ = ("_ident", "pid")

    def __init__(self) -> None:
        self._ident = (-1, "")
        self.pid = os.getpid()
        """The pid of the calling process (a plain attribute: read on every call)."""
        if hasattr(os, "register_at_fork"):
            os.register_at_fork(after_in_child=self._forget)

    def _forget(self) -> None:
        self.pid = os.getpid()
        self._ident = (-1, "")

    @property
    def ident(self) -> tuple[int, str]:
        """(pid, start time in clock ticks since boot) of the calling process, read together."""
        ident = self._ident
        if ident[0] == -1:
            pid = self.pid
            ident = self._ident = (pid, pid_start(pid))  # one assignment: threads see both or neither
        return ident

    @property
    def start(self) -> str:
        """Its start time in clock ticks since boot (empty without /proc)."""
        return self.ident[1]


HOST = os.uname().nodename
_numbers = itertools.count(1)
PID = Process()
