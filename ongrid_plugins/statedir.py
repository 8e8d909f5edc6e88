"""State folders shared by a group: ``ongrid-skills state init DIR --group NAME``.

By default a state folder (approval tickets, the audit log) is private to the user
who made it (0700, files 0600), so two operators on one machine each have their own
tickets. To share them, one person (the folder's owner, or root) makes a shared
folder once; everyone in the group then points ``ONGRID_STATE_DIR`` at it:

* the folder and its ``audit-inflight`` journal folder: group ``NAME``, mode
  ``2770`` -- the setgid bit makes every file created inside belong to ``NAME``;
* ``approvals.db`` and ``audit.db``: created with their schema, group ``NAME``, mode
  ``0660``; SQLite gives their ``-wal`` and ``-shm`` files the same mode, and new
  journal files in such a folder are made ``0660`` too (:func:`._sqlite.file_mode`);
* whatever the folder already held is given to the group and made group-readable and
  -writable, so an existing private folder can be turned into a shared one.

Identities do not change: on the command line an approver is the OS user running the
command, so the two-person rule holds between the members of the group.
"""

from __future__ import annotations

import os
import stat

import attrs

from . import _sqlite
from .errors import ConfigError, StateAccessError

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
    from .audit import DB_NAME as AUDIT_DB
    from .audit.chain import SCHEMA as AUDIT_SCHEMA
    from .audit.journal import JOURNAL_DIR
    from .gate.approvals import _SCHEMA as APPROVALS_SCHEMA
    from .gate.approvals import DB_NAME as APPROVALS_DB

    gid = _gid(group)
    folder = os.path.abspath(os.path.expanduser(folder))
    done: list[str] = []
    for sub in (folder, os.path.join(folder, JOURNAL_DIR)):
        try:
            os.makedirs(sub, mode=0o700, exist_ok=True)
        except PermissionError as exc:
            raise _sqlite.access_error(os.path.join(sub, "x"), exc) from None
        _share(sub, gid, group, SHARED_DIR_MODE)
        done.append(sub)
    for name, schema, synchronous in (
        (APPROVALS_DB, APPROVALS_SCHEMA, "FULL"),
        (AUDIT_DB, AUDIT_SCHEMA, "NORMAL"),
    ):
        path = os.path.join(folder, name)
        _sqlite.connect(path, schema, synchronous=synchronous).close()
    for root, dirs, files in os.walk(folder):  # everything inside, old files included
        for name in sorted(dirs):
            path = os.path.join(root, name)
            _share(path, gid, group, SHARED_DIR_MODE)
            if path not in done:
                done.append(path)
        for name in sorted(files):
            path = os.path.join(root, name)
            if os.path.islink(path):
                continue
            _share(path, gid, group, SHARED_FILE_MODE)
            done.append(path)
    return SharedState(folder, group, tuple(done))


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


def _share(path: str, gid: int, group: str, mode: int) -> None:
    try:
        st = os.lstat(path)
        if st.st_gid != gid:
            os.chown(path, -1, gid, follow_symlinks=False)
        if stat.S_IMODE(st.st_mode) != mode:
            os.chmod(path, mode)
    except PermissionError:
        message = (
            f"cannot give {path} to group {group} with mode {mode:o}: "
            f"only its owner, being a member of {group}, or root may (run this as that user, or with sudo)"
        )
        raise StateAccessError(message) from None
