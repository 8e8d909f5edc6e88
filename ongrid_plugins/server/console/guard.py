"""What every console answer passes through: the hardening headers, the session, the CSRF token.

:func:`secure` adds the Content-Security-Policy and the other headers to every answer;
:func:`signed` lets only a signed-in session through (pages redirect to sign-in, live
parts and posts get 401) and, for a POST, only a same-origin request whose form carries
the session's CSRF token (403 otherwise, and nothing is done). :func:`respond` puts a
page body in the frame, with the signed-in identity, its CSRF token and its flash.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Awaitable, Callable
from typing import Any

from .. import missing_extra
from .html import esc, page
from .sessions import COOKIE, Session, Sessions, same_token

try:
    from starlette.requests import Request
    from starlette.responses import HTMLResponse, RedirectResponse, Response
except ImportError as exc:  # pragma: no cover - exercised without the extra
    raise missing_extra("server", "starlette") from exc

__all__ = [
    "CSP",
    "MAX_FORM",
    "Endpoint",
    "Page",
    "cross_origin",
    "read_form",
    "refused",
    "respond",
    "secure",
    "signed",
]

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
    "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
_HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "same-origin",
    "Cross-Origin-Opener-Policy": "same-origin",
}
MAX_FORM = 256 * 1024

Endpoint = Callable[[Request], Awaitable[Response]]
#: A page of a signed-in session: called with the request, the session and the POST's form.
Page = Callable[[Request, Session, dict[str, str]], Awaitable[Response]]


def secure(endpoint: Endpoint) -> Endpoint:
    """Add the hardening headers to every answer of ``endpoint``."""

    async def wrapped(request: Request) -> Response:
        response = await endpoint(request)
        for key, value in _HEADERS.items():
            response.headers.setdefault(key, value)
        response.headers.setdefault("Cache-Control", "no-store")
        return response

    return wrapped


def signed(sessions: Sessions, endpoint: Page, *, post: bool = False) -> Endpoint:
    """Only for a signed-in session; a POST also needs a same-origin request and the session's CSRF."""

    async def wrapped(request: Request) -> Response:
        session = sessions.get(request.cookies.get(COOKIE))
        if session is None:
            if post or request.url.path == "/events" or "part" in request.query_params:
                return respond("Signed out", _signed_out(), 401)
            target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
            return RedirectResponse("/login?" + urllib.parse.urlencode({"next": target}), 303)
        form: dict[str, str] = {}
        if post:
            why = cross_origin(request)
            if why:
                return refused(why)
            form = await read_form(request)
            if not same_token(form.get("csrf"), session.csrf):
                body = (
                    '<p class="flash flash-error" role="alert">This form is missing its CSRF token or '
                    "carries a stale one, so nothing was done. Reload the page and try again.</p>"
                )
                return respond("Refused", body, 403, session)
        return await endpoint(request, session, form)

    return wrapped


def respond(title: str, body: str, status: int = 200, session: Session | None = None, **kw: Any) -> Response:
    """The page ``title`` around ``body``; signed in, with the session's identity, CSRF token and flash."""
    if session is None:
        return HTMLResponse(page(title, body), status)
    who = (session.principal.identity, session.principal.persona)
    text = page(title, body, who=who, csrf=session.csrf, flash=session.take_flash(), **kw)
    return HTMLResponse(text, status)


def refused(why: str) -> Response:
    """The 403 page for a request from another origin."""
    return respond("Refused", f'<p class="flash flash-error">{esc(why)}</p>', 403)


def _signed_out() -> str:
    return (
        '<p class="flash flash-error" role="alert">You are signed out. '
        '<a href="/login">Sign in</a> again.</p>'
    )


def cross_origin(request: Request) -> str:
    """Why a state-changing request from another origin is refused; empty when it is same-origin."""
    origin = request.headers.get("origin")
    if origin is None or origin == f"{request.url.scheme}://{request.headers.get('host', '')}":
        return ""
    return f"This request came from another site ({origin}) and was refused."


async def read_form(request: Request) -> dict[str, str]:
    """The urlencoded form of a POST (at most :data:`MAX_FORM` bytes; the last value of a repeated field)."""
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if kind != "application/x-www-form-urlencoded":
        return {}
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_FORM:
            return {}
        chunks.append(chunk)
    text = b"".join(chunks).decode("utf-8", "replace")
    return dict(urllib.parse.parse_qsl(text, keep_blank_values=True, max_num_fields=1000))
