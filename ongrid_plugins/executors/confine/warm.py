"""Spawning threads made ready ahead of the calls that use them.

Joining a cgroup (each thread moves itself: :meth:`.cgroups.CallGroup.join_thread`)
and making a mount namespace with a private ``/tmp`` take most of the cost of a
confined spawn, and nothing in them depends on the call. So a background refiller
keeps a few :class:`Warm` threads parked: each has joined a pooled cgroup, entered a
namespace of its own with a fresh tmpfs on ``/tmp``, and waits for the one job it
will ever run (the call's Landlock, seccomp and capabilities, then the spawn: the
compiled runner's, or ``posix_spawn``). A call takes one, or makes one on the spot
when none is ready.

The refiller is one long-lived thread, woken once a call's thread has spawned (making
the next thread while a call confines itself would slow that call down). What is the
same for every thread it makes is done once, in the refiller itself, and inherited:
its bounding set is emptied (a new thread shares its creator's credentials) and the
system secrets are covered in a mount namespace of its own (a new thread is born in its
creator's namespace, and its own is a copy). A cover made ahead can be undone by the host
meanwhile (a file replaced by ``rename`` loses the mounts on it in every namespace),
so the spawning thread checks the covers again right before it confines itself
(:meth:`Covers.refresh`); the refiller checks its own only when a call found them stale.

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

from . import caps, cgroups, mounts
from .cgroups import CallGroup
from .profile import secret_paths
from .stamps import FileStamp, same_files

__all__ = ["Warm", "take"]

WARM_THREADS = 2
"""How many ready threads the refiller keeps (the pool grows back after each call)."""
_TMP_SIZE_MB = 64 * 1024  # the memory cgroup is the real bound: tmpfs pages are charged to it


class Covers:
    """The system secrets covered in one mount namespace, and what each path showed then.

    A cover is a mount on a path's dentry; when the host replaces the file (``passwd``
    renames a new ``/etc/shadow`` over the old one) or deletes it, the kernel detaches
    the mount in every namespace, and the path shows the new file, uncovered. So what
    was covered ahead of the call is checked again in the spawning thread right before
    it confines itself (:meth:`refresh`): each secret must still show what it showed
    once covered, and new secrets get covered too.
    """

    __slots__ = ("_paths", "_stamps", "covered", "seen")

    def __init__(self) -> None:
        self.covered: list[str] = []
        """The paths covered (a secret that is a symlink or a device is not)."""
        self.seen: dict[str, tuple[int, int] | None] = {}
        """What each secret's path showed once handled (the cover's identity, when covered)."""
        self._paths: list[str] = []
        self._stamps: tuple[FileStamp, ...] = ()
        """``seen`` for ``_paths`` (the secret paths of the last refresh), checked in one go."""

    def copy(self) -> Covers:
        """The same covers, for a namespace copied from this one."""
        other = Covers()
        other.covered, other.seen = list(self.covered), dict(self.seen)
        other._paths, other._stamps = self._paths, self._stamps
        return other

    def refresh(self) -> bool:
        """Cover every secret of the machine that does not show what it showed once covered.

        Runs in a thread of the namespace, with ``CAP_SYS_ADMIN``; raises ``OSError``
        when a cover cannot be mounted (the call then fails: it is never run uncovered).
        Returns whether anything had changed.
        """
        paths = secret_paths()
        if paths == self._paths and same_files(self._stamps):
            return False
        seen, identity = self.seen, mounts.identity
        stale = [path for path in paths if seen.get(path, _UNSEEN) != identity(path)]
        if stale:
            for path in mounts.cover(stale):  # what is absent, or not a file or folder, is skipped
                if path not in self.covered:
                    self.covered.append(path)
            for path in stale:
                seen[path] = identity(path)
        self._paths = paths
        self._stamps = tuple((path, *(seen[path] or (None, None))) for path in paths)
        return bool(stale)


_UNSEEN = (-1, -1)  # never checked: differs from every identity and from None (absent)


class Warm:
    """One parked thread: in a cgroup and a private /tmp, waiting for its one job."""

    def __init__(
        self,
        with_cgroup: bool,
        private_tmp: bool,
        root: bool = False,
        *,
        bounded: bool = False,
        template: Covers | None = None,
    ) -> None:
        """Start the thread.

        ``bounded``: it is born with an empty bounding set (a thread inherits its
        creator's, and the refiller emptied its own once). ``template``: it is born in
        the refiller's namespace, where these covers are in place already; its own
        namespace is a copy of that one, covers included.
        """
        self.root = root
        """Whether the thread empties its bounding set while it waits (a root host)."""
        self.bounded = bounded
        """:func:`.caps.drop_bounding` ran on the thread: the call's ``drop_all`` skips it."""
        self.group: CallGroup | None = cgroups.acquire() if with_cgroup else None
        self.private_tmp = private_tmp
        self.under = -1  # the covered /tmp (see mounts.bind_back)
        self.ns = -1  # holds the mount namespace until release()
        self.covers = template.copy() if template is not None else Covers()
        """System secrets covered by empty mounts in this thread's namespace."""
        self._templated = template is not None
        self.setup_error: BaseException | None = None
        self._job: Callable[[Warm], Any] | None = None
        self._result: Any = None
        self._error: BaseException | None = None
        self._ready = threading.Event()
        self._go = threading.Event()  # set: the job is set (or there is none: the thread ends)
        self._sent = False  # _go was set
        self._done = threading.Event()  # set: the job is over
        self.pid = os.getpid()
        threading.Thread(target=self._run, name="ongrid-spawn", daemon=True).start()

    @property
    def covered(self) -> list[str]:
        """System secrets covered by empty mounts in this thread's namespace."""
        return self.covers.covered

    def _run(self) -> None:
        try:
            if self.group is not None:
                self.group.join_thread()
            if self.private_tmp:
                self.under = mounts.enter_private_tmp(_TMP_SIZE_MB, slave=not self._templated)
                self.ns = os.open("/proc/thread-self/ns/mnt", os.O_RDONLY | os.O_CLOEXEC)
                if not self._templated:
                    self.covers.refresh()
        except BaseException as exc:
            self.setup_error = exc
        if self.root and not self.bounded and self.setup_error is None:
            try:
                caps.drop_bounding(True)
                self.bounded = True
            except OSError:
                pass  # the call's drop_all tries again, and fails the call with the errno
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

    def refresh_covers(self) -> None:
        """Check the covers again, right before the call confines itself (:class:`Covers`).

        What changed is covered here; when this thread's covers came from the refiller's,
        those are stale too, and the refiller checks them before it makes the next thread.
        """
        if self.covers.refresh() and self._templated:
            _pool.template_stale()

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
        self._sent = True
        self._go.set()
        self._done.wait()
        # The child runs now: making the next thread and releasing the last call's no
        # longer delay this one's start.
        _pool.wake()
        _closer.wake()
        if self._error is not None:
            raise self._error
        return self._result

    def discard(self) -> None:
        """Let the thread end without a job and give everything back."""
        self.release()

    def release(self) -> None:
        """After the call (or instead of one): the thread ends, the cgroup goes back to the
        pool and the namespace is torn down, off the hot path."""
        if not self._sent:
            self._sent = True
            self._go.set()  # never ran a job: let the parked thread end
            _pool.wake()
        group, self.group = self.group, None
        fds = [fd for fd in (self.under, self.ns) if fd >= 0]
        self.under = self.ns = -1
        if group is None and not fds:
            return
        _closer.put(group, fds)


class _Closer:
    """One background thread that empties cgroups and drops namespaces after calls.

    It waits for the next call's spawn (:meth:`wake`), up to ``LINGER`` seconds, before
    it does: tearing a namespace down and emptying a group right after a call would
    compete with the next call while it confines itself; once that call's child runs,
    the host's threads are idle until it exits.
    """

    LINGER = 0.02

    def __init__(self) -> None:
        self._queue: collections.deque[tuple[CallGroup | None, list[int]]] = collections.deque()
        self._wake = threading.Condition()
        self._thread: threading.Thread | None = None
        self._woken = False

    def put(self, group: CallGroup | None, fds: list[int]) -> None:
        with self._wake:
            self._queue.append((group, fds))
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._loop, name="ongrid-release", daemon=True)
                self._thread.start()
            if len(self._queue) == 1:
                self._wake.notify()

    def wake(self) -> None:
        """A call's child has started: release what waits now."""
        with self._wake:
            if self._queue:
                self._woken = True
                self._wake.notify()

    def _loop(self) -> None:
        while True:
            with self._wake:
                while not self._queue:
                    if not self._wake.wait(timeout=30):
                        self._thread = None
                        return
                self._wake.wait_for(lambda: self._woken, self.LINGER)
                self._woken = False
                batch = list(self._queue)
                self._queue.clear()
            for group, fds in batch:
                for fd in fds:
                    with contextlib.suppress(OSError):
                        os.close(fd)
                if group is not None:
                    with contextlib.suppress(OSError):
                        cgroups.release(group)


_closer = _Closer()


class _Pool:
    """The ready threads of this process, refilled by one background thread.

    The refiller lives on between calls (it ends after ``IDLE`` seconds without one) and
    a call only wakes it, once its own thread has spawned (:meth:`wake`): starting a
    thread waits until the new thread runs, which under the GIL cost a call ~300 us when
    every call started its own refiller, and a thread made while a call confines itself
    competes with it for the CPU and the kernel's locks.
    """

    IDLE = 30.0

    def __init__(self) -> None:
        self._ready: collections.deque[Warm] = collections.deque()
        self._cond = threading.Condition(threading.Lock())
        self._kind: tuple[bool, bool, bool] | None = None
        self._thread: threading.Thread | None = None
        self._stalled = False
        """The last thread could not be made ready: no more until the next call asks."""
        self._stale = False
        """A call found a secret changed since its thread copied the refiller's covers."""
        os.register_at_fork(after_in_child=self._forked)

    def _forked(self) -> None:
        # The parked threads and the refiller did not survive the fork: forget them
        # (their cgroups stay with the parent, which releases them).
        self._ready = collections.deque()
        self._cond = threading.Condition(threading.Lock())
        self._thread = None
        self._stalled = False
        self._stale = False

    def take(self, with_cgroup: bool, private_tmp: bool, root: bool) -> Warm:
        kind = (with_cgroup, private_tmp, root)
        with self._cond:
            if self._kind != kind:
                stale, self._ready = list(self._ready), collections.deque()
                self._kind = kind
            else:
                stale = []
            warm = self._ready.popleft() if self._ready else None
            self._stalled = False
            start = self._thread is None
            if start:
                self._thread = threading.Thread(target=self._refill, name="ongrid-warm", daemon=True)
            # else the refiller is woken once this thread has spawned (wake()), not now:
            # making the next thread while this call confines itself would slow it down.
        for old in stale:
            old.discard()
        if start:
            assert self._thread is not None
            self._thread.start()
        return warm if warm is not None else Warm(with_cgroup, private_tmp, root)

    def wake(self) -> None:
        """A thread was used (or dropped): make the next one now."""
        with self._cond:
            self._stalled = False
            self._cond.notify()

    def template_stale(self) -> None:
        """The refiller's covers no longer match the machine: check them before the next thread."""
        with self._cond:
            self._stale = True

    def _wanted(self) -> tuple[bool, bool, bool] | None:
        """The kind of thread to make next, or None while the pool is full (lock held)."""
        if self._kind is None or self._stalled or len(self._ready) >= WARM_THREADS:
            return None
        return self._kind

    def _refill(self) -> None:
        # The threads this one starts inherit its credentials and its mount namespace.
        # With its bounding set emptied once here, none of them has ~40 prctl calls to
        # make (each makes the kernel copy and commit the thread's credentials); with the
        # system secrets covered once in a namespace of its own, each only copies it and
        # mounts its /tmp. This thread never executes anything: it gives up nothing it needs.
        bounded = False
        template: Covers | None = None
        while True:
            with self._cond:
                kind = self._cond.wait_for(self._wanted, self.IDLE)
                if kind is None:  # idle: the next call starts a new refiller
                    self._thread = None
                    return
                stale, self._stale = self._stale, False
            _, private_tmp, root = kind
            if root and not bounded:
                try:
                    caps.drop_bounding(True)
                    bounded = True
                except OSError:
                    pass  # each thread then drops its own (and fails its call with the errno)
            if private_tmp:
                try:
                    if template is None:
                        mounts.enter_own_namespace()
                        template, stale = Covers(), True
                    if stale:
                        # Made, or a call found a secret replaced or added since (each call
                        # checks its own covers: this spares the next ones covering it again).
                        template.refresh()
                except OSError:
                    # Threads made here would lack covers: stop, and let calls make their
                    # own (each says why it cannot, if it cannot either).
                    with self._cond:
                        self._stalled = self._stale = True
                    continue
            warm = Warm(*kind, bounded=bounded and root, template=template)
            warm._ready.wait()
            with self._cond:
                if warm.setup_error is not None:
                    self._stalled = True  # the call makes its own and says why; retry after it
                elif self._kind == kind:
                    self._ready.append(warm)
                    continue
            warm.discard()


_pool = _Pool()


def take(with_cgroup: bool, private_tmp: bool, root: bool = False) -> Warm:
    """A parked thread for one call (made on the spot if none is ready).

    ``root``: the host may drop capabilities, and the thread empties its bounding set
    while it waits (:func:`.caps.drop_bounding`).
    """
    return _pool.take(with_cgroup, private_tmp, root)
