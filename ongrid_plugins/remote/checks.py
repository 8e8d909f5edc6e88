"""What each side checks of what the other sent, once its signature verified (:mod:`.signing`).

A signature says who sent a message, not that it is sane: a host with a bug, a worker
of another version, or a holder of the key can still send a field of the wrong type
or range. The worker checks a task (:func:`task_refusal`, then :func:`call_refusal`
against its own copy of the tool); the host checks a result (:func:`result_refusal`).
Each returns why it refuses, or ``""``; none raises.

May import: the core values (models, echo, errors) and :mod:`.wire`.
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any

from ..core.echo import printable
from ..errors import OngridError
from ..models import digest_json
from .wire import PROTOCOL

if TYPE_CHECKING:
    from ..host.facade import SkillHost
    from ..models import Tool
    from ..settings import Settings

__all__ = [
    "call_refusal",
    "digest_mismatch",
    "limits_refusal",
    "result_refusal",
    "task_refusal",
    "tool_for",
]


_RESULT_FIELDS: dict[str, tuple[type | tuple[type, ...], bool]] = {
    # name: (types, required)
    "tool": (str, True),
    "ok": (bool, True),
    "error": ((str, type(None)), False),
    "exit_code": ((int, type(None)), False),
    "signal": ((int, type(None)), False),
    "timed_out": (bool, False),
    "duration": ((int, float), False),
    "stderr_tail": (list, False),
    "call_id": (str, True),
    "status": (str, False),
}
_STATUSES = frozenset(
    {"ok", "failed", "timed_out", "invalid_arguments", "denied", "unavailable", "aborted", "cancelled"}
)


def result_refusal(data: Any) -> str:
    """Why ``data`` is not a result a worker sends (``""`` when it is): every field's type,
    a known status, ``ok`` and ``status`` that agree, a duration that is a real number."""
    if not isinstance(data, dict):
        return f"the result is a {type(data).__name__}, not an object"
    for name, (types, required) in _RESULT_FIELDS.items():
        if name not in data:
            if required:
                return f"the result has no {name!r}"
            continue
        value = data[name]
        if not isinstance(value, types) or (isinstance(value, bool) and bool not in _tuple(types)):
            return f"the result's {name!r} is a {type(value).__name__}"
    duration = data.get("duration", 0.0)
    if not 0.0 <= float(duration) < 10**9:
        return f"the result's duration {duration!r} is out of range"
    tail = data.get("stderr_tail") or []
    if len(tail) > 1000 or not all(isinstance(line, str) for line in tail):
        return "the result's stderr_tail is not a list of at most 1000 lines of text"
    status = data.get("status") or ("ok" if data["ok"] else "failed")
    if status not in _STATUSES:
        return f"the result's status {str(status)[:40]!r} is not one a worker sends"
    if (status == "ok") != data["ok"]:
        return f"the result says ok={data['ok']} but status {status!r}"
    return ""


def _tuple(types: type | tuple[type, ...]) -> tuple[type, ...]:
    return types if isinstance(types, tuple) else (types,)


_TASK_FIELDS: dict[str, tuple[type, ...]] = {
    "protocol": (int,),
    "task_id": (str,),
    "queue": (str,),
    "expires": (int, float),
    "confirmed": (bool,),
    "approvers": (list,),
    "tool": (str,),
    "digest": (str,),
    "entry_digest": (str,),
    "tool_class": (str,),
    "args_json": (str,),
    "args_digest": (str,),
    "persona": (str,),
    "caller": (str,),
    "call_id": (str,),
    "ticket": (str, type(None)),
    "timeout": (int, float),
    "stdout_cap": (int,),
    "sandbox": (dict, type(None)),
}
_PROFILE_FIELDS: dict[str, tuple[type, ...]] = {
    "confined": (bool,),
    "tool_class": (str,),
    "network": (bool,),
    "write_all": (bool,),
    "read": (list,),
    "write": (list,),
    "hidden": (list,),
    "skill_dir": (str,),
    "limits": (dict,),
    "declared": (bool,),
    "reason": (str,),
}


def task_refusal(body: dict[str, Any], task_id: str, now: float) -> str:
    """Why a (signature-checked) task body is refused before anything else (``""`` if not):
    every field present with its type, the protocol, the task id Celery delivered it as,
    the expiry, a class, a positive timeout and output cap, a profile of known fields."""
    for name, types in _TASK_FIELDS.items():
        if name not in body:
            return f"the task has no {name!r}"
        value = body[name]
        if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
            return f"the task's {name!r} is a {type(value).__name__}"
    if body["protocol"] != PROTOCOL:
        return f"the task speaks protocol {body['protocol']}, this worker {PROTOCOL}: upgrade the older side"
    if body["task_id"] != task_id:
        return "the task was signed for another task id (a replayed or re-sent body)"
    if not now <= body["expires"]:
        return "the task expired before this worker took it"
    if body["tool_class"] not in ("safe", "mutating", "dangerous"):
        return "the task's class is not safe, mutating or dangerous"
    if not 0 < body["timeout"] <= 7 * 24 * 3600:
        return "the task's timeout is not a positive number of seconds"
    if body["stdout_cap"] < 1:
        return "the task's stdout_cap is below 1"
    if not all(isinstance(a, str) for a in body["approvers"]):
        return "the task's approvers are not names"
    sandbox = body["sandbox"]
    if sandbox is not None:
        if set(sandbox) != set(_PROFILE_FIELDS):
            return "the task's sandbox profile does not have the profile's fields"
        for name, types in _PROFILE_FIELDS.items():
            value = sandbox[name]
            if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
                return f"the task's sandbox {name!r} is a {type(value).__name__}"
            if isinstance(value, list) and not all(isinstance(item, str) for item in value):
                return f"the task's sandbox {name!r} is not a list of paths"
    return ""


def limits_refusal(sent: Any, caps: Any) -> str:
    """Why the limits a host sent are refused (``""`` when not): each a known limit, a
    whole number from 1 to the worker's own cap (``caps``, the operator's caps there)."""
    if not isinstance(sent, dict):
        return "the sandbox limits are not an object"
    for name, value in sent.items():
        if name not in caps:
            return f"the sandbox limit {str(name)[:40]!r} is not one this worker knows"
        if isinstance(value, bool) or not isinstance(value, int):
            return f"the sandbox limit {name} is a {type(value).__name__}, not a whole number"
        if not 1 <= value <= caps[name]:
            return f"the sandbox limit {name}={value} is not between 1 and this worker's cap {caps[name]}"
    return ""


def digest_mismatch(tool: Tool, body: dict[str, Any], worker: str) -> str:
    """Why the worker's copy is not the host's; its own digests travel only in the signed
    result message (the host names both, :mod:`.client`), never in the error text."""
    if body["digest"] == tool.digest and body["entry_digest"] == tool.entry_digest:
        return ""
    return (
        f"digest mismatch for {tool.name}: worker {worker} has other skill files than the host sent "
        "for; refused: deploy the same skill version on both"
    )


def call_refusal(tool: Tool, body: dict[str, Any], settings: Settings) -> str:
    """Why a signed call is refused on this worker (``""`` when not): its class is this
    tool's, its arguments are the canonical JSON of an object the tool's schema accepts
    and match their digest, its sandbox limits are whole numbers from 1 to the caps here."""
    from ..schema.arguments import check_arguments

    if body["tool_class"] != tool.tool_class.value:
        return (
            f"the host decided for a {body['tool_class']} call, {tool.name} is {tool.tool_class.value} here"
        )
    try:
        args = json.loads(body["args_json"])
    except ValueError:
        return "its arguments are not JSON"
    if not isinstance(args, dict):
        return "its arguments are not a JSON object"
    _data, text, errors = check_arguments(tool, args)
    if errors:
        where, why = errors[0]
        return (
            f"its arguments do not match {tool.name}'s schema ({printable(where, 80)}: {printable(why, 200)})"
        )
    if text != body["args_json"] or digest_json(tool.name, text) != body["args_digest"]:
        return "its arguments are not the ones their digest was taken of"
    sent = body["sandbox"]
    if sent is not None:
        return limits_refusal(sent["limits"], settings.sandbox_caps)
    return ""


def tool_for(host: SkillHost, body: dict[str, Any], worker: str, task_id: str) -> Tool | tuple[str, str]:
    """The worker's tool for a signed task, or the error and worker digest refusing it."""
    refused = task_refusal(body, task_id, time.time())
    if refused:
        return f"refused on worker {worker}: {refused}; the skill did not run", ""
    name = body["tool"]
    try:
        tool = host.get(name)
    except OngridError:
        return f"worker {worker} has no tool {name!r}: install the same skill in its roots and restart it", ""
    refused = digest_mismatch(tool, body, worker)
    if refused:
        return refused, tool.digest
    refused = call_refusal(tool, body, host.settings)
    if refused:
        return f"refused on worker {worker}: {refused}; the skill did not run", tool.digest
    return tool
