"""The console's routes: one table wiring each path to its handler, and the packaged static files.

:func:`console_routes` returns Starlette routes to mount at ``/`` of the REST app; they
share its host and token store. Every answer goes through :func:`~.guard.secure`, which
adds the Content-Security-Policy and the other hardening headers; every page but
sign-in goes through :func:`~.guard.signed` (a session, and for a POST its CSRF token
and the same origin).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from importlib import resources

from ...host.facade import SkillHost
from .. import missing_extra
from ..tokens import TokenStore
from . import approvals, audit, live, signin, tools
from .guard import CSP, Endpoint, secure, signed
from .sessions import Session
from .state import Console

try:
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Route
except ImportError as exc:  # pragma: no cover - exercised without the extra
    raise missing_extra("server", "starlette") from exc

__all__ = ["CSP", "Console", "console_routes"]

_STATIC = {"console.css": "text/css", "console.js": "text/javascript", "favicon.svg": "image/svg+xml"}

Handler = Callable[[Console, Request, Session, dict[str, str]], Awaitable[Response]]


def console_routes(host: SkillHost, tokens: TokenStore, *, max_concurrent: int = 16) -> list[Route]:
    """The console's routes over ``host`` and ``tokens`` (the same ones the REST API uses)."""
    console = Console(host, tokens, max_concurrent)
    get, post = ["GET"], ["POST"]

    def page(handler: Handler, *, is_post: bool = False) -> Endpoint:
        async def endpoint(request: Request, session: Session, form: dict[str, str]) -> Response:
            return await handler(console, request, session, form)

        return secure(signed(console.sessions, endpoint, post=is_post))

    def open_page(handler: Callable[[Console, Request], Awaitable[Response]]) -> Endpoint:
        async def endpoint(request: Request) -> Response:
            return await handler(console, request)

        return secure(endpoint)

    return [
        Route("/login", open_page(signin.login_page), methods=get),
        Route("/login", open_page(signin.login), methods=post),
        Route("/logout", page(signin.logout, is_post=True), methods=post),
        Route("/", page(tools.catalog), methods=get),
        Route("/tools/{name}", page(tools.tool_page), methods=get),
        Route("/tools/{name}/run", page(tools.run, is_post=True), methods=post),
        Route("/tools/{name}/run/stream", page(tools.run_stream, is_post=True), methods=post),
        Route("/approvals", page(approvals.approvals), methods=get),
        Route("/approvals/{ticket_id}/approve", page(approvals.approve, is_post=True), methods=post),
        Route("/approvals/{ticket_id}/reject", page(approvals.reject, is_post=True), methods=post),
        Route("/approvals/{ticket_id}/run", page(approvals.run_approved, is_post=True), methods=post),
        Route("/audit", page(audit.audit), methods=get),
        Route("/events", page(live.events), methods=get),
        Route("/static/{file}", secure(static), methods=get),
    ]


async def static(request: Request) -> Response:
    """``GET /static/{file}``: the console's stylesheet, script and icon (nothing else)."""
    name = request.path_params["file"]
    if name not in _STATIC:
        return Response("not found", 404, media_type="text/plain")
    data = resources.files(__package__).joinpath("static", name).read_bytes()
    return Response(data, media_type=_STATIC[name], headers={"Cache-Control": "public, max-age=300"})
