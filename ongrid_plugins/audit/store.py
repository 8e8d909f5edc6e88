"""The audit log's database: one connection per process, one transaction per write.

:class:`Store` holds the process's connection to ``audit.db`` (re-opened after a fork,
and when the file at its path is not the one it has), hands it out under its lock in
one transaction at a time (``BEGIN IMMEDIATE`` for a write). Every write first inserts
the in-flight records and chains the finished rows waiting for it (a failed write's
leftovers, or another thread's), so concurrent calls share commits.
Opening the connection chains the in-flight calls of dead processes
(:func:`.inflight.recover`). At exit, the WAL of a log this process wrote to is
checkpointed into ``audit.db`` itself.

May import what :mod:`.chain` may, and :mod:`.chain`, :mod:`.entries` and :mod:`.inflight`.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import os
import threading
import weakref
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from ..core import _sqlite
from ..core.forksafe import renew_after_fork
from ..errors import ConfigError
from .chain import ADDED_COLUMNS, SCHEMA, append
from .entries import UnreadableLog
from .inflight import pid_start, recover, started

if TYPE_CHECKING:
    import sqlite3

__all__ = ["Store", "checkpoint"]


class Store:
    """The database of one audit log, as this process uses it."""

    def __init__(self, path: str, key: bytes | None, key_error: ConfigError | None) -> None:
        """The database at ``path``; ``key`` signs rows, ``key_error`` (if any) keeps it closed."""
        self.path = path
        self.key = key
        self.key_error = key_error
        self.lock = threading.Lock()
        renew_after_fork(self, "lock")  # a thread of the parent may hold it at a fork
        self.pid = 0
        self.ident = (0, "")
        """(pid, start time) of the process the connection was opened in: what in-flight rows name."""
        self._conn: sqlite3.Connection | None = None
        self._file: tuple[int, int] | None = None  # (dev, inode) of the database the connection has
        self._lockfd = -1  # a descriptor of that file, for the writers' flock (_serialise)
        self.backlog: list[dict[str, Any]] = []
        """Finished rows a failed transaction could not chain: the next write chains them first."""
        self._chaining = 0
        self.starting: list[tuple[str, dict[str, Any]]] = []
        """In-flight records ``(call_id, columns)`` waiting for a write (:meth:`start`)."""
        self._starting = 0
        self.wrote = False
        """Whether this process committed a row: the WAL is then checkpointed at exit."""
        _STORES.add(self)

    def _chain_backlog(self, conn: sqlite3.Connection) -> None:
        """Chain the rows waiting in :attr:`_backlog` (inside a write transaction, under the lock).

        Every write transaction does this first (:meth:`_transaction`); the rows leave the
        backlog only once it commits.
        """
        for row in self.backlog[: self._chaining]:
            append(conn, row, self.key)
            conn.execute("DELETE FROM inflight WHERE call_id = ?", (row["call_id"],))

    def start(self, call_id: str, row: dict[str, Any]) -> None:
        """Record ``call_id`` in flight (``row``: its columns so far), committed when this returns.

        Like :meth:`chain`, concurrent calls share commits: every write inserts all the
        in-flight records waiting for the lock. On an error the record is withdrawn (the
        caller refuses the call, or runs it unrecorded) and the error raised.
        """
        entry = (call_id, row)
        self.starting.append(entry)
        try:
            with self.lock:
                if any(waiting is entry for waiting in self.starting):
                    with self._locked_transaction(write=True):
                        pass  # the record is inserted first thing in every write transaction
        except BaseException:
            with self.lock:
                for index, waiting in enumerate(self.starting):
                    if waiting is entry:
                        del self.starting[index]
                        break
            raise

    def chain(self, row: dict[str, Any]) -> None:
        """Chain the finished ``row``, committed when this returns (or left in the backlog on error).

        Concurrent calls share commits: a row that another thread's transaction chained
        while this one waited for the lock is in the chain already, and needs none of its own.
        """
        self.backlog.append(row)
        with self.lock:
            if any(waiting is row for waiting in self.backlog):
                with self._locked_transaction(write=True):
                    pass  # the row is chained first thing in every write transaction

    @contextlib.contextmanager
    def transaction(self, write: bool = True) -> Iterator[sqlite3.Connection]:
        """The process's connection in one transaction (``BEGIN IMMEDIATE`` for a write), under the lock.

        A write first chains the rows a failed write left behind (:meth:`_chain_backlog`); it is
        committed when the block ends without an error, rolled back otherwise. Any error SQLite
        gives for a file that is not a database, or a damaged one, leaves as
        :class:`~.entries.UnreadableLog` naming the file and the fix.
        """
        with self.lock, self._locked_transaction(write) as conn:
            yield conn

    @contextlib.contextmanager
    def _locked_transaction(self, write: bool) -> Iterator[sqlite3.Connection]:
        """:meth:`transaction` for a caller that holds ``self.lock``."""
        import sqlite3

        try:
            conn = self._connection()
            if write:
                self._serialise()
            try:
                conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
            except BaseException:
                self._unserialise(write)
                raise
        except sqlite3.DatabaseError as exc:
            if "locked" in str(exc):  # busy past the timeout: the file itself is fine
                raise
            raise UnreadableLog(self.path, str(exc)) from exc  # not a file, not a database, damaged
        try:
            if write:
                # Other threads append to the backlog without the lock: only the rows
                # there now are chained, and only they leave it once committed.
                self._starting, self._chaining = len(self.starting), len(self.backlog)
                for call_id, columns in self.starting[: self._starting]:
                    started(conn, call_id, columns, self.ident)
                self._chain_backlog(conn)
            yield conn
            if write:
                conn.commit()
                del self.starting[: self._starting], self.backlog[: self._chaining]
                self.wrote = True
            else:
                conn.rollback()
        except BaseException as exc:
            with contextlib.suppress(sqlite3.Error):
                conn.rollback()
            if isinstance(exc, sqlite3.DatabaseError) and not isinstance(exc, sqlite3.OperationalError):
                raise UnreadableLog(self.path, str(exc)) from exc  # malformed: a page is damaged
            raise
        finally:
            self._unserialise(write)

    def _serialise(self) -> None:
        """Wait for the other processes' writes to this log, in the kernel (``flock``).

        SQLite's own wait for its write lock sleeps 1, 2, 5... up to 100 ms between tries,
        which with eight writing processes cost nine rows in ten; ``flock`` wakes the next
        writer as the last one ends. It is taken on a descriptor of ``audit.db`` kept open
        as long as the connection (a BSD lock: it never meets SQLite's POSIX locks).
        """
        if self._lockfd >= 0:
            fcntl.flock(self._lockfd, fcntl.LOCK_EX)

    def _unserialise(self, write: bool) -> None:
        if write and self._lockfd >= 0:
            fcntl.flock(self._lockfd, fcntl.LOCK_UN)

    def _connection(self) -> sqlite3.Connection:
        """One connection per process (re-opened after a fork), used under ``self.lock``.

        Checked at each use to still name the file at ``path`` (one ``stat``): a log moved
        aside, or replaced, is not written behind the new one's back. Opening it chains the
        in-flight calls dead processes left (:func:`.inflight.recover`).
        """
        pid = os.getpid()
        try:
            st = os.stat(self.path)
            current: tuple[int, int] | None = (st.st_dev, st.st_ino)
        except OSError:
            current = None  # gone: connect() makes it anew (or says why it cannot)
        if self._conn is not None and self.pid == pid and current == self._file:
            return self._conn
        if self._conn is not None and self.pid == pid:  # the file at path was replaced or moved
            with contextlib.suppress(Exception):
                self._conn.close()
        self._conn = None
        # Closed only once no connection of this process has the file open: closing a
        # descriptor drops the process's POSIX locks on the file, SQLite's included. A
        # forked child closes its copy of the parent's (the parent's flock stays).
        if self._lockfd >= 0:
            with contextlib.suppress(OSError):
                os.close(self._lockfd)
            self._lockfd = -1
        if self.key_error is not None:  # recovered rows would lack their HMAC
            raise ConfigError(str(self.key_error))
        # NORMAL in WAL mode: a killed process loses nothing committed; a power cut may
        # drop the last commits but never breaks the chain.
        conn: sqlite3.Connection = _sqlite.connect(
            self.path, SCHEMA, synchronous="NORMAL", check_same_thread=False, added=ADDED_COLUMNS
        )
        try:
            conn.execute("BEGIN IMMEDIATE")
            try:
                recover(conn, self.key)
            except BaseException:
                conn.rollback()
                raise
            conn.commit()
        except BaseException:
            conn.close()
            raise
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK)
            st = os.fstat(fd)
        except OSError:
            conn.close()
            raise
        self._conn, self.pid, self.ident = conn, pid, (pid, pid_start(pid))
        self._file, self._lockfd = (st.st_dev, st.st_ino), fd
        return conn

    def close(self) -> None:
        """Close this process's connection (it reopens on the next use)."""
        with self.lock:
            if self._conn is not None and self.pid == os.getpid():
                self._conn.close()
            self._conn = None
            if self._lockfd >= 0:
                with contextlib.suppress(OSError):
                    os.close(self._lockfd)
                self._lockfd = -1


#: Every store of this process, so the WAL of those that wrote is checkpointed at exit.
_STORES: weakref.WeakSet[Store] = weakref.WeakSet()


def checkpoint(path: str) -> None:
    """Copy what the WAL holds into ``path`` itself, without waiting for anyone (best effort).

    A short-lived process (a CLI command) never closes its connections, so SQLite would
    leave every row in ``audit.db-wal`` until 1000 pages gathered: a backup copying
    ``audit.db`` alone would hold an empty log. ``PASSIVE`` copies what no reader still
    needs and returns; the next writer's exit copies the rest.
    """
    import sqlite3

    with contextlib.suppress(Exception):
        conn = sqlite3.connect(path, timeout=0.2)
        try:
            conn.execute("PRAGMA wal_checkpoint(PASSIVE)")
        finally:
            conn.close()


@atexit.register
def _checkpoint_at_exit() -> None:
    for store in list(_STORES):
        if store.backlog:  # one last try: their calls are in flight meanwhile (interrupted at worst)
            with contextlib.suppress(Exception), store.transaction():
                pass
        if store.wrote and store.pid == os.getpid():
            checkpoint(store.path)
