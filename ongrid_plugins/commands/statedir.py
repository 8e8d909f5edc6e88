"""State folders shared by a group: ``ongrid-skills state init DIR --group NAME``.

By default a state folder (approval tickets, the audit log) is private to the user
who made it (0700, files 0600), so two operators on one machine each have their own
tickets. To share them, one person (the folder's owner, or root) makes a shared
folder once; everyone in the group then points ``ONGRID_STATE_DIR`` at it:

* the folder: group ``NAME``, mode ``2770`` -- the setgid bit makes every file
  created inside belong to ``NAME``;
* ``approvals.db`` and ``audit.db``: created with their schema, group ``NAME``, mode
  ``0660``; SQLite gives their ``-wal`` and ``-shm`` files the same mode
  (:func:`._sqlite.file_mode`);
* whatever the folder already held is given to the group and made group-readable and
  -writable, so an existing private folder can be turned into a shared one. Nothing
  inside is followed: a symbolic link there stops it with an error (any member can
  plant one, and following it would change a file outside the folder), and FIFOs,
  sockets and devices are left alone.

Identities do not change: on the command line an approver is the OS user running the
command, so the two-person rule holds between the members of the group.
"""

from __future__ import annotations

import errno
import os
import stat

import attrs

from ..core import _sqlite
from ..errors import ConfigError, StateAccessError

__all__ = ["SHARED_DIR_MODE", "SHARED_FILE_MODE", "SharedState", "init_shared"]

SHARED_DIR_MODE = 0o2770
SHARED_FILE_MODE = 0o660


@attrs.frozen
class SharedState:
    """What :func:`init_shared` set up."""

    folder: str
    group: str
    paths: tuple[str, ...]
    """Every folder and file it gave to the group, in order."""


def init_shared(folder: str, group: str) -> SharedState:
    """Make ``folder`` a state folder every member of ``group`` can use (idempotent).

    :raises ConfigError: no such group.
    :raises StateAccessError: this user may not give a file to the group (only its
        owner, being a member of the group, or root may).
    """
    from ..audit import DB_NAME as AUDIT_DB
    from ..audit.chain import SCHEMA as AUDIT_SCHEMA
    from ..gate.approvals import _SCHEMA as APPROVALS_SCHEMA
    from ..gate.approvals import DB_NAME as APPROVALS_DB

    gid = _gid(group)
    folder = os.path.abspath(os.path.expanduser(folder))
    done: list[str] = []
    try:
        os.makedirs(folder, mode=0o700, exist_ok=True)
    except PermissionError as exc:
        raise _sqlite.access_error(os.path.join(folder, "x"), exc) from None
    for name in (APPROVALS_DB, AUDIT_DB):  # SQLite would follow a link planted in their place
        for suffix in ("", "-wal", "-shm", "-journal"):  # or in place of its side files
            _refuse_link(os.path.join(folder, name + suffix))
    for name, schema, synchronous in (
        (APPROVALS_DB, APPROVALS_SCHEMA, "FULL"),
        (AUDIT_DB, AUDIT_SCHEMA, "NORMAL"),
    ):
        path = os.path.join(folder, name)
        _sqlite.connect(path, schema, synchronous=synchronous).close()
    # The folder itself is the one named (a link there is the operator's choice); nothing
    # inside it is followed: every member of the group can plant a link there.
    top = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        _share_tree(top, folder, _Target(gid, group), done)
    finally:
        os.close(top)
    return SharedState(folder, group, tuple(done))


@attrs.frozen
class _Target:
    gid: int
    group: str


def _share_tree(dir_fd: int, path: str, target: _Target, done: list[str]) -> None:
    """Give the open folder ``dir_fd`` (at ``path``) and everything in it to the group.

    Each entry is opened relative to its folder with ``O_NOFOLLOW`` and changed through
    its descriptor (``fchown``/``fchmod``), so a link never redirects the change; a FIFO,
    socket or device is left as it is (the folder's own files are never one).
    """
    _share(dir_fd, path, target, SHARED_DIR_MODE)
    done.append(path)
    for name in sorted(os.listdir(dir_fd)):
        child = os.path.join(path, name)
        st = os.lstat(name, dir_fd=dir_fd)
        if stat.S_ISLNK(st.st_mode):
            raise _link_error(child)
        if not (stat.S_ISDIR(st.st_mode) or stat.S_ISREG(st.st_mode)):
            continue
        fd = _open_entry(name, dir_fd, child, st)
        try:
            if stat.S_ISDIR(st.st_mode):
                _share_tree(fd, child, target, done)
            else:
                _share(fd, child, target, SHARED_FILE_MODE)
                done.append(child)
        finally:
            os.close(fd)


def _open_entry(name: str, dir_fd: int, path: str, st: os.stat_result) -> int:
    """``name`` in ``dir_fd``, opened without following a link, and still the entry ``st`` saw."""
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
    if stat.S_ISDIR(st.st_mode):
        flags |= os.O_DIRECTORY
    try:
        fd = os.open(name, flags, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):  # replaced by a link since the lstat
            raise _link_error(path) from None
        raise _cannot_share(path, f"it cannot be opened ({exc.strerror})") from None
    opened = os.fstat(fd)
    if (opened.st_dev, opened.st_ino) != (st.st_dev, st.st_ino):
        os.close(fd)
        raise _cannot_share(path, "it was replaced while this ran; run this again")
    return fd


def _refuse_link(path: str) -> None:
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if stat.S_ISLNK(st.st_mode):
        raise _link_error(path)


def _link_error(path: str) -> StateAccessError:
    try:
        where = f" (to {os.readlink(path)})"
    except OSError:
        where = ""
    return StateAccessError(
        f"refusing to share {path}: it is a symbolic link{where}, and a state folder holds none "
        "(following it would change a file outside the folder; any member of the group can plant one); "
        "remove it, check what it pointed to, and run this again"
    )


def _cannot_share(path: str, why: str) -> StateAccessError:
    return StateAccessError(f"cannot give {path} to the group: {why}")


def _gid(group: str) -> int:
    import grp

    try:
        return grp.getgrnam(group).gr_gid
    except KeyError:
        message = (
            f"there is no group {group!r}: create it (`groupadd {group}`) and add everyone who shares "
            f"approvals (`usermod -aG {group} NAME`), then run this again"
        )
        raise ConfigError(message) from None


def _share(fd: int, path: str, target: _Target, mode: int) -> None:
    try:
        st = os.fstat(fd)
        if st.st_gid != target.gid:
            os.fchown(fd, -1, target.gid)
        if stat.S_IMODE(st.st_mode) != mode:
            os.fchmod(fd, mode)
    except PermissionError:
        message = (
            f"cannot give {path} to group {target.group} with mode {mode:o}: "
            f"only its owner, being a member of {target.group}, or root may "
            "(run this as that user, or with sudo)"
        )
        raise StateAccessError(message) from None
