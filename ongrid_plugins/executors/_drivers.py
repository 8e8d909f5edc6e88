"""The two drivers of a :class:`~._process._Run`: ``select.poll`` in the calling thread, or an asyncio loop.

A driver waits for what the run watches (its descriptors and its next timer) and
calls the run's ``on_ready`` / ``on_time``; the run itself never blocks.
"""

from __future__ import annotations

import asyncio
import math
import select
import time
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
    """Feeds a :class:`_Run` from an asyncio loop: one reader and one timer.

    The run's descriptors go into an ``epoll`` object of the call's own, and only that
    one descriptor is registered with the loop: one ``add_reader`` a call instead of one
    per pipe (the loop's per-descriptor bookkeeping is most of a call's asyncio cost).
    Without ``epoll`` (not Linux), each descriptor is registered with the loop itself.
    """

    def __init__(self, run: _Run, loop: asyncio.AbstractEventLoop) -> None:
        self._run = run
        self._loop = loop
        self._epoll: Any = None  # select.epoll, made by the first wait()
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
                self._watch(fd, events)
        self._settle()
        await self._waiter

    def detach(self) -> None:
        for fd in list(self._watched):
            self._forget(fd)
        if self._epoll is not None:
            self._loop.remove_reader(self._epoll.fileno())
            self._epoll.close()
            self._epoll = None
        self._set_timer(math.inf)

    def _watch(self, fd: int, events: int) -> None:
        self._watched[fd] = events
        if _EPOLL is None:
            add = self._loop.add_reader if events == _POLLIN else self._loop.add_writer
            add(fd, self._on_fd, fd)
            return
        if self._epoll is None:
            self._epoll = _EPOLL()
            self._loop.add_reader(self._epoll.fileno(), self._on_events)
        self._epoll.register(fd, events)

    def _on_events(self) -> None:
        """The call's epoll is readable: hand every ready descriptor to the run."""
        try:
            for fd, events in self._epoll.poll(0):
                self._run.on_ready(fd, events)
        except Exception as exc:  # a callback's exception would only be logged by the loop
            self._fail(exc)
            return
        self._step()

    def _on_fd(self, fd: int) -> None:
        try:
            self._run.on_ready(fd)
        except Exception as exc:
            self._fail(exc)
            return
        self._step()

    def _on_timer(self) -> None:
        self._timer, self._timer_at = None, math.inf
        self._step()

    def _step(self) -> None:
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
        if events is None:
            return
        if _EPOLL is None:
            (self._loop.remove_reader if events == _POLLIN else self._loop.remove_writer)(fd)
        elif self._epoll is not None:
            self._epoll.unregister(fd)


_EPOLL: Any = getattr(select, "epoll", None)
"""``select.epoll`` (Linux); tests set it to None to exercise one loop registration per descriptor."""
