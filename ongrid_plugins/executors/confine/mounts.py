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

__all__ = ["private_tmp"]

_CLONE_NEWNS = 0x00020000
_MS_RDONLY = 1
_MS_NOSUID = 2
_MS_NODEV = 4
_MS_REMOUNT = 32
_MS_BIND = 4096
_MS_REC = 16384
_MS_SLAVE = 1 << 19


def _mount(source: bytes | None, target: bytes, fstype: bytes | None, flags: int, data: bytes | None) -> None:
    _sys.syscall("mount", source, target, fstype, ctypes.c_ulong(flags), data)


def private_tmp(size_mb: int, keep: list[tuple[str, int, bool]]) -> None:
    """Give the calling thread its own tmpfs on ``/tmp``, with ``keep`` bound back.

    ``keep`` lists ``(path under /tmp, O_PATH descriptor opened by the host, writable)``.
    Landlock grants add up along a path across mount points, so a folder bound under
    the writable tmpfs would be writable too: each bind is made read-only unless it is
    a declared write path. A bind
    mount needs a source in the caller's own mount namespace, so each path is opened
    again after ``unshare`` (no symlink followed at its end) and must be the same
    inode as the host's descriptor: a folder swapped in between fails the call.
    """
    _sys.syscall("unshare", _CLONE_NEWNS)
    _mount(None, b"/", None, _MS_REC | _MS_SLAVE, None)
    sources: list[tuple[str, int, bool, bool]] = []
    try:
        bound: list[str] = []
        for path, host_fd, writable in sorted(keep, key=lambda k: (k[0], not k[2])):
            if any(path == b or path.startswith(b + "/") for b in bound):
                continue  # visible through the folder bound above it
            fd = os.open(path, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC)
            sources.append((path, fd, stat.S_ISDIR(os.fstat(fd).st_mode), writable))
            mine, theirs = os.fstat(fd), os.fstat(host_fd)
            if (mine.st_dev, mine.st_ino) != (theirs.st_dev, theirs.st_ino):
                raise OSError(errno.ESTALE, f"{path} changed while the call was being prepared")
            bound.append(path)
        _mount(b"tmpfs", b"/tmp", b"tmpfs", _MS_NOSUID | _MS_NODEV, f"size={size_mb}m,mode=1777".encode())
        for path, fd, is_dir, writable in sources:
            if is_dir:
                os.makedirs(path, mode=0o755, exist_ok=True)
            else:
                os.makedirs(os.path.dirname(path), mode=0o755, exist_ok=True)
                os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o644))
            target = os.fsencode(path)
            _mount(f"/proc/self/fd/{fd}".encode(), target, None, _MS_BIND | _MS_REC, None)
            if not writable:
                _mount(None, target, None, _MS_REMOUNT | _MS_BIND | _MS_RDONLY | _MS_NOSUID | _MS_NODEV, None)
    finally:
        for _, fd, _, _ in sources:
            os.close(fd)
