"""Lines the MCP SDK's stdio transport drops without an answer, answered (used by :mod:`.mcp`).

The SDK parses each stdin line with a strict JSON parser and, when that fails, hands the
session an exception that it only logs: the client gets no answer, and one waiting for
its request waits for ever. Two kinds of line get there:

* text that is not JSON: answered with JSON-RPC's parse error (``-32700``, ``id: null``);
* valid JSON holding a lone surrogate (``"\\ud800"``), which Python's parser reads and the
  SDK's refuses. A ``tools/call`` is then run through
  :func:`~ongrid_plugins.dispatch.adispatch` like any call, so the model gets the same
  ``invalid_arguments`` result (the pipeline refuses text no UTF-8 can carry) and the
  audit log its row; any other request gets ``-32602`` (invalid params).

It imports the ``mcp`` SDK (the ``[mcp]`` extra), :mod:`ongrid_plugins.dispatch` and
the host's types; nothing imports it but :mod:`.mcp`.
"""

from __future__ import annotations

import json
from typing import Any

import anyio  # the [mcp] extra: .mcp, which imports this module, checked it is installed
import mcp.types as types
from mcp.shared.message import SessionMessage

from ..dispatch import adispatch
from ..host import PersonaLike, SkillHost

__all__ = ["screened"]

_MAX_SHOWN = 200


def screened(
    read_stream: Any,
    write_stream: Any,
    host: SkillHost,
    persona: PersonaLike,
    caller: str | None,
    group: Any,
) -> Any:
    """The stream ``server.run`` should read: ``read_stream`` with the lines the SDK could
    not parse answered here (in a task of ``group``) instead of passed on."""
    send, receive = anyio.create_memory_object_stream[Any](0)

    async def pump() -> None:
        async with send:
            async for item in read_stream:
                if isinstance(item, Exception):
                    answer = await _answer(item, host, persona, caller)
                    if answer is not None:
                        await write_stream.send(SessionMessage(answer))
                        continue
                await send.send(item)

    group.start_soon(pump)
    return receive


async def _answer(
    exc: Exception, host: SkillHost, persona: PersonaLike, caller: str | None
) -> types.JSONRPCMessage | None:
    """The answer to the line ``exc`` failed to parse, or None (not a line: pass it on)."""
    line = _line_of(exc)
    if line is None:
        return None
    try:
        message = json.loads(line)
    except (ValueError, RecursionError):
        line = line.rstrip("\r\n")
        shown = line if len(line) <= _MAX_SHOWN else line[:_MAX_SHOWN] + "..."
        error = types.ErrorData(code=types.PARSE_ERROR, message=f"not valid JSON: {shown!r}")
        return types.JSONRPCError(jsonrpc="2.0", id=None, error=error)
    if not isinstance(message, dict) or not isinstance(message.get("id"), str | int):
        return None  # a notification or a stray value: nobody waits for an answer
    request_id = message["id"]
    params = message.get("params")
    if message.get("method") == "tools/call" and isinstance(params, dict):
        call = {"name": params.get("name"), "arguments": params.get("arguments") or {}}
        outcome = await adispatch(host, call, persona=persona, caller=caller)
        result = types.CallToolResult.model_validate(_plain(outcome.message))
        body = result.model_dump(by_alias=True, exclude_none=True, mode="json")
        return types.JSONRPCResponse(jsonrpc="2.0", id=request_id, result=body)
    text = "the request holds text that is not UTF-8 (a lone surrogate such as \\ud800)"
    error = types.ErrorData(code=types.INVALID_PARAMS, message=text)
    return types.JSONRPCError(jsonrpc="2.0", id=request_id, error=error)


def _line_of(exc: Exception) -> str | None:
    """The raw line of a parse failure the SDK reported (a pydantic ``ValidationError``)."""
    errors = getattr(exc, "errors", None)
    if not callable(errors):
        return None
    try:
        found = errors()
    except Exception:
        return None
    for error in found:
        if error.get("type") == "json_invalid" and isinstance(error.get("input"), str | bytes):
            value = error["input"]
            return value.decode("utf-8", "replace") if isinstance(value, bytes) else value
    return None


def _plain(value: Any) -> Any:
    """``value`` with lone surrogates replaced, so that it can be written as UTF-8."""
    text = json.dumps(value, ensure_ascii=False, default=str)
    return json.loads(text.encode("utf-8", "surrogatepass").decode("utf-8", "replace"))
