"""The two drivers of a run (:class:`Drivable`): ``select.poll`` in the calling thread, or an asyncio loop.

A driver waits for what the run watches (its descriptors and its next timer) and
calls the run's ``on_ready`` / ``on_time``; the run itself never blocks. While a call
is in flight on a loop the next ones spawn in a few threads (:func:`_spawner`), not on
the loop.
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
from typing import Protocol

__all__ = ["Drivable", "LoopDriver", "PollDriver"]


class Drivable(Protocol):
    """What a driver needs of a run (``_process._Run`` is the one there is): the run never blocks."""

    before_close: Callable[[int], None]

    def launch(self) -> str | None: ...
    def watches(self) -> list[tuple[int, int]]: ...
    def next_wakeup(self) -> float: ...
    def on_ready(self, fd: int, events: int = 0) -> None: ...
    def on_time(self, now: float) -> None: ...


_MAX_POLL_MS = 86_400_000  # poll() takes a C int: wake daily under absurd timeouts
_POLLIN = select.POLLIN
_POLLOUT = select.POLLOUT


class PollDriver:
    """Feeds a :class:`Drivable` from ``select.poll`` in the calling thread."""

    def __init__(self, run: Drivable) -> None:
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
    """Feeds a :class:`Drivable` from an asyncio loop: a reader or writer per descriptor, and one timer."""

    def __init__(self, run: Drivable, loop: asyncio.AbstractEventLoop) -> None:
        self._run = run
        self._loop = loop
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
                add = self._loop.add_reader if events == _POLLIN else self._loop.add_writer
                add(fd, self._on_fd, fd)
                self._watched[fd] = events
        self._settle()
        await self._waiter

    def detach(self) -> None:
        for fd in list(self._watched):
            self._forget(fd)
        self._set_timer(math.inf)

    def _on_fd(self, fd: int) -> None:
        """``fd`` is ready: let the run handle it, then apply what became due."""
        try:
            self._run.on_ready(fd)
        except Exception as exc:  # a callback's exception would only be logged by the loop
            self._fail(exc)
            return
        self.step()

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
            (self._loop.remove_reader if events == _POLLIN else self._loop.remove_writer)(fd)


# The first call in flight on a loop spawns on the loop itself (no thread hop, the least
# latency); while one is in flight, the next spawn runs in a thread, so the loop keeps
# serving the running children while posix_spawn waits for its child's exec (vfork) or a
# confined call's thread gets ready: concurrent calls overlap their spawns as threads do.
# Without it, 8 concurrent calls ran at less than half the rate.
in_flight: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, int] = weakref.WeakKeyDictionary()
"""Calls in flight per loop (:func:`._process.arun_process` counts them)."""
_spawners: tuple[int, concurrent.futures.ThreadPoolExecutor] | None = None


async def _launch_aside(run: Drivable) -> str | None:
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
