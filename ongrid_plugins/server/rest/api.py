"""What every REST route shares: the host, the tokens and the limits of one app.

:class:`Api` signs a request in by its bearer token (401), hands out call slots (429:
per token and per server), reads a JSON body within its size and time limits (413,
408), and answers which tools a persona may see: a denied tool is answered as if
absent. The routes of each resource (:mod:`.skills`, :mod:`.approvals`, :mod:`.audit`)
are functions over it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from ...errors import OngridError, UnknownSkill
from ...host.facade import SkillHost
from ...models import Tool
from .. import missing_extra
from ..responses import ApiError, api_error
from ..rules import may_see_tool, may_sign
from ..tokens import Principal, TokenStore
from .bodies import digits, no_constant, no_duplicates, query

try:
    from starlette.applications import Starlette
    from starlette.concurrency import run_in_threadpool
    from starlette.requests import Request
    from starlette.responses import Response
except ImportError as exc:  # pragma: no cover - exercised without the extra
    raise missing_extra("server", "starlette") from exc

__all__ = [
    "DEFAULT_BODY_TIMEOUT",
    "DEFAULT_MAX_BODY",
    "DEFAULT_MAX_CONCURRENT",
    "DEFAULT_MAX_PER_TOKEN",
    "Api",
    "Endpoint",
    "Handler",
]

DEFAULT_MAX_BODY = 1024 * 1024
DEFAULT_MAX_CONCURRENT = 16
#: Seconds a request body may take to arrive (a slow body is answered with 408).
DEFAULT_BODY_TIMEOUT = 30.0
#: Calls one token may have running at once (within the global cap), so that one client
#: calling slow skills does not get every other client a 429.
DEFAULT_MAX_PER_TOKEN = 4

Endpoint = Callable[[Request], Awaitable[Response]]
#: A route that needs a token: called with the app's :class:`Api`, the request and who sent it.
Handler = Callable[["Api", Request, Principal], Awaitable[Response]]


class Api:
    """The state the route handlers share: the host, the tokens, the limits and the running calls."""

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
        self.openapi: dict[str, Any] | None = None
        """The OpenAPI document, built at its first request."""
        self.closing = asyncio.Event()
        """Set when the server shuts down: event streams end."""
        self.loop: asyncio.AbstractEventLoop | None = None

    @contextlib.asynccontextmanager
    async def lifespan(self, app: Starlette) -> AsyncIterator[None]:
        self.loop = asyncio.get_running_loop()
        await run_in_threadpool(self.host.tools)  # load the registry before the first request
        yield

    # ------------------------------------------------------------------ who is calling

    def authed(self, handler: Handler) -> Endpoint:
        """``handler`` as an endpoint that first signs the request in (401 without a valid token)."""

        async def wrapped(request: Request) -> Response:
            return await handler(self, request, self.principal(request))

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

    def signs(self, who: Principal) -> bool:
        """Whether ``who``'s persona is dual-sign-required (approves, reads the audit log)."""
        return may_sign(self.host, who)

    # ------------------------------------------------------------------ what it may see

    def tool(self, name: str, who: Principal) -> Tool:
        """The tool, if this persona may see it: a denied tool is answered as if absent,
        and suggestions name only tools the persona may call (as the list does)."""
        try:
            tool = self.host.get(name)
        except UnknownSkill as exc:
            visible = [s for s in exc.suggestions if self.visible(s, who)]
            raise api_error(UnknownSkill(name, visible)) from None
        if not self.visible(name, who):
            raise api_error(UnknownSkill(name, ())) from None
        return tool

    def visible(self, name: str, who: Principal) -> bool:
        """Whether ``who`` may see the tool ``name`` (:func:`.rules.may_see_tool`, as the console asks)."""
        return may_see_tool(self.host, name, who)

    # ------------------------------------------------------------------ call slots

    def reserve(self, who: Principal) -> None:
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

    def release(self, who: Principal) -> None:
        self.running -= 1
        left = self.per_token.get(who.identity, 1) - 1
        if left > 0:
            self.per_token[who.identity] = left
        else:
            self.per_token.pop(who.identity, None)

    # ------------------------------------------------------------------ stores and bodies

    async def in_thread(self, function: Callable[..., Any], *args: Any) -> Any:
        """``function(*args)`` off the event loop (SQLite and fsync), its error as an API error."""
        try:
            return await run_in_threadpool(function, *args)
        except OngridError as exc:
            raise api_error(exc) from None

    async def json(self, request: Request) -> Any:
        """The request's JSON body (``{}`` when empty), within :attr:`max_body` and :attr:`body_timeout`."""
        query(request)
        length = request.headers.get("content-length")
        if length is not None and (not digits(length) or int(length) > self.max_body):
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
            return json.loads(raw, parse_constant=no_constant, object_pairs_hook=no_duplicates)
        except (ValueError, RecursionError) as exc:
            raise ApiError(400, "bad_request", f"the body is not valid JSON: {exc}") from None
