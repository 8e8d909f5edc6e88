"""Opening the state databases (approvals, audit log) the same careful way.

The state folder and the database files are created private to their owner
(0700 / 0600) before SQLite touches them -- or, in a folder shared by a group
(setgid, see :mod:`.statedir`), group-writable (0660); every connection waits
for locks instead of failing (``busy_timeout``), runs in WAL mode so readers
never block writers, and sets the schema up idempotently, retrying the one step
SQLite does not retry on its own (switching the journal mode while another
process holds the file).

A folder or file this user may not use is a :class:`~.errors.StateAccessError`
naming it and the fix (:func:`access_problem`), never a bare ``PermissionError``.
"""

from __future__ import annotations

import contextlib
import functools
import os
import stat
import time
from collections.abc import Callable
from typing import Any

from ..errors import StateAccessError

__all__ = ["access_error", "access_problem", "connect", "create_private", "file_mode"]

BUSY_TIMEOUT = 60.0
_ACCESS_WORDS = ("readonly", "unable to open", "permission", "access")


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

    try:
        create_private(path)
    except PermissionError as exc:
        raise access_error(path, exc) from None
    try:
        conn = sqlite3.connect(
            path, timeout=BUSY_TIMEOUT, isolation_level=None, check_same_thread=check_same_thread
        )
    except sqlite3.OperationalError as exc:
        raise _explained(path, exc) from None
    try:
        conn.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT * 1000)}")
        _retry_busy(lambda: conn.execute("PRAGMA journal_mode = WAL"))
        _retry_busy(lambda: conn.executescript(schema))
        for table, column, declaration in added:
            _retry_busy(functools.partial(_add_column, conn, table, column, declaration))
        conn.execute(f"PRAGMA synchronous = {synchronous}")
    except sqlite3.OperationalError as exc:
        conn.close()
        raise _explained(path, exc) from None
    except BaseException:
        conn.close()
        raise
    return conn


def file_mode(folder: str) -> int:
    """The mode for a new state file in ``folder``: 0660 in a group-shared (setgid) folder, else 0600."""
    try:
        shared = bool(os.stat(folder).st_mode & stat.S_ISGID)
    except OSError:
        shared = False
    return 0o660 if shared else 0o600


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
    """Create the folder (0700) and the database file (0600; 0660 in a shared folder) if missing."""
    folder = os.path.dirname(path) or "."
    os.makedirs(folder, mode=0o700, exist_ok=True)
    _refuse_foreign_link(path)
    if not os.path.exists(path):
        mode = file_mode(folder)
        with contextlib.suppress(FileExistsError):
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, mode)
            try:
                os.fchmod(fd, mode)  # past the umask: a shared folder's files stay group-writable
            finally:
                os.close(fd)


def _refuse_foreign_link(path: str) -> None:
    """Refuse a link at ``path`` that another user made: SQLite would follow it and create or
    write its target as this user (any member of a group-shared folder can plant one)."""
    try:
        st = os.lstat(path)
    except OSError:
        return
    if stat.S_ISLNK(st.st_mode) and st.st_uid not in (os.geteuid(), 0):
        message = (
            f"refusing to open {path}: it is a symbolic link made by {_name(st.st_uid, 'pwd')}, "
            "not by this user or root, and opening it would write wherever it points; "
            "remove it (check what it pointed to) and run this again"
        )
        raise StateAccessError(message)


def _explained(path: str, exc: Exception) -> Exception:
    if any(word in str(exc).lower() for word in _ACCESS_WORDS) and access_problem(path):
        return access_error(path, exc)
    return exc


def state_exists(path: str) -> bool:
    """Whether the state file ``path`` exists; a folder closed to this user is a
    :class:`StateAccessError` saying so, never "there is nothing" (``os.path.exists``
    answers False when it may not look)."""
    try:
        os.stat(path)
    except FileNotFoundError:
        return False
    except PermissionError as exc:
        raise access_error(path, exc) from None
    return True


def access_error(path: str, exc: BaseException | None = None, state_dir: str = "") -> StateAccessError:
    """The error for a state file this user cannot use: which file or folder, why, and the fix.

    ``state_dir``: the state folder ``path`` lies in, when that is not its parent (a journal
    in ``audit-inflight``): the folder ``state init`` is run on.
    """
    problem = access_problem(path) or f"{path} cannot be used: {exc}"
    folder = state_dir or os.path.dirname(os.path.abspath(path))
    if _read_only_file_system(os.path.dirname(os.path.abspath(path))):
        return StateAccessError(
            f"{problem}: it is on a read-only file system, which `state init` cannot change; "
            "remount it read-write, or point ONGRID_STATE_DIR at a writable folder"
        )
    fix = (
        f"if several people share this state folder, its owner (or root) runs "
        f"`ongrid-skills state init {folder} --group GROUP` once and everyone who shares it joins GROUP "
        "(docs/approvals.md, 'Sharing approvals'); otherwise point ONGRID_STATE_DIR at a folder of your own"
    )
    return StateAccessError(f"{problem}; {fix}")


def _read_only_file_system(folder: str) -> bool:
    """Whether ``folder`` (or its nearest existing parent) is on a read-only mount."""
    while not os.path.exists(folder) and os.path.dirname(folder) != folder:
        folder = os.path.dirname(folder)
    try:
        return bool(os.statvfs(folder).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def access_problem(path: str) -> str:
    """What keeps this user from using the state file ``path`` (its folder, it, its -wal/-shm), or ``""``."""
    folder = os.path.dirname(os.path.abspath(path))
    user = _user()
    probe = folder
    while not os.path.exists(probe) and os.path.dirname(probe) != probe:
        probe = os.path.dirname(probe)
    if probe != folder:  # the folder does not exist: can it be made?
        if not os.access(probe, os.W_OK | os.X_OK):
            where = f"{probe} is not writable ({_describe(probe)})"
            return f"{user} cannot create the state folder {folder}: {where}"
        return ""
    if not os.access(folder, os.W_OK | os.X_OK):
        return f"{user} cannot use the state folder {folder} ({_describe(folder)})"
    for candidate in (path, path + "-wal", path + "-shm"):
        if os.path.exists(candidate) and not os.access(candidate, os.R_OK | os.W_OK):
            return f"{user} cannot read and write {candidate} ({_describe(candidate)})"
    return ""


def _describe(path: str) -> str:
    try:
        st = os.stat(path)
    except OSError as exc:
        return f"{path}: {exc.strerror or exc}"
    return (
        f"owner {_name(st.st_uid, 'pwd')}, group {_name(st.st_gid, 'grp')}, mode {stat.filemode(st.st_mode)}"
    )


def _name(ident: int, module: str) -> str:
    try:
        if module == "pwd":
            import pwd

            return pwd.getpwuid(ident).pw_name
        import grp

        return grp.getgrgid(ident).gr_name
    except (ImportError, KeyError):
        return str(ident)


def _user() -> str:
    return _name(os.getuid(), "pwd") if hasattr(os, "getuid") else "this user"


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
