"""The thread a confined call is spawned from.

Each confined call gets a thread that exists only for it (restrictions on a thread
are irreversible, inherited by what it starts, and leave the host's other threads
alone). Before the call's job runs, the thread joins the call's cgroup (it moves
itself: :meth:`.cgroups.CallGroup.join_thread`), enters a mount namespace of its own
with a fresh tmpfs on ``/tmp``, covers the system secrets with empty mounts there and,
on a root host, empties its bounding set. Then it runs its one job: the call's
Landlock, seccomp and capabilities, then the spawn (:meth:`.plan.Plan.apply`).

A cover can be undone by the host (a file replaced by ``rename`` loses the mounts on
it in every namespace), so the covers are checked again right before the thread
confines itself (:meth:`Covers.refresh`).

When the call ends its namespace and cgroup are released by a background thread: the
last reference to a mount namespace tears its mounts down and waits for RCU, and that
should not delay the call's result.

(Threads made ready ahead of the calls, parked in their cgroup and namespace, saved
no measurable time per call: ``python benchmarks/bench_call.py``.)
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
    """One call's spawning thread: in a cgroup and a private /tmp, waiting for its one job."""

    def __init__(self, with_cgroup: bool, private_tmp: bool, root: bool = False) -> None:
        """Start the thread; ``root``: it empties its bounding set (a root host)."""
        self.root = root
        self.bounded = False
        """:func:`.caps.drop_bounding` ran on the thread: the call's ``drop_all`` skips it."""
        self.group: CallGroup | None = cgroups.acquire() if with_cgroup else None
        self.private_tmp = private_tmp
        self.under = -1  # the covered /tmp (see mounts.bind_back)
        self.ns = -1  # holds the mount namespace until release()
        self.covers = Covers()
        """System secrets covered by empty mounts in this thread's namespace."""
        self.setup_error: BaseException | None = None
        self._job: Callable[[Warm], Any] | None = None
        self._result: Any = None
        self._error: BaseException | None = None
        self._ready = threading.Event()
        # Plain locks made held, each released once by the one thread that signals and
        # acquired by the one that waits.
        self._go = _held()  # released: the job is set (or there is none: the thread ends)
        self._sent = False  # _go was released
        self._done = _held()  # released: the job is over
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
                self.under = mounts.enter_private_tmp(_TMP_SIZE_MB)
                self.ns = os.open("/proc/thread-self/ns/mnt", os.O_RDONLY | os.O_CLOEXEC)
                self.covers.refresh()
        except BaseException as exc:
            self.setup_error = exc
        if self.root and self.setup_error is None:
            try:
                caps.drop_bounding(True)
                self.bounded = True
            except OSError:
                pass  # the call's drop_all tries again, and fails the call with the errno
        self._ready.set()
        self._go.acquire()
        job = self._job
        if job is None:
            return
        try:
            self._result = job(self)
        except BaseException as exc:
            self._error = exc
        finally:
            self._done.release()

    def refresh_covers(self) -> None:
        """Check the covers again, right before the call confines itself (:class:`Covers`)."""
        self.covers.refresh()

    def wait_ready(self) -> None:
        """Block until the thread has joined its cgroup and namespace (or failed to)."""
        self._ready.wait()
        if self.setup_error is not None:
            error = self.setup_error
            self.discard()
            raise error

    def run(self, job: Callable[[Warm], Any]) -> Any:
        """Run ``job(self)`` in the thread (which then ends) and return its value."""
        self._ready.wait()
        if self.setup_error is not None:
            self.discard()
            raise self.setup_error
        self._job = job
        self._sent = True
        self._go.release()
        self._done.acquire()
        _closer.wake()  # the child runs now: releasing the last call's no longer delays it
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
            self._go.release()  # never ran a job: let the thread end
        group, self.group = self.group, None
        fds = [fd for fd in (self.under, self.ns) if fd >= 0]
        self.under = self.ns = -1
        if group is None and not fds:
            return
        _closer.put(group, fds)


def _held() -> threading.Lock:
    lock = threading.Lock()
    lock.acquire()
    return lock


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


def take(with_cgroup: bool, private_tmp: bool, root: bool = False) -> Warm:
    """The spawning thread for one call.

    ``root``: the host may drop capabilities, and the thread empties its bounding set
    before its job (:func:`.caps.drop_bounding`).
    """
    return Warm(with_cgroup, private_tmp, root)
