"""A private ``/tmp`` for the call: a new mount namespace with a tmpfs on ``/tmp``.

The spawning thread (only it: ``unshare(CLONE_NEWNS)`` on one thread leaves the
host's other threads where they were) makes its mounts slaves of the host's, so
nothing propagates back, mounts a size-capped tmpfs on ``/tmp`` and binds back the
folders the call must still reach there (its own skill folder when it lives under
``/tmp``, a declared read or write path there). The tmpfs disappears with the last
process of the call: nothing to clean up, even after ``kill -9`` of the host.
Needs ``CAP_SYS_ADMIN`` (a root host); elsewhere the caller falls back to a
private folder passed as ``TMPDIR``.

The same thread also gets an IPC namespace of its own (System V shared memory,
semaphores, message queues and POSIX queues: none of the host's, and whatever the
call makes is freed with its last process), and read-only mounts where Landlock
cannot reach: Landlock rules opening and writing files, not ``chmod``, ``utime``,
``setxattr`` or writes to ``/sys`` and ``/proc/sys`` (a cgroup's ``tasks`` file takes
any pid from a uid 0 without a capability). :func:`protect_system` makes those
read-only for every call, :func:`read_only` the hidden folders for a call that may
write everywhere else, and :func:`read_only_except` everything but ``/tmp`` and the
declared write paths for every other call.
"""

from __future__ import annotations

import ctypes
import errno
import os
import re
import stat

from . import _sys

__all__ = [
    "bind_back",
    "cover",
    "enter_own_namespace",
    "enter_private_tmp",
    "identity",
    "protect_system",
    "read_only",
    "read_only_except",
    "uncover",
]

_CLONE_NEWNS = 0x00020000
_CLONE_NEWIPC = 0x08000000
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
    _sys.syscall("unshare", _CLONE_NEWIPC)
    protect_system()
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
    """Take a :func:`cover` off again (a call that declared it may read ``path``); a cover
    whose path is gone since the thread was made ready (ENOENT, EINVAL) has nothing to take off."""
    try:
        _sys.syscall("umount2", os.fsencode(path), _MNT_DETACH)
    except OSError as exc:
        if exc.errno not in (errno.ENOENT, errno.EINVAL):
            raise


# -- read-only mounts ----------------------------------------------------------------

_AT_RECURSIVE = 0x8000
_MOUNT_ATTR_RDONLY = 0x1
#: ``/sys`` (every cgroup file among them) and the kernel's writable knobs in ``/proc``.
_SYSTEM = ("/sys", "/proc")  # the host's own /proc/<pid> knobs too (oom_score_adj)
_PROC_KNOBS = ("/proc/sys", "/proc/sysrq-trigger")


class _MountAttr(ctypes.Structure):
    _fields_ = (
        ("attr_set", ctypes.c_uint64),
        ("attr_clr", ctypes.c_uint64),
        ("propagation", ctypes.c_uint64),
        ("userns_fd", ctypes.c_uint64),
    )


def _set_read_only(path: str, on: bool, recursive: bool) -> None:
    """``mount_setattr`` (Linux 5.12): the mount at ``path`` (and every one beneath it,
    ``recursive``) read-only, or writable again; per mount with ``MS_REMOUNT`` before it."""
    attr = _MountAttr(_MOUNT_ATTR_RDONLY if on else 0, 0 if on else _MOUNT_ATTR_RDONLY, 0, 0)
    flags = _AT_RECURSIVE if recursive else 0
    try:
        _sys.syscall(
            "mount_setattr",
            -100,
            os.fsencode(path),
            ctypes.c_uint(flags),
            ctypes.byref(attr),
            ctypes.sizeof(attr),
        )
    except OSError as exc:
        if exc.errno != errno.ENOSYS:
            raise
        for point, options in _mounts_at(path, recursive):
            kept = sum(bit for name, bit in _KEPT.items() if name in options)
            _mount(
                None,
                os.fsencode(point),
                None,
                _MS_REMOUNT | _MS_BIND | kept | (_MS_RDONLY if on else 0),
                None,
            )


_KEPT = {"nosuid": _MS_NOSUID, "nodev": _MS_NODEV, "noexec": _MS_NOEXEC}


#: mountinfo's escapes: space, tab, newline and backslash as three octal digits; every other
#: byte of a path is as it is (UTF-8 or not).
_OCTAL = re.compile(rb"\\([0-7]{3})")


def _mounts_at(path: str, recursive: bool) -> list[tuple[str, set[str]]]:
    """The mount points at ``path`` (and beneath it) with their per-mount options, from
    mountinfo, in mount order (a mount on top of another after it)."""
    found = []
    with open("/proc/thread-self/mountinfo", "rb") as f:
        for line in f:
            fields = line.split(b" ")
            point = os.fsdecode(_OCTAL.sub(lambda m: bytes([int(m.group(1), 8)]), fields[4]))
            if point == path or (recursive and point.startswith(path.rstrip("/") + "/")):
                found.append((point, set(fields[5].decode("ascii", "replace").split(","))))
    return found


def protect_system() -> None:
    """Make ``/sys`` and ``/proc`` (its kernel knobs too) read-only in this thread's namespace.

    A uid 0 with no capability may still write a pid into a cgroup v1 ``tasks`` file
    (and so leave the call's group and its limits), a value into
    ``/proc/sys/kernel/core_pattern``, or the host's own ``/proc/<pid>/oom_score_adj``
    (same uid); Landlock grants an undeclared mutating call writes everywhere but the
    hidden folders. ``/proc/sys`` is not a mount of its own: it is bound onto itself
    first (a read-only ``/proc`` is not always one for what is mounted beneath it).
    """
    for path in _SYSTEM:
        if os.path.isdir(path):
            _set_read_only(path, True, recursive=True)
    for path in _PROC_KNOBS:
        if os.path.exists(path):
            target = os.fsencode(path)
            _mount(target, target, None, _MS_BIND | _MS_REC, None)
            _mount(None, target, None, _MS_REMOUNT | _MS_BIND | _MS_RDONLY | _MS_NOSUID | _MS_NODEV, None)


def read_only(paths: tuple[str, ...]) -> None:
    """Bind each of ``paths`` that exists onto itself, read-only, in this thread's namespace.

    For the host's own state: Landlock keeps a skill from opening it, not from
    ``chmod``, ``utime`` or ``setxattr`` by path (or through an ``O_PATH``
    descriptor), which a uid 0 may do to the files it owns without a capability.
    """
    for path in paths:
        if not os.path.lexists(path) or os.path.islink(path):
            continue
        target = os.fsencode(path)
        _mount(target, target, None, _MS_BIND | _MS_REC, None)
        _set_read_only(path, True, recursive=True)


def read_only_except(
    keep: list[tuple[str, int, bool]],
    writable: list[tuple[str, int | None, int | None]],
    covered: list[str],
) -> None:
    """Every mount of this thread's namespace read-only but ``/tmp`` and the call's write paths.

    For a call that may write only its ``/tmp`` and its declared ``write`` paths: a
    file it cannot write it cannot ``chmod``, ``utime`` or ``setxattr`` either (Landlock
    still decides which files of a writable mount it may write). ``keep``: the folders
    bound back under ``/tmp`` (:func:`bind_back`), the writable ones made writable
    again. ``writable``: the declared write paths elsewhere, ``(path, st_dev, st_ino)``
    as the host granted them; each is bound onto itself with what is mounted beneath it
    (a volume inside it stays there) and made writable, those mounts too but the
    ``covered`` secrets, and must still be what was granted (a path swapped since fails
    the call; one gone since is skipped). Device files stay usable: a read-only mount
    refuses changes to the file system, not writes to ``/dev/null``.
    """
    _set_read_only("/", True, recursive=True)
    _set_read_only("/tmp", False, recursive=False)
    for path, _fd, rw in keep:
        if rw and os.path.ismount(path):
            _set_read_only(path, False, recursive=False)
    for path, dev, ino in writable:
        try:
            fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
        except FileNotFoundError:
            continue  # gone since it was granted: nothing to write there
        try:
            st = os.fstat(fd)
            if (st.st_dev, st.st_ino) != (dev, ino):
                raise OSError(errno.ESTALE, f"{path} changed while the call was being prepared")
            real = os.readlink(f"/proc/self/fd/{fd}")
            _mount(f"/proc/self/fd/{fd}".encode(), os.fsencode(real), None, _MS_BIND | _MS_REC, None)
        finally:
            os.close(fd)
        for point, _options in _mounts_at(real, recursive=True):
            if not any(point == c or point.startswith(c.rstrip("/") + "/") for c in covered):
                _set_read_only(point, False, recursive=False)
