"""Spawning threads made ready ahead of the calls that use them.

Joining a cgroup (v1 migrates the thread under a global lock that waits for an RCU
grace period) and making a mount namespace with a private ``/tmp`` take most of the
cost of a confined spawn, and nothing in them depends on the call. So a background
refiller keeps a few :class:`Warm` threads parked: each has joined a pooled cgroup,
entered a namespace of its own with a fresh tmpfs on ``/tmp``, and waits for the one
job it will ever run (the call's Landlock, seccomp and capabilities, then
``posix_spawn``). A call takes one, or makes one on the spot when none is ready.

When the call ends its namespace is released by a background thread too: the last
reference to a mount namespace tears its mounts down and waits for RCU, and that
should not delay the call's result either.
"""

from __future__ import annotations

import collections
import contextlib
import os
import threading
from collections.abc import Callable
from typing import Any

from . import cgroups, mounts
from .cgroups import CallGroup
from .profile import system_secrets

__all__ = ["Warm", "take"]

WARM_THREADS = 2
"""How many ready threads the refiller keeps (the pool grows back after each call)."""
_TMP_SIZE_MB = 64 * 1024  # the memory cgroup is the real bound: tmpfs pages are charged to it


class Warm:
    """One parked thread: in a cgroup and a private /tmp, waiting for its one job."""

    def __init__(self, with_cgroup: bool, private_tmp: bool) -> None:
        self.group: CallGroup | None = cgroups.acquire() if with_cgroup else None
        self.private_tmp = private_tmp
        self.under = -1  # the covered /tmp (see mounts.bind_back)
        self.ns = -1  # holds the mount namespace until release()
        self.covered: list[str] = []
        """System secrets covered by empty mounts in this thread's namespace."""
        self.setup_error: BaseException | None = None
        self._job: Callable[[Warm], Any] | None = None
        self._result: Any = None
        self._error: BaseException | None = None
        self._ready = threading.Event()
        self._go = threading.Event()
        self._done = threading.Event()
        self.pid = os.getpid()
        threading.Thread(target=self._run, name="ongrid-spawn", daemon=True).start()

    def _run(self) -> None:
        try:
            if self.group is not None:
                self.group.join_thread()
            if self.private_tmp:
                self.under = mounts.enter_private_tmp(_TMP_SIZE_MB)
                self.ns = os.open("/proc/thread-self/ns/mnt", os.O_RDONLY | os.O_CLOEXEC)
                self.covered = mounts.cover(system_secrets())
        except BaseException as exc:
            self.setup_error = exc
        self._ready.set()
        self._go.wait()
        job = self._job
        if job is None:
            return
        try:
            self._result = job(self)
        except BaseException as exc:
            self._error = exc
        finally:
            self._done.set()

    def wait_ready(self) -> None:
        """Block until the thread has joined its cgroup and namespace (or failed to)."""
        self._ready.wait()
        if self.setup_error is not None:
            error = self.setup_error
            self.discard()
            raise error

    def run(self, job: Callable[[Warm], Any]) -> Any:
        """Run ``job(self)`` in the parked thread (which then ends) and return its value."""
        self._ready.wait()
        if self.setup_error is not None:
            self.discard()
            raise self.setup_error
        self._job = job
        self._go.set()
        self._done.wait()
        if self._error is not None:
            raise self._error
        return self._result

    def discard(self) -> None:
        """Let the thread end without a job and give everything back."""
        self.release()

    def release(self) -> None:
        """After the call (or instead of one): the thread ends, the cgroup goes back to the
        pool and the namespace is torn down, off the hot path."""
        if not self._go.is_set():
            self._go.set()  # never ran a job: let the parked thread end
        group, self.group = self.group, None
        fds = [fd for fd in (self.under, self.ns) if fd >= 0]
        self.under = self.ns = -1
        if group is None and not fds:
            return
        _closer.put(group, fds)


class _Closer:
    """One background thread that empties cgroups and drops namespaces after calls."""

    def __init__(self) -> None:
        self._queue: collections.deque[tuple[CallGroup | None, list[int]]] = collections.deque()
        self._wake = threading.Condition()
        self._thread: threading.Thread | None = None

    def put(self, group: CallGroup | None, fds: list[int]) -> None:
        with self._wake:
            self._queue.append((group, fds))
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._loop, name="ongrid-release", daemon=True)
                self._thread.start()
            self._wake.notify()

    def _loop(self) -> None:
        while True:
            with self._wake:
                while not self._queue:
                    if not self._wake.wait(timeout=30):
                        self._thread = None
                        return
                group, fds = self._queue.popleft()
            for fd in fds:
                with contextlib.suppress(OSError):
                    os.close(fd)
            if group is not None:
                with contextlib.suppress(OSError):
                    cgroups.release(group)
        # not reached


_closer = _Closer()


class _Pool:
    """The ready threads of this process, refilled in the background."""

    def __init__(self) -> None:
        self._ready: collections.deque[Warm] = collections.deque()
        self._lock = threading.Lock()
        self._refilling = False
        self._kind: tuple[bool, bool] | None = None
        os.register_at_fork(after_in_child=self._forked)

    def _forked(self) -> None:
        # The parked threads did not survive the fork: forget them (their cgroups stay
        # with the parent, which releases them).
        self._ready = collections.deque()
        self._lock = threading.Lock()
        self._refilling = False

    def take(self, with_cgroup: bool, private_tmp: bool) -> Warm:
        kind = (with_cgroup, private_tmp)
        with self._lock:
            if self._kind != kind:
                stale, self._ready = list(self._ready), collections.deque()
                self._kind = kind
            else:
                stale = []
            warm = self._ready.popleft() if self._ready else None
            start = not self._refilling
            self._refilling = True
        for old in stale:
            old.discard()
        if start:
            threading.Thread(target=self._refill, args=(kind,), name="ongrid-warm", daemon=True).start()
        return warm if warm is not None else Warm(with_cgroup, private_tmp)

    def _refill(self, kind: tuple[bool, bool]) -> None:
        try:
            while True:
                with self._lock:
                    if self._kind != kind or len(self._ready) >= WARM_THREADS:
                        return
                warm = Warm(*kind)
                warm._ready.wait()
                if warm.setup_error is not None:
                    warm.discard()
                    return
                with self._lock:
                    if self._kind != kind:
                        stale = warm
                    else:
                        self._ready.append(warm)
                        stale = None
                if stale is not None:
                    stale.discard()
                    return
        finally:
            with self._lock:
                self._refilling = False


_pool = _Pool()


def take(with_cgroup: bool, private_tmp: bool) -> Warm:
    """A parked thread for one call (made on the spot if none is ready)."""
    return _pool.take(with_cgroup, private_tmp)
