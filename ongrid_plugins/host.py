"""SkillHost: the facade a host application embeds.

::

    from ongrid_plugins import SkillHost, Settings

    host = SkillHost(Settings(skill_dirs=["/srv/skills"], include_defaults=False))
    report = host.load()
    result = host.call("disk_usage", {"path": "/"})

Every call goes through one pipeline: look the tool up, fill in defaults and
check the arguments, ask the gate, tell the ``ongrid_before_call`` hooks,
enforce (raise for caller errors), run the executor, tell the
``ongrid_after_call`` hooks. Skill-level failures come back as a
:class:`CallResult` with ``ok=False``; caller errors raise.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import logging
import os
import threading
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

import attrs

from . import gate
from .catalog import Hub, diff, load_catalog, skill_digest
from .errors import (
    ApprovalError,
    ApprovalRequired,
    ConfigError,
    ConfirmationRequired,
    InvalidArguments,
    OngridError,
    PermissionDenied,
    SkillUnavailable,
    UnknownPersona,
    UnknownSkill,
)
from .executors import Executor
from .instructions import Instructions, read_instructions
from .models import (
    CallRequest,
    CallResult,
    Decision,
    EventCallback,
    LoadReport,
    Persona,
    Skill,
    Tool,
    ToolClass,
    Verdict,
    digest_json,
)
from .plugins import PluginInfo, PluginManager, call_hook, get_plugin_manager
from .registry import Registry, Snapshot, spelling
from .resolve import ResolvedSkill, resolve
from .schema.arguments import check_arguments, is_light
from .settings import Settings

if TYPE_CHECKING:
    # Imported when first needed (the first call, load or persona file), not with the package.
    from .audit import AuditLog
    from .catalog.events import Listener
    from .catalog.watch import Watch
    from .dispatch import ConfirmFn
    from .executors.confine import Profile
    from .gate.approvals import ApprovalStore
    from .gate.personas import PersonaCatalog
    from .gate.tickets import Ticket

__all__ = ["SkillHost"]

logger = logging.getLogger(__name__)

PersonaLike = str | Persona


@attrs.frozen
class _Attempt:
    """A prepared call: the request, the gate's decision, and why it may not run (if so)."""

    request: CallRequest
    decision: Decision
    refusal: BaseException | None
    status: str


class SkillHost:
    """Loads skills into one registry and runs them through one pipeline."""

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        plugin_manager: PluginManager | None = None,
        plugins: Iterable[object] = (),
    ) -> None:
        """Create a host; nothing is read from disk until the first :meth:`load`.

        :param settings: Where skills are and what the limits are;
            ``Settings.from_env()`` when omitted.
        :param plugin_manager: A ready plugin manager (tests, embedding); built
            from ``settings`` when omitted.
        :param plugins: Extra plugin objects or modules to register, in order,
            after the built-in and entry-point ones.
        """
        self.settings = settings if settings is not None else Settings.from_env()
        self.registry = Registry()
        self._pm = plugin_manager
        self._extra = list(plugins)
        self._report: LoadReport | None = None
        self._lock = threading.Lock()
        self._load_lock = threading.RLock()
        self._default_caller = ""
        self._personas: PersonaCatalog | None = None
        self._approvals: ApprovalStore | None = None
        self._audit: AuditLog | None = None
        self.catalog = Hub()
        """Who hears of catalog changes (see :meth:`subscribe`)."""

    def __repr__(self) -> str:
        state = "loaded" if self._report is not None else "not loaded"
        return f"<SkillHost {state} {self.registry!r}>"

    # ------------------------------------------------------------------ plugins

    @property
    def pm(self) -> PluginManager:
        """The plugin manager, built on first use."""
        if self._pm is None:
            with self._lock:
                if self._pm is None:
                    from .audit import PLUGIN_NAME, warn_if_disabled

                    pm = get_plugin_manager(self.settings, per_host={PLUGIN_NAME: lambda: self.audit})
                    warn_if_disabled(pm)
                    for index, plugin in enumerate(self._extra):
                        pm.add_plugin(plugin, _plugin_name(plugin, index))
                    self._pm = pm
        return self._pm

    @property
    def audit(self) -> AuditLog:
        """The audit log (``<state_dir>/audit.db``); records calls unless the ``audit`` plugin is disabled."""
        if self._audit is None:
            from .audit import AuditLog

            self._audit = AuditLog.for_settings(self.settings)
        return self._audit

    @property
    def approvals(self) -> ApprovalStore:
        """The two-person ticket store: ``<state_dir>/approvals.db``, or a server's (``approvals_url``)."""
        if self._approvals is None:
            if self.settings.approvals_url:
                from .gate.approvals_client import RemoteApprovalStore

                self._approvals = RemoteApprovalStore.for_settings(self.settings)
            else:
                from .gate.approvals import ApprovalStore

                self._approvals = ApprovalStore.for_settings(self.settings)
        return self._approvals

    @approvals.setter
    def approvals(self, store: ApprovalStore) -> None:
        self._approvals = store

    def plugins(self) -> list[PluginInfo]:
        """Every plugin offered to the host, with its status and hooks."""
        return self.pm.describe()

    # ------------------------------------------------------------------ loading

    def load(self) -> LoadReport:
        """Walk every root and swap in a fresh registry; return what happened.

        Never raises for a bad manifest or root (see the report); calls in
        flight keep the registry they started with.
        """
        with self._load_lock:
            previous = self.registry.snapshot if self._report is not None else None
            snapshot, report = load_catalog(self.pm, self.settings, previous)
            self.registry.swap(snapshot)
            self._report = report
            self._personas = None  # persona files are read again on next use
            if previous is not None:
                self.catalog.publish(diff(previous, snapshot))
        return report

    def reload(self) -> LoadReport:
        """Load again (same as :meth:`load`): re-reads every root."""
        return self.load()

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Call ``listener`` with each batch of ``CatalogChange`` a reload makes; returns the unsubscribe.

        The first load announces nothing; every later one (:meth:`reload`, a
        :meth:`watch`) announces what it added, changed, removed or kept stale.
        """
        return self.catalog.subscribe(listener)

    def watch(
        self,
        *,
        debounce: float = 0.2,
        poll_interval: float = 0.25,
        force_polling: bool = False,
    ) -> Watch:
        """Reload whenever a root, persona folder or the packs folder changes (see :mod:`.catalog.watch`).

        ``with host.watch():`` reloads in the background for the block;
        ``async for changes in host.watch():`` yields each batch of
        :class:`CatalogChange`. watchfiles (extra ``[watch]``) is used when
        installed, else (or when inotify runs out) the folders are polled.
        """
        from .catalog.watch import Watch

        self._snapshot()
        return Watch(
            self._watched_folders,
            self.reload,
            self.subscribe,
            debounce=debounce,
            poll_interval=poll_interval,
            force_polling=force_polling,
        )

    def _watched_folders(self) -> list[str]:
        from .gate.personas import persona_dirs

        report = self._report
        roots = list(report.roots) if report is not None else []
        configured = [d for d in self.settings.skill_dirs if os.path.isabs(d)]  # watched once they exist
        return [*roots, *configured, *persona_dirs(self.settings), self.settings.user_skills_dir]

    @property
    def report(self) -> LoadReport:
        """The report of the last load (loading first if needed)."""
        self._snapshot()
        assert self._report is not None
        return self._report

    def _snapshot(self) -> Snapshot:
        if self._report is None:
            with self._load_lock:
                if self._report is None:
                    self.load()
        return self.registry.snapshot

    # ------------------------------------------------------------------ lookup

    def skills(self) -> list[Skill]:
        """Every registered skill, sorted by name."""
        return self._snapshot().list_skills()

    def tools(
        self,
        persona: PersonaLike | None = None,
        *,
        category: str | None = None,
        tool_class: ToolClass | str | None = None,
        include_unavailable: bool = False,
    ) -> list[Tool]:
        """Tools sorted by name; with ``persona``, only those it may ever call."""
        tools = self._snapshot().list_tools(
            category=category, tool_class=tool_class, include_unavailable=include_unavailable
        )
        if persona is None:
            return tools
        who = self.persona(persona)
        return [t for t in tools if self.decide(t, who).verdict is not Verdict.DENY]

    def get(self, name: str) -> Tool:
        """The tool called ``name``; raises :class:`UnknownSkill` with suggestions."""
        return self._snapshot().get(name)

    def skill(self, name: str) -> Skill:
        """The skill called ``name``, or the skill declaring the tool ``name``."""
        snapshot = self._snapshot()
        found = snapshot.find_skill(name)
        if found is None:
            tool = snapshot.tools.get(name) or snapshot.tools.get(spelling(name))
            found = snapshot.skills.get(tool.skill) if tool is not None else None
        if found is None:
            raise UnknownSkill(name, snapshot.suggestions(name))
        return found

    def instructions(self, name: str) -> Instructions:
        """The body and files of skill ``name`` (or of the skill declaring tool ``name``), read now."""
        return read_instructions(self.skill(name))

    def resolve(self, query: str, persona: PersonaLike | None = None) -> list[ResolvedSkill]:
        """The skills to mount for the user message ``query``, with the tools ``persona`` may call."""
        skills = self._snapshot().list_skills()
        if persona is None:
            return resolve(skills, query)
        who = self.persona(persona)
        return resolve(skills, query, lambda tool: self.decide(tool, who).verdict is not Verdict.DENY)

    def persona(self, persona: PersonaLike) -> Persona:
        """Resolve a persona: a :class:`Persona`, a built-in or persona-file name, or a file path.

        :raises UnknownPersona: no persona has that name (there is no fallback).
        :raises ConfigError: the persona file named by path is broken.
        """
        if isinstance(persona, Persona):
            return persona
        if not isinstance(persona, str):
            message = f"persona must be a name, a path or a Persona, got {type(persona).__name__}"
            raise ConfigError(message)
        builtin = gate.BUILTIN_PERSONAS.get(persona)
        if builtin is not None:
            return builtin
        from .gate import personas as persona_files

        if persona_files.looks_like_path(persona):
            return persona_files.read_persona(persona)
        found = self._persona_catalog().personas.get(persona)
        if found is None:  # a file added since the last look: read the folders again, once
            found = self._persona_catalog(refresh=True).personas.get(persona)
        if found is None:
            raise UnknownPersona(persona, self._persona_catalog().names())
        return found

    def personas(self) -> list[Persona]:
        """Every persona: the three built-ins, then the persona files, sorted by name."""
        files = self._persona_catalog(refresh=True).personas
        return [*gate.BUILTIN_PERSONAS.values(), *(files[name] for name in sorted(files))]

    def _persona_catalog(self, refresh: bool = False) -> PersonaCatalog:
        catalog = self._personas
        if catalog is None or refresh:
            from .gate.personas import discover

            catalog = self._personas = discover(self.settings)
        return catalog

    # ------------------------------------------------------------------ approvals

    def approve(self, ticket_id: str, *, approver: str, note: str = "", sop: str | None = None) -> Ticket:
        """Approve a two-person ticket as ``approver`` (an identity the host vouches for).

        Every ``ongrid_verify_approval`` plugin may refuse. Raises
        :class:`ApprovalError` naming the rule when the approval does not count.
        """
        from .gate.approvals import verify_with_plugins

        verify = verify_with_plugins(self.pm)
        ticket = self.approvals.approve(ticket_id, approver=approver, note=note, sop=sop, verify=verify)
        self._record_ticket(ticket, "approval", approver, note)
        return ticket

    def reject(self, ticket_id: str, *, approver: str, note: str = "") -> Ticket:
        """Reject a ticket: it can never be approved or executed again."""
        ticket = self.approvals.reject(ticket_id, approver=approver, note=note)
        self._record_ticket(ticket, "rejection", approver, note)
        return ticket

    def _record_ticket(self, ticket: Ticket, outcome: str, by: str, note: str) -> None:
        """Chain the decision in the audit log, unless the ``audit`` plugin is disabled."""
        from .audit import PLUGIN_NAME

        if not self.pm.is_blocked(PLUGIN_NAME):
            self.audit.record_ticket(ticket, outcome, by, note)

    def ticket(self, ticket_id: str) -> Ticket:
        """The ticket ``ticket_id`` (raises ``ApprovalError(reason="unknown")``)."""
        return self.approvals.ticket(ticket_id)

    def tickets(self, status: str | None = None) -> list[Ticket]:
        """Every ticket, newest first; ``status`` filters (pending, approved, rejected, executed, expired)."""
        return self.approvals.tickets(status)

    def _os_user(self) -> str:
        if not self._default_caller:
            from .gate.tickets import os_identity

            self._default_caller = os_identity()
        return self._default_caller

    def decide(self, tool: Tool, persona: PersonaLike, request: CallRequest | None = None) -> Decision:
        """The gate's decision for ``persona`` calling ``tool`` (with ``request``'s arguments)."""
        return gate.decide(self.pm, tool, self.persona(persona), request)

    # ------------------------------------------------------------------ model APIs

    def export(
        self, format: str, *, persona: PersonaLike = "operator", strict: bool = False
    ) -> list[dict[str, Any]]:
        """The tools ``persona`` may call, in the function-calling shape of ``format``.

        ``format`` is ``openai``, ``anthropic`` or ``mcp`` (see :mod:`ongrid_plugins.export`);
        ``strict`` rewrites the schemas for the strict modes and raises
        :class:`StrictSchemaError` naming, per tool, why one cannot be made strict.
        """
        from .export import export_tools, raise_for_problems

        who = self.persona(persona)
        tools = self.tools(who)
        notes = {t.name: _call_note(self.decide(t, who).verdict) for t in tools}
        return raise_for_problems(export_tools(tools, format, strict=strict, notes=notes))

    def dispatch(
        self,
        tool_call: object,
        *,
        persona: PersonaLike = "operator",
        caller: str | None = None,
        confirm: bool | str | ConfirmFn = False,
        ticket: str | None = None,
        on_event: EventCallback | None = None,
        timeout: float | None = None,
    ) -> dict[str, Any]:
        """Run a model's tool call; return the tool-result message for it, in the call's format.

        Never raises for the model's mistakes (see :mod:`ongrid_plugins.dispatch`): they
        come back as error results. ``confirm`` is the host's answer (True, the args
        digest) or a callback asking the user; ``caller`` the identity the host vouches for.
        """
        from .dispatch import dispatch

        outcome = dispatch(
            self,
            tool_call,
            persona=persona,
            caller=caller,
            confirm=confirm,
            ticket=ticket,
            on_event=on_event,
            timeout=timeout,
        )
        return outcome.message

    async def adispatch(
        self,
        tool_call: object,
        *,
        persona: PersonaLike = "operator",
        caller: str | None = None,
        confirm: bool | str | ConfirmFn = False,
        ticket: str | None = None,
        on_event: EventCallback | None = None,
        timeout: float | None = None,
    ) -> dict[str, Any]:
        """Like :meth:`dispatch`, without blocking the event loop (``confirm`` may be async)."""
        from .dispatch import adispatch

        outcome = await adispatch(
            self,
            tool_call,
            persona=persona,
            caller=caller,
            confirm=confirm,
            ticket=ticket,
            on_event=on_event,
            timeout=timeout,
        )
        return outcome.message

    # ------------------------------------------------------------------ calling

    def call(
        self,
        name: str,
        args: object = None,
        *,
        persona: PersonaLike = "operator",
        confirm: bool | str = False,
        caller: str | None = None,
        ticket: str | None = None,
        on_event: EventCallback | None = None,
        timeout: float | None = None,
    ) -> CallResult:
        """Run tool ``name`` with ``args`` (a JSON object) and wait for the result.

        :param persona: Who is asking: a persona name (built-in or from a persona
            file), the path of a persona file, or a :class:`Persona`.
        :param confirm: True (or the call's ``args_digest``) to confirm a call
            that needs a confirmation.
        :param caller: The identity of whoever asked (audit log, ticket requester);
            the OS user by default.
        :param ticket: The id of an approved two-person ticket for exactly this
            call (tool, arguments, persona); it is spent by this call.
        :param on_event: Receives :class:`Event`\\ s (stderr lines, start, exit) as they happen.
        :param timeout: A shorter timeout than the tool's, in seconds.
        :raises UnknownSkill, InvalidArguments, PermissionDenied: for caller errors;
            ``ApprovalRequired`` carries the ticket to approve, ``ApprovalError``
            says why a ticket does not cover the call, ``AuditError`` that the
            audit log cannot record a risky call.
        """
        attempt, executor = self._begin(name, args, persona, confirm, caller, ticket, on_event, timeout)
        try:
            result = executor.run(attempt.request)
        except BaseException as exc:
            self._after(attempt.request, _crashed(attempt, exc))
            raise
        return self._finish(attempt, result)

    async def acall(
        self,
        name: str,
        args: object = None,
        *,
        persona: PersonaLike = "operator",
        confirm: bool | str = False,
        caller: str | None = None,
        ticket: str | None = None,
        on_event: EventCallback | None = None,
        timeout: float | None = None,
    ) -> CallResult:
        """Like :meth:`call`, without blocking the event loop. Cancelling kills the skill.

        Argument checking, the gate and the approval store run in a worker thread unless
        the check is certainly light (small arguments, a small schema: see
        :func:`~ongrid_plugins.schema.arguments.is_light`): a request with huge or hostile
        arguments delays its own call, never the loop.
        """
        begin = functools.partial(
            self._begin, name, args, persona, confirm, caller, ticket, on_event, timeout
        )
        if is_light(self.get(name), args):  # microseconds: a thread hop would cost more
            attempt, executor = begin()
        else:
            attempt, executor = await self._begin_in_thread(begin)
        try:
            result = await executor.arun(attempt.request)
        except BaseException as exc:
            self._after(attempt.request, _crashed(attempt, exc))
            raise
        return self._finish(attempt, result)

    async def _begin_in_thread(
        self, begin: Callable[[], tuple[_Attempt, Executor]]
    ) -> tuple[_Attempt, Executor]:
        """``begin()`` in a worker thread; cancelled meanwhile, the call is recorded as cancelled.

        The thread cannot be stopped: its checks, audit start and ticket claim run to the
        end, so the attempt is closed here (as ``cancelled``) instead of left in flight.
        """
        future = asyncio.ensure_future(asyncio.to_thread(begin))
        try:
            return await asyncio.shield(future)
        except asyncio.CancelledError as cancelled:
            try:
                attempt, _executor = await future
            except BaseException:  # refused: _begin recorded it already
                raise cancelled from None
            self._after(attempt.request, _crashed(attempt, cancelled))
            raise

    def _begin(
        self,
        name: str,
        args: object,
        persona: PersonaLike,
        confirm: bool | str,
        caller: str | None,
        ticket: str | None,
        on_event: EventCallback | None,
        timeout: float | None,
    ) -> tuple[_Attempt, Executor]:
        tool = self.get(name)
        who = self.persona(persona)
        data, text, errors = check_arguments(tool, args)
        request = CallRequest(
            tool=tool,
            args=data,
            persona=who,
            call_id=_next_call_id(),
            args_digest=digest_json(tool.name, text) if text else "",
            args_json=text,
            caller=caller or self._os_user(),
            confirm=confirm,
            ticket=ticket,
            on_event=on_event,
            timeout=_check_timeout(timeout),
            sandbox=self.sandbox_profile(tool),
        )
        pm = self.pm
        decision = gate.decide(pm, tool, who, request)
        refusal, status = self._refusal(request, decision, errors)
        try:
            call_hook(pm, "ongrid_before_call", request=request)
        except BaseException as exc:
            self._after(request, self._refused(_Attempt(request, decision, exc, "aborted")))
            raise
        if decision.verdict is Verdict.DUAL_SIGN and refusal is None and ticket is None:
            request, refusal, status = self._request_approval(request, decision)
        if refusal is not None:
            self._raise_refused(_Attempt(request, decision, refusal, status))
        attempt = _Attempt(request, decision, None, "")
        executor = self._executor(attempt)
        if decision.verdict is Verdict.DUAL_SIGN:
            # Claimed last, once nothing else can stop the call: a claimed ticket is spent.
            request, refusal = self._claim_ticket(request)
            self._raise_refused(_Attempt(request, decision, refusal, "ticket_refused"))
            attempt = _Attempt(request, decision, None, "")
        return attempt, executor

    def sandbox_profile(self, tool: Tool) -> Profile:
        """The confinement profile every call of ``tool`` gets under this host's settings."""
        cached = tool.cache.get("sandbox")
        if cached is not None and cached[0] is self.settings:
            return cached[1]  # type: ignore[no-any-return]
        from .executors.confine import Profile, profile_for

        if tool.kind == "subprocess":
            profile = profile_for(tool, self.settings)
        else:
            reason = f"a {tool.kind} tool runs inside the host process: it confines itself in code"
            profile = Profile(False, tool.tool_class.value, reason=reason)
        tool.cache["sandbox"] = (self.settings, profile)
        return profile

    def _raise_refused(self, attempt: _Attempt) -> None:
        if attempt.refusal is not None:
            self._after(attempt.request, self._refused(attempt))
            raise attempt.refusal

    def _refusal(
        self, request: CallRequest, decision: Decision, errors: list[tuple[str, str]]
    ) -> tuple[OngridError | None, str]:
        tool = request.tool
        if not tool.available:
            return SkillUnavailable(tool.name, tool.unavailable), "unavailable"
        if decision.verdict is Verdict.DENY:
            return PermissionDenied(tool.name, decision), "denied"
        if errors:
            return InvalidArguments(tool.name, errors), "invalid_arguments"
        if decision.verdict is Verdict.CONFIRM and not _confirmed(request):
            return ConfirmationRequired(tool.name, decision, request.args_digest), "needs_confirmation"
        return None, ""

    def _request_approval(
        self, request: CallRequest, decision: Decision
    ) -> tuple[CallRequest, OngridError, str]:
        """Open (or find) the ticket for this call and refuse it with ``ApprovalRequired``.

        Runs after ``ongrid_before_call``, so a call the audit log refuses opens no ticket.
        """
        try:
            ticket = self._open_ticket(request, decision)
        except ApprovalError as exc:
            return request, exc, "needs_approval"
        request = attrs.evolve(request, ticket=ticket.id)
        refusal = ApprovalRequired(request.tool.name, decision, ticket, _approval_hint(ticket))
        return request, refusal, "needs_approval"

    def _claim_ticket(self, request: CallRequest) -> tuple[CallRequest, OngridError | None]:
        """Spend the call's approved ticket, or say why it does not cover this call."""
        assert request.ticket is not None
        try:
            ticket = self.approvals.claim(
                request.ticket,
                tool=request.tool.name,
                args_digest=request.args_digest,
                persona=request.persona.name,
                caller=request.caller,
                call_id=request.call_id,
                profile=_profile_digest(request),
                skill_digest=self._digest_now(request.tool),
            )
        except ApprovalError as exc:
            return request, exc
        return attrs.evolve(request, approvers=ticket.approvers), None

    def _open_ticket(self, request: CallRequest, decision: Decision) -> Ticket:
        from .schema.redact import redact

        tool = request.tool
        args, _paths = redact(tool.schema, request.args)
        return self.approvals.open_ticket(
            tool=tool.name,
            args_digest=request.args_digest,
            persona=request.persona.name,
            requester=request.caller,
            args=args,
            tool_class=tool.tool_class.value,
            reason=decision.reason,
            profile=_profile_digest(request),
            skill_digest=self._digest_now(tool),
            call_args=request.args,
        )

    def _digest_now(self, tool: Tool) -> str:
        """The digest of ``tool``'s skill as its files are now (what a ticket is bound to)."""
        skill = self.registry.snapshot.skills.get(tool.skill)
        if skill is None or tool not in skill.tools:
            return tool.digest
        return skill_digest(skill).digest

    def _refused(self, attempt: _Attempt) -> CallResult:
        request = attempt.request
        return CallResult(
            tool=request.tool.name,
            ok=False,
            error=str(attempt.refusal),
            call_id=request.call_id,
            status=attempt.status,
            decision=attempt.decision,
        )

    def _executor(self, attempt: _Attempt) -> Executor:
        tool = attempt.request.tool
        executor: Executor | None = call_hook(self.pm, "ongrid_executor", tool=tool, settings=self.settings)
        if executor is None:
            refusal = SkillUnavailable(tool.name, [f"no executor can run tools of kind {tool.kind!r}"])
            self._after(attempt.request, attrs.evolve(self._refused(attempt), error=str(refusal)))
            raise refusal
        return executor

    def _finish(self, attempt: _Attempt, result: CallResult) -> CallResult:
        if result.decision is not attempt.decision or result.call_id != attempt.request.call_id:
            result = attrs.evolve(result, decision=attempt.decision, call_id=attempt.request.call_id)
        self._after(attempt.request, result)
        return result

    def _after(self, request: CallRequest, result: CallResult) -> None:
        try:
            call_hook(self.pm, "ongrid_after_call", request=request, result=result)
        except Exception:
            logger.exception("an ongrid_after_call hook failed for %s", request.tool.name)


# Call ids must be unique, not secret: a random per-process prefix and a
# counter cost a tenth of uuid4() on the per-call path.
_CALL_PREFIX = os.urandom(6).hex()
_CALL_COUNTER = itertools.count(1)


def _next_call_id() -> str:
    return f"{_CALL_PREFIX}{next(_CALL_COUNTER):010x}"


def _confirmed(request: CallRequest) -> bool:
    if request.confirm is True:
        return True
    return isinstance(request.confirm, str) and request.confirm == request.args_digest


def _check_timeout(timeout: float | None) -> float | None:
    if timeout is None:
        return None
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not timeout > 0:
        message = f"timeout must be a positive number of seconds, got {timeout!r}"
        raise ConfigError(message)
    return float(timeout)


def _crashed(attempt: _Attempt, exc: BaseException) -> CallResult:
    request = attempt.request
    status = (
        "cancelled" if not isinstance(exc, Exception) or type(exc).__name__ == "CancelledError" else "failed"
    )
    return CallResult(
        tool=request.tool.name,
        ok=False,
        error=f"the call was interrupted: {exc!r}",
        call_id=request.call_id,
        status=status,
        decision=attempt.decision,
    )


def _plugin_name(plugin: object, index: int) -> str:
    name = getattr(plugin, "__name__", None) or type(plugin).__name__
    return f"{name}#{index}"


def _call_note(verdict: Verdict) -> str:
    """What a model is told about calling a tool, beyond its description."""
    if verdict is Verdict.CONFIRM:
        return "Each call needs the user's confirmation before it runs."
    if verdict is Verdict.DUAL_SIGN:
        return "Each call needs two-person approval: the first call returns a ticket for people to approve."
    return ""


def _approval_hint(ticket: Ticket) -> str:
    expires = ticket.to_dict()["expires"]
    if ticket.status == "approved":
        return (
            f"ticket {ticket.id} is approved by {', '.join(ticket.approvers)}: run the same call again "
            f"with ticket={ticket.id!r} (--ticket {ticket.id}) before {expires}"
        )
    return (
        f"ticket {ticket.id} has {len(ticket.approvals)} of {ticket.required} approvals: two people other "
        f"than {ticket.requester} approve it with `ongrid-skills approvals approve {ticket.id}`, then run "
        f"the same call again with ticket={ticket.id!r} (--ticket {ticket.id}) before {expires}"
    )


def _profile_digest(request: CallRequest) -> str:
    """What a ticket binds of the call's sandbox profile."""
    return request.sandbox.digest if request.sandbox is not None else ""
