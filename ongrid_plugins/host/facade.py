"""SkillHost: the facade a host application embeds.

::

    from ongrid_plugins import SkillHost, Settings

    host = SkillHost(Settings(skill_dirs=["/srv/skills"], include_defaults=False))
    report = host.load()
    result = host.call("disk_usage", {"path": "/"})

Every call goes through the steps of :mod:`ongrid_plugins.host.pipeline`: look the tool up, fill in
defaults and check the arguments, ask the gate, tell the ``ongrid_before_call`` hooks, open or
claim a ticket, run the executor, tell the ``ongrid_after_call`` hooks. Skill failures come back
as a :class:`CallResult` with ``ok=False``; caller errors raise. The host holds what steps read.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from .. import gate
from ..catalog import Hub, diff, load_catalog
from ..catalog.instructions import Instructions, read_instructions
from ..catalog.resolve import ResolvedSkill, resolve
from ..core.hooks import hooks
from ..discovery.registry import Registry, Snapshot, spelling
from ..errors import UnknownSkill
from ..gate.persona_lookup import PersonaLike, PersonaLookup
from ..models import (
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
)
from ..plugins import PluginInfo, PluginManager, get_plugin_manager
from ..settings import Settings
from . import pipeline

if TYPE_CHECKING:
    # Imported when first needed (the first call, load or persona file), not with the package.
    from ..audit import AuditLog
    from ..catalog.events import Listener
    from ..catalog.watch import Watch
    from ..executors.confine import Profile
    from ..gate.approvals import ApprovalStore
    from ..gate.tickets import Ticket
    from .dispatch import ConfirmFn

__all__ = ["SkillHost"]

logger = logging.getLogger("ongrid_plugins.host")


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
        self._pm, self._hooks = plugin_manager, None if plugin_manager is None else hooks(plugin_manager)
        self._extra = list(plugins)
        self._report: LoadReport | None = None
        self._lock = threading.Lock()
        self._load_lock = threading.RLock()
        self._default_caller = ""
        self._personas = PersonaLookup()
        self._approvals: ApprovalStore | None = None
        self._audit: AuditLog | None = None
        self._profiles: dict[int, tuple[Tool, Settings, Profile]] = {}
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
                    from ..audit import PLUGIN_NAME, warn_if_disabled

                    pm = get_plugin_manager(self.settings, per_host={PLUGIN_NAME: lambda: self.audit})
                    warn_if_disabled(pm)
                    for index, plugin in enumerate(self._extra):
                        pm.add_plugin(plugin, _plugin_name(plugin, index))
                    self._pm, self._hooks = pm, hooks(pm)  # the pipeline reads _hooks
        return self._pm

    @property
    def audit(self) -> AuditLog:
        """The audit log (``<state_dir>/audit.db``); records calls unless the ``audit`` plugin is disabled."""
        if self._audit is None:
            from ..audit import AuditLog

            self._audit = AuditLog.for_settings(self.settings)
        return self._audit

    @property
    def approvals(self) -> ApprovalStore:
        """The two-person ticket store: ``<state_dir>/approvals.db``, or a server's (``approvals_url``)."""
        if self._approvals is None:
            if self.settings.approvals_url:
                from ..gate.approvals_client import RemoteApprovalStore

                self._approvals = RemoteApprovalStore.for_settings(self.settings)
            else:
                from ..gate.approvals import ApprovalStore

                self._approvals = ApprovalStore.for_settings(self.settings, witness=self._ticket_witness)
        return self._approvals

    @approvals.setter
    def approvals(self, store: ApprovalStore) -> None:
        self._approvals = store

    def _ticket_witness(self, ticket: Ticket) -> str | None:  # None without the audit plugin
        log = self._audited()
        return None if log is None else log.ticket_problem(ticket)

    def _audited(self) -> AuditLog | None:
        """The audit log, or None when the ``audit`` plugin is disabled."""
        from ..audit import PLUGIN_NAME

        return None if self.pm.is_blocked(PLUGIN_NAME) else self.audit

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
            self._personas.forget()  # persona files are read again on next use
            self._profiles = {}  # and sandbox profiles computed again, for the new tools
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
        from ..catalog.watch import Watch

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
        from ..gate.personas import persona_dirs

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
        return self._personas.resolve(persona, self.settings)

    def personas(self) -> list[Persona]:
        """Every persona: the three built-ins, then the persona files, sorted by name."""
        return self._personas.every(self.settings)

    # ------------------------------------------------------------------ approvals

    def approve(self, ticket_id: str, *, approver: str, note: str = "", sop: str | None = None) -> Ticket:
        """Approve a two-person ticket as ``approver`` (an identity the host vouches for).

        Every ``ongrid_verify_approval`` plugin may refuse: :class:`ApprovalError` names the rule.
        The approval, or its refusal, is a row of the audit log.
        """
        from .ticketlog import approve

        return approve(self, ticket_id, approver=approver, note=note, sop=sop)

    def reject(self, ticket_id: str, *, approver: str, note: str = "") -> Ticket:
        """Reject a ticket: it can never be approved or executed again."""
        from .ticketlog import reject

        return reject(self, ticket_id, approver=approver, note=note)

    def ticket(self, ticket_id: str) -> Ticket:
        """The ticket ``ticket_id`` (raises ``ApprovalError(reason="unknown")``)."""
        return self.approvals.ticket(ticket_id)

    def tickets(self, status: str | None = None) -> list[Ticket]:
        """Every ticket, newest first; ``status`` filters (pending, approved, rejected, executed, expired)."""
        return self.approvals.tickets(status)

    def _os_user(self) -> str:
        if not self._default_caller:
            from ..gate.tickets import os_identity

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

        ``format`` is ``openai``, ``anthropic`` or ``mcp`` (see :mod:`ongrid_plugins.host.export`);
        ``strict`` rewrites the schemas for the strict modes and raises
        :class:`StrictSchemaError` naming, per tool, why one cannot be made strict.
        ``skills-prompt`` returns a string instead: the ``<available_skills>`` block of
        the skills ``persona`` may use (:mod:`ongrid_plugins.host.export_prompt`).
        """
        from .export import export_for_host

        return export_for_host(self, format, persona=persona, strict=strict)

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

        Never raises for the model's mistakes (see :mod:`ongrid_plugins.host.dispatch`): they
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

        The call goes through the steps of :mod:`ongrid_plugins.host.pipeline`.

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
        return pipeline.call(self, name, args, persona, confirm, caller, ticket, on_event, timeout)

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
        return await pipeline.acall(self, name, args, persona, confirm, caller, ticket, on_event, timeout)

    def sandbox_profile(self, tool: Tool) -> Profile:
        """The confinement profile every call of ``tool`` gets under this host's settings.

        Remembered per tool object and settings object, by the host (not on the tool);
        a load forgets them all.
        """
        cached = self._profiles.get(id(tool))
        if cached is not None and cached[0] is tool and cached[1] is self.settings:
            return cached[2]
        from ..executors.confine import Profile, profile_for

        if tool.kind == "subprocess":
            profile = profile_for(tool, self.settings)
        else:
            reason = f"a {tool.kind} tool runs inside the host process: it confines itself in code"
            profile = Profile(False, tool.tool_class.value, reason=reason)
        if len(self._profiles) >= _PROFILES_KEPT:  # tools from outside the registry: stay bounded
            self._profiles.clear()
        self._profiles[id(tool)] = (tool, self.settings, profile)
        return profile


#: How many tools' sandbox profiles a host remembers between loads.
_PROFILES_KEPT = 4096


def _plugin_name(plugin: object, index: int) -> str:
    name = getattr(plugin, "__name__", None) or type(plugin).__name__
    return f"{name}#{index}"
