"""Start one child process with three pipes, in a new session, without ``os.fork()``.

Two backends, chosen by :data:`_BACKEND`:

``posix_spawn`` (Linux, glibc >= 2.29 or musl)
    libc ``posix_spawn`` called through :mod:`ctypes`. :func:`os.posix_spawn` has the
    same flags (new session, signal mask, default dispositions) and ``dup2``/``close``
    actions, but no way to set the child's working directory, which a call needs
    (``tool.cwd``); the libc call can, with ``posix_spawn_file_actions_addchdir_np``.
    A working directory set in the host would be the whole process's, and the
    alternative, a shell that changes directory and execs, costs a second exec. glibc spawns with
    ``clone(CLONE_VM | CLONE_VFORK)``, so the call costs about the same whatever the
    size of the host process, and an exec failure comes back synchronously as the
    return value (and the failed child is already reaped). ``CDLL`` calls release the
    GIL, so threads spawning at the same time do not serialise on it.

    The attributes (shared by every call: libc only reads them) ask for:

    * ``POSIX_SPAWN_SETSID``: a new session and process group whose id is the child's
      pid, so the whole tree can be signalled with ``killpg``;
    * ``POSIX_SPAWN_SETSIGMASK`` with an empty mask: a host thread that blocks signals
      must not hand that mask to the skill;
    * ``POSIX_SPAWN_SETSIGDEF`` with every catchable signal: Python ignores SIGPIPE and
      SIGXFSZ, and an ignored disposition survives exec (``yes | head -1`` would then
      fail with EPIPE instead of dying quietly). Resetting all of them, not only
      Python's, also undoes what the host's own parent ignored (``nohup``).

    File descriptors: our pipe ends are created ``O_CLOEXEC`` and ``dup2``-ed onto
    0, 1 and 2. Every other descriptor is closed with
    ``posix_spawn_file_actions_addclosefrom_np(3)`` (glibc >= 2.34). Without it we
    rely on ``O_CLOEXEC`` (Python makes every descriptor it creates non-inheritable,
    PEP 446) and add an explicit close action for each descriptor that is inheritable
    at spawn time (scanned in ``/proc/self/fd``); a descriptor made inheritable by
    another thread during the scan can still slip through, which is the same window
    any fork-based spawner has.

``popen``
    :class:`subprocess.Popen` with ``start_new_session``, ``close_fds`` and
    ``restore_signals``, given our own pipe ends so the caller's machinery is the same.
    Used where libc lacks ``addchdir_np`` or off Linux. Differences: only SIGPIPE,
    SIGXFZ and SIGXFSZ are reset and the caller thread's signal mask is inherited.

Reaping is the caller's job with either backend (``os.waitpid``); for ``popen`` call
:meth:`Child.forget` afterwards so the ``Popen`` object does not warn or reap again.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

import attrs

__all__ = ["Child", "Confiner", "SpawnError", "backend", "spawn"]

_BACKEND = "auto"
"""``"auto"`` (libc when usable), ``"posix_spawn"`` (libc or RuntimeError) or ``"popen"``."""

_USE_CLOSEFROM = True
"""Tests set this to False to exercise the ``/proc/self/fd`` scan used without closefrom."""

_BACKENDS = ("auto", "posix_spawn", "popen")
_OPAQUE_SIZE = 1024  # posix_spawn_file_actions_t is 80 bytes, posix_spawnattr_t 336 on glibc
_SIGSET_SIZE = 1024  # sigset_t is 128 bytes on glibc
# Same values on glibc and musl (spawn.h).
_POSIX_SPAWN_SETSIGDEF = 0x04
_POSIX_SPAWN_SETSIGMASK = 0x08
_POSIX_SPAWN_SETSID = 0x80


class SpawnError(Exception):
    """No process ran; ``str(error)`` says why, e.g. ``cannot execute /x: ... (errno 13)``."""


@attrs.frozen
class Child:
    """A started child: its pid and the parent's ends of its three pipes."""

    pid: int
    stdin: int
    """Write end of the child's stdin (blocking: the caller decides)."""
    stdout: int
    """Read end of the child's stdout (blocking: read it when poll says so)."""
    stderr: int
    """Read end of the child's stderr (blocking)."""
    popen: subprocess.Popen[bytes] | None = None

    def forget(self, status: int | None) -> None:
        """Tell the ``Popen`` object (if any) that the child was reaped elsewhere."""
        if self.popen is not None:
            self.popen.returncode = 0 if status is None else os.waitstatus_to_exitcode(status)


class _Libc:
    """The libc entry points and the shared, read-only spawn attributes."""

    def __init__(self) -> None:
        libc = ctypes.CDLL(None, use_errno=True)
        # The file-action calls only fill in memory (no I/O, no waiting): through
        # PyDLL they keep the GIL, so building a spawn's actions never hands the GIL to
        # another thread (six round trips a call otherwise). posix_spawn itself waits
        # for the child's exec and releases the GIL (CDLL).
        quick = ctypes.PyDLL(None, use_errno=True)
        # Called on every spawn, so without argtypes: ctypes' default conversions (int
        # to int, bytes to char *, arrays and byref to pointers) are exactly right for
        # them, and skipping from_param saves time on the hot path.
        self.spawn = _fn(libc, "posix_spawn")
        self.fa_init = _fn(quick, "posix_spawn_file_actions_init")
        self.fa_destroy = _fn(quick, "posix_spawn_file_actions_destroy")
        self.fa_dup2 = _fn(quick, "posix_spawn_file_actions_adddup2")
        self.fa_close = _fn(quick, "posix_spawn_file_actions_addclose")
        self.fa_chdir = _fn(quick, "posix_spawn_file_actions_addchdir_np")
        try:
            self.fa_closefrom: Any = _fn(quick, "posix_spawn_file_actions_addclosefrom_np")
        except AttributeError:  # glibc < 2.34, musl
            self.fa_closefrom = None
        self.attr = self._make_attr(libc)

    @staticmethod
    def _make_attr(libc: ctypes.CDLL) -> ctypes.Array[ctypes.c_char]:
        attr = ctypes.create_string_buffer(_OPAQUE_SIZE)
        empty = ctypes.create_string_buffer(_SIGSET_SIZE)
        defaults = ctypes.create_string_buffer(_SIGSET_SIZE)
        _check(_fn(libc, "sigemptyset", ctypes.c_void_p)(empty))
        _check(_fn(libc, "sigemptyset", ctypes.c_void_p)(defaults))
        sigaddset = _fn(libc, "sigaddset", ctypes.c_void_p, ctypes.c_int)
        for sig in signal.valid_signals():
            if sig not in (signal.SIGKILL, signal.SIGSTOP):
                sigaddset(defaults, int(sig))  # glibc refuses its two internal ones: fine
        flags = _POSIX_SPAWN_SETSID | _POSIX_SPAWN_SETSIGMASK | _POSIX_SPAWN_SETSIGDEF
        _check(_fn(libc, "posix_spawnattr_init", ctypes.c_void_p)(attr))
        _check(_fn(libc, "posix_spawnattr_setflags", ctypes.c_void_p, ctypes.c_short)(attr, flags))
        _check(_fn(libc, "posix_spawnattr_setsigmask", ctypes.c_void_p, ctypes.c_void_p)(attr, empty))
        _check(_fn(libc, "posix_spawnattr_setsigdefault", ctypes.c_void_p, ctypes.c_void_p)(attr, defaults))
        return attr


def _fn(libc: ctypes.CDLL, name: str, *argtypes: Any) -> Any:
    """Look up a libc function returning int (AttributeError when libc lacks it)."""
    func = getattr(libc, name)
    if argtypes:
        func.argtypes = list(argtypes)
    func.restype = ctypes.c_int
    return func


def _check(rc: int) -> None:
    """posix_spawn* return the error number (they do not set errno); -1 means errno."""
    if rc == -1:
        rc = ctypes.get_errno()
    if rc != 0:
        raise OSError(rc, os.strerror(rc))


def _load_libc() -> _Libc | None:
    if sys.platform != "linux":
        return None
    try:
        return _Libc()
    except (AttributeError, OSError):  # no addchdir_np (glibc < 2.29) or no libc at all
        return None


_LIBC = _load_libc()


def backend() -> str:
    """The backend the next :func:`spawn` will use: ``"posix_spawn"`` or ``"popen"``."""
    if _BACKEND not in _BACKENDS:
        message = f"_BACKEND must be one of {', '.join(_BACKENDS)} (got {_BACKEND!r})"
        raise ValueError(message)
    if _BACKEND == "popen":
        return "popen"
    if _LIBC is None:
        if _BACKEND == "posix_spawn":
            message = "libc posix_spawn with addchdir_np is not available here"
            raise RuntimeError(message)
        return "popen"
    return "posix_spawn"


class Confiner(Protocol):
    """Restrictions applied, in a thread of their own, just before the child is started."""

    def apply(self) -> None:
        """Confine the calling thread (it then starts the child)."""
        ...

    def run(self, job: Callable[[], Child]) -> Child:
        """Run ``job`` in a thread that exists only for it, and return what it returned."""
        ...


def spawn(
    argv: Sequence[str],
    cwd: str,
    env: Mapping[str, str],
    *,
    exec_fd: int | None = None,
    confine: Confiner | None = None,
) -> Child:
    """Start ``argv`` in ``cwd`` with exactly ``env``, stdin/stdout/stderr on pipes.

    ``exec_fd``: execute this descriptor (``/proc/self/fd/3`` in the child) instead of
    the path ``argv[0]``, so the file that was checked is the file that runs, whatever
    happens to the path meanwhile. ``confine``: the child is started from a thread of
    the confiner's (``run``) after its ``apply()``; restrictions on that thread
    (Landlock, seccomp, capabilities, cgroup, mount namespace) are inherited by the
    child and every descendant before the entry's first instruction, and never touch
    the host's other threads.

    Raises :class:`SpawnError` when no process could be started (exec failure, bad
    cwd, no descriptors left, a confinement that could not be applied) and
    ``ValueError`` for malformed arguments.
    """
    if confine is None:
        return _spawn(argv, cwd, env, exec_fd)

    def confined() -> Child:
        try:
            confine.apply()
        except OSError as exc:
            raise SpawnError(cannot_confine(argv[0], exc)) from None
        return _spawn(argv, cwd, env, exec_fd)

    try:
        return confine.run(confined)
    except OSError as exc:  # the thread could not be made ready (cgroup, namespace)
        raise SpawnError(cannot_confine(argv[0], exc)) from None


def cannot_confine(name: str, exc: OSError) -> str:
    """Why ``name`` was not started: its confinement failed with ``exc``."""
    return f"cannot confine {name}: {exc.strerror or exc} (errno {exc.errno})"


def _spawn(argv: Sequence[str], cwd: str, env: Mapping[str, str], exec_fd: int | None) -> Child:
    chosen = backend()
    raw_argv, raw_env = _encode(argv, env)  # the same checks, the same errors, for both backends
    raw_cwd = os.fsencode(cwd)
    if b"\0" in raw_cwd:  # libc would stop at it: another folder than the one named
        message = "embedded null byte in cwd"
        raise ValueError(message)
    try:
        pipes = _make_pipes()
    except OSError as exc:
        raise SpawnError(pipes_error(argv[0], exc)) from None
    (stdin_r, stdin_w), (stdout_r, stdout_w), (stderr_r, stderr_w) = pipes
    child_ends = (stdin_r, stdout_w, stderr_w)
    ok = False
    try:
        if chosen == "posix_spawn":
            assert _LIBC is not None
            pid = _spawn_libc(_LIBC, raw_argv, raw_cwd, raw_env, child_ends, exec_fd)
            popen = None
        else:
            popen = _spawn_popen(argv, cwd, env, child_ends, exec_fd)
            pid = popen.pid
        ok = True
    except OSError as exc:
        raise SpawnError(_describe(exc, argv[0], cwd)) from None
    finally:
        for fd in child_ends if ok else (*child_ends, stdin_w, stdout_r, stderr_r):
            os.close(fd)
    return Child(pid, stdin_w, stdout_r, stderr_r, popen)


def pipes_error(executable: str, exc: OSError) -> str:
    """Why no process ran when its pipes could not be made."""
    return f"cannot create pipes for {executable}: {_reason(exc)}"


def _encode(argv: Sequence[str], env: Mapping[str, str]) -> tuple[list[bytes], list[bytes]]:
    """Check and encode like ``subprocess`` does, so both backends reject the same input."""
    if not argv:
        message = "argv must not be empty"
        raise ValueError(message)
    fsencode = os.fsencode
    raw_argv = [fsencode(arg) for arg in argv]
    raw_env = [fsencode(key) + b"=" + fsencode(value) for key, value in env.items()]
    for key in env:
        if not key or "=" in key:
            message = f"illegal environment variable name {key!r}"
            raise ValueError(message)
    if b"\0" in b"".join(raw_argv) or b"\0" in b"".join(raw_env):
        message = "embedded null byte in argv or env"
        raise ValueError(message)
    return raw_argv, raw_env


def _make_pipes() -> list[tuple[int, int]]:
    """Three ``O_CLOEXEC`` pipes, all ends above 2.

    A host that closed its fd 0, 1 or 2 would get a pipe end there, and ``dup2(0, 0)``
    in the child would keep its close-on-exec flag: such low pipes are parked until the
    three real ones exist above them.
    """
    pipes: list[tuple[int, int]] = []
    parked: list[int] = []
    try:
        while len(pipes) < 3:
            pair = os.pipe2(os.O_CLOEXEC)
            if min(pair) < 3:
                parked.extend(pair)
                continue
            pipes.append(pair)
    except OSError:
        for fd in (fd for pair in pipes for fd in pair):
            os.close(fd)
        raise
    finally:
        for fd in parked:
            os.close(fd)
    return pipes


_EXEC_FD = 3  # where the checked entry's descriptor sits in the child
_EXEC_PATH = b"/proc/self/fd/3"


def _spawn_libc(
    libc: _Libc,
    argv: list[bytes],
    cwd: bytes,
    env: list[bytes],
    fds: tuple[int, int, int],
    exec_fd: int | None = None,
) -> int:
    actions = (ctypes.c_char * _OPAQUE_SIZE)()  # zeroed
    _check(libc.fa_init(actions))
    try:
        closefrom = libc.fa_closefrom if _USE_CLOSEFROM else None
        first_closed = 3 if exec_fd is None else _EXEC_FD + 1
        if closefrom is None:
            for fd in _inheritable_fds():
                if fd >= first_closed:
                    _check(libc.fa_close(actions, fd))
        dup2 = libc.fa_dup2
        # Each returns 0 or an error number; `or` stops at the first failure.
        _check(
            dup2(actions, fds[0], 0)
            or dup2(actions, fds[1], 1)
            or dup2(actions, fds[2], 2)
            or (dup2(actions, exec_fd, _EXEC_FD) if exec_fd is not None else 0)
            or libc.fa_chdir(actions, cwd)
            or (closefrom(actions, first_closed) if closefrom is not None else 0)
        )
        path = argv[0] if exec_fd is None else _EXEC_PATH
        pid = ctypes.c_int(0)
        _check(libc.spawn(ctypes.byref(pid), path, actions, libc.attr, _cstrings(argv), _cstrings(env)))
    finally:
        libc.fa_destroy(actions)
    return pid.value


def _cstrings(items: list[bytes]) -> ctypes.Array[ctypes.c_char_p]:
    """A NULL-terminated ``char *[]``."""
    return (ctypes.c_char_p * (len(items) + 1))(*items)


def _inheritable_fds() -> list[int]:
    """Descriptors above 2 that would survive exec (only needed without closefrom)."""
    found = []
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        try:
            if fd > 2 and os.get_inheritable(fd):
                found.append(fd)
        except OSError:  # closed meanwhile, e.g. listdir's own descriptor
            continue
    return found


def _spawn_popen(
    argv: Sequence[str],
    cwd: str,
    env: Mapping[str, str],
    fds: tuple[int, int, int],
    exec_fd: int | None = None,
) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        list(argv),
        executable=None if exec_fd is None else f"/proc/self/fd/{exec_fd}",
        pass_fds=() if exec_fd is None else (exec_fd,),
        cwd=cwd,
        env=dict(env),
        stdin=fds[0],
        stdout=fds[1],
        stderr=fds[2],
        start_new_session=True,
        close_fds=True,
        restore_signals=True,
    )


def _describe(exc: OSError, executable: str, cwd: str) -> str:
    """A readable message; blame the working directory when that is what failed."""
    if exc.filename == cwd or (exc.filename is None and _bad_dir(cwd)):
        return f"cannot change directory to {cwd}: {_reason(exc)}"
    return f"cannot execute {executable}: {_reason(exc)}"


def _bad_dir(path: str) -> bool:
    # posix_spawn reports a failed chdir and a failed exec alike: look (error path only).
    return not (os.path.isdir(path) and os.access(path, os.X_OK))


def _reason(exc: OSError) -> str:
    if exc.errno is None:
        return str(exc)
    return f"{os.strerror(exc.errno)} (errno {exc.errno})"
