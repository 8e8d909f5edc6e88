"""Dispatch: run a tool call as a model API returns it; answer with its tool-result message.

::

    for call in response.choices[0].message.tool_calls:          # OpenAI
        messages.append(host.dispatch(call, persona="operator", caller="ada"))

Accepted calls (dicts, or SDK objects with ``model_dump()``), recognised by shape:

========================= ============================================ ====================================
format                    the call                                     the answer
========================= ============================================ ====================================
``openai``                ``{"id", "type": "function", "function":     ``{"role": "tool", "tool_call_id",
                          {"name", "arguments": "<JSON text>"}}``      "content"}``
``openai-responses``      ``{"type": "function_call", "call_id",       ``{"type": "function_call_output",
                          "name", "arguments"}``                       "call_id", "output"}``
``anthropic``             ``{"type": "tool_use", "id", "name",         ``{"type": "tool_result",
                          "input"}``                                   "tool_use_id", "content",
                                                                       "is_error"}`` (a content block)
``mcp``                   ``tools/call`` params ``{"name",             a ``CallToolResult``: ``{"content",
                          "arguments"}``                               "structuredContent", "isError"}``
========================= ============================================ ====================================

Nothing the model sends makes dispatch raise: malformed ``arguments`` text, a dict of
no known tool-call shape (``{"foo": 1}``: code ``malformed_call``, answered in the MCP
result shape, the one neutral to every API), an unknown tool, invalid arguments, a
denied call, a call that needs a confirmation or an approval, a refused ticket and a
failed skill all come back as error results the model can read: a JSON object with
``error``, a ``code``, the details (field paths, suggestions, the ticket) and a
``hint`` saying what to do next. A host mistake (an unknown persona, a value that is
not a dict at all) still raises.

Ids: a result must name the call it answers. An OpenAI or Anthropic call without an
``id`` (or a Responses call without a ``call_id``), which the APIs never send but
hand-built or proxied calls may, gets a generated one (``call_<24 hex>``,
``toolu_<24 hex>``), so the answer is never ``tool_call_id: ""``; ``ToolCall.id_generated``
says so, and the host must put the same id on the assistant message it keeps.

Confirmations and approvals stay with the host. ``confirm`` is the host's answer (True,
or the ``args_digest`` the user saw) or a callback that asks the user; the model's
arguments can never confirm. A dangerous
call opens a two-person ticket and tells the model its id; once two people approved it
out of band, the same call from the same caller runs on that ticket (it is spent).

Layering: a surface over the host. It takes any :class:`~ongrid_plugins.host.hostlike.CallingHost`
(``SkillHost`` is one) and never imports the host, not even for a type, so
``SkillHost.dispatch`` can forward here without a circle.
"""

from __future__ import annotations

import inspect
import json
import uuid
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

import attrs

from ..errors import (
    ApprovalError,
    ApprovalRequired,
    AuditError,
    ConfigError,
    ConfirmationRequired,
    InvalidArguments,
    OngridError,
    PermissionDenied,
    PluginFailed,
    SkillUnavailable,
    UnknownSkill,
)
from ..models import CallResult, EventCallback, Tool
from ..schema.strict import drop_strict_nulls

if TYPE_CHECKING:
    from ..gate.persona_lookup import PersonaLike
    from .hostlike import CallingHost

__all__ = [
    "CALL_FORMATS",
    "UNKNOWN_FORMAT",
    "ConfirmFn",
    "Confirmation",
    "Dispatched",
    "ToolCall",
    "adispatch",
    "dispatch",
    "parse_tool_call",
    "refusal",
    "result_message",
]

CALL_FORMATS = ("openai", "openai-responses", "anthropic", "mcp")
#: The format of a dict that is no known tool call: answered with a ``malformed_call`` error.
UNKNOWN_FORMAT = "unknown"
_STDERR_LINES = 10


@attrs.frozen
class ToolCall:
    """One tool call, whatever API it came from."""

    format: str
    id: str
    """The call's id (``tool_call_id``, ``tool_use_id``, ``call_id``); empty for MCP."""
    name: str
    arguments: dict[str, Any] | None
    malformed: str = ""
    """Why the arguments could not be read; empty when they could."""
    id_generated: bool = False
    """True when the call came without an id and ``id`` was made up (see the module docs)."""


@attrs.frozen
class Confirmation:
    """What a ``confirm`` callback is asked: may this exact call run?"""

    tool: Tool
    arguments: Mapping[str, Any]
    args_digest: str
    reason: str


ConfirmFn = Callable[[Confirmation], "bool | Awaitable[bool]"]


@attrs.frozen
class Dispatched:
    """What happened to one tool call, and the message to send back to the model."""

    call: ToolCall
    status: str
    """``ok``, ``failed``, ``timed_out``, ``malformed_arguments``, ``unknown_skill``,
    ``invalid_arguments``, ``denied``, ``needs_confirmation``, ``needs_approval``,
    ``ticket_refused``, ``unavailable``, ``audit_unavailable`` ..."""
    payload: Any
    """What the model reads: the skill's result, or ``{"error", "code", ..., "hint"}``."""
    result: CallResult | None = None
    error: OngridError | None = None

    @property
    def ok(self) -> bool:
        """True when the skill ran and succeeded."""
        return self.status == "ok"

    @property
    def message(self) -> dict[str, Any]:
        """The tool-result message in the call's format."""
        return result_message(self.call, self.payload, is_error=not self.ok)


def parse_tool_call(tool_call: object) -> ToolCall:
    """Recognise a tool call's format and read its arguments (never raising for bad arguments).

    A dict of no known shape is a :data:`UNKNOWN_FORMAT` call whose ``malformed`` says so.

    :raises ConfigError: the value is not a dict (nor an SDK object with ``model_dump()``).
    """
    data = _as_mapping(tool_call)
    kind = data.get("type")
    if isinstance(data.get("function"), Mapping):
        function = _as_mapping(data["function"])
        args, bad = _parse_arguments(function.get("arguments"))
        return _with_id("openai", data.get("id"), "call_", _name(function), args, bad)
    if kind == "function_call":
        args, bad = _parse_arguments(data.get("arguments"))
        return _with_id("openai-responses", data.get("call_id"), "call_", _name(data), args, bad)
    if kind == "tool_use":
        args, bad = _object_arguments(data.get("input"), "input")
        return _with_id("anthropic", data.get("id"), "toolu_", _name(data), args, bad)
    if "name" in data and kind is None:
        args, bad = _object_arguments(data.get("arguments"), "arguments")
        return ToolCall("mcp", "", _name(data), args, bad)
    message = (
        "not a tool call: expected an OpenAI tool_calls item, a Responses function_call, an Anthropic "
        f"tool_use block or MCP tools/call params, got keys {sorted(map(str, data))[:20]}"
    )
    return ToolCall(UNKNOWN_FORMAT, "", _name(data), None, message)


def _with_id(
    fmt: str, raw: object, prefix: str, name: str, args: dict[str, Any] | None, bad: str
) -> ToolCall:
    if raw is not None and str(raw):
        return ToolCall(fmt, str(raw), name, args, bad)
    return ToolCall(fmt, prefix + uuid.uuid4().hex[:24], name, args, bad, id_generated=True)


def dispatch(
    host: CallingHost,
    tool_call: object,
    *,
    persona: PersonaLike = "operator",
    caller: str | None = None,
    confirm: bool | str | ConfirmFn = False,
    ticket: str | None = None,
    on_event: EventCallback | None = None,
    timeout: float | None = None,
) -> Dispatched:
    """Run ``tool_call`` through ``host.call`` and say what happened (see the module docs)."""
    call = parse_tool_call(tool_call)
    prepared = _prepare(host, call)
    if isinstance(prepared, Dispatched):
        return prepared
    kwargs = _first_try(confirm, ticket)
    common: dict[str, Any] = {"persona": persona, "caller": caller, "on_event": on_event, "timeout": timeout}
    while True:
        try:
            result = host.call(call.name, prepared, **common, **kwargs)
        except OngridError as exc:
            step = _next(exc, kwargs, confirm, host, call, prepared)
            if isinstance(step, Confirmation):
                answer = confirm(step)  # type: ignore[operator]
                if inspect.isawaitable(answer):
                    if inspect.iscoroutine(answer):
                        answer.close()  # never awaited: say so by raising, not by a warning later
                    message = "dispatch() got an async confirm callback: use adispatch()"
                    raise ConfigError(message) from None
                step = _answered(kwargs, step, bool(answer))
            if step is None:
                return _refused(call, exc)
            kwargs = step
            continue
        return _finished(call, result)


async def adispatch(
    host: CallingHost,
    tool_call: object,
    *,
    persona: PersonaLike = "operator",
    caller: str | None = None,
    confirm: bool | str | ConfirmFn = False,
    ticket: str | None = None,
    on_event: EventCallback | None = None,
    timeout: float | None = None,
) -> Dispatched:
    """Like :func:`dispatch`, through ``host.acall``; ``confirm`` may be an async callback."""
    call = parse_tool_call(tool_call)
    prepared = _prepare(host, call)
    if isinstance(prepared, Dispatched):
        return prepared
    kwargs = _first_try(confirm, ticket)
    common: dict[str, Any] = {"persona": persona, "caller": caller, "on_event": on_event, "timeout": timeout}
    while True:
        try:
            result = await host.acall(call.name, prepared, **common, **kwargs)
        except OngridError as exc:
            step = _next(exc, kwargs, confirm, host, call, prepared)
            if isinstance(step, Confirmation):
                answer = confirm(step)  # type: ignore[operator]
                if inspect.isawaitable(answer):
                    answer = await answer
                step = _answered(kwargs, step, bool(answer))
            if step is None:
                return _refused(call, exc)
            kwargs = step
            continue
        return _finished(call, result)


def result_message(call: ToolCall, payload: Any, *, is_error: bool) -> dict[str, Any]:
    """The tool-result message answering ``call`` with ``payload`` (any JSON value)."""
    text = json.dumps(payload, ensure_ascii=False, default=str)
    if call.format == "openai":
        return {"role": "tool", "tool_call_id": call.id, "content": text}
    if call.format == "openai-responses":
        return {"type": "function_call_output", "call_id": call.id, "output": text}
    if call.format == "anthropic":
        block: dict[str, Any] = {"type": "tool_result", "tool_use_id": call.id, "content": text}
        if is_error:
            block["is_error"] = True
        return block
    out: dict[str, Any] = {"content": [{"type": "text", "text": text}], "isError": is_error}
    if not is_error and isinstance(payload, dict):
        out["structuredContent"] = payload
    return out


# ---------------------------------------------------------------------- parsing


def _as_mapping(value: object) -> Mapping[str, Any]:
    dump = getattr(value, "model_dump", None)
    if callable(dump) and not isinstance(value, Mapping):
        value = dump()
    if not isinstance(value, Mapping):
        kind = type(value).__name__
        message = f"not a tool call: expected a dict (or an SDK object with model_dump()), got {kind}"
        raise ConfigError(message)
    return value


def _name(data: Mapping[str, Any]) -> str:
    name = data.get("name")
    return name if isinstance(name, str) else ""


def _parse_arguments(raw: object) -> tuple[dict[str, Any] | None, str]:
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return {}, ""
    if not isinstance(raw, str):
        return _object_arguments(raw, "arguments")
    try:
        value = json.loads(raw)
    except ValueError as exc:
        return None, f"the arguments are not valid JSON ({exc}): {_clip(raw)}"
    except RecursionError:
        return None, "the arguments are nested too deeply to read"
    return _object_arguments(value, "arguments")


def _object_arguments(value: object, field: str) -> tuple[dict[str, Any] | None, str]:
    if value is None:
        return {}, ""
    if not isinstance(value, Mapping):
        return None, f"the {field} must be a JSON object, got {_json_type(value)}"
    return dict(value), ""


def _json_type(value: object) -> str:
    names = {str: "a string", list: "an array", bool: "a boolean", int: "a number", float: "a number"}
    return names.get(type(value), "null" if value is None else type(value).__name__)


def _clip(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[:limit] + "..."


# ---------------------------------------------------------------------- the steps


def _prepare(host: CallingHost, call: ToolCall) -> dict[str, Any] | Dispatched:
    if call.format == UNKNOWN_FORMAT:
        hint = (
            "send the call in your API's tool-call format, e.g. "
            '{"type": "function", "id": "call_1", "function": {"name": "TOOL", "arguments": "{}"}}'
        )
        return _error(call, "malformed_call", call.malformed, hint=hint)
    if call.arguments is None:
        hint = 'call the tool again with the arguments as one JSON object, e.g. {"name": "value"}'
        return _error(call, "malformed_arguments", call.malformed, hint=hint)
    try:
        tool = host.get(call.name)
    except UnknownSkill as exc:
        return _refused(call, exc)
    cleaned: dict[str, Any] = drop_strict_nulls(tool.schema, call.arguments)
    return cleaned


def _first_try(confirm: bool | str | ConfirmFn, ticket: str | None) -> dict[str, Any]:
    return {"confirm": confirm if isinstance(confirm, bool | str) else False, "ticket": ticket}


def _next(
    exc: OngridError,
    kwargs: dict[str, Any],
    confirm: bool | str | ConfirmFn,
    host: CallingHost,
    call: ToolCall,
    args: dict[str, Any],
) -> dict[str, Any] | Confirmation | None:
    """After a refusal: the keyword arguments to try again with, a question for the user, or None."""
    if isinstance(exc, ConfirmationRequired) and callable(confirm) and kwargs["confirm"] is False:
        tool = host.get(call.name)
        return Confirmation(tool, args, exc.args_digest, exc.decision.reason)
    if (
        isinstance(exc, ApprovalRequired)
        and kwargs["ticket"] is None
        and getattr(exc.ticket, "status", None) == "approved"
    ):
        return {**kwargs, "ticket": exc.ticket.id}
    if isinstance(exc, UnknownSkill | InvalidArguments | PermissionDenied | SkillUnavailable):
        return None
    if isinstance(exc, ApprovalError | AuditError | PluginFailed):  # the call failed: the model reads why
        return None
    raise exc  # a host problem (unknown persona, bad timeout): not the model's to read


def _answered(kwargs: dict[str, Any], question: Confirmation, yes: bool) -> dict[str, Any] | None:
    # A "no" stops here; a "yes" is bound to the exact arguments the user was shown.
    return {**kwargs, "confirm": question.args_digest} if yes else None


def _finished(call: ToolCall, result: CallResult) -> Dispatched:
    if result.ok:
        return Dispatched(call, "ok", result.value, result)
    details: dict[str, Any] = {"exit_code": result.exit_code}
    if result.timed_out:
        details["timed_out"] = True
    if result.stderr_tail:
        details["stderr_tail"] = list(result.stderr_tail[-_STDERR_LINES:])
    if result.value is not None:
        details["result"] = result.value
    hint = "the tool ran and failed; read the error, fix the arguments if they caused it, or tell the user"
    payload = _payload(result.error or "the tool failed", result.outcome, details, hint)
    return Dispatched(call, result.outcome, payload, result)


def _refused(call: ToolCall, exc: OngridError) -> Dispatched:
    code, details, hint = _explain(exc)
    return Dispatched(call, code, _payload(_model_message(exc), code, details, hint), error=exc)


def refusal(call: ToolCall, exc: OngridError) -> Dispatched:
    """What the model reads when ``call`` is refused with ``exc`` (for a surface that words a
    refusal differently from the pipeline, as MCP hides tools its persona may not call)."""
    return _refused(call, exc)


def _model_message(exc: OngridError) -> str:
    # The exceptions' own messages address a CLI user (--yes, --ticket); a model gets the reason.
    if isinstance(exc, ConfirmationRequired):
        return f"the call to {exc.tool!r} needs the user's confirmation: {exc.decision.reason}"
    if isinstance(exc, ApprovalRequired):
        return f"the call to {exc.tool!r} needs two-person approval: {exc.decision.reason}"
    return str(exc)


def _error(call: ToolCall, code: str, message: str, *, hint: str) -> Dispatched:
    return Dispatched(call, code, _payload(message, code, {}, hint))


def _payload(message: str, code: str, details: Mapping[str, Any], hint: str) -> dict[str, Any]:
    return {"error": message, "code": code, **details, "hint": hint}


#: What a model should do next, by the refusal's code (the code and details come from the error).
_HINTS = {
    "unknown_skill": "call one of the tools you were given",
    "invalid_arguments": "fix the arguments named above and call the tool again",
    "needs_confirmation": (
        "this call changes things and needs the user's confirmation, which the host did not give; "
        "tell the user what you want to do and why, and do not call it again unless they agree"
    ),
    "denied": "you may not make this call; do not retry it, tell the user instead",
    "ticket_refused": (
        "the approval ticket does not cover this call; tell the user (a new call opens a new ticket)"
    ),
    "unavailable": "this tool cannot run here; tell the user why",
    "audit_unavailable": "the call cannot be recorded right now; try again later or tell the user",
}


def _explain(exc: OngridError) -> tuple[str, dict[str, Any], str]:
    """The code, the details and the hint for a refusal: the error's own, plus what to do."""
    if isinstance(exc, ApprovalRequired):
        return exc.code, *_approval(exc)
    details = exc.details()
    details.pop("args_digest", None)  # the model cannot confirm; the host does
    return exc.code, details, _HINTS.get(exc.code, "tell the user the call failed and why")


def _approval(exc: ApprovalRequired) -> tuple[dict[str, Any], str]:
    ticket = exc.ticket
    if ticket is None:
        return {"reason": exc.decision.reason}, "this call needs two-person approval; tell the user"
    data = ticket.to_dict()
    details = {
        "reason": exc.decision.reason,
        "ticket": {
            "id": ticket.id,
            "status": ticket.status,
            "approvals": len(ticket.approvals),
            "required": ticket.required,
            "requester": ticket.requester,
            "expires": data["expires"],
        },
    }
    hint = (
        f"this call needs two-person approval. Tell the user that ticket {ticket.id} must be approved by "
        f"two people other than {ticket.requester} (`ongrid-skills approvals approve {ticket.id}`); once it "
        f"is approved, call this tool again with exactly the same arguments before {data['expires']}"
    )
    return details, hint
