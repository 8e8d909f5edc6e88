"""``GET /v1/events``: the catalog's changes as server-sent events (extra ``[server]``).

Each change a reload makes (``added``, ``changed``, ``removed``, ``stale``) is
one event, named by its kind, whose data is the
:class:`~ongrid_plugins.catalog.CatalogChange` as JSON (name, digest, previous
digest, path, tools, message). A client sees only skills with a tool its
token's persona may call (prompt skills are seen by everyone), and a removal
only by a client that could list the skill, so a listing it cannot make is
not leaked through events. The stream opens with a
``ready`` event and sends a comment every :data:`KEEPALIVE` seconds; it ends
when the client goes away. Changes come from any reload: ``serve --watch``
makes every file change one.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

from ..catalog import CatalogChange
from ..host import SkillHost
from ..models import Verdict
from .tokens import Principal

__all__ = ["KEEPALIVE", "MAX_QUEUED", "event_stream"]

KEEPALIVE = 15.0
MAX_QUEUED = 1000
"""Batches queued for a client that does not read; then it gets an ``overflow`` event and the stream ends."""


async def event_stream(host: SkillHost, who: Principal) -> AsyncIterator[str]:
    """The SSE text of ``who``'s catalog events, until the client disconnects."""
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[list[CatalogChange] | None] = asyncio.Queue(MAX_QUEUED)

    def listener(changes: list[CatalogChange]) -> None:  # called in the reloading thread
        loop.call_soon_threadsafe(_offer, queue, changes)

    unsubscribe = host.subscribe(listener)
    seen = await asyncio.to_thread(_Seen, host, who)
    try:
        yield _text("ready", {"persona": who.persona})
        while True:
            try:
                batch = await asyncio.wait_for(queue.get(), KEEPALIVE)
            except TimeoutError:
                yield ": keep-alive\n\n"
                continue
            if batch is None:
                yield _text("overflow", {"error": "too many changes were not read; reconnect and list again"})
                return
            for change in batch:
                if seen.visible(change):
                    yield _text(change.kind, change.to_dict())
    finally:
        unsubscribe()


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
