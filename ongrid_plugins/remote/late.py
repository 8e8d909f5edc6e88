"""Calls the host gave up on that a worker finished later: each becomes a follow-up audit row.

When the host stops waiting for a call a worker accepted (its lease expired, the broker
went away, the deadline passed) the caller gets a failure and the audit row says
``failed``; the worker may still finish the call (a partition, a Redis restart). The
worker keeps its signed result message under :func:`.wire.done_key` for a day, and
:func:`follow` watches that key from a daemon thread of the host until the call's
deadline and :data:`LATE_WINDOW` seconds more. A result found there (signed, of this
call and task, well formed) is recorded as a second row, call id ``CALL_ID.late``,
whose outcome is the worker's and whose error says "completed on worker W after the
host gave up", naming the first row's call: ``audit list`` shows both. A host process
that exits before the result arrives records nothing more; the worker's log has it.

May import: the core values, :mod:`.wire`, :mod:`.checks`, :mod:`.signing`, the audit
log's public methods, and redis.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import TYPE_CHECKING, Any

import attrs
import redis

from ..core.echo import printable
from ..models import RemoteRun
from .checks import result_refusal
from .signing import CHANNEL, Signer
from .wire import done_key, result_from_dict

if TYPE_CHECKING:
    from ..models import CallRequest
    from ..settings import Settings

__all__ = ["LATE_WINDOW", "follow"]

logger = logging.getLogger("ongrid_plugins.remote.client")

LATE_WINDOW = 120.0
"""Seconds after the call's own deadline the host still looks for a late result."""
_POLL = 1.0


def follow(
    client: redis.Redis,
    signer: Signer,
    settings: Settings,
    where: RemoteRun,
    request: CallRequest,
    until: float,
    why: str,
) -> None:
    """Watch for the late result of a call the host gave up on (``why``) until ``until``
    (a ``time.monotonic()``), from a daemon thread; record it as a follow-up audit row."""
    if "audit" in settings.disable_plugins:
        return
    args = (client, signer, settings, where, request, until, why)
    threading.Thread(target=_watch, args=args, name="ongrid-remote-late", daemon=True).start()


def _watch(
    client: redis.Redis,
    signer: Signer,
    settings: Settings,
    where: RemoteRun,
    request: CallRequest,
    until: float,
    why: str,
) -> None:
    key = done_key(request.call_id, where.task_id)
    while time.monotonic() < until:
        time.sleep(_POLL)
        try:
            raw = client.get(key)
        except (redis.RedisError, OSError):
            continue  # the broker is still away: look again
        if raw is None:
            continue
        data = signer.open_text(CHANNEL, raw)
        refused = data if isinstance(data, str) else _refusal(data, request, where.task_id)
        if refused:
            logger.warning("remote call %s: refused its late result (%s)", request.call_id, refused)
            return
        assert isinstance(data, dict)
        if data["result"].get("status") != "cancelled":  # the host's cancel reached it: nothing new
            _record(settings, where, request, data, why)
        return


def _refusal(data: dict[str, Any], request: CallRequest, task_id: str) -> str:
    result = data.get("result")
    if data.get("k") != "result" or data.get("task_id") != task_id or not isinstance(result, dict):
        return "it is not this task's result"
    if result.get("call_id") != request.call_id or result.get("tool") != request.tool.name:
        return "it is not this call's result"
    return result_refusal(result)


def _record(
    settings: Settings, where: RemoteRun, request: CallRequest, data: dict[str, Any], why: str
) -> None:
    from ..audit import AuditLog

    late = result_from_dict(data["result"])
    worker = printable(str(data.get("worker") or where.worker), 200)
    note = (
        f"completed on worker {worker} after the host gave up ({why}); "
        f"the row of call {request.call_id} says it failed, this row is what happened"
    )
    call_id = f"{request.call_id}.late"
    follow_up = attrs.evolve(request, call_id=call_id, on_event=None)
    digest = printable(str(data.get("digest") or ""), 100)
    ran = RemoteRun(where.queue, where.task_id, worker, digest)
    error = f"{note}: {late.error}" if late.error else note
    result = attrs.evolve(late, call_id=call_id, error=error, remote=ran)
    log = AuditLog.for_settings(settings)
    try:
        log.ongrid_before_call(follow_up)
        log.ongrid_after_call(follow_up, result)
        if not log.flush(30):
            failures = log.write_failures
            raise RuntimeError(f"the row is journaled but not chained yet ({failures} write failures)")
        log.close()
    except Exception as exc:  # the call is long over: say so, never raise in a daemon thread
        logger.error("remote call %s: cannot record its late result: %s", request.call_id, exc)
        return
    logger.warning("remote call %s: %s (audit row %s)", request.call_id, note, call_id)
