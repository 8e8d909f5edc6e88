"""``/v1/skills``: list and describe the tools a token's persona may call, run one; ``/v1/events``.

A call runs as the token's persona and is recorded under its identity; it takes one of
the token's call slots and one of the server's (:meth:`.Api.reserve`). The streamed
variant sends the skill's stderr lines as server-sent events, then its result; a call
refused before it started is a plain JSON error, as for the unstreamed route.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from ...audit.telemetry import remote_parent
from ...errors import OngridError, PermissionDenied, UnknownSkill
from ...models import CallResult, Event, Tool, Verdict
from ...packs.trusted import pack_of_tool, pack_states
from .. import missing_extra
from ..responses import ApiError, api_error, result_body, sse
from ..tokens import Principal
from .api import Api
from .bodies import execute_body, query

try:
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response, StreamingResponse
except ImportError as exc:  # pragma: no cover - exercised without the extra
    raise missing_extra("server", "starlette") from exc

__all__ = ["events", "execute", "execute_stream", "get_skill", "list_skills"]


async def list_skills(api: Api, request: Request, who: Principal) -> Response:
    """``GET /v1/skills``: the tools the persona may call, by category and class."""
    params = query(request, "category", "class")
    tool_class = params.get("class")
    if tool_class is not None and tool_class not in ("safe", "mutating", "dangerous"):
        raise ApiError(400, "bad_request", "class must be safe, mutating or dangerous")
    persona = api.host.persona(who.persona)
    tools = api.host.tools(persona, category=params.get("category"), tool_class=tool_class)
    packs = pack_states(api.host)
    items = [{**_summary(api, tool, who), "pack": pack_of_tool(api.host, packs, tool)} for tool in tools]
    return JSONResponse({"items": items, "total": len(items)})


async def get_skill(api: Api, request: Request, who: Principal) -> Response:
    """``GET /v1/skills/{name}``: one tool with its schema (404 when the persona may not see it)."""
    query(request)
    tool = api.tool(request.path_params["name"], who)
    data = _summary(api, tool, who)
    data.update(
        kind=tool.kind,
        schema=tool.schema,
        timeout_seconds=tool.timeout,
        unavailable=list(tool.unavailable),
        provenance=tool.provenance,
        pack=pack_of_tool(api.host, pack_states(api.host), tool),
    )
    return JSONResponse(data)


def _summary(api: Api, tool: Tool, who: Principal) -> dict[str, Any]:
    decision = api.host.decide(tool, who.persona).to_dict()
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
        "stale": _stale(api, tool),
        "decision": {**decision, "needs": Verdict(decision["verdict"]).needs},
    }


def _stale(api: Api, tool: Tool) -> str:
    skill = api.host.registry.snapshot.skills.get(tool.skill)
    return skill.stale if skill is not None else ""


async def events(api: Api, request: Request, who: Principal) -> Response:
    """``GET /v1/events``: catalog changes as server-sent events (see :mod:`ongrid_plugins.server.events`)."""
    from ..events import event_stream

    query(request)
    headers = {"Cache-Control": "no-store", "X-Accel-Buffering": "no"}
    stream = event_stream(api.host, who, api.closing)
    return StreamingResponse(stream, media_type="text/event-stream", headers=headers)


async def execute(api: Api, request: Request, who: Principal) -> Response:
    """``POST /v1/skills/{name}/execute``: run the tool, answer its result (or its failure)."""
    name = request.path_params["name"]
    body = execute_body(await api.json(request))
    api.reserve(who)
    try:
        with remote_parent(api.host.settings, request.headers):  # a W3C traceparent, when OTel is on
            result = await _call(api, name, body, who, None)
    finally:
        api.release(who)
    return JSONResponse(result_body(result))


async def execute_stream(api: Api, request: Request, who: Principal) -> Response:
    """``POST /v1/skills/{name}/execute/stream``: the same call, its log lines streamed as they come."""
    name = request.path_params["name"]
    body = execute_body(await api.json(request))
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()

    def on_event(event: Event) -> None:  # may be called from an executor's thread
        loop.call_soon_threadsafe(queue.put_nowait, ("event", event))

    api.reserve(who)
    with remote_parent(api.host.settings, request.headers):  # the task copies the context now
        task = asyncio.ensure_future(_call(api, name, body, who, on_event))
    task.add_done_callback(lambda _task: _release_after(api, queue, who))
    first = await queue.get()
    if first[0] == "done" and task.exception() is not None:
        raise task.exception()  # type: ignore[misc]  # refused before it started: a plain error
    return StreamingResponse(sse(first, queue, task), media_type="text/event-stream")


def _release_after(api: Api, queue: asyncio.Queue[tuple[str, Any]], who: Principal) -> None:
    api.release(who)
    queue.put_nowait(("done", None))


async def _call(
    api: Api, name: str, body: dict[str, Any], who: Principal, on_event: Callable[[Event], None] | None
) -> CallResult:
    try:
        return await api.host.acall(
            name,
            body["params"],
            persona=who.persona,
            caller=who.identity,
            confirm=body["confirm"],
            ticket=body["ticket"],
            timeout=body["timeout"],
            on_event=on_event,
        )
    except UnknownSkill as exc:  # suggest only what this persona may call, as api.tool does
        visible = [s for s in exc.suggestions if api.visible(s, who)]
        raise api_error(UnknownSkill(name, visible, skill=exc.skill)) from None
    except PermissionDenied as exc:
        if not api.visible(name, who):  # denied whatever the arguments: answered as if absent
            raise api_error(UnknownSkill(name, ())) from None
        raise api_error(exc) from None  # these arguments only: the reason helps the caller
    except OngridError as exc:
        raise api_error(exc) from None
