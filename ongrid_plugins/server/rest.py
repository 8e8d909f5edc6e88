"""The REST API: ``/v1/skills``, approvals and the audit log over a :class:`SkillHost` (extra ``[server]``).

::

    from ongrid_plugins.server.rest import create_app
    from ongrid_plugins.server.tokens import TokenStore

    app = create_app(host, TokenStore.from_file("/etc/ongrid/tokens.json"))   # any ASGI server

Every route but ``/healthz``, ``/openapi.json`` and ``/docs`` (the API reference,
:mod:`.apidocs`) needs ``Authorization: Bearer <token>``; the token names an identity
and a persona. Calls run as that persona (the gate decides) and are recorded under
that identity (``caller``); approvals are signed by it (``approver``), so the approval
store's rules -- never your own ticket, never twice -- hold between tokens. Nothing of
the gate, the checks or the runner is re-implemented here: each route is a thin call
into the host.

Errors are JSON ``{"error": message, "code": code, ...details}`` with the status the
problem deserves (``docs/rest.md`` has the table). A skill that ran and failed is not an
HTTP error: its call returns 200 with ``error`` and ``code`` (``failed``, ``timed_out``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from ..audit import OUTCOMES
from ..errors import ApprovalError, ConfigError, OngridError, UnknownSkill
from ..gate.tickets import STATUSES
from ..host import SkillHost
from ..models import CallResult, Event, PermissionMode, Tool, Verdict, args_digest
from ..schema.redact import redact
from . import missing_extra
from .access import AccessLog as AccessLogMiddleware
from .responses import ApiError, api_error, result_body, sse
from .tokens import Principal, TokenStore

try:
    from starlette.applications import Starlette
    from starlette.concurrency import run_in_threadpool
    from starlette.exceptions import HTTPException
    from starlette.requests import Request
    from starlette.responses import HTMLResponse, JSONResponse, Response, StreamingResponse
    from starlette.routing import Route
except ImportError as exc:  # pragma: no cover - exercised without the extra
    raise missing_extra("server", "starlette") from exc

__all__ = [
    "DEFAULT_BODY_TIMEOUT",
    "DEFAULT_MAX_BODY",
    "DEFAULT_MAX_CONCURRENT",
    "DEFAULT_MAX_PER_TOKEN",
    "ApiError",
    "close_event_streams",
    "create_app",
]

logger = logging.getLogger(__name__)

DEFAULT_MAX_BODY = 1024 * 1024
DEFAULT_MAX_CONCURRENT = 16
#: Seconds a request body may take to arrive (a slow body is answered with 408).
DEFAULT_BODY_TIMEOUT = 30.0
#: Calls one token may have running at once (within the global cap), so that one client
#: calling slow skills does not get every other client a 429.
DEFAULT_MAX_PER_TOKEN = 4
MAX_AUDIT_LIMIT = 1000
MAX_SEQ = 2**63 - 1  # SQLite's largest integer

Endpoint = Callable[[Request], Awaitable[Response]]


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
    api = _Api(host, tokens, max_body, max_concurrent, max_per_token)
    api.body_timeout = body_timeout
    routes = [
        Route("/healthz", api.healthz, methods=["GET"]),
        Route("/openapi.json", api.openapi, methods=["GET"]),
        Route("/docs", api.reference, methods=["GET"]),
        Route("/v1/skills", api.authed(api.list_skills), methods=["GET"]),
        Route("/v1/skills/{name}", api.authed(api.get_skill), methods=["GET"]),
        Route("/v1/skills/{name}/execute", api.authed(api.execute), methods=["POST"]),
        Route("/v1/skills/{name}/execute/stream", api.authed(api.execute_stream), methods=["POST"]),
        Route("/v1/approvals", api.authed(api.list_approvals), methods=["GET"]),
        Route("/v1/approvals", api.authed(api.open_approval), methods=["POST"]),
        Route("/v1/approvals/{ticket_id}", api.authed(api.get_approval), methods=["GET"]),
        Route("/v1/approvals/{ticket_id}/approve", api.authed(api.approve), methods=["POST"]),
        Route("/v1/approvals/{ticket_id}/reject", api.authed(api.reject), methods=["POST"]),
        Route("/v1/approvals/{ticket_id}/claim", api.authed(api.claim), methods=["POST"]),
        Route("/v1/audit", api.authed(api.audit), methods=["GET"]),
        Route("/v1/events", api.authed(api.events), methods=["GET"]),
    ]
    if console:
        from .console import console_routes

        routes += console_routes(host, tokens, max_concurrent=max_concurrent)
    handlers: dict[Any, Any] = {ApiError: _api_error, HTTPException: _http_error, Exception: _server_error}
    app = Starlette(routes=routes, exception_handlers=handlers, lifespan=api.lifespan)
    app.add_middleware(AccessLogMiddleware)
    app.state.ongrid_api = api
    return app


def close_event_streams(app: Starlette) -> None:
    """End every open ``/v1/events`` stream of ``app`` (call it when the server starts shutting down).

    Safe from a signal handler or another thread; streams opened later end at once.
    """
    api: _Api = app.state.ongrid_api
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


class _Api:
    """The route handlers, sharing the host, the tokens and the limits."""

    def __init__(
        self, host: SkillHost, tokens: TokenStore, max_body: int, max_concurrent: int, max_per_token: int
    ) -> None:
        self.host = host
        self.tokens = tokens
        self.max_body = max_body
        self.max_concurrent = max_concurrent
        self.max_per_token = max_per_token
        self.running = 0
        self.per_token: dict[str, int] = {}
        self.body_timeout = DEFAULT_BODY_TIMEOUT
        self._openapi: dict[str, Any] | None = None
        self.closing = asyncio.Event()
        """Set when the server shuts down: event streams end."""
        self.loop: asyncio.AbstractEventLoop | None = None

    @contextlib.asynccontextmanager
    async def lifespan(self, app: Starlette) -> AsyncIterator[None]:
        self.loop = asyncio.get_running_loop()
        await run_in_threadpool(self.host.tools)  # load the registry before the first request
        yield

    def authed(self, endpoint: Callable[[Request, Principal], Awaitable[Response]]) -> Endpoint:
        async def wrapped(request: Request) -> Response:
            return await endpoint(request, self.principal(request))

        return wrapped

    def principal(self, request: Request) -> Principal:
        scheme, _, token = request.headers.get("authorization", "").partition(" ")
        challenge = {"WWW-Authenticate": 'Bearer realm="ongrid"'}
        if scheme.lower() != "bearer" or not token.strip():
            raise ApiError(401, "unauthorized", "send Authorization: Bearer <token>", challenge)
        principal = self.tokens.authenticate(token.strip())
        if principal is None:
            challenge["WWW-Authenticate"] += ', error="invalid_token"'
            raise ApiError(401, "unauthorized", "the token is not valid", challenge)
        request.state.identity = principal.identity  # for the access log line
        return principal

    # ------------------------------------------------------------------ open routes

    async def healthz(self, request: Request) -> Response:
        return JSONResponse({"status": "ok"})

    async def openapi(self, request: Request) -> Response:
        if self._openapi is None:
            from .openapi import document

            self._openapi = document()
        return JSONResponse(self._openapi)

    async def reference(self, request: Request) -> Response:
        """The API reference page, rendered here: no script or stylesheet from anywhere else."""
        from .apidocs import render

        if self._openapi is None:
            from .openapi import document

            self._openapi = document()
        headers = {"Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'"}
        return HTMLResponse(render(self._openapi), headers=headers)

    # ------------------------------------------------------------------ skills

    async def list_skills(self, request: Request, who: Principal) -> Response:
        query = _query(request, "category", "class")
        tool_class = query.get("class")
        if tool_class is not None and tool_class not in ("safe", "mutating", "dangerous"):
            raise ApiError(400, "bad_request", "class must be safe, mutating or dangerous")
        persona = self.host.persona(who.persona)
        tools = self.host.tools(persona, category=query.get("category"), tool_class=tool_class)
        items = [self._summary(tool, who) for tool in tools]
        return JSONResponse({"items": items, "total": len(items)})

    async def get_skill(self, request: Request, who: Principal) -> Response:
        _query(request)
        tool = self._tool(request.path_params["name"], who)
        data = self._summary(tool, who)
        data.update(
            kind=tool.kind,
            schema=tool.schema,
            timeout_seconds=tool.timeout,
            unavailable=list(tool.unavailable),
            provenance=tool.provenance,
        )
        return JSONResponse(data)

    def _summary(self, tool: Tool, who: Principal) -> dict[str, Any]:
        decision = self.host.decide(tool, who.persona).to_dict()
        return {
            "name": tool.name,
            "display_name": tool.display_name or tool.name,
            "description": tool.description,
            "when_to_use": tool.when_to_use,
            "class": tool.tool_class.value,
            "category": tool.category,
            "skill": tool.skill,
            "available": tool.available,
            "digest": tool.digest,
            "stale": self._stale(tool),
            "decision": {**decision, "needs": Verdict(decision["verdict"]).needs},
        }

    def _stale(self, tool: Tool) -> str:
        skill = self.host.registry.snapshot.skills.get(tool.skill)
        return skill.stale if skill is not None else ""

    async def events(self, request: Request, who: Principal) -> Response:
        """``GET /v1/events``: catalog changes as server-sent events (see :mod:`.events`)."""
        from .events import event_stream

        _query(request)
        headers = {"Cache-Control": "no-store", "X-Accel-Buffering": "no"}
        stream = event_stream(self.host, who, self.closing)
        return StreamingResponse(stream, media_type="text/event-stream", headers=headers)

    def _tool(self, name: str, who: Principal) -> Tool:
        """The tool, if this persona may see it: a denied tool is answered as if absent,
        and suggestions name only tools the persona may call (as the list does)."""
        try:
            tool = self.host.get(name)
        except UnknownSkill as exc:
            visible = [s for s in exc.suggestions if self._visible(s, who)]
            raise api_error(UnknownSkill(name, visible)) from None
        if not self._visible(name, who):
            raise api_error(UnknownSkill(name, ())) from None
        return tool

    def _visible(self, name: str, who: Principal) -> bool:
        try:
            return self.host.decide(self.host.get(name), who.persona).verdict.value != "deny"
        except OngridError:
            return False

    async def execute(self, request: Request, who: Principal) -> Response:
        name = request.path_params["name"]
        body = _execute_body(await self._json(request))
        self._reserve(who)
        try:
            result = await self._call(name, body, who, None)
        finally:
            self._release(who)
        return JSONResponse(result_body(result))

    async def execute_stream(self, request: Request, who: Principal) -> Response:
        name = request.path_params["name"]
        body = _execute_body(await self._json(request))
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()

        def on_event(event: Event) -> None:  # may be called from an executor's thread
            loop.call_soon_threadsafe(queue.put_nowait, ("event", event))

        self._reserve(who)
        task = asyncio.ensure_future(self._call(name, body, who, on_event))
        task.add_done_callback(lambda _task: self._release_after(queue, who))
        first = await queue.get()
        if first[0] == "done" and task.exception() is not None:
            raise task.exception()  # type: ignore[misc]  # refused before it started: a plain error
        return StreamingResponse(sse(first, queue, task), media_type="text/event-stream")

    def _release_after(self, queue: asyncio.Queue[tuple[str, Any]], who: Principal) -> None:
        self._release(who)
        queue.put_nowait(("done", None))

    def _reserve(self, who: Principal) -> None:
        """Take a call slot: one of the token's own, and one of the server's."""
        mine = self.per_token.get(who.identity, 0)
        if mine >= self.max_per_token:
            message = (
                f"this token has {mine} calls running, the most one token may run at once; retry shortly"
            )
            raise ApiError(429, "busy", message, {"Retry-After": "1"})
        if self.running >= self.max_concurrent:
            message = f"{self.running} calls are running, the most this server runs at once; retry shortly"
            raise ApiError(429, "busy", message, {"Retry-After": "1"})
        self.running += 1
        self.per_token[who.identity] = mine + 1

    def _release(self, who: Principal) -> None:
        self.running -= 1
        left = self.per_token.get(who.identity, 1) - 1
        if left > 0:
            self.per_token[who.identity] = left
        else:
            self.per_token.pop(who.identity, None)

    async def _call(
        self, name: str, body: dict[str, Any], who: Principal, on_event: Callable[[Event], None] | None
    ) -> CallResult:
        try:
            return await self.host.acall(
                name,
                body["params"],
                persona=who.persona,
                caller=who.identity,
                confirm=body["confirm"],
                ticket=body["ticket"],
                timeout=body["timeout"],
                on_event=on_event,
            )
        except OngridError as exc:
            raise api_error(exc) from None

    # ------------------------------------------------------------------ approvals

    async def list_approvals(self, request: Request, who: Principal) -> Response:
        status = _query(request, "status").get("status")
        if status is not None and status not in STATUSES:
            raise ApiError(400, "bad_request", f"status must be one of {', '.join(STATUSES)}")
        tickets = await self._approvals(self.host.tickets, status)
        if not self._signs(who):  # tickets are read as the audit log is, or by their requester
            tickets = [t for t in tickets if t.requester == who.identity]
        return JSONResponse({"items": [t.to_dict() for t in tickets], "total": len(tickets)})

    async def get_approval(self, request: Request, who: Principal) -> Response:
        _query(request)
        ticket_id = request.path_params["ticket_id"]
        ticket = await self._approvals(self.host.ticket, ticket_id)
        if not self._signs(who) and ticket.requester != who.identity:
            message = f"no approval ticket {ticket_id!r} (see `ongrid-skills approvals list`)"
            raise api_error(ApprovalError("unknown", ticket_id, message))  # as if absent
        return JSONResponse(ticket.to_dict())

    async def approve(self, request: Request, who: Principal) -> Response:
        ticket_id = request.path_params["ticket_id"]
        body = _fields(await self._json(request), {"note": str, "sop": (str, type(None))})
        if not self._signs(who):
            message = f"persona {who.persona} may not approve: approving needs a dual-sign-required persona"
            raise ApiError(403, "forbidden", message)
        ticket = await self._approvals(
            lambda: self.host.approve(
                ticket_id, approver=who.identity, note=body.get("note", ""), sop=body.get("sop")
            )
        )
        return JSONResponse(ticket.to_dict())

    async def reject(self, request: Request, who: Principal) -> Response:
        ticket_id = request.path_params["ticket_id"]
        body = _fields(await self._json(request), {"note": str})
        ticket = await self._approvals(self.host.ticket, ticket_id)
        if not self._signs(who) and ticket.requester != who.identity:
            message = (
                "only a dual-sign-required persona, or its requester (withdrawing it), may reject a ticket"
            )
            raise ApiError(403, "forbidden", message)
        ticket = await self._approvals(
            lambda: self.host.reject(ticket_id, approver=who.identity, note=body.get("note", ""))
        )
        return JSONResponse(ticket.to_dict())

    async def open_approval(self, request: Request, who: Principal) -> Response:
        """Open (or find) a ticket for a call another host wants to make, requested by the token's identity.

        The server works out the digest and the redaction from the arguments itself, so
        what approvers read is what the ticket covers.
        """
        fields = {"tool": str, "params": dict, "persona": str, "reason": str}
        body = _required(_fields(await self._json(request), fields), "tool", "params", "persona")
        tool = self._tool(body["tool"], who)
        if body["persona"] not in {p.name for p in await run_in_threadpool(self.host.personas)}:
            raise ApiError(400, "bad_request", f"persona {body['persona']!r} does not exist on this server")
        digest = args_digest(tool.name, body["params"])
        shown, _paths = redact(tool.schema, body["params"])
        ticket = await self._approvals(
            lambda: self.host.approvals.open_ticket(
                tool=tool.name,
                args_digest=digest,
                persona=body["persona"],
                requester=who.identity,
                args=shown,
                tool_class=tool.tool_class.value,
                reason=body.get("reason", ""),
                profile=self.host.sandbox_profile(tool).digest,  # the profile as this server runs it
                skill_digest=self.host._digest_now(tool),  # and its files as they are now
            )
        )
        return JSONResponse(ticket.to_dict())

    async def claim(self, request: Request, who: Principal) -> Response:
        """Spend an approved ticket for the call its requester's host is about to make."""
        ticket_id = request.path_params["ticket_id"]
        fields = {"tool": str, "args_digest": str, "persona": str, "call_id": str}
        body = _required(_fields(await self._json(request), fields), *fields)
        ticket = await self._approvals(self.host.ticket, ticket_id)
        if ticket.requester.strip().casefold() != who.identity.strip().casefold():
            message = (
                f"only the requester of ticket {ticket_id} ({ticket.requester}) may run it over the server"
            )
            raise ApiError(403, "forbidden", message)
        ticket = await self._approvals(
            lambda: self.host.approvals.claim(
                ticket_id,
                tool=body["tool"],
                args_digest=body["args_digest"],
                persona=body["persona"],
                caller=who.identity,
                call_id=body["call_id"],
                profile=self.host.sandbox_profile(self._tool(body["tool"], who)).digest,
                skill_digest=self.host._digest_now(self._tool(body["tool"], who)),
            )
        )
        return JSONResponse(ticket.to_dict())

    def _signs(self, who: Principal) -> bool:
        return self.host.persona(who.persona).permission_mode is PermissionMode.DUAL_SIGN_REQUIRED

    async def _approvals(self, function: Callable[..., Any], *args: Any) -> Any:
        try:
            return await run_in_threadpool(function, *args)  # SQLite and fsync: not on the event loop
        except OngridError as exc:
            raise api_error(exc) from None

    # ------------------------------------------------------------------ audit

    async def audit(self, request: Request, who: Principal) -> Response:
        if not self._signs(who):
            message = (
                f"persona {who.persona} may not read the audit log: that needs a dual-sign-required persona"
            )
            raise ApiError(403, "forbidden", message)
        query = _query(request, "tool", "outcome", "since", "limit")
        since = _int(query.get("since"), "since", 0, MAX_SEQ)
        limit = _int(query.get("limit"), "limit", 1, MAX_AUDIT_LIMIT) or 100
        outcome = query.get("outcome")
        if outcome is not None and outcome not in OUTCOMES:
            raise ApiError(
                400, "bad_request", f"unknown outcome {outcome!r}; use one of {', '.join(OUTCOMES)}"
            )
        log = self.host.audit
        entries = await run_in_threadpool(
            lambda: log.entries(tool=query.get("tool"), outcome=outcome, since=since, limit=limit)
        )
        return JSONResponse({"items": [e.to_dict() for e in entries], "total": len(entries)})

    # ------------------------------------------------------------------ bodies

    async def _json(self, request: Request) -> Any:
        _query(request)
        length = request.headers.get("content-length")
        if length is not None and (not _digits(length) or int(length) > self.max_body):
            raise ApiError(413, "too_large", f"the request body is larger than {self.max_body} bytes")
        chunks, size = [], 0
        try:
            async with asyncio.timeout(self.body_timeout):
                async for chunk in request.stream():
                    size += len(chunk)
                    if size > self.max_body:
                        message = f"the request body is larger than {self.max_body} bytes"
                        raise ApiError(413, "too_large", message)
                    chunks.append(chunk)
        except TimeoutError:
            message = f"the request body did not arrive within {self.body_timeout:g} s"
            raise ApiError(408, "timeout", message, {"Connection": "close"}) from None
        raw = b"".join(chunks)
        if not raw.strip():
            return {}
        try:
            return json.loads(raw, parse_constant=_no_constant)
        except (ValueError, RecursionError) as exc:
            raise ApiError(400, "bad_request", f"the body is not valid JSON: {exc}") from None


def _query(request: Request, *allowed: str) -> dict[str, str]:
    """The query parameters, each at most once; an unknown one is a 400 (a typo must not widen a listing)."""
    params = request.query_params
    for key in params:
        if key not in allowed:
            names = ", ".join(allowed) or "none"
            raise ApiError(400, "bad_request", f"unknown query parameter {key!r}; this route takes: {names}")
        if len(params.getlist(key)) > 1:
            raise ApiError(400, "bad_request", f"query parameter {key!r} given more than once")
    return dict(params)


def _no_constant(name: str) -> Any:
    message = f"{name} is not JSON"
    raise ValueError(message)


def _fields(body: Any, allowed: dict[str, Any]) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise ApiError(400, "bad_request", "the body must be a JSON object")
    for key, value in body.items():
        if key not in allowed:
            message = f"unknown field {key!r}; allowed: {', '.join(sorted(allowed))}"
            raise ApiError(400, "bad_request", message)
        kinds = allowed[key]
        if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in _tuple(kinds)):
            raise ApiError(400, "bad_request", f"field {key!r} has the wrong type")
    return body


def _required(body: dict[str, Any], *names: str) -> dict[str, Any]:
    missing = [name for name in names if name not in body]
    if missing:
        raise ApiError(400, "bad_request", f"missing field(s): {', '.join(missing)}")
    return body


def _tuple(kinds: Any) -> tuple[Any, ...]:
    return kinds if isinstance(kinds, tuple) else (kinds,)


def _execute_body(body: Any) -> dict[str, Any]:
    checked = _fields(
        body,
        {
            "params": dict,
            "confirm": (bool, str),
            "ticket": (str, type(None)),
            "timeout": (int, float, type(None)),
        },
    )
    timeout = checked.get("timeout")
    if timeout is not None and not timeout > 0:
        raise ApiError(400, "bad_request", "timeout must be a positive number of seconds")
    return {
        "params": checked.get("params", {}),
        "confirm": checked.get("confirm", False),
        "ticket": checked.get("ticket"),
        "timeout": float(timeout) if timeout is not None else None,
    }


def _int(raw: str | None, name: str, low: int, high: int) -> int | None:
    if raw is None:
        return None
    if not _digits(raw) or not low <= int(raw) <= high:
        raise ApiError(400, "bad_request", f"{name} must be an integer from {low} to {high}")
    return int(raw)


def _digits(text: str) -> bool:
    return text.isascii() and text.isdigit() and len(text) <= 19
