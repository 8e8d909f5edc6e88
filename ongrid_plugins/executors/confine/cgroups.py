"""Per-call cgroups: the process and memory limits, and killing every descendant.

cgroup v1 (``/sys/fs/cgroup/pids`` and ``/sys/fs/cgroup/memory``), writable by a
root host: the spawning thread moves itself into the call's group before it
starts the child (v1 moves single threads), so the entry's first instruction
already runs inside it, and so does everything it forks; a process cannot leave
the group (its files are not writable inside the sandbox). When the call ends,
every process still in the group is killed, ``setsid`` and double forks included,
until the group is empty.

Groups are pooled: creating a memory cgroup costs far more than reusing one, and
an empty group is as good as new once its limits are rewritten (the ``max``
and ``oom_kill`` counters are read as differences).
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import os
import signal
import sys
import threading
import time

from ...core.forksafe import renew_after_fork

__all__ = ["CallGroup", "acquire", "available", "sweep_stale"]

_V1 = "/sys/fs/cgroup"
_PARENT = "ongrid"
_SWEEP_ROUNDS = 200
_POOL_MAX = 32
"""Emptied groups kept for reuse (beyond that, one is left for the sweep at exit)."""


def _write(path: str, value: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
    try:
        os.write(fd, value.encode())
    finally:
        os.close(fd)


def _read(path: str) -> str:
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        return os.read(fd, 65536).decode()
    finally:
        os.close(fd)


def _counter(text: str, key: str) -> int:
    for line in text.splitlines():
        name, _, value = line.partition(" ")
        if name == key:
            with contextlib.suppress(ValueError):
                return int(value)
    return 0


@functools.cache
def _parents() -> tuple[str, str] | None:
    """``(pids parent, memory parent)`` created and writable, else None."""
    parents = []
    for controller in ("pids", "memory"):
        base = os.path.join(_V1, controller)
        if not os.path.isfile(os.path.join(base, "tasks")):
            return None
        parent = os.path.join(base, _PARENT)
        try:
            os.makedirs(parent, exist_ok=True)
        except OSError:
            return None
        if not os.access(os.path.join(parent, "tasks"), os.W_OK):
            return None
        parents.append(parent)
    if not os.path.isfile(os.path.join(parents[0], "pids.max")):
        return None
    for parent in parents:
        _sweep_stale(parent)
    atexit.register(_remove_own)
    return parents[0], parents[1]


def _sweep_stale(parent: str) -> int:
    """Empty and remove the groups of hosts that died (named ``<pid>-<n>``); processes killed."""
    killed = 0
    try:
        names = os.listdir(parent)
    except OSError:
        return killed
    for name in names:
        owner, _, _ = name.partition("-")
        path = os.path.join(parent, name)
        if not owner.isdigit() or not os.path.isdir(path) or _alive(int(owner)):
            continue
        with contextlib.suppress(OSError):
            killed += CallGroup(path, path).kill_all()
            os.rmdir(path)
    return killed


def sweep_stale() -> int | None:
    """Kill what is left in the groups of processes that died, now; None without cgroups.

    A host sweeps once when it first uses cgroups; a long-lived process that outlives
    others (a worker whose pool process was killed mid-call) calls this again.
    """
    parents = _parents()
    if parents is None:
        return None
    return sum(_sweep_stale(parent) for parent in parents)


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs; a zombie does not (a killed worker's pool process, say, until
    init reaps it: its groups are stale already, and a restart at once must sweep them)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    try:
        stat = _read(f"/proc/{pid}/stat")
    except OSError:
        return not os.path.isdir("/proc/self")  # no /proc: trust kill(0)
    fields = stat.rpartition(")")[2].split()
    return not fields or fields[0] not in ("Z", "X")


def _remove_own() -> None:
    """At exit: remove this process's emptied groups (a busy one is left for the sweep)."""
    with _pool_lock:
        groups = list(_pool)
        _pool.clear()
    for group in groups:
        for path in (group.pids, group.memory):
            with contextlib.suppress(OSError):
                os.rmdir(path)


def available() -> bool:
    """True when per-call pids and memory groups can be made here."""
    return _parents() is not None


class CallGroup:
    """The pids and memory cgroups of one call."""

    def __init__(self, pids: str, memory: str, *, fresh: bool = False) -> None:
        self.pids = pids
        self.memory = memory
        self._max_before = 0
        self._oom_before = 0
        self._limits: tuple[int, int] | None = None
        """The limits the group's files hold (None: unknown, written by the next call)."""
        self._counted = fresh
        """Whether the counters above are the group's, read while it was empty (a group
        just made has them at 0): nothing in it can move them until the next call."""

    def configure(self, processes: int, memory_mb: int) -> None:
        """Set the limits for the next call and remember the counters.

        A pooled group keeps its limits: they are written only when the call's differ
        from the last ones written (the files are not writable inside the sandbox), and
        the counters are the ones :func:`release` read once the group was empty.
        """
        if self._limits != (processes, memory_mb):
            self._limits = None  # a failed write below leaves them unknown
            # +1: the spawning thread counts until it has started the child and exited.
            _write(os.path.join(self.pids, "pids.max"), str(processes + 1))
            limit = str(memory_mb * 1024 * 1024)
            memsw = os.path.join(self.memory, "memory.memsw.limit_in_bytes")
            # v1 wants memory <= memory+swap at every moment: raise memsw first, lower it last.
            with contextlib.suppress(OSError):  # absent without swap accounting; or lowering
                _write(memsw, limit)
            _write(os.path.join(self.memory, "memory.limit_in_bytes"), limit)
            with contextlib.suppress(OSError):
                _write(memsw, limit)
            self._limits = (processes, memory_mb)
        if not self._counted:
            self.count()
        self._counted = False  # the call about to start may move them

    def count(self) -> None:
        """Remember the group's ``max`` and ``oom_kill`` counters: a call's hits are the difference."""
        self._max_before = _counter(_read(os.path.join(self.pids, "pids.events")), "max")
        self._oom_before = _counter(_read(os.path.join(self.memory, "memory.oom_control")), "oom_kill")
        self._counted = True

    def join_thread(self) -> None:
        """Move the calling thread into both groups (its children are born there).

        It writes ``0`` (the writing thread), not its thread id: the kernel moves a thread
        named by id under the global write lock of ``cgroup_threadgroup_rwsem``, which
        waits for an RCU grace period when no move came just before (~0.1-17 ms here,
        against ~25-55 us for ``0``) and holds back every ``fork`` and ``clone`` on the
        machine meanwhile.
        """
        _write(os.path.join(self.pids, "tasks"), "0")
        _write(os.path.join(self.memory, "tasks"), "0")

    def idle(self) -> bool:
        """Nothing is charged to the group: no process, and no killed one left unreaped."""
        return _read(os.path.join(self.pids, "pids.current")).strip() == "0"

    def hit_process_limit(self) -> bool:
        return _counter(_read(os.path.join(self.pids, "pids.events")), "max") > self._max_before

    def hit_memory_limit(self) -> bool:
        return _counter(_read(os.path.join(self.memory, "memory.oom_control")), "oom_kill") > self._oom_before

    def members(self) -> list[int]:
        """The processes in the group, never the host itself: until the spawning thread has
        fully exited, v1 lists the host's pid here too (one of its threads is a member)."""
        me = os.getpid()
        return [pid for pid in map(int, _read(os.path.join(self.pids, "cgroup.procs")).split()) if pid != me]

    def kill_all(self) -> int:
        """SIGKILL every process in the group until it is empty; how many were killed."""
        killed = 0
        for _ in range(_SWEEP_ROUNDS):
            pids = self.members()
            if not pids:
                return killed
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
                    killed += 1
            time.sleep(0.001)
        return killed


_pool: list[CallGroup] = []
_pool_lock = threading.Lock()
_counter_lock = threading.Lock()
# The warm pool's refiller holds _pool_lock while it reads the pooled groups: a fork then
# must not leave the child's calls waiting on it.
renew_after_fork(sys.modules[__name__], "_pool_lock", "_counter_lock")
_next = [0]


def _forked() -> None:
    """In a new child, at once: the pooled groups are the parent's to hand out."""
    _pool.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forked)


def acquire() -> CallGroup | None:
    """An empty call group from the pool, or a new one; None where cgroups are unusable."""
    parents = _parents()
    if parents is None:
        return None
    with _pool_lock:
        for i in range(len(_pool) - 1, -1, -1):
            group = _pool[i]
            try:
                idle = group.idle()
            except OSError:  # removed under us: forget it
                del _pool[i]
                continue
            if idle:
                del _pool[i]
                return group
    with _counter_lock:
        _next[0] += 1
        name = f"{os.getpid()}-{_next[0]}"
    pids, memory = (os.path.join(parent, name) for parent in parents)
    try:
        os.mkdir(pids)
        os.mkdir(memory)
    except FileExistsError:
        return CallGroup(pids, memory)  # left by an earlier process of this pid: read it
    except OSError:
        return None
    return CallGroup(pids, memory, fresh=True)


def release(group: CallGroup) -> None:
    """Give an emptied group back to the pool, its counters read (off the next call's path).

    A killed process leaves the group's list at once but stays charged to it until its
    parent (init, for a call's orphans) reaps it: a group given out before then would
    start the next call with fewer processes than its limit. Such a group waits in the
    pool until :func:`acquire` finds nothing charged to it.
    """
    group.kill_all()
    with contextlib.suppress(OSError):
        if group.idle():
            group.count()
    with _pool_lock:
        if len(_pool) < _POOL_MAX:
            _pool.append(group)
