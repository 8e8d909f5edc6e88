"""The console's routes: sign-in, catalog, tool pages and runs, approvals, audit, live events.

:func:`console_routes` returns Starlette routes to mount at ``/`` of the REST app; they
share its host and token store. Every page answer goes through :meth:`Console.secure`,
which adds the Content-Security-Policy and the other hardening headers.
"""

from __future__ import annotations

import asyncio
import calendar
import datetime
import hashlib
import json
import logging
import os
import secrets
import time
import urllib.parse
from collections.abc import AsyncIterator, Awaitable, Callable
from importlib import resources
from typing import Any

import attrs

from ...audit import VerifyReport
from ...errors import ApprovalError, ApprovalRequired, OngridError, UnknownSkill
from ...host import SkillHost
from ...models import CallResult, Event, PermissionMode, Tool, Verdict
from ...sidetable import SideTable
from .. import missing_extra
from ..responses import ApiError, api_error, result_body, sse
from ..tokens import Principal, TokenStore
from . import pages
from .forms import FieldError, field_of, form_arguments
from .html import esc, page
from .sessions import COOKIE, LOGIN_COOKIE, Session, Sessions, same_token

try:
    from starlette.concurrency import run_in_threadpool
    from starlette.requests import Request
    from starlette.responses import HTMLResponse, RedirectResponse, Response, StreamingResponse
    from starlette.routing import Route
except ImportError as exc:  # pragma: no cover - exercised without the extra
    raise missing_extra("server", "starlette") from exc

__all__ = ["CSP", "Console", "console_routes"]

logger = logging.getLogger(__name__)

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
_STATIC = {"console.css": "text/css", "console.js": "text/javascript", "favicon.svg": "image/svg+xml"}
MAX_FORM = 256 * 1024
#: How often ``/events`` looks at the state databases for changes, in seconds.
POLL_SECONDS = 0.25
KEEPALIVE_SECONDS = 15.0
MAX_HELD = 1000
_FINISHED = ("rejected", "executed", "expired")

Endpoint = Callable[[Request], Awaitable[Response]]


def console_routes(host: SkillHost, tokens: TokenStore, *, max_concurrent: int = 16) -> list[Route]:
    """The console's routes over ``host`` and ``tokens`` (the same ones the REST API uses)."""
    return Console(host, tokens, max_concurrent).routes()


@attrs.frozen
class _Held:
    """A call opened from the console that waits for its ticket: run as its requester once approved."""

    tool: str
    args: dict[str, Any]
    persona: str
    caller: str


class Console:
    """The console of one host: its sessions, the calls waiting for approval, the chain status cache."""

    def __init__(self, host: SkillHost, tokens: TokenStore, max_concurrent: int = 16) -> None:
        self.host = host
        self.tokens = tokens
        self.sessions = Sessions()
        self.max_concurrent = max_concurrent
        self.running = 0
        self.held: dict[str, _Held] = {}
        self.progress: dict[str, str] = {}
        self._tasks: set[asyncio.Future[Any]] = set()
        self._chain: tuple[Any, VerifyReport] | None = None

    def routes(self) -> list[Route]:
        """Every route of the console."""
        return [
            Route("/login", self.secure(self.login_page), methods=["GET"]),
            Route("/login", self.secure(self.login), methods=["POST"]),
            Route("/logout", self.secure(self.signed(self.logout, post=True)), methods=["POST"]),
            Route("/", self.secure(self.signed(self.catalog)), methods=["GET"]),
            Route("/tools/{name}", self.secure(self.signed(self.tool_page)), methods=["GET"]),
            Route("/tools/{name}/run", self.secure(self.signed(self.run, post=True)), methods=["POST"]),
            Route(
                "/tools/{name}/run/stream",
                self.secure(self.signed(self.run_stream, post=True)),
                methods=["POST"],
            ),
            Route("/approvals", self.secure(self.signed(self.approvals)), methods=["GET"]),
            Route(
                "/approvals/{ticket_id}/approve",
                self.secure(self.signed(self.approve, post=True)),
                methods=["POST"],
            ),
            Route(
                "/approvals/{ticket_id}/reject",
                self.secure(self.signed(self.reject, post=True)),
                methods=["POST"],
            ),
            Route(
                "/approvals/{ticket_id}/run",
                self.secure(self.signed(self.run_approved, post=True)),
                methods=["POST"],
            ),
            Route("/audit", self.secure(self.signed(self.audit)), methods=["GET"]),
            Route("/events", self.secure(self.signed(self.events)), methods=["GET"]),
            Route("/static/{file}", self.secure(self.static), methods=["GET"]),
        ]

    # ------------------------------------------------------------------ plumbing

    def secure(self, endpoint: Endpoint) -> Endpoint:
        """Add the hardening headers to every answer of ``endpoint``."""

        async def wrapped(request: Request) -> Response:
            response = await endpoint(request)
            for key, value in _HEADERS.items():
                response.headers.setdefault(key, value)
            response.headers.setdefault("Cache-Control", "no-store")
            return response

        return wrapped

    def signed(
        self,
        endpoint: Callable[[Request, Session, dict[str, str]], Awaitable[Response]],
        *,
        post: bool = False,
    ) -> Endpoint:
        """Only for a signed-in session; a POST also needs a same-origin request and the session's CSRF."""

        async def wrapped(request: Request) -> Response:
            session = self.sessions.get(request.cookies.get(COOKIE))
            if session is None:
                if post or request.url.path == "/events" or "part" in request.query_params:
                    return self._html("Signed out", _signed_out(), 401)
                target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
                return RedirectResponse("/login?" + urllib.parse.urlencode({"next": target}), 303)
            form: dict[str, str] = {}
            if post:
                refused = _cross_origin(request)
                if refused:
                    return self._html("Refused", f'<p class="flash flash-error">{esc(refused)}</p>', 403)
                form = await _form(request)
                if not same_token(form.get("csrf"), session.csrf):
                    body = (
                        '<p class="flash flash-error" role="alert">This form is missing its CSRF token or '
                        "carries a stale one, so nothing was done. Reload the page and try again.</p>"
                    )
                    return self._html("Refused", body, 403, session)
            return await endpoint(request, session, form)

        return wrapped

    def _html(
        self, title: str, body: str, status: int = 200, session: Session | None = None, **kw: Any
    ) -> Response:
        if session is None:
            return HTMLResponse(page(title, body), status)
        who = (session.principal.identity, session.principal.persona)
        text = page(title, body, who=who, csrf=session.csrf, flash=session.take_flash(), **kw)
        return HTMLResponse(text, status)

    def _signs(self, principal: Principal) -> bool:
        return self.host.persona(principal.persona).permission_mode is PermissionMode.DUAL_SIGN_REQUIRED

    # ------------------------------------------------------------------ sign-in

    async def login_page(self, request: Request) -> Response:
        if self.sessions.get(request.cookies.get(COOKIE)) is not None:
            return RedirectResponse(_next(request.query_params.get("next")), 303)
        return self._login_form(_next(request.query_params.get("next")))

    def _login_form(self, next_path: str, error: str = "", status: int = 200) -> Response:
        nonce = secrets.token_urlsafe(24)
        response = self._html("Sign in", pages.login_body(nonce, next_path, error), status)
        response.set_cookie(
            LOGIN_COOKIE, nonce, max_age=1800, path="/login", httponly=True, samesite="strict"
        )
        return response

    async def login(self, request: Request) -> Response:
        refused = _cross_origin(request)
        if refused:
            return self._html("Refused", f'<p class="flash flash-error">{esc(refused)}</p>', 403)
        form = await _form(request)
        next_path = _next(form.get("next"))
        if not same_token(form.get("csrf"), request.cookies.get(LOGIN_COOKIE, "")):
            return self._login_form(next_path, "The sign-in form had expired; paste the token again.", 403)
        principal = self.tokens.authenticate(form.get("token", "").strip())
        if principal is None:
            return self._login_form(next_path, "That token is not valid here. Check it and try again.", 401)
        cookie, session = self.sessions.create(principal)
        session.say("ok", f"Signed in as {principal.identity} (persona {principal.persona}).")
        response = RedirectResponse(next_path, 303)
        response.set_cookie(
            COOKIE, cookie, path="/", httponly=True, samesite="strict", secure=request.url.scheme == "https"
        )
        response.delete_cookie(LOGIN_COOKIE, path="/login")
        logger.info("console: %s signed in", principal.identity)
        return response

    async def logout(self, request: Request, session: Session, form: dict[str, str]) -> Response:
        self.sessions.drop(request.cookies.get(COOKIE))
        response = RedirectResponse("/login", 303)
        response.delete_cookie(COOKIE, path="/", httponly=True, samesite="strict")
        return response

    # ------------------------------------------------------------------ catalog and tools

    async def catalog(self, request: Request, session: Session, form: dict[str, str]) -> Response:
        query = {
            k: v for k, v in request.query_params.items() if k in ("q", "class", "category", "available")
        }
        persona = self.host.persona(session.principal.persona)
        everything = await run_in_threadpool(lambda: self.host.tools(include_unavailable=True))
        allowed = []
        for tool in everything:
            decision = self.host.decide(tool, persona)
            if decision.verdict is not Verdict.DENY:
                allowed.append((tool, decision))
        categories = sorted({tool.category for tool, _ in allowed})
        words = query.get("q", "").lower().split()
        rows = [
            (tool, decision)
            for tool, decision in allowed
            if (not query.get("class") or tool.tool_class.value == query["class"])
            and (not query.get("category") or tool.category == query["category"])
            and (not query.get("available") or tool.available == (query["available"] == "yes"))
            and all(
                w in f"{tool.name} {tool.display_name} {tool.description} {tool.category}".lower()
                for w in words
            )
        ]
        body = pages.catalog_body(
            rows, total=len(allowed), query=query, categories=categories, persona=persona.name
        )
        return self._html("Catalog", body, 200, session, current="catalog")

    def _tool(self, name: str) -> Tool | None:
        try:
            return self.host.get(name)
        except UnknownSkill:
            return None

    async def tool_page(self, request: Request, session: Session, form: dict[str, str]) -> Response:
        tool = self._tool(request.path_params["name"])
        if tool is None:
            return self._no_tool(request.path_params["name"], session)
        return self._tool_response(tool, session)

    def _no_tool(self, name: str, session: Session) -> Response:
        body = (
            f'<p class="flash flash-error" role="alert">There is no tool {esc(name)}.</p>'
            '<p><a href="/">Back to the catalog</a></p>'
        )
        return self._html("Unknown tool", body, 404, session, current="catalog")

    def _tool_response(
        self,
        tool: Tool,
        session: Session,
        *,
        status: int = 200,
        values: dict[str, str] | None = None,
        errors: dict[str, str] | None = None,
        outcome: str = "",
    ) -> Response:
        decision = self.host.decide(tool, session.principal.persona)
        body = pages.tool_body(
            tool,
            decision,
            csrf=session.csrf,
            digest=_digest(tool),
            sandbox=self._sandbox(tool),
            values=values,
            errors=errors,
            outcome=outcome,
        )
        return self._html(tool.name, body, status, session, current="catalog")

    def _sandbox(self, tool: Tool) -> str:
        settings = self.host.settings
        declared = json.dumps(tool.sandbox.to_dict(), sort_keys=True) if tool.sandbox is not None else "none"
        return f"host mode {settings.sandbox}, policy {settings.sandbox_policy}; the tool declares {declared}"

    async def run(self, request: Request, session: Session, form: dict[str, str]) -> Response:
        tool = self._tool(request.path_params["name"])
        if tool is None:
            return self._no_tool(request.path_params["name"], session)
        values = _values(form)
        try:
            result = await self._call(tool, form, session.principal, None)
        except ApiError as error:
            errors = _field_errors(error)
            body = {"error": error.message, "code": error.code, **error.details}
            outcome = pages.outcome_html(body)
            return self._tool_response(
                tool, session, status=error.status, values=values, errors=errors, outcome=outcome
            )
        outcome = pages.outcome_html(result_body(result))
        return self._tool_response(tool, session, values=values, outcome=outcome)

    async def run_stream(self, request: Request, session: Session, form: dict[str, str]) -> Response:
        tool = self._tool(request.path_params["name"])
        if tool is None:
            return self._no_tool(request.path_params["name"], session)
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()

        def on_event(event: Event) -> None:  # may be called from an executor's thread
            loop.call_soon_threadsafe(queue.put_nowait, ("event", event))

        task = asyncio.ensure_future(self._call(tool, form, session.principal, on_event))
        task.add_done_callback(lambda _task: queue.put_nowait(("done", None)))
        first = await queue.get()
        return StreamingResponse(sse(first, queue, task), media_type="text/event-stream")

    async def _call(
        self, tool: Tool, form: dict[str, str], who: Principal, on_event: Callable[[Event], None] | None
    ) -> CallResult:
        try:
            args = form_arguments(tool.schema, form)
        except FieldError as exc:
            errors = [{"path": f"$.{k}" if k else "$", "message": v} for k, v in exc.errors.items()]
            raise ApiError(
                422, "invalid_arguments", "some fields are not valid; nothing ran", errors=errors
            ) from None
        if self.running >= self.max_concurrent:
            message = f"{self.running} calls are running from the console, the most at once; retry shortly"
            raise ApiError(429, "busy", message)
        self.running += 1
        try:
            return await self.host.acall(
                tool.name,
                args,
                persona=who.persona,
                caller=who.identity,
                confirm=form.get("confirm") == "true",
                on_event=on_event,
            )
        except ApprovalRequired as exc:
            if exc.ticket is not None and exc.ticket.status == "pending" and len(self.held) < MAX_HELD:
                self.held[exc.ticket.id] = _Held(tool.name, args, who.persona, who.identity)
            raise api_error(exc) from None
        except OngridError as exc:
            raise api_error(exc) from None
        finally:
            self.running -= 1

    # ------------------------------------------------------------------ approvals

    async def approvals(self, request: Request, session: Session, form: dict[str, str]) -> Response:
        tickets = await run_in_threadpool(self._tickets)
        who = session.principal
        listing = pages.ticket_list(
            tickets,
            me=who.identity,
            can_sign=self._signs(who),
            persona=who.persona,
            csrf=session.csrf,
            running=self.progress,
            held=set(self.held),
        )
        if request.query_params.get("part") == "list":
            return HTMLResponse(listing)
        return self._html(
            "Approvals", pages.approvals_body(listing), 200, session, current="approvals", live="approvals"
        )

    def _tickets(self) -> list[Any]:
        try:
            tickets = self.host.tickets()
        except ApprovalError as exc:
            logger.error("console: %s", exc)
            return []
        for ticket in tickets:  # forget held calls whose ticket can no longer run
            if ticket.status in _FINISHED:
                self.held.pop(ticket.id, None)
        closed = [t for t in tickets if t.status in _FINISHED][:50]
        return [t for t in tickets if t.status not in _FINISHED] + closed

    async def approve(self, request: Request, session: Session, form: dict[str, str]) -> Response:
        ticket_id = request.path_params["ticket_id"]
        who = session.principal
        if not self._signs(who):
            message = f"Your persona {who.persona} cannot approve: that takes a dual-sign-required persona."
            return await self._refused(request, session, message)
        note = form.get("note", "")[:2000]
        try:
            ticket = await run_in_threadpool(
                lambda: self.host.approve(ticket_id, approver=who.identity, note=note)
            )
        except ApprovalError as exc:
            return await self._refused(request, session, pages.rule_text(exc.reason, str(exc)))
        if ticket.status == "approved":
            held = self.held.pop(ticket.id, None)
            if held is not None:
                self._start_held(ticket.id, held)
                session.say(
                    "ok", f"You approved ticket {ticket.id}: it is approved, and runs now for {held.caller}."
                )
            else:
                session.say(
                    "ok",
                    f"You approved ticket {ticket.id}: it is approved; {ticket.requester} may run it once.",
                )
        else:
            session.say(
                "ok", f"You approved ticket {ticket.id} ({len(ticket.approvals)} of {ticket.required})."
            )
        return RedirectResponse(f"/approvals#t-{ticket.id}", 303)

    async def run_approved(self, request: Request, session: Session, form: dict[str, str]) -> Response:
        """The requester runs the call the console holds for an approved ticket (approved elsewhere)."""
        ticket_id = request.path_params["ticket_id"]
        held = self.held.get(ticket_id)
        if held is None:
            message = (
                f"The console holds no call for ticket {ticket_id} (it was asked elsewhere, or the server "
                "restarted): run it where it was asked, with its ticket."
            )
            return await self._refused(request, session, message)
        if held.caller.strip().casefold() != session.principal.identity.strip().casefold():
            return await self._refused(
                request, session, f"Only {held.caller}, who asked for it, runs this call."
            )
        self.held.pop(ticket_id, None)
        self._start_held(ticket_id, held)
        session.say("ok", f"Running the approved call of ticket {ticket_id}.")
        return RedirectResponse(f"/approvals#t-{ticket_id}", 303)

    def _start_held(self, ticket_id: str, held: _Held) -> None:
        self.progress[ticket_id] = f"running now, as {held.caller}"
        task = asyncio.ensure_future(self._run_held(ticket_id, held))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _run_held(self, ticket_id: str, held: _Held) -> None:
        try:
            result = await self.host.acall(
                held.tool, held.args, persona=held.persona, caller=held.caller, ticket=ticket_id
            )
            self.progress[ticket_id] = f"ran: {result.outcome}"
        except OngridError as exc:
            self.progress[ticket_id] = f"could not run: {exc}"
        except Exception as exc:  # a background task: log, never lose it silently
            logger.exception("console: the approved call of ticket %s crashed", ticket_id)
            self.progress[ticket_id] = f"crashed: {exc!r}"

    async def reject(self, request: Request, session: Session, form: dict[str, str]) -> Response:
        ticket_id = request.path_params["ticket_id"]
        who = session.principal
        note = form.get("note", "")[:2000]
        try:
            ticket = await run_in_threadpool(self.host.ticket, ticket_id)
            if (
                not self._signs(who)
                and ticket.requester.strip().casefold() != who.identity.strip().casefold()
            ):
                message = (
                    "Only a dual-sign-required persona, or the requester withdrawing it, may reject a ticket."
                )
                return await self._refused(request, session, message)
            ticket = await run_in_threadpool(
                lambda: self.host.reject(ticket_id, approver=who.identity, note=note)
            )
        except ApprovalError as exc:
            return await self._refused(request, session, pages.rule_text(exc.reason, str(exc)))
        self.held.pop(ticket.id, None)
        session.say("ok", f"You rejected ticket {ticket.id}: it can never run.")
        return RedirectResponse(f"/approvals#t-{ticket.id}", 303)

    async def _refused(self, request: Request, session: Session, message: str) -> Response:
        session.say("error", message)
        response = await self.approvals(request, session, {})
        response.status_code = 403
        return response

    # ------------------------------------------------------------------ audit

    async def audit(self, request: Request, session: Session, form: dict[str, str]) -> Response:
        who = session.principal
        if not self._signs(who):
            body = (
                f'<p class="flash flash-error" role="alert">Your persona {esc(who.persona)} may not read '
                "the audit log: it shows every caller's arguments, so it takes a dual-sign-required "
                "persona.</p>"
            )
            return self._html("Audit", body, 403, session, current="audit")
        keys = ("tool", "outcome", "caller", "start", "end", "limit")
        query = {k: v.strip() for k, v in request.query_params.items() if k in keys and v.strip()}
        try:
            filters = _audit_filters(query)
        except ValueError as exc:
            session.say("error", str(exc))
            filters = {"limit": 100}
        part = request.query_params.get("part")
        if part == "chain":
            return HTMLResponse(pages.chain_html(await run_in_threadpool(self._verified, True)))
        # The whole page never waits for a full chain check (~20 µs a row): it shows the
        # last result while the log is unchanged, else asks for it once painted.
        entries = await run_in_threadpool(self._audit_entries, dict(filters))
        report = await run_in_threadpool(self._verified, part == "rows")
        rows = pages.audit_rows(entries, report)
        if part == "rows":
            return HTMLResponse(rows)
        live = "/audit?" + urllib.parse.urlencode({**query, "part": "rows"})
        return self._html(
            "Audit", pages.audit_body(rows, query, live), 200, session, current="audit", live="audit"
        )

    def _audit_entries(self, filters: dict[str, Any]) -> list[Any]:
        limit = filters.pop("limit")
        return self.host.audit.entries(last=limit, **filters)[::-1]

    def _verified(self, compute: bool) -> VerifyReport | None:
        """The chain's status, cached while the log files are unchanged; None if stale and not ``compute``."""
        log = self.host.audit
        log.flush()
        key = _fingerprint([log.path, log.path + "-wal"])
        if self._chain is not None and self._chain[0] == key:
            return self._chain[1]
        if not compute:
            return None
        report = log.verify()
        self._chain = (key, report)
        return report

    # ------------------------------------------------------------------ live

    async def events(self, request: Request, session: Session, form: dict[str, str]) -> Response:
        topics = [
            t
            for t in request.query_params.get("topics", "approvals").split(",")
            if t in ("approvals", "audit")
        ]
        if "audit" in topics and not self._signs(session.principal):
            topics.remove("audit")
        watched = {
            "approvals": [self.host.approvals.path, self.host.approvals.path + "-wal"],
            "audit": [self.host.audit.path, self.host.audit.path + "-wal"],
        }
        cookie = request.cookies.get(COOKIE)
        return StreamingResponse(self._watch(topics, watched, cookie), media_type="text/event-stream")

    async def _watch(
        self, topics: list[str], watched: dict[str, list[str]], cookie: str | None
    ) -> AsyncIterator[str]:
        """``approvals`` / ``audit`` events whenever their database changes or a ticket expires.

        Ends when the session does (sign-out, idle): a stream never outlives its session.
        """
        seen = {topic: _fingerprint(watched[topic]) for topic in topics}
        expiry = await run_in_threadpool(self._next_expiry) if "approvals" in topics else None
        progress = dict(self.progress)
        yield "retry: 2000\n\n"
        quiet = 0.0
        while self.sessions.alive(cookie):
            await asyncio.sleep(POLL_SECONDS)
            quiet += POLL_SECONDS
            for topic in topics:
                now = _fingerprint(watched[topic])
                changed = now != seen[topic]
                if topic == "approvals":
                    if expiry is not None and time.time() >= expiry:
                        changed = True
                    if self.progress != progress:
                        progress, changed = dict(self.progress), True
                if changed:
                    seen[topic] = now
                    if topic == "approvals":
                        expiry = await run_in_threadpool(self._next_expiry)
                    quiet = 0.0
                    yield f"event: {topic}\ndata: {json.dumps({'changed': topic})}\n\n"
            if quiet >= KEEPALIVE_SECONDS:
                quiet = 0.0
                yield ": keep-alive\n\n"

    def _next_expiry(self) -> float | None:
        try:
            open_tickets = [t for t in self.host.tickets() if t.is_open]
        except ApprovalError:
            return None
        return min((t.expires for t in open_tickets), default=None)

    # ------------------------------------------------------------------ assets

    async def static(self, request: Request) -> Response:
        name = request.path_params["file"]
        if name not in _STATIC:
            return Response("not found", 404, media_type="text/plain")
        data = resources.files(__package__).joinpath("static", name).read_bytes()
        return Response(data, media_type=_STATIC[name], headers={"Cache-Control": "public, max-age=300"})


# ---------------------------------------------------------------------- helpers


def _signed_out() -> str:
    return (
        '<p class="flash flash-error" role="alert">You are signed out. '
        '<a href="/login">Sign in</a> again.</p>'
    )


def _cross_origin(request: Request) -> str:
    """Why a state-changing request from another origin is refused; empty when it is same-origin."""
    origin = request.headers.get("origin")
    if origin is None or origin == f"{request.url.scheme}://{request.headers.get('host', '')}":
        return ""
    return f"This request came from another site ({origin}) and was refused."


async def _form(request: Request) -> dict[str, str]:
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


def _next(value: str | None) -> str:
    """Where to go after signing in: a local path only (never ``//host`` or a URL)."""
    if not value or not value.startswith("/") or value.startswith("//") or "\\" in value:
        return "/"
    return value if not value.startswith("/login") else "/"


def _values(form: dict[str, str]) -> dict[str, str]:
    from .forms import PREFIX

    return {k[len(PREFIX) :]: v for k, v in form.items() if k.startswith(PREFIX)}


def _field_errors(error: ApiError) -> dict[str, str]:
    errors: dict[str, str] = {}
    for item in error.details.get("errors", []) or []:
        errors.setdefault(field_of(str(item.get("path", ""))), str(item.get("message", "")))
    return errors


def _fingerprint(paths: list[str]) -> tuple[Any, ...]:
    out: list[Any] = []
    for path in paths:
        try:
            st = os.stat(path)
        except OSError:
            out.append(None)
        else:
            out.append((st.st_ino, st.st_size, st.st_mtime_ns))
    return tuple(out)


_DIGESTS: SideTable[tuple[tuple[Any, ...], str]] = SideTable()
"""Each tool's entry digest, with the file state it was computed for."""


def _digest(tool: Tool) -> str:
    """The sha256 of a subprocess tool's entry file (memoised per file state); empty when unknown."""
    if not tool.entry:
        return ""
    try:
        st = os.stat(tool.entry)
        key = ("console-digest", st.st_ino, st.st_size, st.st_mtime_ns)
        cached = _DIGESTS.get(id(tool))
        if cached and cached[0] == key:
            return str(cached[1])
        if st.st_size > 64 * 1024 * 1024:
            return ""
        h = hashlib.sha256()
        with open(tool.entry, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
    except OSError:
        return ""
    text = f"sha256:{h.hexdigest()} (entry file)"
    _DIGESTS.put(tool, (key, text))
    return text


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
