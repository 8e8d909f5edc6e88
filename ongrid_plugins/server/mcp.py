"""An MCP server over stdio for one persona (extra ``[mcp]``, the official ``mcp`` SDK).

``ongrid-skills mcp --persona operator`` serves:

* ``tools/list``: the tools the persona may call (``host.export("mcp")``);
* ``tools/call``: :func:`~ongrid_plugins.host.dispatch.adispatch`, so the same gate, checks and
  runner as every other surface; the skill's stderr lines go out as progress
  notifications (when the client sent a progress token) and as log messages;
* ``prompts/list`` / ``prompts/get``: each SKILL.md skill's instructions, and
  ``resources/list`` / ``resources/read``: ``skill://<skill>/SKILL.md`` (the file as
  written) and the skill's files (``skill://<skill>/references/api.md``), read only
  when asked for;
* MCP's Skills extension (``skills/list``, ``skills/get``, ``resources/directory/read``;
  :mod:`.mcp_skills`).

A call that needs a confirmation asks the user through MCP elicitation: a
``elicitation/create`` request on handshake-era connections, an ``InputRequiredResult``
on 2026-07-28 ones. A client without elicitation gets the call refused with a message
saying so. A dangerous call returns its two-person ticket for people to approve out of
band (``ongrid-skills approvals approve ID``); the same call made again after that runs.

The caller (requester of tickets, ``caller`` in the audit log) is the OS user running
the server; there is no flag to claim another name, for the reason ``approvals`` has none.

Catalog changes (a reload, ``ongrid-skills mcp --watch``): the server declares
``listChanged`` for tools, prompts and resources and, after each reload that changed
something, sends ``notifications/tools/list_changed`` (and ``prompts/list_changed``,
``resources/list_changed`` when a SKILL.md skill changed) to every handshake-era
session that has made a request, and publishes the same events to every 2026-07-28
``subscriptions/listen`` stream. Each listed tool carries its skill's digest in
``_meta["ongrid/digest"]`` (and ``_meta["ongrid/stale"]`` when the last good version
is served).
"""

from __future__ import annotations

import asyncio
import base64
import logging
import mimetypes
import os
import secrets
import time
import warnings
import weakref
from collections.abc import Iterator
from typing import Any

from ..catalog import CatalogChange
from ..core.stdio import stdout_to_stderr
from ..discovery.registry import spelling
from ..errors import ConfirmationRequired, PermissionDenied, ResourceRefused, UnknownSkill
from ..gate.persona_lookup import PersonaLike
from ..host.dispatch import Confirmation, Dispatched, adispatch, refusal
from ..host.facade import SkillHost
from ..models import Event, Skill, Verdict
from . import missing_extra

try:
    import anyio
    import mcp.types as types
    from mcp.server.lowlevel import NotificationOptions, Server
    from mcp.server.stdio import stdio_server
    from mcp.server.subscriptions import (
        InMemorySubscriptionBus,
        ListenHandler,
        PromptsListChanged,
        ResourcesListChanged,
        ToolsListChanged,
    )
    from mcp.shared.exceptions import MCPDeprecationWarning, MCPError
    from mcp_types.version import MODERN_PROTOCOL_VERSIONS
except ImportError as exc:  # pragma: no cover - exercised without the extra
    raise missing_extra("mcp", "mcp") from exc
from .mcp_answers import (
    CONFIRM_SCHEMA,
    accepted,
    can_elicit,
    cannot_ask,
    declined,
    input_required,
    not_asked,
    question_text,
)
from .mcp_skills import register
from .mcp_wire import carried, screened
from .rules import may_see_tool
from .tokens import Principal

__all__ = ["LIST_CHANGED", "MAX_CALLS", "create_server", "serve_stdio"]

MAX_CALLS = 16  # tool calls one server runs at once by default (``mcp --max-calls``)

#: What ``initialize`` declares: every list may change (the catalog reloads).
LIST_CHANGED = NotificationOptions(prompts_changed=True, resources_changed=True, tools_changed=True)
_DIGEST_META = "ongrid/digest"
_STALE_META = "ongrid/stale"

_LEVELS = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")
_URI = "skill://"
logger = logging.getLogger(__name__)
_ASK_TTL = 600.0  # seconds a confirmation question stays answerable
_MAX_ASKED = 1000


def create_server(
    host: SkillHost,
    *,
    persona: PersonaLike = "operator",
    caller: str | None = None,
    max_calls: int = MAX_CALLS,
) -> Server[Any]:
    """The low-level MCP server (run it with :func:`serve_stdio`, or over any SDK transport);
    ``max_calls`` tool calls run at once, more wait (a flood does not start skills without end)."""
    who = host.persona(persona)
    handlers = _Handlers(host, who.name if not who.path else who.path, caller, max_calls)
    server: Server[Any] = Server(
        "ongrid-plugins",
        version=_version(),
        instructions=(
            f"Tools run through ongrid-plugins' permission gate as persona {who.name}: "
            "changes ask the user for a confirmation; dangerous calls need two-person approval "
            "(the result names a ticket)."
        ),
        on_list_tools=handlers.list_tools,
        on_call_tool=handlers.call_tool,
        on_list_prompts=handlers.list_prompts,
        on_get_prompt=handlers.get_prompt,
        on_list_resources=handlers.list_resources,
        on_read_resource=handlers.read_resource,
        on_subscriptions_listen=handlers.listen,
    )
    server.add_request_handler("logging/setLevel", types.SetLevelRequestParams, handlers.set_level)
    register(
        server, handlers._skills, handlers._seen
    )  # the Skills extension: skills/list, skills/get, directory reads
    server.ongrid_announce = handlers.announce  # type: ignore[attr-defined]
    server.ongrid_slots = handlers.slots  # type: ignore[attr-defined]  # also for calls mcp_wire runs
    return server


async def serve_stdio(
    host: SkillHost,
    *,
    persona: PersonaLike = "operator",
    caller: str | None = None,
    max_calls: int = MAX_CALLS,
) -> None:
    """Serve MCP on this process's stdin/stdout until the client closes them."""
    # Log lines are what this server is for; the SDK warns that the logging capability is
    # deprecated in 2026-07-28 (where it is opt-in per request and delivered as such).
    warnings.filterwarnings("ignore", category=MCPDeprecationWarning)
    with stdout_to_stderr():  # the SDK claims fd 1 only once it serves: a plugin's print() at load
        server = create_server(host, persona=persona, caller=caller, max_calls=max_calls)
        await anyio.to_thread.run_sync(host.tools)  # load before the first request
    loop = asyncio.get_running_loop()

    def on_changes(changes: list[CatalogChange]) -> None:  # called in the reloading thread
        future = asyncio.run_coroutine_threadsafe(server.ongrid_announce(changes), loop)  # type: ignore[attr-defined]
        future.add_done_callback(_log_failure)

    unsubscribe = host.subscribe(on_changes)
    try:
        async with stdio_server() as (read_stream, write_stream), anyio.create_task_group() as group:
            lines = screened(read_stream, write_stream, host, persona, caller, group, server.ongrid_slots)  # type: ignore[attr-defined]
            await server.run(lines, write_stream, server.create_initialization_options(LIST_CHANGED))
    finally:
        unsubscribe()


def _log_failure(future: Any) -> None:
    if not future.cancelled() and future.exception() is not None:
        logger.error("mcp: telling the sessions of a catalog change failed: %r", future.exception())


def _version() -> str:
    from ..core.version import __version__

    return __version__


class _Handlers:
    def __init__(self, host: SkillHost, persona: str, caller: str | None, max_calls: int) -> None:
        self.host = host
        self.slots = anyio.Semaphore(max_calls)
        self.persona = persona
        self.caller = caller
        self.level = "info"
        # request_state tokens issued: token -> (tool, args digest, deadline). Random, single-use:
        # a client cannot forge a confirmation it was never asked for (digests are derivable).
        self.asked: dict[str, tuple[str, str, float]] = {}
        self.bus = InMemorySubscriptionBus()
        self.listen = ListenHandler(self.bus)
        self.sessions: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()
        """Handshake-era connections that made a request -> their latest session (``list_changed``)."""

    def _seen(self, ctx: Any) -> None:
        if getattr(ctx, "protocol_version", None) not in MODERN_PROTOCOL_VERSIONS:
            # The SDK makes a session per request over one connection; any of them reaches
            # the connection's own channel, so the latest is kept while the connection lives.
            self.sessions[getattr(ctx.session, "_connection", ctx.session)] = ctx.session

    async def announce(self, changes: list[CatalogChange]) -> None:
        """Tell every session which lists ``changes`` touched."""
        kinds: list[Any] = []
        if any(change.tools for change in changes):
            kinds.append(ToolsListChanged())
        if any(change.path.endswith("SKILL.md") for change in changes):
            kinds += [PromptsListChanged(), ResourcesListChanged()]
        for event in kinds:
            await self.bus.publish(event)
        for connection, session in list(self.sessions.items()):
            for event in kinds:
                send = {
                    ToolsListChanged: session.send_tool_list_changed,
                    PromptsListChanged: session.send_prompt_list_changed,
                    ResourcesListChanged: session.send_resource_list_changed,
                }[type(event)]
                try:
                    await send()
                except Exception:  # a closed connection: it will not be told again
                    self.sessions.pop(connection, None)
                    break

    # ------------------------------------------------------------------ tools

    async def list_tools(self, ctx: Any, params: Any) -> types.ListToolsResult:
        self._seen(ctx)
        tools = await anyio.to_thread.run_sync(self._export)
        return types.ListToolsResult(tools=[types.Tool.model_validate(t) for t in tools])

    def _export(self) -> list[dict[str, Any]]:
        snapshot = self.host.registry.snapshot
        tools = self.host.export("mcp", persona=self.persona)
        for tool in tools:
            found = snapshot.tools.get(tool["name"])
            if found is None:
                continue
            meta = {_DIGEST_META: found.digest}
            skill = snapshot.skills.get(found.skill)
            if skill is not None and skill.stale:
                meta[_STALE_META] = skill.stale
            tool["_meta"] = {**tool.get("_meta", {}), **meta}
        return tools

    async def call_tool(
        self, ctx: Any, params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult:
        self._seen(ctx)
        call = {"name": params.name, "arguments": params.arguments or {}}
        modern = ctx.protocol_version in MODERN_PROTOCOL_VERSIONS
        can_ask = can_elicit(ctx)
        asked = {"declined": False}
        confirm: Any = False
        if modern and params.input_responses and "confirm" in params.input_responses:
            digest = self._redeem(params.name, params.request_state) if can_ask else None
            if digest is None:
                return not_asked(params.name)
            if not accepted(params.input_responses["confirm"]):
                return declined(params.name)
            confirm = digest  # the args digest the user was asked about
        elif can_ask and not modern:
            confirm = _asker(ctx, asked, self.slots)
        outcome = self._hidden(await self._run(ctx, call, confirm))
        if asked["declined"]:
            return declined(params.name)
        if outcome.status == "needs_confirmation" and isinstance(outcome.error, ConfirmationRequired):
            if modern and can_ask and confirm is False:
                state = self._issue(params.name, outcome.error.args_digest)
                return input_required(outcome.error, outcome.call.arguments or {}, state)
            if not can_ask:
                return cannot_ask(outcome)
        return types.CallToolResult.model_validate(carried(outcome.message))

    def _hidden(self, outcome: Dispatched) -> Dispatched:
        """As REST answers: a tool this persona may not call at all is absent, and
        suggestions name only tools it may call (a model must not learn the others)."""
        exc, who = (
            outcome.error,
            Principal(self.caller or "", getattr(self.persona, "name", str(self.persona))),
        )
        if isinstance(exc, UnknownSkill) and exc.suggestions:
            visible = [name for name in exc.suggestions if may_see_tool(self.host, name, who)]
            if len(visible) < len(exc.suggestions):
                return refusal(outcome.call, UnknownSkill(exc.name, visible, skill=exc.skill))
        elif isinstance(exc, PermissionDenied) and not may_see_tool(self.host, outcome.call.name, who):
            return refusal(outcome.call, UnknownSkill(outcome.call.name))
        return outcome

    def _issue(self, tool: str, digest: str) -> str:
        """A fresh request_state for a confirmation this server asks for."""
        now = time.monotonic()
        for token in [t for t, (_tool, _digest, deadline) in self.asked.items() if deadline < now]:
            del self.asked[token]
        while len(self.asked) >= _MAX_ASKED:
            del self.asked[next(iter(self.asked))]  # the oldest question lapses
        token = secrets.token_urlsafe(32)
        self.asked[token] = (tool, digest, now + _ASK_TTL)
        return token

    def _redeem(self, tool: str, state: object) -> str | None:
        """The args digest of the question ``state`` answers, once; None if never asked."""
        if not isinstance(state, str):
            return None
        found = self.asked.pop(state, None)
        if found is None or found[0] != tool or found[2] < time.monotonic():
            return None
        return found[1]

    async def _run(self, ctx: Any, call: dict[str, Any], confirm: Any) -> Dispatched:
        relay = _Relay(ctx, self)
        async with self.slots, anyio.create_task_group() as group:
            group.start_soon(relay.pump)
            try:
                outcome = await adispatch(
                    self.host,
                    call,
                    persona=self.persona,
                    caller=self.caller,
                    confirm=confirm,
                    on_event=relay.put,
                )
            finally:
                relay.close()
        return outcome

    async def set_level(self, ctx: Any, params: types.SetLevelRequestParams) -> types.EmptyResult:
        self.level = params.level
        return types.EmptyResult()

    # ------------------------------------------------------------------ prompts and resources

    def _skills(self) -> list[Skill]:
        """Skills with instructions the persona may use: a prompt skill, or one with a tool it may call."""
        who = self.host.persona(self.persona)
        allowed = []
        for skill in self.host.skills():
            if skill.format != "SKILL.md" or not skill.model_invocable or not skill.available:
                continue
            tools = [t for t in skill.tools if t.available]
            if not skill.tools or any(self.host.decide(t, who).verdict is not Verdict.DENY for t in tools):
                allowed.append(skill)
        return allowed

    async def list_prompts(self, ctx: Any, params: Any) -> types.ListPromptsResult:
        self._seen(ctx)
        skills = await anyio.to_thread.run_sync(self._skills)
        prompts = [
            types.Prompt(name=s.name, title=s.display_name or None, description=s.description) for s in skills
        ]
        return types.ListPromptsResult(prompts=prompts)

    async def get_prompt(self, ctx: Any, params: types.GetPromptRequestParams) -> types.GetPromptResult:
        skill = await self._skill(params.name)
        body = (await anyio.to_thread.run_sync(self.host.instructions, skill.name)).body
        message = types.PromptMessage(role="user", content=types.TextContent(type="text", text=body))
        return types.GetPromptResult(description=skill.description, messages=[message])

    async def list_resources(self, ctx: Any, params: Any) -> types.ListResourcesResult:
        self._seen(ctx)
        resources = await anyio.to_thread.run_sync(lambda: list(self._resources()))
        return types.ListResourcesResult(resources=resources)

    def _resources(self) -> Iterator[types.Resource]:
        for skill in self._skills():
            instructions = self.host.instructions(skill.name)
            yield types.Resource(
                uri=f"{_URI}{skill.name}/SKILL.md",
                name=f"{skill.name}/SKILL.md",
                description=skill.description,
                mime_type="text/markdown",
            )
            for item in instructions.resources:
                if not item.refused:
                    yield types.Resource(
                        uri=f"{_URI}{skill.name}/{item.path}",
                        name=f"{skill.name}/{item.path}",
                        mime_type=mimetypes.guess_type(item.path)[0] or "application/octet-stream",
                        size=item.size,
                    )

    async def read_resource(
        self, ctx: Any, params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        uri = str(params.uri)
        name, _, path = uri.removeprefix(_URI).partition("/")
        if not uri.startswith(_URI) or not path:
            raise MCPError(types.INVALID_PARAMS, f"not a skill resource: {uri} (use skill://<skill>/<path>)")
        # A nested skill's files (skill://outer/inner/SKILL.md) are the enclosing skill's too: read there.
        skill = await self._skill(name)
        instructions = await anyio.to_thread.run_sync(self.host.instructions, skill.name)
        if path == "SKILL.md":  # the file as written, front matter included: the bytes skills/list digests
            path = os.path.basename(skill.path)
        try:
            data = await anyio.to_thread.run_sync(instructions.read, path)
        except ResourceRefused as exc:
            raise MCPError(types.INVALID_PARAMS, str(exc)) from None
        mime = mimetypes.guess_type(path)[0] or "application/octet-stream"
        contents: types.TextResourceContents | types.BlobResourceContents
        try:
            contents = types.TextResourceContents(uri=uri, mime_type=mime, text=data.decode("utf-8"))
        except UnicodeDecodeError:
            contents = types.BlobResourceContents(
                uri=uri, mime_type=mime, blob=base64.b64encode(data).decode()
            )
        return types.ReadResourceResult(contents=[contents])

    async def _skill(self, name: str) -> Skill:
        skills = {spelling(s.name): s for s in await anyio.to_thread.run_sync(self._skills)}
        if spelling(name) not in skills:
            raise MCPError(types.INVALID_PARAMS, f"no skill instructions named {name!r} for this persona")
        return skills[spelling(name)]


class _Relay:
    """Sends a call's events to the client, in order, from whichever thread emitted them."""

    def __init__(self, ctx: Any, handlers: _Handlers) -> None:
        self.ctx = ctx
        self.handlers = handlers
        self.loop = asyncio.get_running_loop()
        self.queue: asyncio.Queue[Event | None] = asyncio.Queue()
        self.lines = 0

    def put(self, event: Event) -> None:
        self.loop.call_soon_threadsafe(self.queue.put_nowait, event)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.queue.put_nowait, None)

    async def pump(self) -> None:
        while (event := await self.queue.get()) is not None:
            if event.kind != "stderr":
                continue
            self.lines += 1
            line = str(event.data)
            try:
                await self.ctx.session.report_progress(self.lines, None, line)
                if _LEVELS.index(self.handlers.level) <= _LEVELS.index("info"):
                    await self.ctx.session.send_log_message(
                        "info",
                        {"tool": event.tool, "line": line},
                        logger=f"ongrid.{event.tool}",
                        related_request_id=self.ctx.request_id,
                    )
            except Exception:  # a client that went away must not break the call
                continue


def _asker(ctx: Any, asked: dict[str, bool], slots: anyio.Semaphore) -> Any:
    """A ``confirm`` callback asking the user with an ``elicitation/create`` request (handshake
    era); the call's slot is free while the person reads the question."""

    async def ask(question: Confirmation) -> bool:
        slots.release()
        try:
            answer = await ctx.session.elicit_form(
                question_text(question), CONFIRM_SCHEMA, related_request_id=ctx.request_id
            )
        finally:
            with anyio.CancelScope(shield=True):
                await slots.acquire()
        yes = accepted(answer)
        asked["declined"] = not yes
        return yes

    return ask
