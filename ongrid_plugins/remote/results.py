"""The host's one pub/sub connection per broker and process, shared by every remote call.

:class:`Subscriber` subscribes a call's channel and returns once Redis confirmed it (so
the task is sent only after and no event is lost); a daemon thread reads the connection
and hands each message to the queue of the call whose channel it came on. When the
connection fails, or its reader stops, every call waiting on it gets ``(LOST, error)``
and the next call connects anew; a connection is used only once it is subscribed and
read, so a failure while connecting (Redis down) leaves nothing behind. After a fork the
child makes its own.

May import: :mod:`..forksafe` and redis (the optional extra ``ongrid-plugins[celery]``).
"""

from __future__ import annotations

import contextlib
import logging
import os
import queue
import sys
import threading
import time
import uuid
from typing import Any

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from ..core.forksafe import renew_after_fork

__all__ = ["LOST", "Connection", "Subscriber", "subscriber"]

logger = logging.getLogger(__name__)

LOST = "lost"
"""What the subscriber hands a call's queue when the pub/sub connection failed."""


class Connection:
    """One pub/sub connection, the calls subscribed on it, and the thread that reads it."""

    def __init__(self, broker_url: str, timeout: float) -> None:
        # No silent reconnect: messages published while it reconnected would be lost
        # unseen; a failure is told to every waiting call, and the next call connects anew.
        # ``supported_errors=()``: redis-py's failure handler would otherwise disconnect and
        # connect again even with no retry, in whichever thread saw the error, and that
        # handshake raced the other thread's commands on the same connection.
        self.client = redis.Redis.from_url(  # kept: a collected client closes its pool
            broker_url,
            socket_connect_timeout=timeout,
            socket_timeout=timeout,
            retry=Retry(NoBackoff(), 0, supported_errors=()),
        )
        self.pubsub: Any = self.client.pubsub()  # type: ignore[no-untyped-call,unused-ignore]
        self.queues: dict[str, queue.SimpleQueue[tuple[str, Any]]] = {}
        self.confirmed: dict[str, threading.Event] = {}
        self.dead = False
        self.pid = os.getpid()
        self.reader: threading.Thread | None = None
        """The thread reading the connection; a connection without a live one is not used."""
        self.commands = threading.Lock()
        """Held around every command sent on the pub/sub connection and around its close:
        a connection is closed only between two commands, never under one."""

    def command(self, verb: str, name: str) -> None:
        """Send ``SUBSCRIBE`` or ``UNSUBSCRIBE`` for ``name``; raise when the connection is dead.

        Any exception means the connection is unusable: redis-py is not safe for the
        reader thread and a caller to use one connection while it fails (a socket or parse
        buffer cleared under a command raises ``AttributeError`` or ``ValueError``).
        """
        with self.commands:
            if self.dead:
                raise redis.ConnectionError("the result subscription's connection is closed")
            getattr(self.pubsub, verb)(name)


class Subscriber:
    """One pub/sub connection per executor and process, shared by every call it waits for.

    A daemon thread reads the connection and puts each message on the queue of the call
    whose channel it came on; :meth:`open` subscribes a call's channel and returns once
    Redis confirmed the subscription, so the task is sent only after. When the
    connection fails every call waiting on it gets ``(LOST, error)`` and the next
    :meth:`open` connects again; after a fork the child starts its own connection.
    """

    def __init__(self, broker_url: str, timeout: float) -> None:
        self.broker_url, self.timeout = broker_url, timeout
        self.lock = threading.Lock()
        renew_after_fork(self, "lock")  # a forked child connects anew, under a lock of its own
        self.current: Connection | None = None

    def open(self, name: str) -> tuple[queue.SimpleQueue[tuple[str, Any]], Connection]:
        """Subscribe ``name``: the queue its messages arrive on (``("message", data)``), its connection."""
        for attempt in (1, 2):  # a connection found dead is replaced once
            box: queue.SimpleQueue[tuple[str, Any]] = queue.SimpleQueue()
            done = threading.Event()
            with self.lock:
                conn = self._connected()
                conn.queues[name], conn.confirmed[name] = box, done
            try:
                conn.command("subscribe", name)
            except Exception as exc:  # any: see Connection.command
                self._drop(conn, exc)
                if attempt == 2:
                    raise
                continue
            end = time.monotonic() + self.timeout
            while not done.wait(0.05) and not conn.dead:
                if time.monotonic() > end:
                    self.close(name, conn)
                    raise TimeoutError(f"Redis did not confirm the subscription within {self.timeout:g}s")
            if done.is_set():
                return box, conn
        raise redis.ConnectionError("the result subscription's connection failed twice")

    def close(self, name: str, conn: Connection) -> None:
        """Forget ``name`` (later messages on it are dropped) and unsubscribe, without waiting."""
        with self.lock:
            conn.queues.pop(name, None)
            conn.confirmed.pop(name, None)
        if not conn.dead and conn.pid == os.getpid():
            try:
                conn.command("unsubscribe", name)
            except Exception as exc:  # any: see Connection.command
                self._drop(conn, exc)

    def _connected(self) -> Connection:
        """This process's live connection, read by its thread (call with the lock).

        The connection becomes :attr:`current` only once it is subscribed and its reader
        runs: a failure on the way (Redis down) leaves nothing behind, and the next call
        connects anew. One whose reader thread is gone is never handed out.
        """
        conn = self.current
        if conn is not None and not conn.dead and conn.pid == os.getpid():
            if conn.reader is not None and conn.reader.is_alive():
                return conn
            stopped = redis.ConnectionError("the result subscription's reader stopped")
            for waiting in self._forget(conn):  # nobody would confirm a subscription on it
                waiting.put((LOST, stopped))
            _close(conn)
        conn = Connection(self.broker_url, self.timeout)
        try:
            # A channel of its own keeps the connection subscribed (and read) between calls.
            conn.pubsub.subscribe(f"ongrid:host:{uuid.uuid4().hex}")
            conn.reader = threading.Thread(
                target=self._read, args=(conn,), name="ongrid-remote-results", daemon=True
            )
            conn.reader.start()
        except BaseException:
            conn.dead = True
            _close(conn)
            raise
        self.current = conn
        return conn

    def _forget(self, conn: Connection) -> list[queue.SimpleQueue[tuple[str, Any]]]:
        """Mark ``conn`` dead, no longer current; the queues of the calls waiting on it (with the lock)."""
        conn.dead = True
        if self.current is conn:
            self.current = None
        lost = list(conn.queues.values())
        conn.queues, conn.confirmed = {}, {}
        return lost

    def _drop(self, conn: Connection, exc: BaseException | None = None) -> None:
        """Mark ``conn`` dead and tell every call waiting on it."""
        with self.lock:
            lost = self._forget(conn)
        if not isinstance(exc, redis.RedisError | OSError):  # None, or redis-py's own state raced
            exc = redis.ConnectionError("the result subscription failed" + (f" ({exc!r})" if exc else ""))
        for waiting in lost:
            waiting.put((LOST, exc))
        _close(conn)

    def _read(self, conn: Connection) -> None:
        """Hand each message to its call until the connection fails; then tell every waiting call."""
        try:
            while not conn.dead:
                self._deliver(conn, conn.pubsub.get_message(timeout=1.0))
        except Exception as exc:  # the connection failed, or a message we cannot read: a new one
            if not conn.dead:
                logger.warning(
                    "remote: the result subscription failed (%s: %s); the next call reconnects",
                    type(exc).__name__,
                    exc,
                )
            self._drop(conn, exc)

    def _deliver(self, conn: Connection, message: dict[str, Any] | None) -> None:
        if message is None or os.getpid() != conn.pid:
            return
        name = message["channel"]
        name = name.decode() if isinstance(name, bytes) else str(name)
        with self.lock:
            if message["type"] == "subscribe":
                done = conn.confirmed.get(name)
                if done is not None:
                    done.set()
                return
            box = conn.queues.get(name) if message["type"] == "message" else None
        if box is not None:
            box.put(("message", message["data"]))


def _close(conn: Connection) -> None:
    """Close ``conn``'s socket between two commands, never under one."""
    with conn.commands, contextlib.suppress(Exception):
        conn.pubsub.close()


_subscribers: dict[tuple[str, float], Subscriber] = {}
_subscribers_lock = threading.Lock()
renew_after_fork(sys.modules[__name__], "_subscribers_lock")


def subscriber(broker_url: str, timeout: float) -> Subscriber:
    """The subscriber of this process for ``broker_url`` (shared by its executors)."""
    with _subscribers_lock:
        found = _subscribers.get((broker_url, timeout))
        if found is None:
            found = _subscribers[(broker_url, timeout)] = Subscriber(broker_url, timeout)
        return found
