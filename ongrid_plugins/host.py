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

import difflib
import getpass
import itertools
import logging
import os
import threading
from collections.abc import Iterable

import attrs

from . import gate, loader
from .arguments import check_arguments
from .errors import (
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
from .plugins import PluginInfo, PluginManager, get_plugin_manager
from .registry import Registry, Snapshot
from .resolve import ResolvedSkill, resolve
from .settings import Settings

__all__ = ["SkillHost"]

logger = logging.getLogger(__name__)

PersonaLike = str | Persona


@attrs.frozen
class _Attempt:
    """A prepared call: the request, the gate's decision, and why it may not run (if so)."""

    request: CallRequest
    decision: Decision
    refusal: OngridError | None
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
        self._default_caller = _os_user()

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
                    pm = get_plugin_manager(self.settings)
                    for index, plugin in enumerate(self._extra):
                        pm.add_plugin(plugin, _plugin_name(plugin, index))
                    self._pm = pm
        return self._pm

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
            snapshot, report = loader.load(self.pm, self.settings)
            self.registry.swap(snapshot)
            self._report = report
        return report

    def reload(self) -> LoadReport:
        """Load again (same as :meth:`load`): re-reads every root."""
        return self.load()

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
        found = snapshot.skills.get(name)
        if found is None:
            tool = snapshot.tools.get(name)
            found = snapshot.skills.get(tool.skill) if tool is not None else None
        if found is None:
            close = difflib.get_close_matches(name, [*snapshot.skills, *snapshot.tools], n=3, cutoff=0.75)
            raise UnknownSkill(name, sorted(set(close)))
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
        """Resolve a persona name (or pass a :class:`Persona` through)."""
        if isinstance(persona, Persona):
            return persona
        try:
            return gate.BUILTIN_PERSONAS[persona]
        except KeyError:
            raise UnknownPersona(persona, sorted(gate.BUILTIN_PERSONAS)) from None

    def decide(self, tool: Tool, persona: PersonaLike, request: CallRequest | None = None) -> Decision:
        """The gate's decision for ``persona`` calling ``tool`` (with ``request``'s arguments)."""
        return gate.decide(self.pm, tool, self.persona(persona), request)

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

        :param persona: Who is asking (a built-in persona name or a :class:`Persona`).
        :param confirm: True (or the call's ``args_digest``) to confirm a call
            that needs a confirmation.
        :param caller: The identity of whoever asked, for the audit log.
        :param ticket: The approved ticket id for a call needing two-person approval.
        :param on_event: Receives :class:`Event`\\ s (stderr lines, start, exit) as they happen.
        :param timeout: A shorter timeout than the tool's, in seconds.
        :raises UnknownSkill, InvalidArguments, PermissionDenied: for caller errors.
        """
        attempt = self._begin(name, args, persona, confirm, caller, ticket, on_event, timeout)
        executor = self._executor(attempt)
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
        """Like :meth:`call`, without blocking the event loop. Cancelling kills the skill."""
        attempt = self._begin(name, args, persona, confirm, caller, ticket, on_event, timeout)
        executor = self._executor(attempt)
        try:
            result = await executor.arun(attempt.request)
        except BaseException as exc:
            self._after(attempt.request, _crashed(attempt, exc))
            raise
        return self._finish(attempt, result)

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
    ) -> _Attempt:
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
            caller=caller or self._default_caller,
            confirm=confirm,
            ticket=ticket,
            on_event=on_event,
            timeout=_check_timeout(timeout),
        )
        decision = gate.decide(self.pm, tool, who, request)
        refusal, status = self._refusal(request, decision, errors)
        attempt = _Attempt(request, decision, refusal, status)
        before = self.pm.hook.ongrid_before_call
        if before.get_hookimpls():
            before(request=request)
        if refusal is not None:
            self._after(request, self._refused(attempt))
            raise refusal
        return attempt

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
        if decision.verdict is Verdict.DUAL_SIGN:
            hint = "two-person approval is not available in this version; the call is refused"
            return ApprovalRequired(tool.name, decision, None, hint), "needs_approval"
        return None, ""

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
        executor: Executor | None = self.pm.hook.ongrid_executor(tool=tool, settings=self.settings)
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
        after = self.pm.hook.ongrid_after_call
        if not after.get_hookimpls():
            return
        try:
            after(request=request, result=result)
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


def _os_user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "unknown"
