"""Capabilities: drop every one of them for good on the calling thread.

Root inside the sandbox must not be able to undo it, so the thread (and what it
executes) loses the bounding set, the ambient set, the inheritable, permitted and
effective sets, and the securebits are locked so that executing a program as uid 0
grants nothing back (``SECBIT_NOROOT``). A host that is not root has nothing to
drop; ``no_new_privs`` (set with the seccomp filter) stops setuid and file
capabilities from granting anything.
"""

from __future__ import annotations

import ctypes
import functools

from . import _sys

__all__ = ["drop_all", "drop_bounding", "last_cap"]

_PR_CAPBSET_DROP = 24
_PR_SET_SECUREBITS = 28
_PR_CAP_AMBIENT = 47
_PR_CAP_AMBIENT_CLEAR_ALL = 4
_SECBITS_LOCKED_NOROOT = (
    0xEF  # NOROOT, NO_SETUID_FIXUP, NO_CAP_AMBIENT_RAISE (+ their locks), KEEP_CAPS_LOCKED
)
_CAP_VERSION_3 = 0x20080522


class _Header(ctypes.Structure):
    _fields_ = (("version", ctypes.c_uint32), ("pid", ctypes.c_int))


class _Data(ctypes.Structure):
    _fields_ = (
        ("effective", ctypes.c_uint32),
        ("permitted", ctypes.c_uint32),
        ("inheritable", ctypes.c_uint32),
    )


@functools.cache
def last_cap() -> int:
    """The highest capability number this kernel knows."""
    try:
        with open("/proc/sys/kernel/cap_last_cap", encoding="ascii") as f:
            return int(f.read())
    except (OSError, ValueError):
        return 40


def drop_bounding(root: bool) -> None:
    """Lock the securebits and empty the bounding set of the calling thread, irreversibly.

    Both only change what a later ``execve`` grants; the thread keeps its effective
    capabilities (a parked spawning thread still mounts its private ``/tmp`` after
    this), so :mod:`.warm` does it before the call, and :func:`drop_all` finishes.
    """
    if not root:
        return
    _sys.prctl(_PR_SET_SECUREBITS, _SECBITS_LOCKED_NOROOT)
    for cap in range(last_cap() + 1):
        _sys.prctl(_PR_CAPBSET_DROP, cap)


def drop_all(root: bool, *, bounded: bool = False) -> None:
    """Drop every capability of the calling thread, irreversibly.

    :param bounded: :func:`drop_bounding` already ran on this thread.
    """
    if not bounded:
        drop_bounding(root)
    _sys.prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL)
    header = _Header(_CAP_VERSION_3, 0)
    data = (_Data * 2)()
    _sys.syscall("capset", ctypes.byref(header), ctypes.byref(data))
