"""An audit row in the making: the columns of a call attempt.

A call's row is made in two steps: :func:`start_row` before the call (the columns
known then, which the in-flight record keeps, :mod:`.inflight`) and :func:`finish_row`
after it (all the columns, chained by :func:`~.chain.append`). Arguments and stderr
are redacted here (:mod:`ongrid_plugins.schema.redact`); a value that has no JSON text
is kept as its repr, so every attempt gets its row.

May import what :mod:`.chain` may, and :mod:`.chain` and :mod:`.inflight`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..models import sha256_hex
from ..schema.redact import needs_redaction, redact, redact_lines, redact_text, scrub_values
from .chain import MAX_TEXT, STDERR_LINES, canonical
from .inflight import HOST

if TYPE_CHECKING:
    from ..models import CallRequest, CallResult

__all__ = ["approvers_json", "clip", "dumps", "finish_row", "start_row"]


def start_row(request: CallRequest, started: float) -> dict[str, Any]:
    """The columns known before the call runs (what the in-flight record keeps)."""
    tool = request.tool
    args: Any = request.args
    redacted: list[str] = []
    if needs_redaction(tool.schema, args):
        args, redacted = redact(tool.schema, args)
    return {
        "time": started,
        "call_id": request.call_id,
        "tool": tool.name,
        "tool_class": tool.tool_class.value,
        "persona": request.persona.name,
        "caller": request.caller,
        # args_json is the canonical JSON of args already: nothing to serialise again
        "args": dumps(args) if redacted or not request.args_json else request.args_json,
        # a digest of arguments that held a secret could confirm a guess of it
        "args_digest": "" if redacted else request.args_digest,
        "redacted": dumps(redacted) if redacted else "[]",
        "pid": os.getpid(),
        "hostname": HOST,
        "sandbox": None if request.sandbox is None else dumps(request.sandbox.to_dict()),
        "skill_digest": tool.digest,
        "ticket": request.ticket,
        "approvers": approvers_json(request.approvers),
    }


def finish_row(
    start: dict[str, Any], request: CallRequest, result: CallResult, duration: float
) -> dict[str, Any]:
    """The whole row of an attempt that is over."""
    decision = result.decision
    text = dumps(result.value) if result.value is not None else ""
    # surrogatepass: a value holding a lone surrogate (an executor that did not refuse one)
    # still gets its row; strict UTF-8 would raise here and the row would be lost.
    data = text.encode("utf-8", "surrogatepass")
    return {
        **start,
        "verdict": decision.verdict.value if decision else "",
        "reason": decision.reason if decision else "",
        "plugin": decision.plugin if decision else "",
        "outcome": str(result.outcome),
        "error": clip(redact_text(result.error)) if result.error else None,
        "exit_code": result.exit_code,
        "signal": result.signal,
        "duration": float(duration),
        "stderr_tail": _stderr(start, request, result.stderr_tail) if result.stderr_tail else "[]",
        "result_size": len(data),
        "result_digest": sha256_hex(data) if data else "",
        "ticket": request.ticket,
        "approvers": approvers_json(request.approvers),
        "remote": dumps(result.remote.to_dict()) if result.remote is not None else None,
    }


def _stderr(start: dict[str, Any], request: CallRequest, tail: Any) -> str:
    """The ``stderr_tail`` column: the last lines, secret shapes redacted, and the values
    redacted from the arguments wherever a line repeats them."""
    lines = redact_lines(map(str, tail))
    if start["redacted"] != "[]":  # values were taken out of the arguments
        lines = scrub_values(lines, request.args, redact(request.tool.schema, request.args)[0])
    return dumps([clip(line) for line in lines][-STDERR_LINES:])


def approvers_json(approvers: Sequence[str]) -> str:
    """The ``approvers`` column: canonical JSON of the list (most calls have none)."""
    return dumps(list(approvers)) if approvers else "[]"


def dumps(value: Any) -> str:
    """Canonical JSON, and never an exception: what cannot be JSON is kept as its repr."""
    try:
        return canonical(value)
    except (TypeError, ValueError, RecursionError):
        return json.dumps(repr(value)[:MAX_TEXT])


def clip(text: str) -> str:
    return text if len(text) <= MAX_TEXT else text[: MAX_TEXT - 3] + "..."
