"""``/events``: server-sent events telling the open approvals and audit pages to refresh.

It looks at the state databases' files every :data:`POLL_SECONDS` (no database read
when nothing changed), also wakes when an open ticket expires or a held call makes
progress, and ends when the session does (sign-out, idle): a stream never outlives
its session. Only a dual-sign-required persona hears about the audit log.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator

from ...errors import ApprovalError
from .. import missing_extra
from .digests import fingerprint
from .sessions import COOKIE, Session
from .state import Console

try:
    from starlette.concurrency import run_in_threadpool
    from starlette.requests import Request
    from starlette.responses import Response, StreamingResponse
except ImportError as exc:  # pragma: no cover - exercised without the extra
    raise missing_extra("server", "starlette") from exc

__all__ = ["KEEPALIVE_SECONDS", "POLL_SECONDS", "events"]

#: How often ``/events`` looks at the state databases for changes, in seconds.
POLL_SECONDS = 0.25
KEEPALIVE_SECONDS = 15.0


async def events(console: Console, request: Request, session: Session, form: dict[str, str]) -> Response:
    """``GET /events?topics=approvals,audit``: a stream of ``approvals`` / ``audit`` change events."""
    topics = [
        t for t in request.query_params.get("topics", "approvals").split(",") if t in ("approvals", "audit")
    ]
    if "audit" in topics and not console.signs(session.principal):
        topics.remove("audit")
    watched = {
        "approvals": [console.host.approvals.path, console.host.approvals.path + "-wal"],
        "audit": [console.host.audit.path, console.host.audit.path + "-wal"],
    }
    cookie = request.cookies.get(COOKIE)
    return StreamingResponse(_watch(console, topics, watched, cookie), media_type="text/event-stream")


async def _watch(
    console: Console, topics: list[str], watched: dict[str, list[str]], cookie: str | None
) -> AsyncIterator[str]:
    """``approvals`` / ``audit`` events whenever their database changes or a ticket expires.

    Ends when the session does (sign-out, idle): a stream never outlives its session.
    """
    seen = {topic: fingerprint(watched[topic]) for topic in topics}
    expiry = await run_in_threadpool(_next_expiry, console) if "approvals" in topics else None
    progress = dict(console.progress)
    yield "retry: 2000\n\n"
    quiet = 0.0
    while console.sessions.alive(cookie):
        await asyncio.sleep(POLL_SECONDS)
        quiet += POLL_SECONDS
        for topic in topics:
            now = fingerprint(watched[topic])
            changed = now != seen[topic]
            if topic == "approvals":
                if expiry is not None and time.time() >= expiry:
                    changed = True
                if console.progress != progress:
                    progress, changed = dict(console.progress), True
            if changed:
                seen[topic] = now
                if topic == "approvals":
                    expiry = await run_in_threadpool(_next_expiry, console)
                quiet = 0.0
                yield f"event: {topic}\ndata: {json.dumps({'changed': topic})}\n\n"
        if quiet >= KEEPALIVE_SECONDS:
            quiet = 0.0
            yield ": keep-alive\n\n"


def _next_expiry(console: Console) -> float | None:
    try:
        open_tickets = [t for t in console.host.tickets() if t.is_open]
    except ApprovalError:
        return None
    return min((t.expires for t in open_tickets), default=None)
