"""A call's first steps (checks, gate, audit start) in a worker thread, for an ``acall``.

The thread cannot be stopped: a call cancelled while its steps run there is closed as
``cancelled`` once they are done — by the coroutine when the thread finished first, by
the thread when it finishes after. So a call the audit log saw start never stays in
flight, even when the cancellation is delivered again at every await (anyio's cancel
scopes, an MCP client that closed its stream) or the loop is shutting down.

It imports only the standard library; the pipeline passes what it needs
(:mod:`ongrid_plugins.host.pipeline` is its only user).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any, Generic, TypeVar

__all__ = ["begin_in_thread"]

A = TypeVar("A")


class _Aside(Generic[A]):
    """``start()`` run in a thread, and who closes its attempt if the caller left."""

    def __init__(self, start: Callable[[], A], close: Callable[[A, BaseException], None]) -> None:
        self.start, self.close = start, close
        self.lock = threading.Lock()
        self.attempt: A | None = None
        self.left: BaseException | None = None

    def run(self) -> A:
        attempt = self.start()  # refused: it recorded the refusal itself
        with self.lock:
            left, self.attempt = self.left, attempt
        if left is not None:
            self.close(attempt, left)
        return attempt

    def leave(self, why: BaseException) -> None:
        with self.lock:
            self.left, attempt = why, self.attempt
        if attempt is not None:
            self.close(attempt, why)


async def begin_in_thread(start: Callable[[], A], close: Callable[[A, BaseException], Any]) -> A:
    """``start()`` in a worker thread; cancelled meanwhile, ``close(attempt, cancellation)``
    records the attempt exactly once, whenever the thread is done."""
    aside = _Aside(start, close)
    future = asyncio.ensure_future(asyncio.to_thread(aside.run))
    try:
        return await asyncio.shield(future)
    except asyncio.CancelledError as cancelled:
        aside.leave(cancelled)
        raise
