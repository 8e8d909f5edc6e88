"""A private ``/tmp`` for the call: a new mount namespace with a tmpfs on ``/tmp``.

The spawning thread (only it: ``unshare(CLONE_NEWNS)`` on one thread leaves the
host's other threads where they were) makes its mounts slaves of the host's, so
nothing propagates back, mounts a size-capped tmpfs on ``/tmp`` and binds back the
folders the call must still reach there (its own skill folder when it lives under
``/tmp``, a declared read or write path there). The tmpfs disappears with the last
process of the call: nothing to clean up, even after ``kill -9`` of the host.
Needs ``CAP_SYS_ADMIN`` (a root host); elsewhere the caller falls back to a
private folder passed as ``TMPDIR``.
"""

from __future__ import annotations

import ctypes
import errno
import os
import stat

from . import _sys

__all__ = ["bind_back", "cover", "enter_own_namespace", "enter_private_tmp", "identity", "uncover"]

_CLONE_NEWNS = 0x00020000
_MS_RDONLY = 1
_MS_NOSUID = 2
_MS_NODEV = 4
_MS_NOEXEC = 8
_MS_REMOUNT = 32
_MS_BIND = 4096
_MS_REC = 16384
_MS_SLAVE = 1 << 19
_MNT_DETACH = 2


def _mount(source: bytes | None, target: bytes, fstype: bytes | None, flags: int, data: bytes | None) -> None:
    _sys.syscall("mount", source, target, fstype, ctypes.c_ulong(flags), data)


def enter_own_namespace() -> None:
    """Give the calling thread a mount namespace of its own whose mounts are slaves of
    the host's: host mounts still show up in it, nothing made in it shows up outside."""
    _sys.syscall("unshare", _CLONE_NEWNS)
    _mount(None, b"/", None, _MS_REC | _MS_SLAVE, None)


def enter_private_tmp(size_mb: int, *, slave: bool = True) -> int:
    """Give the calling thread its own mount namespace with a tmpfs on ``/tmp``.

    Returns an ``O_PATH`` descriptor of the ``/tmp`` that the tmpfs now covers, for
    :func:`bind_back`: a bind mount needs a source in the caller's own namespace, and
    after the tmpfs is mounted the old ``/tmp`` is reachable through it only.
    ``slave=False``: the thread is in a namespace of :func:`enter_own_namespace`
    already, whose copy keeps its mounts slaves (one walk over every mount less).
    """
    if slave:
        enter_own_namespace()
    else:
        _sys.syscall("unshare", _CLONE_NEWNS)
    under = os.open("/tmp", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        _mount(b"tmpfs", b"/tmp", b"tmpfs", _MS_NOSUID | _MS_NODEV, f"size={size_mb}m,mode=1777".encode())
    except BaseException:
        os.close(under)
        raise
    return under


def bind_back(under: int, keep: list[tuple[str, int, bool]]) -> None:
    """Bind the ``keep`` paths of the covered ``/tmp`` (``under``) into the private one.

    ``keep`` lists ``(path under /tmp, O_PATH descriptor opened by the host, writable)``.
    Each path is opened again beneath ``under`` with no symlink on the way and must be
    the same inode as the host's descriptor: a folder swapped in between fails the
    call. Landlock grants add up along a path across mount points, so a folder bound
    under the writable tmpfs would be writable too: each bind is made read-only
    unless it is a declared write path.
    """
    from ...discovery.roots import open_beneath

    bound: list[str] = []
    for path, host_fd, writable in sorted(keep, key=lambda k: (k[0], not k[2])):
        if any(path == b or path.startswith(b + "/") for b in bound):
            continue  # visible through the folder bound above it
        fd = open_beneath(under, path[len("/tmp/") :], os.O_PATH)
        try:
            mine, theirs = os.fstat(fd), os.fstat(host_fd)
            if (mine.st_dev, mine.st_ino) != (theirs.st_dev, theirs.st_ino):
                raise OSError(errno.ESTALE, f"{path} changed while the call was being prepared")
            if stat.S_ISDIR(mine.st_mode):
                os.makedirs(path, mode=0o755, exist_ok=True)
            else:
                os.makedirs(os.path.dirname(path), mode=0o755, exist_ok=True)
                os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o644))
            target = os.fsencode(path)
            _mount(f"/proc/self/fd/{fd}".encode(), target, None, _MS_BIND | _MS_REC, None)
            if not writable:
                _mount(None, target, None, _MS_REMOUNT | _MS_BIND | _MS_RDONLY | _MS_NOSUID | _MS_NODEV, None)
        finally:
            os.close(fd)
        bound.append(path)


def cover(paths: list[str]) -> list[str]:
    """Cover each of ``paths`` with something empty and read-only, in this thread's namespace.

    A file gets ``/dev/null`` bound over it (on a ``nodev`` mount: opening it fails), a
    folder a fresh empty read-only tmpfs; reading either gives nothing. Landlock would
    need a rule for every sibling of every such path instead (``/etc`` alone has ~150
    entries), on every call. Returns the paths covered; ones that vanished meanwhile
    are skipped.
    """
    covered = []
    for path in paths:
        try:
            st = os.lstat(path)
        except OSError:
            continue
        target = os.fsencode(path)
        if stat.S_ISDIR(st.st_mode):
            flags = _MS_RDONLY | _MS_NOSUID | _MS_NODEV | _MS_NOEXEC
            _mount(b"tmpfs", target, b"tmpfs", flags, b"size=4k,nr_inodes=1,mode=0555")
        elif stat.S_ISREG(st.st_mode):
            _mount(b"/dev/null", target, None, _MS_BIND, None)
            _mount(None, target, None, _MS_REMOUNT | _MS_BIND | _MS_RDONLY | _MS_NOSUID | _MS_NODEV, None)
        else:
            continue
        covered.append(path)
    return covered


def identity(path: str) -> tuple[int, int] | None:
    """``(st_dev, st_ino)`` of what ``path`` shows in this thread's namespace (a cover's,
    while it is in place), None when nothing is there."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def uncover(path: str) -> None:
    """Take a :func:`cover` off again (a call that declared it may read ``path``)."""
    _sys.syscall("umount2", os.fsencode(path), _MNT_DETACH)
