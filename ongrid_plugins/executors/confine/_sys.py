"""Thin ctypes wrappers around the Linux system calls confinement needs.

Nothing here decides anything: each function does one system call and raises
``OSError`` with the kernel's errno when it fails. The numbers are x86_64's and
aarch64's (the generic table); on other architectures :data:`ARCH` is ``""`` and
the callers report the primitives as missing instead of guessing numbers.
"""

from __future__ import annotations

import ctypes
import os
import platform

__all__ = ["ARCH", "NR", "check", "libc", "syscall"]

ARCH = {"x86_64": "x86_64", "amd64": "x86_64", "aarch64": "aarch64", "arm64": "aarch64"}.get(
    platform.machine().lower(), ""
)

_X86_64 = {
    "landlock_create_ruleset": 444,
    "landlock_add_rule": 445,
    "landlock_restrict_self": 446,
    "seccomp": 317,
    "capset": 126,
    "unshare": 272,
    "mount": 165,
    "umount2": 166,
    "mount_setattr": 442,
}
_AARCH64 = {
    "landlock_create_ruleset": 444,
    "landlock_add_rule": 445,
    "landlock_restrict_self": 446,
    "seccomp": 277,
    "capset": 91,
    "unshare": 97,
    "mount": 40,
    "umount2": 39,
    "mount_setattr": 442,
}
NR: dict[str, int] = {"x86_64": _X86_64, "aarch64": _AARCH64}.get(ARCH, {})

try:
    libc = ctypes.CDLL(None, use_errno=True)
    _syscall = libc.syscall
    _syscall.restype = ctypes.c_long
    _prctl = libc.prctl
    _prctl.restype = ctypes.c_int
    _prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
except (OSError, AttributeError):  # not a glibc/musl system
    libc = None  # type: ignore[assignment]
    _syscall = None  # type: ignore[assignment]
    _prctl = None  # type: ignore[assignment]


def check(rc: int, what: str) -> int:
    """Raise ``OSError(errno)`` when a libc call returned -1."""
    if rc < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")
    return rc


def syscall(name: str, *args: object) -> int:
    """``syscall(NR[name], *args)``; ``OSError(ENOSYS)`` where the number is unknown."""
    number = NR.get(name)
    if number is None or libc is None:
        raise OSError(38, f"{name}: not available on this architecture")
    return check(int(_syscall(number, *args)), name)


def prctl(option: int, arg2: int = 0, arg3: int = 0, arg4: int = 0, arg5: int = 0) -> int:
    """``prctl(2)``."""
    if libc is None:
        raise OSError(38, "prctl: no libc")
    return check(_prctl(option, arg2, arg3, arg4, arg5), f"prctl({option})")
