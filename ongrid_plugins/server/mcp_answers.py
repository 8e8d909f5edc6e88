"""The ``tools/call`` answers the MCP server makes itself, and its confirmation questions.

A refusal it words (``not_asked``, ``declined``, ``cannot_ask``), the question a
confirmation asks (``question_text``, ``input_required`` for the 2026-07-28 flow,
``CONFIRM_SCHEMA``) and how it reads the client's elicitation abilities and answers.
It imports the ``mcp`` SDK's types (the ``[mcp]`` extra) and the dispatch surface's
types; only :mod:`.mcp` imports it.
"""

from __future__ import annotations

import json
from typing import Any

import mcp.types as types

from ..errors import ConfirmationRequired
from ..host.dispatch import Confirmation, Dispatched

__all__ = [
    "CONFIRM_SCHEMA",
    "accepted",
    "can_elicit",
    "cannot_ask",
    "declined",
    "error_result",
    "input_required",
    "not_asked",
    "question_text",
]

CONFIRM_SCHEMA = {
    "type": "object",
    "properties": {"confirm": {"type": "boolean", "title": "Run it", "description": "Run this call now?"}},
    "required": ["confirm"],
}


def can_elicit(ctx: Any) -> bool:
    """Whether the client can show a form (an empty elicitation capability means form, by the spec)."""
    elicitation = getattr(ctx.session.client_capabilities, "elicitation", None)
    if elicitation is None:
        return False
    return getattr(elicitation, "form", None) is not None or getattr(elicitation, "url", None) is None


def accepted(answer: Any) -> bool:
    content = getattr(answer, "content", None) or {}
    return getattr(answer, "action", None) == "accept" and content.get("confirm") is True


def question_text(question: Confirmation) -> str:
    arguments = json.dumps(dict(question.arguments), ensure_ascii=False, sort_keys=True)
    return (
        f"Run {question.tool.name} ({question.tool.tool_class.value})? {question.tool.description.strip()}\n"
        f"Arguments: {arguments}\nWhy you are asked: {question.reason}"
    )


def input_required(
    exc: ConfirmationRequired, arguments: dict[str, Any], state: str
) -> types.InputRequiredResult:
    """Ask through the 2026-07-28 multi-round flow; ``state`` names the question server-side."""
    shown = json.dumps(arguments, ensure_ascii=False, sort_keys=True)
    message = (
        f"Run {exc.tool}? It changes things.\nArguments: {shown}\nWhy you are asked: {exc.decision.reason}"
    )
    request = types.ElicitRequest(
        params=types.ElicitRequestFormParams(message=message, requested_schema=CONFIRM_SCHEMA)
    )
    return types.InputRequiredResult(input_requests={"confirm": request}, request_state=state)


def not_asked(name: str) -> types.CallToolResult:
    message = (
        f"the call to {name!r} was not run: it answers a confirmation this server did not ask for "
        "(unknown, reused or expired request_state); call it again without input_responses to be asked"
    )
    return error_result({"error": message, "code": "not_asked", "hint": "call it again to be asked"})


def cannot_ask(outcome: Dispatched) -> types.CallToolResult:
    payload = dict(outcome.payload)
    payload["error"] = (
        f"the call to {outcome.call.name!r} changes things and needs the user's confirmation, but this MCP "
        "client cannot ask for one (it does not support elicitation), so it was not run"
    )
    payload["hint"] = "tell the user; they can run it themselves with `ongrid-skills run ... --yes`"
    return error_result(payload)


def declined(name: str) -> types.CallToolResult:
    payload = {
        "error": f"the user declined the call to {name!r}; it was not run",
        "code": "declined",
        "hint": "do not call it again unless the user asks you to",
    }
    return error_result(payload)


def error_result(payload: dict[str, Any]) -> types.CallToolResult:
    text = json.dumps(payload, ensure_ascii=False)
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=True)
