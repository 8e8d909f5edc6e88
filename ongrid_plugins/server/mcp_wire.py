"""Lines the MCP SDK's stdio transport drops without an answer, answered (used by :mod:`.mcp`).

The SDK parses each stdin line with a strict JSON parser and, when that fails, hands the
session an exception that it only logs: the client gets no answer, and one waiting for
its request waits for ever. Two kinds of line get there:

* text that is not JSON: answered with JSON-RPC's parse error (``-32700``, ``id: null``);
* valid JSON holding a lone surrogate (``"\\ud800"``), which Python's parser reads and the
  SDK's refuses. A ``tools/call`` is then run through
  :func:`~ongrid_plugins.host.dispatch.adispatch` like any call (in a task: the next lines are
  read meanwhile), so the model gets the same ``invalid_arguments`` result (the pipeline
  refuses text no UTF-8 can carry) and the audit log its row; any other request gets
  ``-32602`` (invalid params);
* valid JSON the SDK's parser gives up on (nested deeper than it reads) that is no request
  to run: a batch (an array), an ``id`` that is neither a string nor an integer, a
  ``jsonrpc`` other than ``"2.0"``, ``params`` that are not an object, or a request with
  no lone surrogate. These get ``-32600`` (invalid request), with the request's ``id``
  when it has a usable one, and nothing runs;
* JSON the SDK parses but does not take for a JSON-RPC message (its validation fails):
  a batch, a bare value, ``params`` that are not an object, a ``jsonrpc`` other than
  ``"2.0"``, a ``method`` that is not a string, an ``id`` with neither a method nor a
  result. A request among these gets ``-32600`` too, with its ``id`` when usable; a
  notification or a response gets nothing (nobody waits for an answer).

An answer made here that cannot be written (a result nested deeper than the SDK writes)
is replaced by an error saying so: a failed write would end the whole server.

It imports the ``mcp`` SDK (the ``[mcp]`` extra), :mod:`ongrid_plugins.host.dispatch` and
the host's types; nothing imports it but :mod:`.mcp`.
"""

from __future__ import annotations

import contextlib
import json
from typing import Any

import anyio  # the [mcp] extra: .mcp, which imports this module, checked it is installed
import mcp.types as types
from mcp.shared.message import SessionMessage

from ..gate.persona_lookup import PersonaLike
from ..host.dispatch import adispatch
from ..host.facade import SkillHost

__all__ = ["carried", "screened"]

_MAX_SHOWN = 200


def screened(
    read_stream: Any,
    write_stream: Any,
    host: SkillHost,
    persona: PersonaLike,
    caller: str | None,
    group: Any,
    slots: Any = None,
) -> Any:
    """The stream ``server.run`` should read: ``read_stream`` with the lines the SDK could
    not parse answered here (in a task of ``group``) instead of passed on. ``slots``: the
    server's limit on calls running at once, which a call run here takes too."""
    send, receive = anyio.create_memory_object_stream[Any](0)

    async def pump() -> None:
        async with send:
            async for item in read_stream:
                if isinstance(item, Exception):
                    answer = _answer(item)
                    if isinstance(answer, dict):  # a tools/call to run: not on the reading task
                        group.start_soon(_run_call, answer, write_stream, host, persona, caller, slots)
                        continue
                    if answer is not None:
                        await write_stream.send(SessionMessage(_writable(answer)))
                        continue
                await send.send(item)

    group.start_soon(pump)
    return receive


def _answer(exc: Exception) -> types.JSONRPCMessage | dict[str, Any] | None:
    """The answer to the line ``exc`` failed to parse: an error, the request of a
    ``tools/call`` to run, or None (not a line, or a notification: pass it on)."""
    found = _line_of(exc)
    if found is None:
        invalid = _invalid_message(exc)
        return None if invalid is None else _judged(invalid[0], invalid[1], parsed=True)
    line, why = found
    try:
        message = json.loads(line)
    except ValueError:
        line = line.rstrip("\r\n")
        shown = line if len(line) <= _MAX_SHOWN else line[:_MAX_SHOWN] + "..."
        return _error(None, types.PARSE_ERROR, f"not valid JSON: {shown!r}")
    except RecursionError:
        return _error(None, types.INVALID_REQUEST, f"the request could not be read: {why}")
    return _judged(message, why, parsed=False)


def _judged(message: Any, why: str, parsed: bool) -> types.JSONRPCMessage | dict[str, Any] | None:
    """The answer to ``message``, a JSON value the SDK refused: ``parsed`` when its parser
    read it and its validation failed (``why``), else its parser gave up on the line."""
    if not isinstance(message, dict):
        batch = " (batches are not supported)" if isinstance(message, list) else ""
        return _error(None, types.INVALID_REQUEST, f"a request is one JSON object{batch}")
    request_id = message.get("id")
    if "id" not in message or ("method" not in message and ("result" in message or "error" in message)):
        return None  # a notification or a stray response: nobody waits for an answer
    if isinstance(request_id, bool) or not isinstance(request_id, str | int):
        return _error(None, types.INVALID_REQUEST, "a request's id is a string or an integer")
    params = message.get("params")
    if message.get("jsonrpc") != "2.0" or not isinstance(params, dict | None):
        return _error(request_id, types.INVALID_REQUEST, 'a request has "jsonrpc": "2.0" and object params')
    if not isinstance(message.get("method"), str):
        return _error(request_id, types.INVALID_REQUEST, 'a request has a "method" that is a string')
    if parsed:
        return _error(request_id, types.INVALID_REQUEST, f"not a valid JSON-RPC request: {why}")
    if not _has_lone_surrogate(message):  # nested deeper than the SDK reads, say
        return _error(request_id, types.INVALID_REQUEST, f"the request could not be read: {why}")
    if message.get("method") == "tools/call" and isinstance(params, dict):
        return message
    text = "the request holds text that is not UTF-8 (a lone surrogate such as \\ud800)"
    return _error(request_id, types.INVALID_PARAMS, text)


def _error(request_id: str | int | None, code: int, text: str) -> types.JSONRPCError:
    return types.JSONRPCError(jsonrpc="2.0", id=request_id, error=types.ErrorData(code=code, message=text))


def _has_lone_surrogate(message: dict[str, Any]) -> bool:
    try:
        json.dumps(message, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return True
    except (ValueError, RecursionError):
        return False
    return False


async def _run_call(
    message: dict[str, Any],
    write_stream: Any,
    host: SkillHost,
    persona: PersonaLike,
    caller: str | None,
    slots: Any,
) -> None:
    """Run a ``tools/call`` the SDK could not read (a lone surrogate) and send its answer."""
    params = message["params"]
    call = {"name": params.get("name"), "arguments": params.get("arguments") or {}}
    async with slots if slots is not None else contextlib.nullcontext():
        outcome = await adispatch(host, call, persona=persona, caller=caller)
    result = types.CallToolResult.model_validate(_plain(outcome.message))
    body = result.model_dump(by_alias=True, exclude_none=True, mode="json")
    answer = types.JSONRPCResponse(jsonrpc="2.0", id=message["id"], result=body)
    with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
        await write_stream.send(SessionMessage(_writable(answer)))  # the client may have gone meanwhile


def _writable(answer: types.JSONRPCMessage) -> types.JSONRPCMessage:
    """``answer``, or an error in its place when the SDK could not write it."""
    try:
        answer.model_dump_json(by_alias=True, exclude_unset=True)
    except (ValueError, RecursionError):
        request_id = getattr(answer, "id", None)
        return _error(request_id, types.INTERNAL_ERROR, "the answer is nested more deeply than can be sent")
    return answer


def _errors_of(exc: Exception) -> list[dict[str, Any]]:
    """The errors a pydantic ``ValidationError`` lists; none for any other exception."""
    errors = getattr(exc, "errors", None)
    if not callable(errors):
        return []
    try:
        return list(errors())
    except Exception:
        return []


def _line_of(exc: Exception) -> tuple[str, str] | None:
    """The raw line of a parse failure the SDK reported (a pydantic ``ValidationError``), and why."""
    for error in _errors_of(exc):
        if error.get("type") == "json_invalid" and isinstance(error.get("input"), str | bytes):
            value = error["input"]
            text = value.decode("utf-8", "replace") if isinstance(value, bytes) else value
            return text, str(error.get("msg", "it is not JSON the MCP SDK reads"))[:_MAX_SHOWN]
    return None


def _invalid_message(exc: Exception) -> tuple[Any, str] | None:
    """The JSON value a validation failure of the SDK (a pydantic ``ValidationError``) was
    about, and its first reason; None for any other exception.

    Each error names where it failed in the message (``loc``: the model tried, then the
    member); one about the message as a whole (the wrong type, or a member missing from
    it) carries the whole value as its ``input``."""
    found = _errors_of(exc)
    whole: list[Any] = []
    for error in found:
        loc = error.get("loc") or ()
        if len(loc) == 1 or (len(loc) == 2 and error.get("type") == "missing"):
            whole.append(error.get("input"))
    if not whole or not found:
        return None
    first = found[0]
    where = ".".join(str(part) for part in (first.get("loc") or ())[1:]) or "the message"
    why = f"{where}: {first.get('msg', 'invalid')}"
    return whole[0], why[:_MAX_SHOWN]


def carried(message: dict[str, Any]) -> dict[str, Any]:
    """A ``tools/call`` result ``message`` the SDK can write: without its
    ``structuredContent`` when that is nested more deeply than the SDK writes (about 250
    levels; the text block carries the same value), which would otherwise end the call in
    an error with code 0."""
    structured = message.get("structuredContent")
    if structured is None or _nested_within(structured, _MAX_STRUCTURED_DEPTH):
        return message
    return {key: value for key, value in message.items() if key != "structuredContent"}


#: The deepest ``structuredContent`` sent (the SDK writes ~250 levels, envelope included).
_MAX_STRUCTURED_DEPTH = 200


def _nested_within(value: Any, limit: int) -> bool:
    """Whether ``value``'s lists and objects are nested at most ``limit`` levels deep."""
    level: list[Any] = [value] if isinstance(value, dict | list) else []
    for _depth in range(limit):
        level = [
            item
            for container in level
            for item in (container.values() if isinstance(container, dict) else container)
            if isinstance(item, dict | list)
        ]
        if not level:
            return True
    return False


def _plain(value: Any) -> Any:
    """``value`` with lone surrogates replaced, so that it can be written as UTF-8."""
    text = json.dumps(value, ensure_ascii=False, default=str)
    return json.loads(text.encode("utf-8", "surrogatepass").decode("utf-8", "replace"))
