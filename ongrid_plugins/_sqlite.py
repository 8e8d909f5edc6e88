"""Opening the state databases (approvals, audit log) the same careful way.

The state folder and the database files are created private to their owner
(0700 / 0600) before SQLite touches them; every connection waits for locks
instead of failing (``busy_timeout``), runs in WAL mode so readers never block
writers, and sets the schema up idempotently, retrying the one step SQLite
does not retry on its own (switching the journal mode while another process
holds the file).
"""

from __future__ import annotations

import contextlib
import functools
import os
import time
from collections.abc import Callable
from typing import Any

__all__ = ["connect"]

BUSY_TIMEOUT = 60.0


def connect(
    path: str,
    schema: str,
    *,
    synchronous: str,
    check_same_thread: bool = True,
    added: tuple[tuple[str, str, str], ...] = (),
) -> Any:
    """An autocommit connection to ``path`` (transactions are begun explicitly), schema in place.

    ``added`` lists columns ``(table, column, declaration)`` newer than the
    first schema: a database created before them gets them with ``ALTER TABLE``.
    """
    import sqlite3

    create_private(path)
    conn = sqlite3.connect(
        path, timeout=BUSY_TIMEOUT, isolation_level=None, check_same_thread=check_same_thread
    )
    try:
        conn.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT * 1000)}")
        _retry_busy(lambda: conn.execute("PRAGMA journal_mode = WAL"))
        _retry_busy(lambda: conn.executescript(schema))
        for table, column, declaration in added:
            _retry_busy(functools.partial(_add_column, conn, table, column, declaration))
        conn.execute(f"PRAGMA synchronous = {synchronous}")
    except BaseException:
        conn.close()
        raise
    return conn


def _add_column(conn: Any, table: str, column: str, declaration: str) -> None:
    import sqlite3

    if any(row[1] == column for row in conn.execute(f"PRAGMA table_info({table})")):
        return
    try:
        conn.execute(f"ALTER TABLE {table} ADD COLUMN {column} {declaration}")
    except sqlite3.OperationalError as exc:
        if "duplicate column" not in str(exc):  # another process was faster
            raise


def create_private(path: str) -> None:
    """Create the folder (0700) and the database file (0600) if they do not exist yet."""
    os.makedirs(os.path.dirname(path) or ".", mode=0o700, exist_ok=True)
    if not os.path.exists(path):
        with contextlib.suppress(FileExistsError):
            os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))


def _retry_busy(action: Callable[[], object], attempts: int = 50) -> None:
    import sqlite3

    for attempt in range(attempts):
        try:
            action()
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or attempt == attempts - 1:
                raise
            time.sleep(0.02 * (attempt + 1))
