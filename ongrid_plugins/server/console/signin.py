"""Signing in and out of the console: a bearer token once, then a session cookie.

The sign-in form is a double-submit cookie: a random value in a hidden field and in a
``SameSite=Strict`` cookie scoped to ``/login``, which must be equal. The server does
not track the value (it is not one-time); a cross-site post carries neither the cookie
nor a same-site ``Origin``, and :func:`~.guard.cross_origin` refuses the latter. A
session cookie is ``HttpOnly``, ``SameSite=Strict`` and ``Secure`` over TLS. A sign-in
the full session store cannot take is a 503 page; nobody is signed out to make room.
After signing in the browser goes back where it was going, but
only to a local path of the console (never ``//host`` or a URL).
"""

from __future__ import annotations

import logging
import secrets

from .. import missing_extra
from . import pages
from .guard import cross_origin, read_form, refused, respond
from .sessions import COOKIE, LOGIN_COOKIE, Session, SessionsFull, same_token
from .state import Console

try:
    from starlette.requests import Request
    from starlette.responses import RedirectResponse, Response
except ImportError as exc:  # pragma: no cover - exercised without the extra
    raise missing_extra("server", "starlette") from exc

__all__ = ["login", "login_page", "logout", "next_path"]

logger = logging.getLogger(__name__)


async def login_page(console: Console, request: Request) -> Response:
    """``GET /login``: the form (or straight on, when already signed in)."""
    if console.sessions.get(request.cookies.get(COOKIE)) is not None:
        return RedirectResponse(next_path(request.query_params.get("next")), 303)
    return _login_form(next_path(request.query_params.get("next")))


def _login_form(next_to: str, error: str = "", status: int = 200) -> Response:
    nonce = secrets.token_urlsafe(24)
    response = respond("Sign in", pages.login_body(nonce, next_to, error), status)
    response.set_cookie(LOGIN_COOKIE, nonce, max_age=1800, path="/login", httponly=True, samesite="strict")
    return response


async def login(console: Console, request: Request) -> Response:
    """``POST /login``: check the token once, start a session, go where the user was going."""
    why = cross_origin(request)
    if why:
        return refused(why)
    form = await read_form(request)
    next_to = next_path(form.get("next"))
    if not same_token(form.get("csrf"), request.cookies.get(LOGIN_COOKIE, "")):
        return _login_form(next_to, "The sign-in form had expired; paste the token again.", 403)
    principal = console.tokens.authenticate(form.get("token", "").strip())
    if principal is None:
        return _login_form(next_to, "That token is not valid here. Check it and try again.", 401)
    try:
        cookie, session = console.sessions.create(principal)
    except SessionsFull as exc:  # refused, rather than signing someone else out to make room
        logger.warning("console: sign-in of %s refused: %s", principal.identity, exc)
        message = (
            "The console cannot sign you in now: too many people are signed in at once. Nobody was "
            "signed out to make room; try again in a few minutes, or use the REST API with your token."
        )
        response = _login_form(next_to, message, 503)
        response.headers["Retry-After"] = "300"
        return response
    session.say("ok", f"Signed in as {principal.identity} (persona {principal.persona}).")
    response = RedirectResponse(next_to, 303)
    response.set_cookie(
        COOKIE, cookie, path="/", httponly=True, samesite="strict", secure=request.url.scheme == "https"
    )
    response.delete_cookie(LOGIN_COOKIE, path="/login")
    logger.info("console: %s signed in", principal.identity)
    return response


async def logout(console: Console, request: Request, session: Session, form: dict[str, str]) -> Response:
    """``POST /logout``: end the session (its live streams end with it)."""
    console.sessions.drop(request.cookies.get(COOKIE))
    response = RedirectResponse("/login", 303)
    response.delete_cookie(COOKIE, path="/", httponly=True, samesite="strict")
    return response


def next_path(value: str | None) -> str:
    """Where to go after signing in: a local path only (never ``//host`` or a URL)."""
    if not value or not value.startswith("/") or value.startswith("//") or "\\" in value:
        return "/"
    return value if not value.startswith("/login") else "/"
