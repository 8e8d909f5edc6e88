"""The call pipeline: named steps passing one :class:`Attempt` along.

::

    lookup ─► check_arguments ─► decide ─► before_call ─► request_ticket ─► refuse
           ─► choose_executor ─► claim_ticket ─► run (sync or async) ─► after_call

:func:`begin` runs the steps up to the executor and the ticket claim, :func:`call` and
:func:`acall` drive a call through them and the executor (``acall`` moves the steps to a
worker thread unless the argument check is certainly light); ``SkillHost`` is a facade.

Who handles what, in the order the steps run:

=================================== ================= =====================================
outcome                             step              what the caller sees (audit status)
=================================== ================= =====================================
unknown tool / persona, bad timeout :func:`lookup`,   raises ``UnknownSkill``,
                                    :func:`check_     ``UnknownPersona``, ``ConfigError``
                                    arguments`        (nothing recorded)
tool unavailable                    :func:`decide`    ``SkillUnavailable`` (``unavailable``)
verdict ``deny``                    :func:`decide`    ``PermissionDenied`` (``denied``)
arguments invalid                   :func:`decide`    ``InvalidArguments``
                                                      (``invalid_arguments``)
verdict ``confirm``, unconfirmed    :func:`decide`    ``ConfirmationRequired``
                                                      (``needs_confirmation``)
a ``ongrid_before_call`` hook       :func:`before_    an ``OngridError`` as it is, any
raises (the audit log fails closed) call`             other as ``PluginFailed`` naming the
                                                      plugin (``aborted``); the refusals
                                                      above are recorded after it
verdict ``dual_sign``, no ticket    :func:`request_   ``ApprovalRequired`` with the ticket
                                    ticket`           (``needs_approval``)
no executor for the tool's kind     :func:`choose_    ``SkillUnavailable`` (status empty)
                                    executor`
verdict ``dual_sign``, a ticket     :func:`claim_     ``ApprovalError`` when it does not
                                    ticket`           cover the call (``ticket_refused``);
                                                      else the ticket is spent and it runs
verdict ``allow`` (or covered)      :func:`call` /    the executor's :class:`CallResult`
                                    :func:`acall`
the executor raises / is cancelled  :func:`call` /    ``PluginFailed`` naming the plugin
                                    :func:`acall`     (``failed``); a cancellation and an
                                                      ``OngridError`` re-raised
=================================== ================= =====================================

Every attempt that reached :func:`decide` ends in exactly one :func:`after_call`
(``ongrid_after_call`` hooks: the audit log's end row), and the raise for a refusal
comes after it. A ticket is claimed last, once nothing else can stop the call: a
claimed ticket is spent.

The per-call path makes one :class:`Attempt` and one :class:`CallRequest` (two on a
ticketed call), and calls each hook once through its typed method (:func:`~ongrid_plugins.core.hooks.hooks`).

Layering: the host stage. It may import the values, the schema checks, the gate, the
executors' interface and the catalog's digests; the host reaches it, it never imports
the host, not even for a type: the ``host`` parameter of each step is a
:class:`~ongrid_plugins.host.hostlike.StepHost`, the members the steps read.
"""

from __future__ import annotations

import functools
import itertools
import logging
import os
from collections.abc import Callable
from typing import TYPE_CHECKING

import attrs

from .. import gate
from ..catalog import skill_digest
from ..core.hooks import hooks
from ..errors import (
    ApprovalError,
    ApprovalRequired,
    ConfirmationRequired,
    InvalidArguments,
    OngridError,
    PermissionDenied,
    PluginFailed,
    SkillUnavailable,
)
from ..models import (
    CallRequest,
    CallResult,
    Decision,
    EventCallback,
    Outcome,
    Persona,
    Tool,
    Verdict,
    digest_json,
)
from ..schema.arguments import check_arguments as check_schema
from ..schema.arguments import is_light
from .begin_aside import begin_in_thread
from .callinputs import check_caller, check_ticket, check_timeout

if TYPE_CHECKING:
    from ..core.hooks import Hooks
    from ..executors import Executor
    from ..gate.persona_lookup import PersonaLike
    from ..gate.tickets import Ticket
    from .hostlike import StepHost

__all__ = [
    "Attempt",
    "acall",
    "after_call",
    "before_call",
    "begin",
    "call",
    "check_arguments",
    "choose_executor",
    "claim_ticket",
    "decide",
    "digest_now",
    "lookup",
    "refuse",
    "request_ticket",
]

logger = logging.getLogger("ongrid_plugins.pipeline")


class Attempt:
    """One call on its way through the steps: each step reads it and fills in its part.

    Not a value object: it lives for one call, is never shared between calls, and is
    mutable so that the steps pass one object instead of building a new one each.
    """

    __slots__ = ("decision", "errors", "executor", "refusal", "request", "status")

    def __init__(self, request: CallRequest, errors: list[tuple[str, str]]) -> None:
        self.request = request
        """The request as the hooks and the executor see it (a ticket step may replace it)."""
        self.errors = errors
        """The argument checker's (path, message) pairs; empty when the arguments are valid."""
        self.decision: Decision = _UNDECIDED
        self.refusal: BaseException | None = None
        """Why the call may not run, raised by :func:`refuse` once recorded."""
        self.status = ""
        """The audit status of the refusal."""
        self.executor: Executor | None = None

    def refused(self) -> CallResult:
        """The result recorded for a call that did not run."""
        request = self.request
        return CallResult(
            tool=request.tool.name,
            ok=False,
            error=str(self.refusal),
            call_id=request.call_id,
            status=self.status,
            decision=self.decision,
        )

    def crashed(self, exc: BaseException) -> CallResult:
        """The result recorded for a call whose executor raised or was cancelled."""
        request = self.request
        status = (
            Outcome.CANCELLED
            if not isinstance(exc, Exception) or type(exc).__name__ == "CancelledError"
            else Outcome.FAILED
        )
        # A cancellation says only what it is: its text is the task and scope that sent it.
        why = type(exc).__name__ if status is Outcome.CANCELLED else repr(exc)
        return CallResult(
            tool=request.tool.name,
            ok=False,
            error=str(exc) if isinstance(exc, PluginFailed) else f"the call was interrupted: {why}",
            call_id=request.call_id,
            status=status,
            decision=self.decision,
        )


_UNDECIDED = Decision(Verdict.DENY, "the gate has not decided yet", "pipeline")

# ---------------------------------------------------------------------- the steps


def lookup(host: StepHost, name: str, persona: PersonaLike) -> tuple[Tool, Persona]:
    """The tool called ``name`` and the persona asking (raises for either unknown)."""
    return host.get(name), host.persona(persona)


def check_arguments(
    host: StepHost,
    tool: Tool,
    persona: Persona,
    args: object,
    *,
    caller: str | None,
    confirm: bool | str,
    ticket: str | None,
    on_event: EventCallback | None,
    timeout: float | None,
) -> Attempt:
    """Fill in defaults, check ``args`` against the schema and build the call's request.

    Invalid arguments do not raise here: :func:`decide` ranks them among the refusals.
    """
    data, text, errors = check_schema(tool, args)
    request = CallRequest(
        tool=tool,
        args=data,
        persona=persona,
        call_id=_next_call_id(),
        args_digest=digest_json(tool.name, text) if text else "",
        args_json=text,
        caller=check_caller(caller) or host._os_user(),
        confirm=confirm,
        ticket=check_ticket(ticket),
        on_event=on_event,
        timeout=check_timeout(timeout),
        sandbox=host.sandbox_profile(tool),
    )
    return Attempt(request, errors)


def decide(host: StepHost, attempt: Attempt) -> None:
    """Ask the gate, then set the first refusal: unavailable, denied, invalid, unconfirmed."""
    request = attempt.request
    tool = request.tool
    decision = attempt.decision = gate.decide(host.pm, tool, request.persona, request)
    verdict = decision.verdict
    if request.ticket is not None and verdict is not Verdict.DUAL_SIGN:
        # Only a dual_sign call opens or spends a ticket: any other ignores it, and its row must
        # not tie it to a two-person ticket (the audit log's ``ticket`` column).
        attempt.request = attrs.evolve(request, ticket=None)
    if not tool.available:
        attempt.refusal, attempt.status = SkillUnavailable(tool.name, tool.unavailable), Outcome.UNAVAILABLE
    elif verdict is Verdict.DENY:
        attempt.refusal, attempt.status = PermissionDenied(tool.name, decision), Outcome.DENIED
    elif attempt.errors:
        attempt.refusal = InvalidArguments(tool.name, attempt.errors)
        attempt.status = Outcome.INVALID_ARGUMENTS
    elif verdict is Verdict.CONFIRM and not _confirmed(request):
        attempt.refusal = ConfirmationRequired(tool.name, decision, request.args_digest)
        attempt.status = Outcome.NEEDS_CONFIRMATION


def before_call(host: StepHost, attempt: Attempt) -> None:
    """Tell the ``ongrid_before_call`` hooks; one that raises aborts the call (recorded)."""
    calls = host._hooks or hooks(host.pm)
    try:
        calls.before_call(request=attempt.request)
    except BaseException as exc:
        error = _named(calls, attempt, exc, calls.raised_by("ongrid_before_call", exc), "ongrid_before_call")
        attempt.refusal, attempt.status = error, Outcome.ABORTED
        after_call(host, attempt.request, attempt.refused())
        if error is exc:
            raise
        raise error from exc


def _named(calls: Hooks, attempt: Attempt, exc: BaseException, plugin: str, hook: str) -> BaseException:
    """A plugin's own exception on the call path as a :class:`PluginFailed` naming it.

    An :class:`OngridError` (the audit log failing closed) and what is not an ``Exception``
    (Ctrl-C, a cancellation) stay as they are.
    """
    if not isinstance(exc, Exception) or isinstance(exc, OngridError):
        return exc
    who = calls.label(plugin) if plugin else "a plugin"
    return PluginFailed(attempt.request.tool.name, who, hook, exc)


def request_ticket(host: StepHost, attempt: Attempt) -> None:
    """Open (or find) the two-person ticket for this call and refuse it with ``ApprovalRequired``.

    Runs after ``ongrid_before_call``, so a call the audit log refuses opens no ticket.
    """
    request = attempt.request
    attempt.status = Outcome.NEEDS_APPROVAL
    try:
        ticket = _open_ticket(host, request, attempt.decision)
    except ApprovalError as exc:
        attempt.refusal = exc
        return
    request = attempt.request = attrs.evolve(request, ticket=ticket.id)
    attempt.refusal = ApprovalRequired(request.tool.name, attempt.decision, ticket, ticket.next_step())


def refuse(host: StepHost, attempt: Attempt) -> None:
    """Record a refused attempt with the ``ongrid_after_call`` hooks, then raise its refusal."""
    if attempt.refusal is not None:
        after_call(host, attempt.request, attempt.refused())
        raise attempt.refusal


def choose_executor(host: StepHost, attempt: Attempt) -> None:
    """Ask the ``ongrid_executor`` hooks who runs the tool; nobody is ``SkillUnavailable``."""
    tool = attempt.request.tool
    executor: Executor | None = (host._hooks or hooks(host.pm)).executor(tool=tool, settings=host.settings)
    if executor is None:
        refusal = SkillUnavailable(tool.name, [f"no executor can run tools of kind {tool.kind!r}"])
        after_call(host, attempt.request, attrs.evolve(attempt.refused(), error=str(refusal)))
        raise refusal
    attempt.executor = executor


def claim_ticket(host: StepHost, attempt: Attempt) -> None:
    """Spend the call's approved ticket, or refuse with why it does not cover this call."""
    request = attempt.request
    assert request.ticket is not None
    try:
        ticket = host.approvals.claim(
            request.ticket,
            tool=request.tool.name,
            args_digest=request.args_digest,
            persona=request.persona.name,
            caller=request.caller,
            call_id=request.call_id,
            profile=_profile_digest(request),
            skill_digest=digest_now(host, request.tool),
        )
    except ApprovalError as exc:
        attempt.refusal, attempt.status = exc, Outcome.TICKET_REFUSED
        refuse(host, attempt)
    attempt.request = attrs.evolve(request, approvers=ticket.approvers)


def after_call(host: StepHost, request: CallRequest, result: CallResult) -> None:
    """Tell the ``ongrid_after_call`` hooks (the audit log's end row); a failing hook is logged."""
    try:
        (host._hooks or hooks(host.pm)).after_call(request=request, result=result)
    except Exception:
        logger.exception("an ongrid_after_call hook failed for %s", request.tool.name)


# ---------------------------------------------------------------------- the drivers


def begin(
    host: StepHost,
    name: str,
    args: object,
    persona: PersonaLike,
    confirm: bool | str,
    caller: str | None,
    ticket: str | None,
    on_event: EventCallback | None,
    timeout: float | None,
    tool: Tool | None = None,
) -> Attempt:
    """Every step before the executor runs (``tool``: ``host.get(name)``, if known); returns the attempt."""
    tool, who = lookup(host, name, persona) if tool is None else (tool, host.persona(persona))
    attempt = check_arguments(
        host,
        tool,
        who,
        args,
        caller=caller,
        confirm=confirm,
        ticket=ticket,
        on_event=on_event,
        timeout=timeout,
    )
    decide(host, attempt)
    before_call(host, attempt)
    dual_sign = attempt.decision.verdict is Verdict.DUAL_SIGN
    if dual_sign and attempt.refusal is None and ticket is None:
        request_ticket(host, attempt)
    refuse(host, attempt)
    choose_executor(host, attempt)
    if dual_sign:
        claim_ticket(host, attempt)
    return attempt


def call(
    host: StepHost,
    name: str,
    args: object,
    persona: PersonaLike,
    confirm: bool | str,
    caller: str | None,
    ticket: str | None,
    on_event: EventCallback | None,
    timeout: float | None,
) -> CallResult:
    """Run one call through every step and the executor, waiting for the result."""
    attempt = begin(host, name, args, persona, confirm, caller, ticket, on_event, timeout)
    assert attempt.executor is not None
    try:
        result = attempt.executor.run(attempt.request)
    except BaseException as exc:
        _crashed(host, attempt, exc, "run")
        raise
    return _finish(host, attempt, result)


async def acall(
    host: StepHost,
    name: str,
    args: object,
    persona: PersonaLike,
    confirm: bool | str,
    caller: str | None,
    ticket: str | None,
    on_event: EventCallback | None,
    timeout: float | None,
) -> CallResult:
    """Like :func:`call` on an event loop; the steps run in a worker thread unless light."""
    steps = (host, name, args, persona, confirm, caller, ticket, on_event, timeout, host.get(name))
    if is_light(steps[-1], args):  # microseconds: a thread hop would cost more
        attempt = begin(*steps)
    else:
        attempt = await _begin_in_thread(host, functools.partial(begin, *steps))
    assert attempt.executor is not None
    try:
        result = await attempt.executor.arun(attempt.request)
    except BaseException as exc:
        _crashed(host, attempt, exc, "arun")
        raise
    return _finish(host, attempt, result)


def _crashed(host: StepHost, attempt: Attempt, exc: BaseException, method: str) -> None:
    """Record a call whose executor raised; a plugin's own exception is raised as a :class:`PluginFailed`."""
    calls = host._hooks or hooks(host.pm)
    executor = attempt.executor
    error = _named(calls, attempt, exc, calls.owner(executor), f"{type(executor).__qualname__}.{method}")
    after_call(host, attempt.request, attempt.crashed(error))
    if error is not exc:
        raise error from exc


async def _begin_in_thread(host: StepHost, start: Callable[[], Attempt]) -> Attempt:
    """``start()`` in a worker thread; cancelled meanwhile, the call is recorded as cancelled."""
    return await begin_in_thread(
        start, lambda attempt, why: after_call(host, attempt.request, attempt.crashed(why))
    )


def _finish(host: StepHost, attempt: Attempt, result: CallResult) -> CallResult:
    request = attempt.request
    if result.decision is not attempt.decision or result.call_id != request.call_id:
        result = attrs.evolve(result, decision=attempt.decision, call_id=request.call_id)
    after_call(host, request, result)
    return result


# ---------------------------------------------------------------------- tickets


def _open_ticket(host: StepHost, request: CallRequest, decision: Decision) -> Ticket:
    from ..schema.redact import redact

    tool = request.tool
    args, _paths = redact(tool.schema, request.args)
    return host.approvals.open_ticket(
        tool=tool.name,
        args_digest=request.args_digest,
        persona=request.persona.name,
        requester=request.caller,
        args=args,
        tool_class=tool.tool_class.value,
        reason=decision.reason,
        profile=_profile_digest(request),
        skill_digest=digest_now(host, tool),
        call_args=request.args,
    )


def digest_now(host: StepHost, tool: Tool) -> str:
    """The digest of ``tool``'s skill as its files are now (what a ticket is bound to)."""
    skill = host.registry.snapshot.skills.get(tool.skill)
    if skill is None or tool not in skill.tools:
        return tool.digest
    return skill_digest(skill).digest


def _profile_digest(request: CallRequest) -> str:
    """What a ticket binds of the call's sandbox profile."""
    return request.sandbox.digest if request.sandbox is not None else ""


# ---------------------------------------------------------------------- small rules

# Call ids must be unique, not secret: a random per-process prefix (a new one in a forked
# child, which would hand out its parent's ids) and a counter cost a tenth of uuid4().
_CALL_PREFIX = os.urandom(6).hex()
_CALL_COUNTER = itertools.count(1)
os.register_at_fork(after_in_child=lambda: globals().update(_CALL_PREFIX=os.urandom(6).hex()))


def _next_call_id() -> str:
    return f"{_CALL_PREFIX}{next(_CALL_COUNTER):010x}"


def _confirmed(request: CallRequest) -> bool:
    confirm = request.confirm
    return confirm is True or (isinstance(confirm, str) and confirm == request.args_digest)
