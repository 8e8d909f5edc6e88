"""seccomp-bpf: the system calls a confined skill may not make.

One filter per (network allowed?) answer, built once. It refuses, with ``EPERM``
unless noted:

* anything not native to the architecture (x32 and 32-bit compat calls: killed);
* the calls that undo or escape confinement — ``ptrace``, ``process_vm_*``,
  ``unshare``, ``setns``, ``clone`` with a namespace flag, ``mount`` and the new mount
  API, ``pivot_root``, ``chroot``, ``bpf``, ``perf_event_open``, ``userfaultfd``,
  ``io_uring_*`` (its operations would bypass this filter), kernel keyrings, module
  and kexec loading, ``open_by_handle_at``; ``clone3`` answers ``ENOSYS`` so libc
  falls back to ``clone``, whose flags the filter can read;
* ``prlimit64`` on any process but the caller itself (a pid other than 0): the host
  runs as the same uid, and lowering its limits (open files, file size, CPU time)
  would stop its audit log or kill it;
* without network: ``socket()`` of every family (``EACCES``), Unix included, since
  a path-based Unix socket (``/run/docker.sock``) is as much a way out as TCP;
  ``socketpair()`` stays allowed.

x86_64 only; elsewhere :func:`available` is False and the caller says so.
"""

from __future__ import annotations

import ctypes
import errno
import struct

from . import _sys

__all__ = ["available", "install"]

_AUDIT_ARCH_X86_64 = 0xC000003E
_X32_BIT = 0x40000000
_RET_ALLOW = 0x7FFF0000
_RET_ERRNO = 0x00050000
_RET_KILL_PROCESS = 0x80000000
_LD_ABS_W = 0x20
_JEQ_K = 0x15
_JGE_K = 0x35
_JSET_K = 0x45
_RET_K = 0x06
_JA = 0x05
_OFF_NR = 0
_OFF_ARCH = 4
_OFF_ARG0 = 16
_CLONE_NAMESPACES = 0x7E020000  # NEWNS | NEWCGROUP | NEWUTS | NEWIPC | NEWUSER | NEWPID | NEWNET
_SECCOMP_SET_MODE_FILTER = 1
_FILTER_FLAG_SPEC_ALLOW = 1 << 2
"""Leave speculation mitigations to the kernel's global policy instead of forcing them
on every sandboxed process (what a filter does by default): forcing them costs about
1.5 ms per call here and protects against other processes' side channels, not against
what the filter is for. Operators who want them set ``spec_store_bypass_disable=on``."""
_PR_SET_NO_NEW_PRIVS = 38

_DENIED_X86_64 = {
    "ptrace": 101,
    "syslog": 103,
    "vhangup": 153,
    "pivot_root": 155,
    "chroot": 161,
    "acct": 163,
    "settimeofday": 164,
    "mount": 165,
    "umount2": 166,
    "swapon": 167,
    "swapoff": 168,
    "reboot": 169,
    "iopl": 172,
    "ioperm": 173,
    "init_module": 175,
    "delete_module": 176,
    "quotactl": 179,
    "lookup_dcookie": 212,
    "clock_settime": 227,
    "kexec_load": 246,
    "add_key": 248,
    "request_key": 249,
    "keyctl": 250,
    "unshare": 272,
    "perf_event_open": 298,
    "name_to_handle_at": 303,
    "open_by_handle_at": 304,
    "setns": 308,
    "process_vm_readv": 310,
    "process_vm_writev": 311,
    "finit_module": 313,
    "kexec_file_load": 320,
    "bpf": 321,
    "userfaultfd": 323,
    "io_uring_setup": 425,
    "io_uring_enter": 426,
    "io_uring_register": 427,
    "open_tree": 428,
    "move_mount": 429,
    "fsopen": 430,
    "fsconfig": 431,
    "fsmount": 432,
    "fspick": 433,
    "mount_setattr": 442,
}
_CLONE = 56
_CLONE3 = 435
_SOCKET = 41
_PRLIMIT64 = 302


def available() -> bool:
    """True where this module knows the system call numbers (x86_64)."""
    return _sys.ARCH == "x86_64" and _sys.libc is not None


def _insn(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def _tree(numbers: list[int], action: int) -> list[bytes]:
    """A balanced search over sorted ``numbers`` (the accumulator holds the syscall number):
    ``action`` for a member, fall through to the instruction after the tree otherwise.

    A chain of one comparison per number would cost the kernel ``len(numbers)`` steps
    for every allowed call, and again for each of the ~450 system calls it tries when
    it builds its per-filter cache of always-allowed calls; the tree costs ~log2 of it.
    """
    if not numbers:
        return []
    if len(numbers) <= 3:
        out: list[bytes] = []
        for i, number in enumerate(numbers):
            remaining = len(numbers) - i - 1
            # match: jump to the RET after the remaining comparisons; else next comparison
            out.append(_insn(_JEQ_K, number, remaining + 1, 0))
        # no match: skip the RET
        return [*out, _insn(_JA, 1), _insn(_RET_K, action)]
    mid = len(numbers) // 2
    low = _tree(numbers[:mid], action)
    high = _tree(numbers[mid:], action)
    # >= numbers[mid]: the high half; else the low half, which then skips the high half.
    return [_insn(_JGE_K, numbers[mid], len(low) + 1, 0), *low, _insn(_JA, len(high)), *high]


def program(network: bool) -> bytes:
    """The BPF program (``struct sock_filter[]``) for a call with or without network."""
    errno_perm = _RET_ERRNO | errno.EPERM
    body: list[bytes] = [
        _insn(_LD_ABS_W, _OFF_ARCH),
        _insn(_JEQ_K, _AUDIT_ARCH_X86_64, 1, 0),
        _insn(_RET_K, _RET_KILL_PROCESS),
        _insn(_LD_ABS_W, _OFF_NR),
        _insn(_JGE_K, _X32_BIT, 0, 1),
        _insn(_RET_K, _RET_KILL_PROCESS),
    ]
    body += _tree(sorted(_DENIED_X86_64.values()), errno_perm)
    body += [_insn(_JEQ_K, _CLONE3, 0, 1), _insn(_RET_K, _RET_ERRNO | errno.ENOSYS)]
    # prlimit64: only on itself (pid 0, what setrlimit and getrlimit pass); another
    # process of the same uid (the host) could have its limits lowered until it fails.
    body += [
        _insn(_JEQ_K, _PRLIMIT64, 0, 4),
        _insn(_LD_ABS_W, _OFF_ARG0),
        _insn(_JEQ_K, 0, 0, 1),
        _insn(_RET_K, _RET_ALLOW),
        _insn(_RET_K, errno_perm),
    ]
    if not network:
        body += [_insn(_JEQ_K, _SOCKET, 0, 1), _insn(_RET_K, _RET_ERRNO | errno.EACCES)]
    # clone: refuse namespace flags (arg0, low 32 bits), allow the rest.
    body += [
        _insn(_JEQ_K, _CLONE, 0, 3),
        _insn(_LD_ABS_W, _OFF_ARG0),
        _insn(_JSET_K, _CLONE_NAMESPACES, 0, 1),
        _insn(_RET_K, errno_perm),
        _insn(_RET_K, _RET_ALLOW),
    ]
    return b"".join(body)


class _SockFprog(ctypes.Structure):
    _fields_ = (("len", ctypes.c_ushort), ("filter", ctypes.c_void_p))


def install(network: bool) -> None:
    """Set no_new_privs and load the filter on the calling thread (inherited by children)."""
    code = program(network)
    buffer = ctypes.create_string_buffer(code, len(code))
    prog = _SockFprog(len(code) // 8, ctypes.addressof(buffer))
    _sys.prctl(_PR_SET_NO_NEW_PRIVS, 1)
    _sys.syscall("seccomp", _SECCOMP_SET_MODE_FILTER, _FILTER_FLAG_SPEC_ALLOW, ctypes.byref(prog))
