"""The answers of the REST API: errors with their status, call results, server-sent events."""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import AsyncIterator
from typing import Any

from ..errors import (
    ApprovalRequired,
    ConfirmationRequired,
    InvalidArguments,
    OngridError,
    StateAccessError,
    UnknownPersona,
)
from ..models import CallResult, Event
from ..schema.arguments import NOT_UTF8
from . import missing_extra

try:
    from starlette.responses import JSONResponse
except ImportError as exc:  # pragma: no cover - exercised without the extra
    raise missing_extra("server", "starlette") from exc

__all__ = ["ApiError", "api_error", "result_body", "sse"]

logger = logging.getLogger(__name__)

_EXIT_KEYS = {"ok", "exit_code", "signal", "timed_out"}
# An absolute path of two or more components (not the tail of a URL or of a relative path).
_ABSOLUTE_PATH = re.compile(r"(?<![\w.~:/-])/(?:[^/\s'\"()\[\],;:]+/)+([^/\s'\"()\[\],;:]*)")


def scrub_paths(text: str) -> str:
    """``text`` with every absolute server path cut to its last component (``…/run.sh``).

    Error bodies go to clients that have no business knowing the server's layout
    (home folders, state and install directories); the full text stays in the log.
    """
    return _ABSOLUTE_PATH.sub(lambda match: "…/" + match.group(1), text)


def _scrubbed(value: Any) -> Any:
    if isinstance(value, str):
        return scrub_paths(value)
    if isinstance(value, list):
        return [_scrubbed(item) for item in value]
    return value


class ApiError(Exception):
    """An error response: ``status``, a stable ``code``, a message and details."""

    def __init__(
        self, status: int, code: str, message: str, headers: dict[str, str] | None = None, **details: Any
    ) -> None:
        self.status = status
        self.code = code
        self.message = message
        self.headers = headers or {}
        self.details = details
        super().__init__(message)

    def response(self) -> JSONResponse:
        """The JSON error response."""
        details = {key: _scrubbed(value) for key, value in self.details.items()}
        body = {"error": scrub_paths(self.message), "code": self.code, **details}
        return JSONResponse(body, status_code=self.status, headers=self.headers)


def result_body(result: CallResult) -> dict[str, Any]:
    """The body of a call that ran: ``result`` on success, ``error`` and ``code`` when the skill failed."""
    common = {"status": result.outcome, "call_id": result.call_id, "duration": round(result.duration, 6)}
    if result.ok:
        return {"result": result.value, **common}
    return {
        "error": scrub_paths(result.error or "the skill failed"),
        "code": result.outcome,
        **common,
        "exit_code": result.exit_code,
        "signal": result.signal,
        "timed_out": result.timed_out,
        "stderr_tail": list(result.stderr_tail),
        "value": result.value,
    }


def api_error(exc: OngridError) -> ApiError:
    """The HTTP status, code and details of a refusal: the error's own, with REST's wording.

    The status, code and fields come from the error (:mod:`ongrid_plugins.errors`);
    this adds the REST-specific hints and keeps server internals out of the body.
    """
    if isinstance(exc, ApprovalRequired):
        return _needs_approval(exc)
    details = exc.details()
    if isinstance(exc, InvalidArguments) and any(message == NOT_UTF8 for _path, message in exc.errors):
        # Text that is not UTF-8 (a lone surrogate) is a malformed request, not a schema miss.
        return ApiError(400, exc.code, str(exc), **details)
    if isinstance(exc, ConfirmationRequired):
        message = f"the call to {exc.tool!r} needs a confirmation: {exc.decision.reason}"
        hint = 'send it again with "confirm": true, or "confirm": the args_digest you were shown'
        return ApiError(exc.http_status, exc.code, message, **details, hint=hint)
    if isinstance(exc, StateAccessError):
        logger.error("rest: %s", exc)
        return ApiError(exc.http_status, exc.code, "the server cannot use its state folder (see its log)")
    if isinstance(exc, UnknownPersona):
        logger.error("rest: a token names a persona that is gone: %s", exc)
        return ApiError(500, "internal", "the token's persona does not exist on this server")
    return ApiError(exc.http_status, exc.code, str(exc), **details)


def _needs_approval(exc: ApprovalRequired) -> ApiError:
    message = f"the call to {exc.tool!r} needs two-person approval: {exc.decision.reason}"
    ticket = exc.ticket
    if ticket is None:
        return ApiError(409, "needs_approval", message, ticket=None, reason=exc.decision.reason)
    if ticket.status == "approved":
        hint = f'the ticket is approved: send the same call again with "ticket": "{ticket.id}"'
    else:
        hint = (
            f"two identities other than {ticket.requester} approve it (POST /v1/approvals/{ticket.id}/approve"
            f' or `ongrid-skills approvals approve {ticket.id}`), then send the same call with "ticket": '
            f'"{ticket.id}" before {ticket.to_dict()["expires"]}'
        )
    return ApiError(
        409, "needs_approval", message, ticket=ticket.to_dict(), reason=exc.decision.reason, hint=hint
    )


async def sse(
    first: tuple[str, Any], queue: asyncio.Queue[tuple[str, Any]], task: asyncio.Future[CallResult]
) -> AsyncIterator[str]:
    """Server-sent events: ``start``, one ``log`` per stderr line, ``exit``, then ``result`` or ``error``."""
    item = first
    try:
        while item[0] != "done":
            event: Event = item[1]
            yield _event_text(event)
            item = await queue.get()
        while not queue.empty():  # events that raced the end of the call
            late = queue.get_nowait()
            if late[0] == "event":
                yield _event_text(late[1])
        exc = task.exception()
        if exc is None:
            yield _sse_text("result", result_body(task.result()))
        else:
            error = exc if isinstance(exc, ApiError) else ApiError(500, "internal", repr(exc))
            yield _sse_text("error", {"error": error.message, "code": error.code, **error.details})
    finally:
        if not task.done():
            task.cancel()  # the client went away: kill the skill


def _event_text(event: Event) -> str:
    if event.kind == "stderr":
        return _sse_text("log", {"line": event.data})
    data: dict[str, Any] = {"tool": event.tool, "call_id": event.call_id}
    if event.kind == "exit" and isinstance(event.data, dict):  # not "start": its data names server paths
        data.update({k: v for k, v in event.data.items() if k in _EXIT_KEYS})
    elif event.kind not in ("start", "exit"):
        data["data"] = event.data
    return _sse_text(event.kind, data)


def _sse_text(kind: str, data: Any) -> str:
    return f"event: {kind}\ndata: {json.dumps(data, ensure_ascii=False, default=str)}\n\n"
