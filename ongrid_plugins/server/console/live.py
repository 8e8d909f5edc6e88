"""``/events``: server-sent events telling the open approvals and audit pages to refresh.

It looks at the state databases' files every :data:`POLL_SECONDS` (no database read
when nothing changed), also wakes when an open ticket expires or a held call makes
progress, and ends when the session does (sign-out, idle): a stream never outlives
its session. Only a dual-sign-required persona hears about the audit log, and a
persona hears of ``approvals`` only when a ticket it may read changed
(:func:`~ongrid_plugins.server.rules.readable_tickets`): a viewer is not told when
other people's tickets are opened, approved or run.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator

from ...errors import ApprovalError
from .. import missing_extra
from ..rules import readable_tickets
from ..tokens import Principal
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
    stream = _watch(console, topics, watched, cookie, session.principal)
    return StreamingResponse(stream, media_type="text/event-stream")


async def _watch(
    console: Console,
    topics: list[str],
    watched: dict[str, list[str]],
    cookie: str | None,
    who: Principal,
) -> AsyncIterator[str]:
    """``approvals`` / ``audit`` events whenever their database changes or a ticket expires;
    ``approvals`` only when the tickets ``who`` may read (or their held calls) changed.

    Ends when the session does (sign-out, idle): a stream never outlives its session.
    """
    seen = {topic: fingerprint(watched[topic]) for topic in topics}
    view: tuple[str, float | None] = ("", None)
    if "approvals" in topics:
        view = await run_in_threadpool(_view, console, who)
    expiry = view[1]
    progress = _progress(console, view[0])
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
                if _progress(console, view[0]) != progress:
                    changed = True
                if not changed:
                    continue
                seen[topic] = now
                before, view = view, await run_in_threadpool(_view, console, who)
                expiry, held = view[1], _progress(console, view[0])
                if view[0] == before[0] and held == progress:
                    continue  # only tickets ``who`` may not read changed
                progress = held
            elif not changed:
                continue
            seen[topic] = now
            quiet = 0.0
            yield f"event: {topic}\ndata: {json.dumps({'changed': topic})}\n\n"
        if quiet >= KEEPALIVE_SECONDS:
            quiet = 0.0
            yield ": keep-alive\n\n"


def _view(console: Console, who: Principal) -> tuple[str, float | None]:
    """What ``who`` may read of the tickets now (a JSON text to compare) and when the first
    open one of them expires."""
    try:
        tickets = readable_tickets(console.host, console.host.tickets(), who)
    except ApprovalError:
        return "", None
    text = json.dumps([t.to_dict() for t in tickets], sort_keys=True, default=str)
    expiry = min((t.expires for t in tickets if t.is_open), default=None)
    return text, expiry


def _progress(console: Console, view: str) -> dict[str, str]:
    """The held calls' progress of the tickets in ``view`` (their ids appear in its text)."""
    return {ticket: said for ticket, said in console.progress.items() if f'"{ticket}"' in view}
