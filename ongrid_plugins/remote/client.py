"""The host side of a remote call: send the task, stream its events back, enforce the timeout.

The host subscribes to the call's Redis channel *before* it sends the task, so no
event is lost; the worker publishes ``accepted``, every event (``start``, each
``stderr`` line, ``exit``) and the ``result`` on that one channel, in order. One
pub/sub connection per executor and process carries every call's subscription
(:class:`.results.Subscriber`: a thread hands each channel's messages to its call).

The host does not trust the worker to stop: it waits at most the call's timeout plus
a grace, then cancels the call (a ``cancelled`` key for a worker that has not taken it
yet, and a message on its cancel channel: the worker kills the process group), revokes
the task and returns a timed-out result naming the worker. Nor does it trust the worker
to live: once a worker accepted the call it holds the call's lease in Redis
(:func:`.wire.lease_key`, :data:`.wire.LEASE` seconds, renewed every
:data:`.wire.LEASE_RENEW`) while the call runs; the host looks at it every
:data:`_LEASE_CHECK` seconds and, when it expired without a result, returns a failure
naming the worker at once: a worker SIGKILLed mid-call is known about 3.5 s after its
death, not at the timeout.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import queue
import threading
import time
import uuid
from typing import TYPE_CHECKING, Any

import attrs
import redis

from ..core.echo import printable
from ..models import CallResult, RemoteRun
from . import late
from .app import make_app
from .checks import result_refusal
from .late import LATE_WINDOW
from .results import LOST, subscriber
from .signing import CHANNEL, TASK, Signer
from .wire import (
    LEASE,
    alive_key,
    cancel_channel,
    cancelled_key,
    channel,
    lease_key,
    payload,
    result_from_dict,
    task_for,
)

if TYPE_CHECKING:
    from ..models import CallRequest
    from ..settings import Settings

__all__ = ["GRACE", "RemoteExecutor"]

logger = logging.getLogger(__name__)

GRACE = 1.0
"""Seconds, on top of the call's timeout and the kill grace, the host waits for a worker."""
_POLL = 0.25
_LEASE_CHECK = 0.5
"""Seconds between a host's looks at the lease of a call a worker accepted."""
_IN_FLIGHT = 0.2
"""Seconds a host still waits for a result once the lease is gone."""
_TAIL_LINES = 50
"""The stderr lines a host-made answer keeps, as a local call's ``stderr_tail`` does."""
_STOP = "stop"
"""What a cancelled :meth:`RemoteExecutor.arun` puts on its call's queue to wake the wait."""


class _Stop:
    """A cancel for a call waited for in another thread: set, and the wait wakes at once."""

    def __init__(self) -> None:
        self.event = threading.Event()
        self.box: queue.SimpleQueue[tuple[str, Any]] | None = None

    def wakes(self, box: queue.SimpleQueue[tuple[str, Any]]) -> None:
        self.box = box
        if self.event.is_set():
            box.put((_STOP, None))

    def set(self) -> None:
        self.event.set()
        if self.box is not None:
            self.box.put((_STOP, None))

    def is_set(self) -> bool:
        return self.event.is_set()


class _Call:
    """One call a host waits for: what it sent, and what it saw come back so far."""

    def __init__(
        self, request: CallRequest, task_id: str, wait: float, stop: _Stop | None, emit: Any
    ) -> None:
        self.request, self.task_id, self.wait, self.stop, self.emit = request, task_id, wait, stop, emit
        self.started = time.monotonic()
        self.worker = self.instance = ""
        """The worker that accepted the call, and that run of it (its ``alive`` id)."""
        self.tail: collections.deque[str] = collections.deque(maxlen=_TAIL_LINES)
        """The last stderr lines streamed back, for an answer the host makes itself."""

    def event(self, kind: str, data: Any) -> None:
        if kind == "stderr" and isinstance(data, str):
            self.tail.append(data)
        self.emit(kind, data)

    def stamp(self, result: CallResult) -> CallResult:
        """``result``, made on the host (timeout, lost worker or broker), with what it saw:
        the time since the call was sent and the stderr lines that came back."""
        elapsed = time.monotonic() - self.started
        return attrs.evolve(result, duration=elapsed, stderr_tail=tuple(self.tail))


class RemoteExecutor:
    """Runs calls of routed tools on the workers of one queue."""

    def __init__(self, broker_url: str, queue: str, settings: Settings, signer: Signer) -> None:
        self.broker_url = broker_url
        self.queue = queue
        self.settings = settings
        self.signer = signer
        """Signs each task and checks each message on a call's channel (:mod:`.signing`)."""
        self._redis: redis.Redis | None = None

    def __repr__(self) -> str:
        return f"<RemoteExecutor queue={self.queue}>"

    def _client(self) -> redis.Redis:
        if self._redis is None:
            timeout = self.settings.broker_timeout
            self._redis = redis.Redis.from_url(
                self.broker_url, socket_connect_timeout=timeout, socket_timeout=timeout
            )
        return self._redis

    def run(self, request: CallRequest) -> CallResult:
        """Send the call and wait for its result in this thread."""
        return self._run(request, None, request.emit)

    async def arun(self, request: CallRequest) -> CallResult:
        """Like :meth:`run` without blocking the loop; cancelling cancels the remote call."""
        loop = asyncio.get_running_loop()
        stop = _Stop()

        def emit(kind: str, data: Any = None) -> None:
            loop.call_soon_threadsafe(request.emit, kind, data)  # FIFO: the order is kept

        future = asyncio.ensure_future(asyncio.to_thread(self._run, request, stop, emit))
        try:
            result = await asyncio.shield(future)
        except asyncio.CancelledError:
            stop.set()  # the thread publishes the cancel and revokes the task
            raise
        await asyncio.sleep(0)  # deliver the events scheduled before the result
        return result

    def _run(self, request: CallRequest, stop: _Stop | None, emit: Any) -> CallResult:
        tool = request.tool
        timeout = tool.timeout if request.timeout is None else min(request.timeout, tool.timeout)
        call = _Call(request, uuid.uuid4().hex, timeout + self.settings.kill_grace + GRACE, stop, emit)
        expires = time.time() + call.wait
        body = payload(request, timeout, self.settings.stdout_cap, call.task_id, self.queue, expires)
        sealed = self.signer.seal(TASK, body)
        results = subscriber(self.broker_url, self.settings.broker_timeout)
        topic = channel(request.call_id, call.task_id)
        try:
            box, conn = results.open(topic)
        except Exception as exc:  # redis' errors, OSError, the confirmation's TimeoutError
            return self._unsent(request, exc, call.task_id)
        if stop is not None:
            stop.wakes(box)
        try:
            try:
                make_app(self.broker_url, self.settings.broker_timeout).send_task(
                    task_for(body["tool_class"]),
                    args=[sealed],
                    queue=self.queue,
                    task_id=call.task_id,
                    expires=call.wait,
                    retry=False,
                    # Celery would print the whole payload (saferepr) for its log line.
                    argsrepr=f"[<call {request.call_id} of {tool.name}>]",
                    kwargsrepr="{}",
                )
            except Exception as exc:  # redis' and kombu's own connection errors
                return self._unsent(request, exc, call.task_id)
            return self._wait(call, box)
        finally:
            results.close(topic, conn)

    def _wait(self, call: _Call, box: queue.SimpleQueue[tuple[str, Any]]) -> CallResult:
        deadline = time.monotonic() + call.wait
        check = 0.0  # when to look at the worker's lease next; 0 until a worker accepted
        suspect = 0.0  # the lease was gone: when to stop waiting for a result on its way
        while True:
            now = time.monotonic()
            if now >= deadline or (call.stop is not None and call.stop.is_set()):
                return call.stamp(self._give_up(call))
            if suspect and now >= suspect:
                lost = self._lease_lost(call)
                if lost is not None:
                    return call.stamp(lost)
                suspect, check = 0.0, now + _LEASE_CHECK  # a safe call on a live worker: redelivered
            elif check and now >= check:
                check = now + _LEASE_CHECK
                if not self._lease_held(call.request.call_id):
                    # The worker deletes its lease right after it published the result:
                    # a result on its way (or a redelivered call accepted again) still wins.
                    suspect = now + _IN_FLIGHT
            wake = min(x for x in (deadline, check, suspect) if x) - now
            try:
                kind, raw = box.get(timeout=min(max(wake, 0.001), _POLL))
            except queue.Empty:
                continue
            if kind == _STOP:
                continue  # the top of the loop cancels
            if kind == LOST:
                error = f"lost the broker mid-call ({raw}); on {call.worker or 'queue ' + self.queue}"
                self._follow(call, "it lost the broker mid-call")
                return call.stamp(self._failure(call.request, error, remote=self._where(call)))
            data = _message(call, raw, self.signer)
            if data.get("k") == "accepted":
                call.worker, call.instance = (
                    printable(str(data.get("worker", ""))),
                    str(data.get("instance", "")),
                )
                suspect, check = 0.0, time.monotonic() + _LEASE_CHECK
                continue
            done = self._handle(call, data)
            if done is not None:
                return done

    def _where(self, call: _Call) -> RemoteRun:
        return RemoteRun(self.queue, call.task_id, call.worker)

    def _give_up(self, call: _Call) -> CallResult:
        """The call was cancelled or ran out of time: revoke the task, cancel the call, say which."""
        request, task_id, worker = call.request, call.task_id, call.worker
        self._abandon(request.call_id, task_id, call.wait)
        if call.stop is not None and call.stop.is_set():
            return self._failure(request, "cancelled", status="cancelled", remote=self._where(call))
        if worker:
            self._follow(call, "the call's deadline passed")
        who = f"worker {worker}" if worker else f"no worker of queue {self.queue!r} took it"
        error = (
            f"timed out: no answer within {call.wait:.1f}s (the call's timeout, the kill grace and "
            f"{GRACE:g}s) from {who}; the task {task_id} was revoked and the call cancelled"
        )
        return CallResult(
            request.tool.name,
            False,
            error=error,
            timed_out=True,
            call_id=request.call_id,
            remote=self._where(call),
        )

    def _handle(self, call: _Call, data: dict[str, Any]) -> CallResult | None:
        """Deliver an event; the call's result when ``data`` is it."""
        request, task_id = call.request, call.task_id
        kind = data.get("k")
        if kind == "event":
            if not _refused(call, data, _event_refusal(call, data)):
                call.event(data["kind"], data.get("data"))
        elif kind == "result":
            if not isinstance(data.get("result"), dict):
                return self._malformed(call, "its result is not an object")
            if _refused(call, data, _result_mismatch(call, data)):
                return None
            digest = printable(str(data.get("digest") or ""), 100)
            ran = RemoteRun(self.queue, task_id, call.worker, digest)
            malformed = result_refusal(data["result"])
            if malformed:
                return self._malformed(call, malformed, ran)
            logger.info(
                "remote call %s of %s ran on worker %s (queue %s, task %s, worker digest %s)",
                request.call_id,
                request.tool.name,
                call.worker,
                self.queue,
                task_id,
                digest,
            )
            result = attrs.evolve(result_from_dict(data["result"]), remote=ran)
            if digest != request.tool.digest:
                return _other_files(result, request.tool.digest, call.worker, digest)
            return result
        return None

    def _malformed(self, call: _Call, why: str, ran: RemoteRun | None = None) -> CallResult:
        """A signed result of the wrong shape: a recorded failure, and the task revoked."""
        request = call.request
        logger.warning(
            "remote call %s of %s: worker %s sent a malformed result (%s); the task was revoked",
            request.call_id,
            request.tool.name,
            call.worker,
            why,
        )
        self._abandon(request.call_id, call.task_id, call.wait)
        error = f"the worker sent a malformed result ({why}); the task {call.task_id} was revoked"
        return call.stamp(self._failure(request, error, remote=ran or self._where(call)))

    def _lease_held(self, call_id: str) -> bool:
        try:
            return bool(self._client().exists(lease_key(call_id)))
        except (redis.RedisError, OSError):
            return True  # the subscriber hears a lost broker too; the deadline still holds

    def _lease_lost(self, call: _Call) -> CallResult | None:
        """The failure to return now that the worker's lease expired without a result.

        ``None`` for a ``safe`` call whose worker still lives (the same instance holds its
        :func:`.wire.alive_key`): safe calls are acknowledged late, so when only the pool
        process running one died, that worker puts it back on the queue and runs it again;
        the host waits on, up to its deadline. A worker restarted under the same name is
        another instance: its predecessor's call is not coming back.
        """
        request, task_id, worker, instance = call.request, call.task_id, call.worker, call.instance
        if request.tool.tool_class.value == "safe" and instance and self._alive(worker, instance):
            return None
        self._abandon(request.call_id, task_id, call.wait)
        self._follow(call, "the worker's lease expired")
        error = (
            f"worker {worker} stopped answering during the call (lease expired): no renewal of its "
            f"lease for {LEASE:g}s and no result; the worker or its machine died or lost the broker. "
            f"The task {task_id} was revoked and the call cancelled; a call that changes something "
            f"may or may not have run (it is not retried)"
        )
        return self._failure(request, error, remote=self._where(call))

    def _follow(self, call: _Call, why: str) -> None:
        """Record, as a follow-up audit row, a result the worker sends after the host gave up."""
        until = call.started + call.wait + LATE_WINDOW
        late.follow(self._client(), self.signer, self.settings, self._where(call), call.request, until, why)

    def _alive(self, worker: str, instance: str) -> bool:
        """Whether the instance of ``worker`` that accepted the call still holds its liveness key."""
        try:
            held = self._client().get(alive_key(worker))
        except (redis.RedisError, OSError):  # the broker is gone too: the worker counts as lost
            return False
        return isinstance(held, bytes) and held.decode() == instance

    def _abandon(self, call_id: str, task_id: str, wait: float) -> None:
        """Tell the worker to kill the call, and the queue to drop the task if nobody took it."""
        try:
            pipe = self._client().pipeline(transaction=False)
            # The key first: a worker that takes the call after this finds it; one that took
            # it before hears the message (it registered the call before it looked).
            pipe.set(cancelled_key(call_id), "1", ex=int(wait) + 60)  # the task's expiry, and more
            pipe.publish(cancel_channel(call_id), "cancel")
            pipe.execute()
            make_app(self.broker_url, self.settings.broker_timeout).control.revoke(task_id)
        except Exception as exc:  # the broker is gone too: the worker's own timeout still holds
            logger.warning("remote: cannot cancel task %s: %s", task_id, exc)

    def _unsent(self, request: CallRequest, exc: BaseException, task_id: str) -> CallResult:
        error = f"the call was not sent: {self._unreachable(exc)}"
        return self._failure(request, error, remote=RemoteRun(self.queue, task_id))

    def _unreachable(self, exc: BaseException) -> str:
        return (
            f"the broker {_redact(self.broker_url)} is unreachable ({type(exc).__name__}: {exc}); "
            f"gave up after {self.settings.broker_timeout:g}s (ONGRID_BROKER_TIMEOUT); "
            f"is redis-server running and ONGRID_BROKER_URL right?"
        )

    def _failure(
        self, request: CallRequest, error: str, status: str = "", remote: RemoteRun | None = None
    ) -> CallResult:
        return CallResult(
            request.tool.name, False, error=error, call_id=request.call_id, status=status, remote=remote
        )


def _message(call: _Call, raw: Any, signer: Signer) -> dict[str, Any]:
    """A message from the call's channel; ``{}`` (ignored) for one that is not the call's own.

    Every message must carry the remote key's HMAC (:mod:`.signing`) and name the call's
    task: a message signed for another call is not this one's. The worker that sends the
    result must be the one that accepted the task (:func:`_result_mismatch`).
    """
    data = signer.open_text(CHANNEL, raw)
    if isinstance(data, str):
        _refused(call, {}, data)
        return {}
    task = data.get("task_id")
    if task != call.task_id:
        _refused(call, data, f"its task is {printable(str(task), 60)!r}, the call's {call.task_id!r}")
        return {}
    return data


def _other_files(result: CallResult, host: str, worker: str, digest: str) -> CallResult:
    """A worker's answer given with skill files other than the host's: never an ``ok``."""
    said = f"{result.error}; " if result.error else ""
    error = (
        f"{said}the host sent skill digest {host or '-'}, worker {worker} has skill digest {digest or '-'}"
        + ("" if not result.ok else "; its answer is not accepted: deploy the same skill version on both")
    )
    status = "" if result.status in ("", "ok") else result.status
    return attrs.evolve(result, ok=False, error=error, status=status)


def _event_refusal(call: _Call, data: dict[str, Any]) -> str:
    """Why an event message is not one the call's worker sends (``""`` when it is): after
    the worker accepted the task, one of the events a local call streams, of its shape."""
    kind, value = data.get("kind"), data.get("data")
    if not call.worker:
        return "no worker accepted the task yet"
    if not isinstance(kind, str) or kind not in _EVENT_KINDS:
        return f"its kind is {str(kind)[:40]!r}, not one of {', '.join(sorted(_EVENT_KINDS))}"
    if kind == "stderr" and not (isinstance(value, str) and len(value) <= _STDERR_LINE_MAX):
        return f"its stderr line is not text of at most {_STDERR_LINE_MAX} characters"
    if kind in ("start", "exit") and not isinstance(value, dict | None):
        return f"its {kind} data is a {type(value).__name__}, not an object"
    return ""


#: The events a call streams (:class:`~ongrid_plugins.models.Event`), and the longest
#: stderr line a runner reports (the default ``max_line_bytes`` of a ``ProcessSpec``).
_EVENT_KINDS = frozenset({"start", "stderr", "progress", "exit"})
_STDERR_LINE_MAX = 8192


def _result_mismatch(call: _Call, data: dict[str, Any]) -> str:
    """Why a result message is not this call's (``""`` when it is): its tool, call id,
    worker (the one that accepted the task) and task (when it names one) must be the call's."""
    result, request = data["result"], call.request
    checks = [
        ("tool", result.get("tool"), request.tool.name),
        ("call id", result.get("call_id"), request.call_id),
        ("worker", printable(str(data.get("worker"))), call.worker or "<no worker accepted the task yet>"),
    ]
    if "task_id" in data:  # every worker of this version sends it
        checks.append(("task", data["task_id"], call.task_id))
    for what, got, want in checks:
        if got != want:
            return f"its {what} is {got!r}, the call's {want!r}"
    return ""


def _refused(call: _Call, data: dict[str, Any], why: str) -> bool:
    """Log and say whether the message is refused (``why`` is not empty)."""
    if why:
        what = printable(str(data.get("k") or "message"), 40)
        what += f" from {printable(str(data['worker']), 80)!r}" if "worker" in data else ""
        logger.warning(
            "remote call %s of %s: refused a message on its channel (%s: %s); "
            "waiting for the call's own until its deadline",
            call.request.call_id,
            call.request.tool.name,
            what,
            why,
        )
    return bool(why)


def _redact(url: str) -> str:
    """The broker URL without its password."""
    if "@" not in url:
        return url
    scheme, _sep, rest = url.partition("://")
    return f"{scheme}://***@{rest.rpartition('@')[2]}"
