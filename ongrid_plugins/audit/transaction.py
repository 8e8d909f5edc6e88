"""``with log._transaction() as conn``: one transaction on an audit log's connection.

Any error SQLite gives for a file that is not a database, or a damaged one, leaves here
as :class:`~.entries.UnreadableLog` naming the file and the fix, never a bare
``sqlite3.DatabaseError`` (``audit list`` would print a traceback).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .entries import UnreadableLog

if TYPE_CHECKING:
    import sqlite3

    from .log import AuditLog

__all__ = ["Transaction"]


class Transaction:
    """``with log._transaction() as conn``: the process lock, then BEGIN (IMMEDIATE for writes)."""

    def __init__(self, log: AuditLog, write: bool) -> None:
        """A transaction on ``log``'s connection; ``write`` begins it IMMEDIATE."""
        self.log = log
        self.write = write
        self.conn: sqlite3.Connection | None = None

    def __enter__(self) -> sqlite3.Connection:
        import sqlite3

        self.log._lock.acquire()
        try:
            self.conn = self.log._connection()
            self.conn.execute("BEGIN IMMEDIATE" if self.write else "BEGIN")
        except sqlite3.DatabaseError as exc:
            self.log._lock.release()
            if "locked" in str(exc):  # busy past the timeout: the file itself is fine
                raise
            raise UnreadableLog(self.log.path, str(exc)) from exc  # not a file, not a database, damaged
        except BaseException:
            self.log._lock.release()
            raise
        return self.conn

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        import sqlite3

        assert self.conn is not None
        try:
            if exc_type is None and self.write:
                self.conn.commit()
            else:
                self.conn.rollback()
        finally:
            self.log._lock.release()
        if isinstance(exc, sqlite3.DatabaseError) and not isinstance(exc, sqlite3.OperationalError):
            raise UnreadableLog(self.log.path, str(exc)) from exc  # malformed: a page is damaged
