"""The two drivers of a :class:`~._process._Run`: ``select.poll`` in the calling thread, or an asyncio loop.

A driver waits for what the run watches (its descriptors and its next timer) and
calls the run's ``on_ready`` / ``on_time``; the run itself never blocks. A loop's calls
share one epoll (:class:`_Mux`), and while one is in flight the next ones spawn in a
few threads (:func:`_spawner`), not on the loop.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import math
import os
import select
import time
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._process import _Run

__all__ = ["LoopDriver", "PollDriver"]

_MAX_POLL_MS = 86_400_000  # poll() takes a C int: wake daily under absurd timeouts
_POLLIN = select.POLLIN
_POLLOUT = select.POLLOUT


class PollDriver:
    """Feeds a :class:`_Run` from ``select.poll`` in the calling thread."""

    def __init__(self, run: _Run) -> None:
        self._run = run
        self._poller = select.poll()
        self._registered: set[int] = set()
        run.before_close = self._forget

    def wait(self, until: Callable[[], bool]) -> None:
        """Handle events, then due timers, until ``until()``."""
        run, poller = self._run, self._poller
        # No descriptor is ever added later: register once, unregister on close.
        for fd, events in run.watches():
            if fd not in self._registered:
                poller.register(fd, events)
                self._registered.add(fd)
        while not until():
            wakeup = run.next_wakeup()
            timeout = None
            if wakeup != math.inf:
                # Round up: a 0 ms timeout just before the deadline would spin.
                timeout = math.ceil((wakeup - time.monotonic()) * 1000)
                timeout = min(max(timeout, 0), _MAX_POLL_MS)
            for fd, events in poller.poll(timeout):
                run.on_ready(fd, events)
            run.on_time(time.monotonic())

    def _forget(self, fd: int) -> None:
        if fd in self._registered:
            self._registered.discard(fd)
            self._poller.unregister(fd)


class LoopDriver:
    """Feeds a :class:`_Run` from an asyncio loop: its descriptors through the loop's
    :class:`_Mux` (``mux``: one the caller attached, and detaches), and one timer."""

    def __init__(self, run: _Run, loop: asyncio.AbstractEventLoop, mux: _Mux) -> None:
        self._run = run
        self._loop = loop
        self._mux = mux
        self._watched: dict[int, int] = {}  # fd -> POLLIN or POLLOUT
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = math.inf
        self._waiter: asyncio.Future[None] | None = None
        self._until: Callable[[], bool] = lambda: True
        run.before_close = self._forget

    async def wait(self, until: Callable[[], bool]) -> None:
        self._until = until
        self._waiter = self._loop.create_future()
        # No descriptor is ever added later: register once, unregister on close.
        for fd, events in self._run.watches():
            if fd not in self._watched:
                self._watched[fd] = events
                self._mux.watch(fd, events, self)
        self._settle()
        await self._waiter

    def detach(self) -> None:
        for fd in list(self._watched):
            self._forget(fd)
        self._set_timer(math.inf)

    def ready(self, fd: int, events: int) -> bool:
        """``fd`` is ready (called by the mux); False when the run failed (``wait`` raises)."""
        try:
            self._run.on_ready(fd, events)
        except Exception as exc:  # a callback's exception would only be logged by the loop
            self._fail(exc)
            return False
        return True

    def _on_timer(self) -> None:
        self._timer, self._timer_at = None, math.inf
        self.step()

    def step(self) -> None:
        """After events (or the timer): apply what became due, then settle."""
        try:
            self._run.on_time(time.monotonic())
            self._settle()
        except Exception as exc:
            self._fail(exc)

    def _fail(self, exc: Exception) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_exception(exc)

    def _settle(self) -> None:
        """Wake ``wait`` when the run is where it waits for, else re-arm the timer."""
        if self._until():
            if self._waiter is not None and not self._waiter.done():
                self._waiter.set_result(None)
            return
        self._set_timer(self._run.next_wakeup())

    def _set_timer(self, when: float) -> None:
        if when == self._timer_at:
            return
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._timer_at = when
        if when != math.inf:
            self._timer = self._loop.call_later(max(0.0, when - time.monotonic()), self._on_timer)

    def _forget(self, fd: int) -> None:
        """Unregister ``fd`` before it is closed, so a reused number is never watched."""
        events = self._watched.pop(fd, None)
        if events is not None:
            self._mux.forget(fd, events)


class _Mux:
    """The descriptors of every call running on one event loop, in one ``epoll``.

    Only the epoll's own descriptor is registered with the loop, once for as long as
    calls run on it: a call costs an ``epoll.register`` per pipe instead of the loop's
    ``add_reader`` and its bookkeeping. Back-to-back calls keep it. It is closed when
    the loop finds no call running :data:`IDLE_CLOSE` seconds after its calls first all
    ended, or with the loop (a closed loop drops its reader, and a freed one its mux).
    One timer per idle window, not a loop callback per call: a call alone on its loop
    takes two loop steps, not three. Without ``epoll`` (not Linux), each descriptor is
    registered with the loop itself.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.users = 0
        self.owners: dict[int, LoopDriver] = {}
        self._idle_check = False  # a _close_if_idle is scheduled
        self.epoll: Any = None
        if _EPOLL is not None:
            self.epoll = _EPOLL()
            loop.add_reader(self.epoll.fileno(), self._on_events)
        self._loop = weakref.ref(loop)

    @classmethod
    def attach(cls, loop: asyncio.AbstractEventLoop) -> _Mux:
        mux = _muxes.get(loop)
        if mux is None or (mux.epoll is None) != (_EPOLL is None):
            mux = _muxes[loop] = cls(loop)
        mux.users += 1
        return mux

    def detach(self, loop: asyncio.AbstractEventLoop) -> None:
        self.users -= 1
        if self.users:
            return
        if loop.is_closed():  # a call finalised after its loop: close now
            self._close(loop, registered=False)
        elif not self._idle_check:
            loop.call_later(IDLE_CLOSE, self._close_if_idle)
            self._idle_check = True

    def _close_if_idle(self) -> None:
        self._idle_check = False
        loop = self._loop()
        if not self.users and loop is not None:
            self._close(loop, registered=True)

    def _close(self, loop: asyncio.AbstractEventLoop, registered: bool) -> None:
        """Once: off the loop, and the epoll closed (a later close would find its number reused)."""
        if _muxes.get(loop) is self:
            del _muxes[loop]
        if self.epoll is not None and not self.epoll.closed:
            if registered:
                loop.remove_reader(self.epoll.fileno())
            self.epoll.close()

    def watch(self, fd: int, events: int, driver: LoopDriver) -> None:
        """Hand ``fd``'s readiness to ``driver``; when this raises, ``fd`` is not watched."""
        if self.epoll is not None:
            self.epoll.register(fd, events)
        else:
            loop = self._loop()
            assert loop is not None
            add = loop.add_reader if events == _POLLIN else loop.add_writer
            add(fd, self._on_fd, fd)
        self.owners[fd] = driver

    def forget(self, fd: int, events: int) -> None:
        if self.owners.pop(fd, None) is None:
            return
        if self.epoll is not None:
            self.epoll.unregister(fd)
            return
        loop = self._loop()
        if loop is not None:
            (loop.remove_reader if events == _POLLIN else loop.remove_writer)(fd)

    def _on_events(self) -> None:
        """The epoll is readable: hand each ready descriptor to its call, then step each call once."""
        touched: list[LoopDriver] = []
        owners = self.owners
        for fd, events in self.epoll.poll(0):
            driver = owners.get(fd)
            if driver is None:
                continue
            if driver.ready(fd, events) and driver not in touched:
                touched.append(driver)
        for driver in touched:
            driver.step()

    def _on_fd(self, fd: int) -> None:
        driver = self.owners.get(fd)
        if driver is not None and driver.ready(fd, 0):
            driver.step()


_muxes: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Mux] = weakref.WeakKeyDictionary()
#: Seconds a loop's mux waits, once its calls all ended, before it closes when none runs.
IDLE_CLOSE = 1.0
_EPOLL: Any = getattr(select, "epoll", None)
"""``select.epoll`` (Linux); tests set it to None to exercise one loop registration per descriptor."""


# Calls in flight on a loop are its mux's users. The first spawns on the loop itself (no
# thread hop, the least latency); while one is in flight, the next spawn runs in a thread,
# so the loop keeps serving the running children while posix_spawn waits for its child's
# exec (vfork) or a confined call's thread gets ready: concurrent calls overlap their
# spawns as threads do.
_spawners: tuple[int, concurrent.futures.ThreadPoolExecutor] | None = None


async def _launch_aside(run: _Run) -> str | None:
    """``run.launch()`` in a spawner thread; a cancellation still waits for it to end, so
    a child that was started is known to ``run`` and is killed and reaped by the caller."""
    future = _spawner().submit(run.launch)
    try:
        return await asyncio.wrap_future(future)
    except asyncio.CancelledError:
        # Cancelled before the thread took it: nothing ran. Else wait (at most one spawn's
        # time) so the caller's clean-up sees the child and ends it.
        with contextlib.suppress(concurrent.futures.CancelledError):
            future.result()
        raise


def _spawner() -> concurrent.futures.ThreadPoolExecutor:
    """The threads concurrent calls on a loop spawn in (made anew in a forked child)."""
    global _spawners
    if _spawners is None or _spawners[0] != os.getpid():  # none yet, or a forked child's copy
        _spawners = (os.getpid(), concurrent.futures.ThreadPoolExecutor(4, thread_name_prefix="ongrid-spawn"))
    return _spawners[1]
