"""What travels between a host and a worker: the call payload and the result.

Plain JSON both ways (Celery's ``json`` serializer): nothing a worker unpickles.
The payload carries what the host decided; the worker may narrow it, never widen it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import attrs

from ..models import CallResult

if TYPE_CHECKING:
    from ..executors.confine import Profile
    from ..models import CallRequest

__all__ = [
    "LEASE",
    "LEASE_RENEW",
    "SAFE_TASK_NAME",
    "TASK_NAME",
    "alive_key",
    "cancel_channel",
    "cancelled_key",
    "channel",
    "claim_key",
    "done_key",
    "lease_key",
    "narrower",
    "payload",
    "profile_from_dict",
    "profile_to_dict",
    "result_from_dict",
    "result_to_dict",
    "task_for",
]

TASK_NAME = "ongrid.run"
"""The task for ``mutating`` and ``dangerous`` calls: acknowledged early, at most once."""
SAFE_TASK_NAME = "ongrid.run_safe"
"""The task for ``safe`` calls: acknowledged late, redelivered if its worker is lost."""
PROTOCOL = 2
"""2: the body is signed (:mod:`.signing`) and binds its task id, queue and expiry."""
LEASE = 3.0
"""Seconds a worker's lease on a call it started lives without a renewal."""
LEASE_RENEW = 1.0
"""Seconds between a worker's renewals of its leases (and a host's checks of one)."""


def channel(call_id: str, task_id: str) -> str:
    """The Redis pub/sub channel a call's events and result are published on.

    The task id (a random uuid4 the host picks per call) makes it unguessable: call ids
    are a per-process prefix and a counter, so one seen tells the next.
    """
    return f"ongrid:call:{call_id}:{task_id}"


def cancel_channel(call_id: str) -> str:
    """The channel a host publishes on to cancel a running call (the worker kills it)."""
    return f"ongrid:cancel:{call_id}"


def lease_key(call_id: str) -> str:
    """The key a worker holds (its name, :data:`LEASE` s, renewed) while it runs the call."""
    return f"ongrid:lease:{call_id}"


def alive_key(worker: str) -> str:
    """The key a worker's main process holds (its instance id, :data:`LEASE` s, renewed).

    A pool process dies alone (its call's lease expires, the worker lives on and redelivers
    a ``safe`` call) or with its worker (this key expires, or a restarted worker of the
    same name holds it with another instance id).
    """
    return f"ongrid:alive:{worker}"


def cancelled_key(call_id: str) -> str:
    """The key a host sets when it cancels a call, for a worker that takes it afterwards."""
    return f"ongrid:cancelled:{call_id}"


DONE_TTL = 24 * 3600
"""Seconds a worker keeps a call's signed result under :func:`done_key`."""


def done_key(call_id: str, task_id: str) -> str:
    """The key a worker keeps a call's signed result under, for a host that gave up on it."""
    return f"ongrid:done:{call_id}:{task_id}"


def task_for(tool_class: str) -> str:
    """The task a call of ``tool_class`` is sent as (the acknowledgement mode: :mod:`.worker`)."""
    return SAFE_TASK_NAME if tool_class == "safe" else TASK_NAME


def claim_key(body: dict[str, Any]) -> str:
    """The idempotency key a worker claims before running: the ticket id, else the call id."""
    if body.get("ticket"):
        return f"ongrid:claim:ticket:{body['ticket']}"
    return f"ongrid:claim:call:{body['call_id']}"


def payload(
    request: CallRequest,
    timeout: float,
    stdout_cap: int,
    task_id: str = "",
    queue: str = "",
    expires: float = 0.0,
) -> dict[str, Any]:
    """The task body for ``request``: what the host decided, for the worker to check and run.

    The host signs it (:mod:`.signing`): the task id, queue and expiry (seconds since the
    epoch) bind it to the one task the host sent, the class, ticket and confirmation to
    the decision that allowed it.
    """
    tool = request.tool
    return {
        "protocol": PROTOCOL,
        "task_id": task_id,
        "queue": queue,
        "expires": expires,
        "confirmed": bool(request.confirm),
        "approvers": list(request.approvers),
        "tool": tool.name,
        "digest": tool.digest,
        "entry_digest": tool.entry_digest,
        "tool_class": tool.tool_class.value,
        "args_json": request.args_json,
        "args_digest": request.args_digest,
        "persona": request.persona.name,
        "caller": request.caller,
        "call_id": request.call_id,
        "ticket": request.ticket,
        "timeout": timeout,
        "stdout_cap": stdout_cap,
        "sandbox": profile_to_dict(request.sandbox) if request.sandbox is not None else None,
    }


def profile_to_dict(profile: Profile) -> dict[str, Any]:
    """Every field of a profile (``Profile.to_dict`` is the display form and loses some)."""
    data = attrs.asdict(profile)
    data["limits"] = dict(profile.limits)
    return data


def profile_from_dict(data: dict[str, Any]) -> Profile:
    """The profile :func:`profile_to_dict` wrote; unknown keys are an error, not ignored."""
    from ..executors.confine import Profile

    return Profile(**data)


def narrower(host: Profile | None, own: Profile) -> Profile | str:
    """The meet of the host's profile and the worker's own, or why the call is refused.

    Confined when the worker's own profile is; network and write-anywhere only when both
    grant them; declared read and write paths only those both list; hidden folders from
    both; each limit the lower of the two (a limit only one side sets is kept). Paths are
    the worker machine's, so the worker's skill folder is kept. A host that asks for a
    confined call on a worker whose own profile is unconfined (``ONGRID_SANDBOX=off``
    there) is refused: the worker cannot narrow what it does not enforce.
    """
    if host is None or not host.confined:
        return own
    if not own.confined:
        return (
            f"the host asked for a confined call but this worker would run it unconfined "
            f"({own.reason}); refused: a worker never widens the host's sandbox profile"
        )
    limits = dict(own.limits)
    for name, value in host.limits.items():
        limits[name] = min(value, limits[name]) if name in limits else value
    return attrs.evolve(
        own,
        network=host.network and own.network,
        write_all=host.write_all and own.write_all,
        read=tuple(path for path in own.read if path in host.read),
        write=tuple(path for path in own.write if path in host.write),
        hidden=tuple(dict.fromkeys((*own.hidden, *host.hidden))),
        limits=limits,
    )


def result_to_dict(result: CallResult) -> dict[str, Any]:
    """A result as JSON, without the decision (the host's own is put back on arrival)."""
    data = result.to_dict()
    data.pop("decision", None)
    data["duration"] = result.duration
    return data


def result_from_dict(data: dict[str, Any]) -> CallResult:
    """The :class:`CallResult` a worker sent; check it with :func:`result_refusal` first."""
    return CallResult(
        tool=str(data["tool"]),
        ok=bool(data["ok"]),
        value=data.get("value"),
        error=data.get("error"),
        exit_code=data.get("exit_code"),
        signal=data.get("signal"),
        timed_out=bool(data.get("timed_out", False)),
        duration=float(data.get("duration") or 0.0),
        stderr_tail=tuple(data.get("stderr_tail") or ()),
        call_id=str(data.get("call_id") or ""),
        status=str(data.get("status") or ""),
    )
