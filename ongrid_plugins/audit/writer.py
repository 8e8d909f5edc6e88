"""The audit log's writer thread: chains finished rows in batches (group commit).

A call only appends its row to the journal (one ``write()``); this thread then
chains the rows into SQLite, many per transaction, so no call waits for a
commit. The thread starts with the first row, lingers ``LINGER`` seconds to
gather more, and stops after a second of idleness; a reader that needs the rows
(:meth:`Writer.flush`) cuts the lingering short. The thread keeps one connection
while it runs (checked before each batch to still name the file at ``path``) and
closes it when it stops, so an idle log holds no file open. A batch is a few
statements, whatever its size (:func:`~.chain.append_prepared`: a statement per
32 rows), and its rows come serialised (:func:`~.rows.finish_row`): the thread
hashes them without serialising them again.

A failed batch is retried, with a growing pause, until it goes through; its
rows are in the journal meanwhile, so even a process that dies before then
loses nothing. While it fails, :attr:`Writer.failing` holds the error (the log
refuses risky calls). At interpreter exit, pending rows are flushed.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import threading
import time
import weakref
from typing import Any

from .. import _sqlite
from .chain import ADDED_COLUMNS, SCHEMA, Prepared, append_prepared
from .journal import Journal

__all__ = ["Writer"]

logger = logging.getLogger("ongrid_plugins.audit")

Row = tuple[str, Prepared]


class Writer:
    """Chains the rows of one audit log from a background thread."""

    BATCH = 256
    LINGER = 0.05
    """Seconds the thread waits for more rows before it commits."""
    IDLE = 1.0
    """Seconds without rows after which the thread ends (a new one starts with the next row)."""
    MAX_PENDING = 10_000
    """Callers wait (back-pressure) beyond this many unwritten rows."""

    def __init__(self, path: str, journal: Journal, key: bytes | None = None) -> None:
        """Chain rows into the database at ``path``; mark them done in ``journal``."""
        self.path = path
        self.journal = journal
        self.key = key
        self.failing: Exception | None = None
        """The error of the last batch while it could not be written, else None."""
        self.failures = 0
        """Batches that failed (each retry counts)."""
        self.wrote = False
        """Whether a batch was committed: the WAL is then checkpointed at exit."""
        self._lock = threading.Lock()  # never taken twice: no RLock needed
        self._cond = threading.Condition(self._lock)
        self._pending: list[Row] = []
        self._busy = False
        self._flushing = 0
        self._thread: threading.Thread | None = None
        self._conn: Any = None  # the thread's connection, and the (dev, inode) it opened
        self._conn_file: tuple[int, int] | None = None
        _WRITERS.add(self)

    def put(self, call_id: str, row: Prepared) -> None:
        """Queue a finished row; it is in the chain within ``LINGER`` seconds (or at the next flush)."""
        with self._lock:  # the condition's lock: a C context manager, where the condition's is Python
            self._pending.append((call_id, row))
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="ongrid-audit-writer", daemon=True)
                self._thread.start()
            elif len(self._pending) in (1, self.BATCH):  # wake the thread only when it matters
                self._cond.notify_all()
            while len(self._pending) > self.MAX_PENDING and self.failing is None:
                self._cond.wait(1.0)

    def _forked(self) -> None:
        """In a new child: the parent's writer thread may have held the lock at the fork, and
        its rows, thread and connection are the parent's."""
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._pending, self._busy, self._thread, self._flushing = [], False, None, 0
        self._conn, self._conn_file = None, None
        self.wrote = False

    def flush(self, timeout: float | None) -> bool:
        """Wait until every queued row is chained; False on timeout or while writes fail."""
        with self._cond:
            self._flushing += 1
            self._cond.notify_all()
            try:
                # A failing log does not make readers wait: its rows are safe in the journal.
                done = self._cond.wait_for(
                    lambda: self.failing is not None or not (self._pending or self._busy), timeout
                )
            finally:
                self._flushing -= 1
            return bool(done) and self.failing is None

    def _run(self) -> None:
        pause = 0.0
        while True:
            with self._cond:
                if not self._cond.wait_for(lambda: self._pending, self.IDLE):
                    self._thread = None
                    self._disconnect()
                    return
                self._cond.wait_for(lambda: self._flushing or len(self._pending) >= self.BATCH, self.LINGER)
                batch, self._pending = self._pending[: self.BATCH], self._pending[self.BATCH :]
                self._busy = True
            error = self._write(batch)
            with self._cond:
                if error is not None:
                    self._pending[:0] = batch
                self.failing = error
                self._busy = False
                self._cond.notify_all()
            pause = 0.0 if error is None else min(max(pause * 2, 0.05), 2.0)
            time.sleep(pause)

    def _write(self, batch: list[Row]) -> Exception | None:
        try:
            conn = self._connection()
            try:
                conn.execute("BEGIN IMMEDIATE")
                append_prepared(conn, [row for _call_id, row in batch], self.key)
                conn.commit()
            except BaseException:
                self._disconnect()  # rolls back; the next attempt starts afresh
                raise
        except Exception as exc:
            self.failures += 1
            if self.failing is None:
                logger.error(
                    "audit log: cannot write %d row(s) to %s: %s: %s; retrying, and refusing mutating "
                    "and dangerous calls meanwhile",
                    len(batch),
                    self.path,
                    type(exc).__name__,
                    exc,
                )
            return exc
        self.wrote = True
        if self.failing is not None:
            logger.warning("audit log: %s is writable again", self.path)
        self.journal.chained([call_id for call_id, _row in batch])
        return None

    def _connection(self) -> Any:
        """The thread's connection, (re)opened when the file at ``path`` is not the one it has."""
        try:
            st = os.stat(self.path)
            current: tuple[int, int] | None = (st.st_dev, st.st_ino)
        except OSError:
            current = None  # gone: connect() makes it anew (or says why it cannot)
        if self._conn is not None and current is not None and current == self._conn_file:
            return self._conn
        self._disconnect()
        # Once per thread run (not per batch): the schema script and the added columns.
        conn = _sqlite.connect(self.path, SCHEMA, synchronous="NORMAL", added=ADDED_COLUMNS)
        try:
            st = os.stat(self.path)
        except OSError:
            conn.close()
            raise
        self._conn, self._conn_file = conn, (st.st_dev, st.st_ino)
        return conn

    def _disconnect(self) -> None:
        conn, self._conn, self._conn_file = self._conn, None, None
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.close()


_WRITERS: weakref.WeakSet[Writer] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for writer in list(_WRITERS):
        writer._forked()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


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
def _flush_at_exit() -> None:
    for writer in list(_WRITERS):
        if writer.failing is None:  # a failing log keeps its rows in the journal
            writer.flush(10.0)
        writer.journal.close()  # removed when it holds nothing to recover
        if writer.wrote and writer.failing is None:
            checkpoint(writer.path)
