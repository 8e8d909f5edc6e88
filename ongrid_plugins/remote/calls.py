"""The calls a worker process took: the one subscription that hears their cancels, their leases.

:class:`Calls` is what :mod:`.worker` keeps per process: a call is registered
from before the worker accepts it until its result is ready, a cancel the host
publishes (:func:`.wire.cancel_channel`) cancels its task (or is kept until the
task exists), and the call's lease (:func:`.wire.lease_key`) is renewed while it
runs, so a host learns within seconds that a worker died mid-call.
:func:`publish_end` publishes a call's end (its result, kept for a host that gave up
on it) and drops its lease, trying again while the broker is away.

May import: :mod:`.wire` and redis (the optional extra ``ongrid-plugins[celery]``).
It logs on the worker's logger, ``ongrid_plugins.remote.worker``, whose lines
``ongrid-skills worker`` prints.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import threading
import time
from collections.abc import Iterator
from typing import Any

import redis

from .wire import DONE_TTL, LEASE, LEASE_RENEW, cancel_channel, done_key, lease_key

__all__ = ["END_RETRIES", "Calls", "Running", "publish_end"]

END_RETRIES = 30
"""Seconds a worker keeps trying to publish a call's end while the broker is away."""

logger = logging.getLogger("ongrid_plugins.remote.worker")


class Running:
    """A call this process took: its task once it runs, and whether the host cancelled it."""

    def __init__(self) -> None:
        self.task: tuple[asyncio.AbstractEventLoop, asyncio.Future[Any]] | None = None
        self.cancelled = False


class Calls:
    """The calls this process took, the one subscription that hears their cancels, their leases.

    One thread per process holds a pattern subscription to every call's cancel channel,
    made when the process starts, so a call costs no connection or SUBSCRIBE of its own;
    another renews the lease of every call registered here each :data:`.wire.LEASE_RENEW`
    seconds, in one pipeline. A call is registered from before it is accepted until its
    result is ready: a cancel heard before its task exists is kept and applied when it does.
    """

    def __init__(self) -> None:
        self.broker_url = ""  # set by :func:`.worker.build_app`, inherited by the pool processes
        self.lock = threading.Lock()
        self.running: dict[str, Running] = {}
        self.ready = threading.Event()
        self.pid = 0

    def start(self) -> None:
        """Start this process's threads (again after a fork); waits briefly until it listens."""
        with self.lock:
            if self.pid == os.getpid():
                return
            self.pid = os.getpid()
            self.running = {}
            self.ready = threading.Event()
            threading.Thread(target=self._listen, name="ongrid-cancels", daemon=True).start()
            threading.Thread(target=self._renew, name="ongrid-leases", daemon=True).start()
        self.ready.wait(5)

    def register(self, call_id: str) -> None:
        self.start()
        with self.lock:
            self.running[call_id] = Running()

    def unregister(self, call_id: str) -> None:
        with self.lock:
            self.running.pop(call_id, None)

    def cancel(self, call_id: str) -> None:
        """Mark the call cancelled, and cancel its task if it runs."""
        with self.lock:
            found = self.running.get(call_id)
            if found is None:
                return
            found.cancelled = True
            task = found.task
        if task is not None:
            task[0].call_soon_threadsafe(task[1].cancel)

    def cancelled(self, call_id: str) -> bool:
        with self.lock:
            found = self.running.get(call_id)
            return found is not None and found.cancelled

    @contextlib.contextmanager
    def watching(self, call_id: str, task: asyncio.Future[Any]) -> Iterator[None]:
        """Cancels of ``call_id`` cancel ``task`` (at once when one was heard already)."""
        with self.lock:
            found = self.running.setdefault(call_id, Running())
            found.task = (asyncio.get_running_loop(), task)
            cancelled = found.cancelled
        if cancelled:
            task.cancel()  # before it ran a step: nothing was spawned
        try:
            yield
        finally:
            with self.lock:
                found.task = None

    def _listen(self) -> None:
        prefix = cancel_channel("")
        while True:
            try:
                client = redis.Redis.from_url(self.broker_url, socket_connect_timeout=5)
                pubsub: Any = client.pubsub(ignore_subscribe_messages=True)  # type: ignore[no-untyped-call,unused-ignore]
                pubsub.psubscribe(cancel_channel("*"))
                self.ready.set()
                for message in pubsub.listen():
                    if message.get("type") != "pmessage":
                        continue
                    name = message["channel"]
                    self.cancel((name.decode() if isinstance(name, bytes) else str(name))[len(prefix) :])
            except redis.RedisError as exc:
                logger.warning("ongrid worker: cancel subscription lost (%s); again in 1s", exc)
                time.sleep(1)

    def _renew(self) -> None:
        client = redis.Redis.from_url(self.broker_url, socket_connect_timeout=5, socket_timeout=5)
        while True:
            time.sleep(LEASE_RENEW)
            with self.lock:
                calls = list(self.running)
            if not calls:
                continue
            try:
                pipe = client.pipeline(transaction=False)
                for call_id in calls:
                    pipe.pexpire(lease_key(call_id), int(LEASE * 1000))  # never re-creates a lease
                pipe.execute()
            except redis.RedisError as exc:
                logger.warning("ongrid worker: cannot renew %d lease(s): %s", len(calls), exc)


def publish_end(client: redis.Redis, topic: str, texts: list[str], call_id: str, task_id: str) -> None:
    """Publish the held ``exit`` and the result, keep the result for a host that gave up
    (:mod:`.late`), drop the lease; again each second for :data:`END_RETRIES` s while the
    broker is away (a Redis restart mid-call), so the call's end is not lost with it."""
    for attempt in range(END_RETRIES):
        pipe = client.pipeline(transaction=False)
        for text in texts:
            pipe.publish(topic, text)
        pipe.set(done_key(call_id, task_id), texts[-1], ex=DONE_TTL)  # for a host that gave up: .late
        pipe.delete(lease_key(call_id))  # after the result: a host that finds no lease gets the result
        try:
            pipe.execute()
            return
        except redis.RedisError as exc:
            if attempt == END_RETRIES - 1:
                logger.warning("ongrid worker: cannot publish the end of call %s: %s", call_id, exc)
                return
            time.sleep(1)
