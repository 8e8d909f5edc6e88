"""The console's audit page: the newest rows, filters, and the hash chain's status.

Only a dual-sign-required persona reads it: it shows every caller's arguments. The
whole page never waits for a full chain check (~20 µs a row): it shows the last result
while the log files are unchanged, else asks for it once painted (``?part=chain``);
``?part=rows`` is the live part.
"""

from __future__ import annotations

import calendar
import datetime
import urllib.parse
from typing import Any

from ...audit import VerifyReport
from .. import missing_extra
from . import audit_pages
from .digests import fingerprint
from .guard import respond
from .html import esc
from .sessions import Session
from .state import Console

try:
    from starlette.concurrency import run_in_threadpool
    from starlette.requests import Request
    from starlette.responses import HTMLResponse, Response
except ImportError as exc:  # pragma: no cover - exercised without the extra
    raise missing_extra("server", "starlette") from exc

__all__ = ["audit"]

_KEYS = ("tool", "outcome", "caller", "start", "end", "limit")


async def audit(console: Console, request: Request, session: Session, form: dict[str, str]) -> Response:
    """``GET /audit``: the page, or one of its parts (``?part=chain``, ``?part=rows``)."""
    who = session.principal
    if not console.signs(who):
        body = (
            f'<p class="flash flash-error" role="alert">Your persona {esc(who.persona)} may not read '
            "the audit log: it shows every caller's arguments, so it takes a dual-sign-required "
            "persona.</p>"
        )
        return respond("Audit", body, 403, session, current="audit")
    query = {k: v.strip() for k, v in request.query_params.items() if k in _KEYS and v.strip()}
    try:
        filters = _audit_filters(query)
    except ValueError as exc:
        session.say("error", str(exc))
        filters = {"limit": 100}
    part = request.query_params.get("part")
    if part == "chain":
        return HTMLResponse(audit_pages.chain_html(await run_in_threadpool(_verified, console, True)))
    # The whole page never waits for a full chain check (~20 µs a row): it shows the
    # last result while the log is unchanged, else asks for it once painted.
    entries = await run_in_threadpool(_audit_entries, console, dict(filters))
    report = await run_in_threadpool(_verified, console, part == "rows")
    rows = audit_pages.audit_rows(entries, report)
    if part == "rows":
        return HTMLResponse(rows)
    live = "/audit?" + urllib.parse.urlencode({**query, "part": "rows"})
    body = audit_pages.audit_body(rows, query, live)
    return respond("Audit", body, 200, session, current="audit", live="audit")


def _audit_entries(console: Console, filters: dict[str, Any]) -> list[Any]:
    limit = filters.pop("limit")
    return console.host.audit.entries(last=limit, **filters)[::-1]


def _verified(console: Console, compute: bool) -> VerifyReport | None:
    """The chain's status, cached while the log files are unchanged; None if stale and not ``compute``."""
    log = console.host.audit
    log.flush()
    key = fingerprint([log.path, log.path + "-wal"])
    if console.chain is not None and console.chain[0] == key:
        return console.chain[1]
    if not compute:
        return None
    report = log.verify()
    console.chain = (key, report)
    return report


def _audit_filters(query: dict[str, str]) -> dict[str, Any]:
    filters: dict[str, Any] = {"limit": 100}
    for key in ("tool", "outcome", "caller"):
        if key in query:
            filters[key] = query[key]
    for key in ("start", "end"):
        if key in query:
            filters[key] = _utc(query[key], key)
    if "limit" in query:
        if not query["limit"].isdigit() or not 1 <= int(query["limit"]) <= 1000:
            raise ValueError("Show: pick 1 to 1000 rows.")
        filters["limit"] = int(query["limit"])
    return filters


def _utc(text: str, name: str) -> float:
    try:
        moment = datetime.datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(f"{name}: {text!r} is not a date and time (YYYY-MM-DDTHH:MM)") from None
    return float(calendar.timegm(moment.utctimetuple()))
