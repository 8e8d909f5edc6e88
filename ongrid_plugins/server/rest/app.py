"""The REST app: its route table (one line per route, as ``docs/rest.md`` and the OpenAPI document
list them), its error handlers and its shutdown."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from ...errors import ConfigError
from ...host.facade import SkillHost
from .. import missing_extra
from ..access import AccessLog as AccessLogMiddleware
from ..responses import ApiError
from ..tokens import TokenStore
from . import approvals, audit, public, skills
from .api import (
    DEFAULT_BODY_TIMEOUT,
    DEFAULT_MAX_BODY,
    DEFAULT_MAX_CONCURRENT,
    DEFAULT_MAX_PER_TOKEN,
    Api,
    Endpoint,
)

try:
    from starlette.applications import Starlette
    from starlette.exceptions import HTTPException
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response
    from starlette.routing import Route
except ImportError as exc:  # pragma: no cover - exercised without the extra
    raise missing_extra("server", "starlette") from exc

__all__ = ["close_event_streams", "create_app"]

logger = logging.getLogger(__name__)


def create_app(
    host: SkillHost,
    tokens: TokenStore,
    *,
    max_body: int = DEFAULT_MAX_BODY,
    max_concurrent: int = DEFAULT_MAX_CONCURRENT,
    console: bool = True,
    max_per_token: int = DEFAULT_MAX_PER_TOKEN,
    body_timeout: float = DEFAULT_BODY_TIMEOUT,
) -> Starlette:
    """The ASGI app: mount it in your own app, or run it with ``ongrid-skills serve``.

    :param tokens: Who may call: each token maps to an identity and a persona.
    :param max_body: Larger request bodies are refused with 413.
    :param max_concurrent: More calls running at once are refused with 429.
    :param console: Serve the operator console (web pages, ``docs/console.md``) at ``/``.
    :param max_per_token: More calls running at once for one token are refused with 429.
    :param body_timeout: A request body not complete within this many seconds gets 408.
        (Header timeouts and the connection cap are the server's: see
        :func:`ongrid_plugins.server.limits.server_config`.)
    """
    if max_body < 1 or max_concurrent < 1 or max_per_token < 1 or not body_timeout > 0:
        message = "max_body, max_concurrent and max_per_token must be at least 1, body_timeout above 0"
        raise ConfigError(message)
    for principal in tokens.principals():
        host.persona(principal.persona)  # an unknown persona is a start-up error, not a 500 later
    api = Api(host, tokens, max_body, max_concurrent, max_per_token)
    api.body_timeout = body_timeout
    routes = _routes(api)
    if console:
        from ..console import console_routes

        routes += console_routes(host, tokens, max_concurrent=max_concurrent)
    handlers: dict[Any, Any] = {ApiError: _api_error, HTTPException: _http_error, Exception: _server_error}
    app = Starlette(routes=routes, exception_handlers=handlers, lifespan=api.lifespan)
    app.add_middleware(AccessLogMiddleware)
    app.state.ongrid_api = api
    return app


def _routes(api: Api) -> list[Route]:
    """Every route of the API, in the order of ``docs/rest.md``."""
    get, post = ["GET"], ["POST"]
    return [
        Route("/healthz", _open(api, public.healthz), methods=get),
        Route("/openapi.json", _open(api, public.openapi), methods=get),
        Route("/docs", _open(api, public.reference), methods=get),
        Route("/v1/skills", api.authed(skills.list_skills), methods=get),
        Route("/v1/skills/{name}", api.authed(skills.get_skill), methods=get),
        Route("/v1/skills/{name}/execute", api.authed(skills.execute), methods=post),
        Route("/v1/skills/{name}/execute/stream", api.authed(skills.execute_stream), methods=post),
        Route("/v1/approvals", api.authed(approvals.list_approvals), methods=get),
        Route("/v1/approvals", api.authed(approvals.open_approval), methods=post),
        Route("/v1/approvals/{ticket_id}", api.authed(approvals.get_approval), methods=get),
        Route("/v1/approvals/{ticket_id}/approve", api.authed(approvals.approve), methods=post),
        Route("/v1/approvals/{ticket_id}/reject", api.authed(approvals.reject), methods=post),
        Route("/v1/approvals/{ticket_id}/claim", api.authed(approvals.claim), methods=post),
        Route("/v1/audit", api.authed(audit.audit), methods=get),
        Route("/v1/events", api.authed(skills.events), methods=get),
    ]


def _open(api: Api, handler: Callable[[Api, Request], Awaitable[Response]]) -> Endpoint:
    """``handler`` as an endpoint that needs no token."""

    async def endpoint(request: Request) -> Response:
        return await handler(api, request)

    return endpoint


def close_event_streams(app: Starlette) -> None:
    """End every open ``/v1/events`` stream of ``app`` (call it when the server starts shutting down).

    Safe from a signal handler or another thread; streams opened later end at once.
    """
    api: Api = app.state.ongrid_api
    loop = api.loop
    if loop is None or loop.is_closed():
        api.closing.set()
    else:
        loop.call_soon_threadsafe(api.closing.set)


async def _api_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ApiError)
    return exc.response()


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    codes = {404: "not_found", 405: "method_not_allowed"}
    headers = dict(exc.headers or {})
    body = {"error": str(exc.detail), "code": codes.get(exc.status_code, "http_error")}
    return JSONResponse(body, status_code=exc.status_code, headers=headers)


async def _server_error(request: Request, exc: Exception) -> Response:
    logger.error("rest: %s %s failed: %r", request.method, request.url.path, exc)
    return JSONResponse(
        {"error": "internal error (see the server's log)", "code": "internal"}, status_code=500
    )
