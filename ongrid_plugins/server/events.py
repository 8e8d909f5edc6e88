"""``GET /v1/events``: the catalog's changes as server-sent events (extra ``[server]``).

Each change a reload makes (``added``, ``changed``, ``removed``, ``stale``) is
one event, named by its kind, whose data is the
:class:`~ongrid_plugins.catalog.CatalogChange` as JSON (name, digest, previous
digest, path, tools, message). A client sees only skills with a tool its
token's persona may call (prompt skills are seen by everyone), and a removal
only by a client that could list the skill, so a listing it cannot make is
not leaked through events. The stream opens with a
``ready`` event and sends a comment every :data:`KEEPALIVE` seconds; it ends
when the client goes away or the server shuts down
(:func:`~ongrid_plugins.server.rest.close_event_streams`). Changes come from any reload: ``serve --watch``
makes every file change one.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

from ..catalog import CatalogChange
from ..host.facade import SkillHost
from ..models import Verdict
from .tokens import Principal

__all__ = ["KEEPALIVE", "MAX_QUEUED", "event_stream"]

KEEPALIVE = 15.0
MAX_QUEUED = 1000
"""Batches queued for a client that does not read; then it gets an ``overflow`` event and the stream ends."""


async def event_stream(host: SkillHost, who: Principal, closing: asyncio.Event) -> AsyncIterator[str]:
    """The SSE text of ``who``'s catalog events, until the client disconnects or ``closing`` is set.

    ``closing`` is the server shutting down: an endless response would keep
    uvicorn's graceful shutdown waiting for ever.
    """
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[list[CatalogChange] | None] = asyncio.Queue(MAX_QUEUED)

    def listener(changes: list[CatalogChange]) -> None:  # called in the reloading thread
        loop.call_soon_threadsafe(_offer, queue, changes)

    unsubscribe = host.subscribe(listener)
    seen = await asyncio.to_thread(_Seen, host, who)
    try:
        yield _text("ready", {"persona": who.persona})
        while not closing.is_set():
            batch = await _next(queue, closing)
            if batch == ():
                yield ": keep-alive\n\n"
                continue
            if batch == []:
                return
            if batch is None:
                yield _text("overflow", {"error": "too many changes were not read; reconnect and list again"})
                return
            for change in batch:
                if seen.visible(change):
                    yield _text(change.kind, change.to_dict())
    finally:
        unsubscribe()


async def _next(
    queue: asyncio.Queue[list[CatalogChange] | None], closing: asyncio.Event
) -> list[CatalogChange] | tuple[()] | None:
    """The next batch; ``()`` after :data:`KEEPALIVE` seconds without one, ``[]`` once closing."""
    get = asyncio.ensure_future(queue.get())
    closed = asyncio.ensure_future(closing.wait())
    try:
        done, _pending = await asyncio.wait({get, closed}, timeout=KEEPALIVE, return_when="FIRST_COMPLETED")
    finally:
        closed.cancel()
        if not get.done():
            get.cancel()
    if get in done:
        return get.result()
    return [] if closed in done else ()


def _offer(queue: asyncio.Queue[list[CatalogChange] | None], changes: list[CatalogChange]) -> None:
    if queue.qsize() >= MAX_QUEUED - 1:
        if not queue.full():
            queue.put_nowait(None)
        return
    queue.put_nowait(changes)


class _Seen:
    """The tool names a stream's client may know of: what it may list now, and what it was told of."""

    def __init__(self, host: SkillHost, who: Principal) -> None:
        self.host = host
        self.persona = host.persona(who.persona)
        self.names = {tool.name for tool in host.tools(self.persona, include_unavailable=True)}

    def visible(self, change: CatalogChange) -> bool:
        if not change.tools:
            return True
        if change.kind == "removed":
            seen = bool(self.names.intersection(change.tools))
            self.names.difference_update(change.tools)
            return seen
        tools = self.host.registry.snapshot.tools
        allowed = {
            name
            for name in change.tools
            if name in tools and self.host.decide(tools[name], self.persona).verdict is not Verdict.DENY
        }
        self.names.difference_update(change.tools)
        self.names |= allowed
        return bool(allowed)


def _text(event: str, data: Any) -> str:
    return f"event: {event}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n"
