"""The host side of a remote call: send the task, stream its events back, enforce the timeout.

The host subscribes to the call's Redis channel *before* it sends the task, so no
event is lost; the worker publishes ``accepted``, every event (``start``, each
``stderr`` line, ``exit``) and the ``result`` on that one channel, in order. The
host does not trust the worker to stop: it waits at most the call's timeout plus a
grace, then publishes a cancel (the worker kills the process group), revokes the
task and returns a timed-out result naming the worker.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
import uuid
from typing import TYPE_CHECKING, Any

import attrs
import redis

from ..models import CallResult, RemoteRun
from .app import make_app
from .wire import cancel_channel, channel, payload, result_from_dict, task_for

if TYPE_CHECKING:
    from ..models import CallRequest
    from ..settings import Settings

__all__ = ["GRACE", "RemoteExecutor"]

logger = logging.getLogger(__name__)

GRACE = 1.0
"""Seconds, on top of the call's timeout and the kill grace, the host waits for a worker."""
_POLL = 0.25


class RemoteExecutor:
    """Runs calls of routed tools on the workers of one queue."""

    def __init__(self, broker_url: str, queue: str, settings: Settings) -> None:
        self.broker_url = broker_url
        self.queue = queue
        self.settings = settings
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
        stop = threading.Event()

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

    def _run(self, request: CallRequest, stop: threading.Event | None, emit: Any) -> CallResult:
        tool = request.tool
        timeout = tool.timeout if request.timeout is None else min(request.timeout, tool.timeout)
        wait = timeout + self.settings.kill_grace + GRACE
        body = payload(request, timeout, self.settings.stdout_cap)
        client = self._client()
        pubsub = client.pubsub(ignore_subscribe_messages=True)  # type: ignore[no-untyped-call]
        task_id = uuid.uuid4().hex
        try:
            pubsub.subscribe(channel(request.call_id))
            app = make_app(self.broker_url, self.settings.broker_timeout)
            app.send_task(
                task_for(body["tool_class"]),
                args=[body],
                queue=self.queue,
                task_id=task_id,
                expires=wait,
                retry=False,
            )
        except (redis.RedisError, OSError) as exc:
            pubsub.close()
            return self._unsent(request, exc, task_id)
        except Exception as exc:  # kombu's own connection errors
            pubsub.close()
            return self._unsent(request, exc, task_id)
        try:
            return self._wait(request, pubsub, task_id, time.monotonic() + wait, wait, stop, emit)
        finally:
            pubsub.close()

    def _wait(
        self,
        request: CallRequest,
        pubsub: Any,
        task_id: str,
        deadline: float,
        wait: float,
        stop: threading.Event | None,
        emit: Any,
    ) -> CallResult:
        worker = ""
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or (stop is not None and stop.is_set()):
                self._abandon(request.call_id, task_id)
                where = RemoteRun(self.queue, task_id, worker)
                if stop is not None and stop.is_set():
                    return self._failure(request, "cancelled", status="cancelled", remote=where)
                who = f"worker {worker}" if worker else f"no worker of queue {self.queue!r} took it"
                error = (
                    f"timed out: no answer within {wait:.1f}s (the call's timeout, the kill grace and "
                    f"{GRACE:g}s) from {who}; the task {task_id} was revoked and the call cancelled"
                )
                return CallResult(
                    request.tool.name,
                    False,
                    error=error,
                    timed_out=True,
                    call_id=request.call_id,
                    remote=where,
                )
            try:
                message = pubsub.get_message(timeout=min(left, _POLL))
            except (redis.RedisError, OSError) as exc:
                error = f"lost the broker mid-call ({exc}); on {worker or 'queue ' + self.queue}"
                return self._failure(request, error, remote=RemoteRun(self.queue, task_id, worker))
            if message is None or message.get("type") != "message":
                continue
            data = json.loads(message["data"])
            kind = data.get("k")
            if kind == "accepted":
                worker = str(data.get("worker", ""))
            elif kind == "event":
                emit(data["kind"], data.get("data"))
            elif kind == "result":
                logger.info(
                    "remote call %s of %s ran on worker %s (queue %s, task %s, worker digest %s)",
                    request.call_id,
                    request.tool.name,
                    data.get("worker"),
                    self.queue,
                    task_id,
                    data.get("digest"),
                )
                ran = RemoteRun(
                    self.queue, task_id, str(data.get("worker") or worker), str(data.get("digest") or "")
                )
                return attrs.evolve(result_from_dict(data["result"]), remote=ran)

    def _abandon(self, call_id: str, task_id: str) -> None:
        """Tell the worker to kill the call, and the queue to drop the task if nobody took it."""
        try:
            self._client().publish(cancel_channel(call_id), "cancel")
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


def _redact(url: str) -> str:
    """The broker URL without its password."""
    if "@" not in url:
        return url
    scheme, _sep, rest = url.partition("://")
    return f"{scheme}://***@{rest.rpartition('@')[2]}"
