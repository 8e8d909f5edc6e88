"""Landlock: the filesystem, TCP and scope rules of a call, built from O_PATH descriptors.

A ruleset names the access rights it *handles*; everything handled is denied except
where a rule grants it beneath a directory (or on one file). Rules attach to inodes,
so a symlink or ``/proc/<pid>/root`` path that leads into a hidden folder is checked
against that folder's own ancestry and refused. ABI features used when present:
2 ``REFER``, 3 ``TRUNCATE``, 4 TCP bind/connect, 5 ``IOCTL_DEV``, 6 scoping of signals
and abstract Unix sockets.
"""

from __future__ import annotations

import ctypes
import errno
import functools
import os

from . import _sys

__all__ = [
    "FILE_RIGHTS",
    "READ",
    "READ_EXEC",
    "WRITE",
    "Prepared",
    "Ruleset",
    "abi",
    "handled_fs",
    "prepare",
    "prepare_each",
]

EXECUTE = 1 << 0
WRITE_FILE = 1 << 1
READ_FILE = 1 << 2
READ_DIR = 1 << 3
REMOVE_DIR = 1 << 4
REMOVE_FILE = 1 << 5
MAKE_CHAR = 1 << 6
MAKE_DIR = 1 << 7
MAKE_REG = 1 << 8
MAKE_SOCK = 1 << 9
MAKE_FIFO = 1 << 10
MAKE_BLOCK = 1 << 11
MAKE_SYM = 1 << 12
REFER = 1 << 13
TRUNCATE = 1 << 14
IOCTL_DEV = 1 << 15

NET_BIND_TCP = 1 << 0
NET_CONNECT_TCP = 1 << 1
SCOPE_ABSTRACT_UNIX_SOCKET = 1 << 0
SCOPE_SIGNAL = 1 << 1

READ = READ_FILE | READ_DIR
READ_EXEC = READ | EXECUTE
WRITE = (
    WRITE_FILE
    | REMOVE_DIR
    | REMOVE_FILE
    | MAKE_CHAR
    | MAKE_DIR
    | MAKE_REG
    | MAKE_SOCK
    | MAKE_FIFO
    | MAKE_BLOCK
    | MAKE_SYM
    | REFER
    | TRUNCATE
)
FILE_RIGHTS = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV
"""The only rights a rule on a non-directory may carry."""

_RULE_PATH_BENEATH = 1
_CREATE_RULESET_VERSION = 1


class _RulesetAttr(ctypes.Structure):
    _fields_ = (
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    )


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = (("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32))


@functools.cache
def abi() -> int:
    """The kernel's Landlock ABI version, 0 when Landlock is missing or disabled."""
    try:
        return _sys.syscall("landlock_create_ruleset", None, 0, _CREATE_RULESET_VERSION)
    except OSError:
        return 0


def handled_fs(version: int) -> int:
    """Every filesystem right the ABI ``version`` knows (all of them are handled)."""
    rights = (1 << 13) - 1
    if version >= 2:
        rights |= REFER
    if version >= 3:
        rights |= TRUNCATE
    if version >= 5:
        rights |= IOCTL_DEV
    return rights


class Prepared:
    """Rules ready for :meth:`Ruleset.allow_all`: the structures, and a pointer to each."""

    __slots__ = ("array", "pointers")

    def __init__(self, array: ctypes.Array[_PathBeneath]) -> None:
        self.array = array  # the pointers below point into it: it lives as long as they do
        self.pointers = tuple(ctypes.c_void_p(ctypes.addressof(rule)) for rule in array)

    def __len__(self) -> int:
        return len(self.array)


def prepare(grants: list[tuple[int, bool]], rights: int) -> Prepared:
    """Rules granting ``rights`` on each ``(fd, is_directory)``, masked to what this ABI
    handles (a file rule may only carry file rights), ready for :meth:`Ruleset.allow_all`."""
    return prepare_each([(fd, rights, is_dir) for fd, is_dir in grants])


def prepare_each(grants: list[tuple[int, int, bool]]) -> Prepared:
    """Like :func:`prepare`, with rights of its own for each ``(fd, rights, is_directory)``;
    a rule left with no right this ABI handles is dropped (``landlock_add_rule`` refuses it)."""
    fs = handled_fs(abi())
    kept = [(fd, rights & (fs if is_dir else (fs & FILE_RIGHTS))) for fd, rights, is_dir in grants]
    kept = [(fd, rights) for fd, rights in kept if rights]
    rules = (_PathBeneath * len(kept))()
    for i, (fd, rights) in enumerate(kept):
        rules[i].allowed_access = rights
        rules[i].parent_fd = fd
    return Prepared(rules)


class Ruleset:
    """One Landlock ruleset being built; :meth:`restrict_self` applies it to this thread."""

    def __init__(self, *, deny_tcp: bool, scope_unix: bool) -> None:
        version = abi()
        if version == 0:
            raise OSError(errno.ENOSYS, "Landlock is not available")
        self.version = version
        self.fs = handled_fs(version)
        attr = _RulesetAttr(self.fs, 0, 0)
        size = 8
        if version >= 4 and deny_tcp:
            attr.handled_access_net = NET_BIND_TCP | NET_CONNECT_TCP
            size = 16
        if version >= 6:
            attr.scoped = SCOPE_SIGNAL | (SCOPE_ABSTRACT_UNIX_SOCKET if scope_unix else 0)
            size = 24
        self.fd = _sys.syscall("landlock_create_ruleset", ctypes.byref(attr), size, 0)

    def allow(self, fd: int, rights: int, *, directory: bool) -> None:
        """Grant ``rights`` beneath the directory (or on the file) open as ``fd``."""
        rights &= self.fs if directory else (self.fs & FILE_RIGHTS)
        if not rights:
            return
        rule = _PathBeneath(rights, fd)
        _sys.syscall("landlock_add_rule", self.fd, _RULE_PATH_BENEATH, ctypes.byref(rule), 0)

    def allow_all(self, rules: Prepared) -> None:
        """Add prepared rules (:func:`prepare`) with one system call each and nothing else."""
        for pointer in rules.pointers:
            _sys.syscall("landlock_add_rule", self.fd, _RULE_PATH_BENEATH, pointer, 0)

    def restrict_self(self) -> None:
        """Enforce the ruleset on the calling thread and everything it starts (needs no_new_privs)."""
        _sys.syscall("landlock_restrict_self", self.fd, 0)

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
