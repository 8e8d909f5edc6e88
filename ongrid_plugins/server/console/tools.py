"""The console's catalog and tool pages, and runs: a form posted plain or streamed, checked twice.

The form's fields become arguments (:func:`~.forms.form_arguments`: a 422 names the
fields that are wrong, nothing runs) and the host checks them against the full schema
as for every caller. A call that needs two-person approval is held by the console
(:attr:`.Console.held`) so it can run as its requester once approved.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

from ...errors import ApprovalRequired, OngridError
from ...models import CallResult, Event, Tool, Verdict
from ...packs.trusted import pack_of_tool, pack_states
from .. import missing_extra
from ..responses import ApiError, api_error, result_body, sse
from ..tokens import Principal
from . import pages
from .digests import entry_digest
from .forms import PREFIX, FieldError, field_of, form_arguments
from .guard import respond
from .html import esc
from .sessions import Session
from .state import MAX_HELD, Console, Held

try:
    from starlette.concurrency import run_in_threadpool
    from starlette.requests import Request
    from starlette.responses import Response, StreamingResponse
except ImportError as exc:  # pragma: no cover - exercised without the extra
    raise missing_extra("server", "starlette") from exc

__all__ = ["catalog", "run", "run_stream", "tool_page"]

_FILTERS = ("q", "class", "category", "available")


async def catalog(console: Console, request: Request, session: Session, form: dict[str, str]) -> Response:
    """``GET /``: every tool the persona may call, filtered by words, class, category, availability."""
    query = {k: v for k, v in request.query_params.items() if k in _FILTERS}
    persona = console.host.persona(session.principal.persona)
    everything = await run_in_threadpool(lambda: console.host.tools(include_unavailable=True))
    allowed = []
    for tool in everything:
        decision = console.host.decide(tool, persona)
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
            w in f"{tool.name} {tool.display_name} {tool.description} {tool.category}".lower() for w in words
        )
    ]
    packs = await run_in_threadpool(lambda: pack_states(console.host))
    trust = {tool.name: pack_of_tool(console.host, packs, tool) for tool, _ in rows}
    body = pages.catalog_body(
        rows, total=len(allowed), query=query, categories=categories, persona=persona.name, trust=trust
    )
    return respond("Catalog", body, 200, session, current="catalog")


async def tool_page(console: Console, request: Request, session: Session, form: dict[str, str]) -> Response:
    """``GET /tools/{name}``: the tool's facts and its form."""
    tool = console.tool(request.path_params["name"], session.principal)
    if tool is None:
        return _no_tool(request.path_params["name"], session)
    return _tool_response(console, tool, session)


def _no_tool(name: str, session: Session) -> Response:
    body = (
        f'<p class="flash flash-error" role="alert">There is no tool {esc(name)}.</p>'
        '<p><a href="/">Back to the catalog</a></p>'
    )
    return respond("Unknown tool", body, 404, session, current="catalog")


def _tool_response(
    console: Console,
    tool: Tool,
    session: Session,
    *,
    status: int = 200,
    values: dict[str, str] | None = None,
    errors: dict[str, str] | None = None,
    outcome: str = "",
) -> Response:
    decision = console.host.decide(tool, session.principal.persona)
    body = pages.tool_body(
        tool,
        decision,
        csrf=session.csrf,
        digest=entry_digest(tool),
        sandbox=_sandbox(console, tool),
        values=values,
        errors=errors,
        outcome=outcome,
    )
    return respond(tool.name, body, status, session, current="catalog")


def _sandbox(console: Console, tool: Tool) -> str:
    settings = console.host.settings
    declared = json.dumps(tool.sandbox.to_dict(), sort_keys=True) if tool.sandbox is not None else "none"
    return f"host mode {settings.sandbox}, policy {settings.sandbox_policy}; the tool declares {declared}"


async def run(console: Console, request: Request, session: Session, form: dict[str, str]) -> Response:
    """``POST /tools/{name}/run`` (no script): run, then the tool page with the outcome under the form."""
    tool = console.tool(request.path_params["name"], session.principal)
    if tool is None:
        return _no_tool(request.path_params["name"], session)
    values = {k[len(PREFIX) :]: v for k, v in form.items() if k.startswith(PREFIX)}
    try:
        result = await _call(console, tool, form, session.principal, None)
    except ApiError as error:
        errors = _field_errors(error)
        body = {"error": error.message, "code": error.code, **error.details}
        outcome = pages.outcome_html(body)
        return _tool_response(
            console, tool, session, status=error.status, values=values, errors=errors, outcome=outcome
        )
    outcome = pages.outcome_html(result_body(result))
    return _tool_response(console, tool, session, values=values, outcome=outcome)


async def run_stream(console: Console, request: Request, session: Session, form: dict[str, str]) -> Response:
    """``POST /tools/{name}/run/stream``: the same call, its stderr lines as server-sent events."""
    tool = console.tool(request.path_params["name"], session.principal)
    if tool is None:
        return _no_tool(request.path_params["name"], session)
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()

    def on_event(event: Event) -> None:  # may be called from an executor's thread
        loop.call_soon_threadsafe(queue.put_nowait, ("event", event))

    task = asyncio.ensure_future(_call(console, tool, form, session.principal, on_event))
    task.add_done_callback(lambda _task: queue.put_nowait(("done", None)))
    first = await queue.get()
    return StreamingResponse(sse(first, queue, task), media_type="text/event-stream")


async def _call(
    console: Console,
    tool: Tool,
    form: dict[str, str],
    who: Principal,
    on_event: Callable[[Event], None] | None,
) -> CallResult:
    try:
        args = form_arguments(tool.schema, form)
    except FieldError as exc:
        errors = [{"path": f"$.{k}" if k else "$", "message": v} for k, v in exc.errors.items()]
        raise ApiError(
            422, "invalid_arguments", "some fields are not valid; nothing ran", errors=errors
        ) from None
    if console.running >= console.max_concurrent:
        message = f"{console.running} calls are running from the console, the most at once; retry shortly"
        raise ApiError(429, "busy", message)
    console.running += 1
    try:
        return await console.host.acall(
            tool.name,
            args,
            persona=who.persona,
            caller=who.identity,
            confirm=form.get("confirm") == "true",
            on_event=on_event,
        )
    except ApprovalRequired as exc:
        if exc.ticket is not None and exc.ticket.status == "pending" and len(console.held) < MAX_HELD:
            console.held[exc.ticket.id] = Held(tool.name, args, who.persona, who.identity)
        raise api_error(exc) from None
    except OngridError as exc:
        raise api_error(exc) from None
    finally:
        console.running -= 1


def _field_errors(error: ApiError) -> dict[str, str]:
    errors: dict[str, str] = {}
    for item in error.details.get("errors", []) or []:
        errors.setdefault(field_of(str(item.get("path", ""))), str(item.get("message", "")))
    return errors
