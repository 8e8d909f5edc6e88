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
from typing import TYPE_CHECKING

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
            for fd, _ in poller.poll(timeout):
                run.on_ready(fd)
            run.on_time(time.monotonic())

    def _forget(self, fd: int) -> None:
        if fd in self._registered:
            self._registered.discard(fd)
            self._poller.unregister(fd)


class LoopDriver:
    """Feeds a :class:`_Run` from an asyncio loop: readers, writers and one timer."""

    def __init__(self, run: _Run, loop: asyncio.AbstractEventLoop) -> None:
        self._run = run
        self._loop = loop
        self._readers: set[int] = set()
        self._writers: set[int] = set()
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = math.inf
        self._waiter: asyncio.Future[None] | None = None
        self._until: Callable[[], bool] = lambda: True
        run.before_close = self._forget

    async def wait(self, until: Callable[[], bool]) -> None:
        self._until = until
        self._waiter = self._loop.create_future()
        self._refresh()
        await self._waiter

    def detach(self) -> None:
        for fd in list(self._readers | self._writers):
            self._forget(fd)
        self._set_timer(math.inf)

    def _on_fd(self, fd: int) -> None:
        self._step(lambda: self._run.on_ready(fd))

    def _on_timer(self) -> None:
        self._timer, self._timer_at = None, math.inf
        self._step(lambda: None)

    def _step(self, action: Callable[[], None]) -> None:
        try:
            action()
            self._run.on_time(time.monotonic())
            self._refresh()
        except Exception as exc:  # a callback's exception would only be logged by the loop
            if self._waiter is not None and not self._waiter.done():
                self._waiter.set_exception(exc)

    def _refresh(self) -> None:
        """Register what the run waits on, re-arm the timer, wake ``wait`` when done."""
        for fd, events in self._run.watches():
            if events == _POLLIN and fd not in self._readers:
                self._loop.add_reader(fd, self._on_fd, fd)
                self._readers.add(fd)
            elif events == _POLLOUT and fd not in self._writers:
                self._loop.add_writer(fd, self._on_fd, fd)
                self._writers.add(fd)
        self._set_timer(self._run.next_wakeup())
        if self._waiter is not None and not self._waiter.done() and self._until():
            self._waiter.set_result(None)

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
        if fd in self._readers:
            self._readers.discard(fd)
            self._loop.remove_reader(fd)
        if fd in self._writers:
            self._writers.discard(fd)
            self._loop.remove_writer(fd)
