"""``/v1/audit``: rows of the audit log, for a dual-sign-required persona (it shows every argument)."""

from __future__ import annotations

from ...audit import OUTCOMES
from .. import missing_extra
from ..responses import ApiError
from ..tokens import Principal
from .api import Api
from .bodies import integer, query

try:
    from starlette.concurrency import run_in_threadpool
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response
except ImportError as exc:  # pragma: no cover - exercised without the extra
    raise missing_extra("server", "starlette") from exc

__all__ = ["MAX_AUDIT_LIMIT", "MAX_SEQ", "audit"]

MAX_AUDIT_LIMIT = 1000
MAX_SEQ = 2**63 - 1  # SQLite's largest integer


async def audit(api: Api, request: Request, who: Principal) -> Response:
    """``GET /v1/audit``: rows by tool, outcome and sequence number, oldest first."""
    if not api.signs(who):
        message = f"persona {who.persona} may not read the audit log: that needs a dual-sign-required persona"
        raise ApiError(403, "forbidden", message)
    params = query(request, "tool", "outcome", "since", "limit")
    since = integer(params.get("since"), "since", 0, MAX_SEQ)
    limit = integer(params.get("limit"), "limit", 1, MAX_AUDIT_LIMIT) or 100
    outcome = params.get("outcome")
    if outcome is not None and outcome not in OUTCOMES:
        raise ApiError(400, "bad_request", f"unknown outcome {outcome!r}; use one of {', '.join(OUTCOMES)}")
    log = api.host.audit
    entries = await run_in_threadpool(
        lambda: log.entries(tool=params.get("tool"), outcome=outcome, since=since, limit=limit)
    )
    # A full page may not be the last: where to go on from (total counts this page's rows).
    following = entries[-1].seq if len(entries) == limit else None
    return JSONResponse(
        {"items": [e.to_dict() for e in entries], "total": len(entries), "next_since": following}
    )
