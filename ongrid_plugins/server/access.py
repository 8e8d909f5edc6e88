"""One access-log line per REST request, with nothing secret in it.

::

    rest: 127.0.0.1:53114 alice "POST /v1/skills/echo/execute" 200 12.4ms

The client address, the identity its token names (``-`` before authentication or
when it failed), the method and path, the status and the time to the last byte.
Never the ``Authorization`` header, a body, or a query string's values: only the
names of the query parameters (``?limit&tool``), since a client may put anything
there. Lines go to the ``ongrid_plugins.server.access`` logger at INFO;
``ongrid-skills serve`` prints them on stderr (``-q`` silences them). The same middleware
gives every answer the hardening headers its route did not set (:data:`DEFAULT_HEADERS`).

Imports only the standard library.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any
from urllib.parse import parse_qsl

__all__ = ["DEFAULT_HEADERS", "AccessLog", "logger"]

logger = logging.getLogger(__name__)

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


#: Headers every answer carries unless its route set its own: no sniffing, no framing, and for
#: an answer that is not a page (JSON, a router's 404 or 405) nothing to load at all.
DEFAULT_HEADERS = (
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"content-security-policy", b"default-src 'none'; frame-ancestors 'none'"),
)


class AccessLog:
    """ASGI middleware: log each HTTP request once it has been answered, and give each answer
    the :data:`DEFAULT_HEADERS` it does not set itself (the console's pages set their own)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope.get("type") != "http":
            await self.app(scope, receive, send)
            return
        started = time.monotonic()
        status = 0

        async def sending(message: Message) -> None:
            nonlocal status
            if message.get("type") == "http.response.start":
                status = int(message.get("status", 0))
                headers = list(message.get("headers") or ())
                present = {name.lower() for name, _value in headers}
                headers += [pair for pair in DEFAULT_HEADERS if pair[0] not in present]
                message["headers"] = headers
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            if logger.isEnabledFor(logging.INFO):
                logger.info("rest: %s", line(scope, status or 500, time.monotonic() - started))


#: A query parameter name as the routes spell them; any other name is counted, not shown.
_NAME = re.compile(r"[a-z][a-z_]{0,31}")
#: A path segment that looks like a token (long, mixed case or digits): names and ticket ids
#: are lower case, so this is a secret pasted into the URL, not a name.
_SECRET_LIKE = re.compile(r"^(?=.*[A-Z])(?=.*[a-z0-9])[A-Za-z0-9_~+/=.%-]{24,}$")
_REDACTED = "[redacted]"


def line(scope: Scope, status: int, seconds: float) -> str:
    """The access-log line for one answered request (see the module docstring)."""
    client = scope.get("client") or ("-", 0)
    who = str((scope.get("state") or {}).get("identity") or "-")
    path = str(scope.get("path", ""))
    raw = scope.get("query_string", b"")
    keys = {key for key, _value in parse_qsl(raw.decode("latin-1"), keep_blank_values=True)}
    names = sorted(k for k in keys if _NAME.fullmatch(k))
    if len(names) < len(keys):  # a name no route takes could be a secret pasted in the wrong place
        names.append(f"(other:{len(keys) - len(names)})")
    query = ("?" + "&".join(names)) if names else ""
    path = "/".join(_REDACTED if _SECRET_LIKE.search(part) else part for part in path.split("/"))
    shown = "".join(c if c.isprintable() and c not in '"\\' else "?" for c in path + query)
    return (
        f'{client[0]}:{client[1]} {who} "{scope.get("method", "")} {shown}" {status} {seconds * 1000:.1f}ms'
    )
