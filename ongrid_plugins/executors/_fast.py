"""The compiled runner (:mod:`._fastrun`, built from ``_fastrun.c`` at install time).

For an unconfined call, :func:`run` does in one C call what :class:`._process._Run`
driven by ``select.poll`` does: the same spawn (libc ``posix_spawn``, new session,
default signals, empty mask, the checked entry on fd 3, ``closefrom(3 or 4)``), the
same waiting (pidfd + poll, no sleeps), the same limits (deadline, SIGTERM then
SIGKILL after ``kill_grace``, the stdout cap), the same group kill before the reap
and the same bounded drain. The GIL is released for the whole wait, so concurrent
calls from threads do not take turns on it, and the runner's own CPU per call is
about the bare ``posix_spawn`` round trip's. stderr bytes come back to Python as they
arrive (:class:`._stderr.StderrLines` splits and reports them, as for the Python
runner). :func:`arun` is the same state machine stepped by an event loop: each call
is one descriptor for the loop (an epoll of its pipes, its pidfd and a timerfd).

A confined call (:func:`run_confined`) is spawned by the same C code from the thread
its confiner prepared (:mod:`.confine.warm`), once that thread has confined itself, and
seen through here by :meth:`Call.wait` (or stepped by the event loop,
:func:`arun_confined`): the same loop, which also SIGKILLs every process the call's
cgroup lists before the child is reaped and on a SIGKILL (setsid and double forks
included), as the Python runner does through the plan.

The Python runner remains the reference and the fallback: it runs everything where
the extension is missing (no compiler when the package was
installed) or where libc lacks what the C code relies on (``addclosefrom_np``).
Without a pidfd the C code polls ``waitid`` as the Python one does. :func:`usable`
says which runner a call gets; the tests run every runner test against each.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import importlib
import logging
import os
import sys
import time
from collections.abc import Callable
from typing import Any

from ..discovery import roots as _roots
from ..models.fastinit import fast_init
from . import _drivers, _spawn
from ._spec import ProcessOutcome, ProcessSpec, StderrCallback
from ._stderr import StderrLines

__all__ = [
    "arun",
    "arun_confined",
    "available",
    "confinable",
    "open_beneath",
    "run",
    "run_confined",
    "usable",
]

# The runner's logger (one name for everything the runner reports).
logger = logging.getLogger("ongrid_plugins.executors._process")

_native: Any = None
with contextlib.suppress(ImportError):  # not built (no compiler at install time), another platform
    _native = importlib.import_module(f"{__package__}._fastrun")

USE = True
"""Tests set this to False to run every call through the Python runner."""


def available() -> bool:
    """The extension was built and imports."""
    return _native is not None


def usable(spec: ProcessSpec) -> bool:
    """This call runs in C: unconfined, on glibc, a kernel with ``close_range`` (Linux
    5.9), and nothing a test switched to a fallback (no closefrom, the Popen backend).

    The extension spawns on its own (close_range in the child): glibc's
    ``posix_spawn_file_actions_addclosefrom_np``, which the ctypes runner needs, is not
    asked for here.
    """
    return spec.confine is None and _spawns_here()


def confinable(spec: ProcessSpec) -> bool:
    """This confined call runs in C (:func:`run_confined`): as :func:`usable`, with a build
    that kills through a cgroup and a confiner that names its cgroup (``procs_file``)."""
    return (
        spec.confine is not None
        and hasattr(spec.confine, "procs_file")
        and _spawns_here()
        and getattr(_native, "CONFINES", False)
    )


def _spawns_here() -> bool:
    """The extension spawns here (what :func:`usable` and :func:`confinable` share)."""
    return (
        _native is not None
        and USE
        and getattr(_native, "SPAWNS", False)  # False too for a build older than the source
        and _spawn._BACKEND == "auto"
        and _spawn._USE_CLOSEFROM
        and _spawn._LIBC is not None
    )


def open_beneath(root: str, relative: str, flags: int) -> int | None:
    """The entry opened beneath its root in one C call (``openat2``, no symlink, no
    ``..``), or None: no extension, no ``openat2`` here (or switched off, as tests do:
    :data:`ongrid_plugins.discovery.roots._openat2`), or any failure, which the
    caller's Python path then meets again and words in its own terms."""
    if _native is None or not USE or not _roots._syscall():
        return None
    try:
        fd: int | None = _native.open_beneath(root, relative, flags)  # encoded as os.fsencode does
    except (OSError, ValueError):
        return None
    return fd


Tuning = tuple[float, float, bool]
"""The Python runner's ``(_EOF_BOUND, _EOF_MIN, _USE_PIDFD)``, which tests change there."""


def run(spec: ProcessSpec, on_stderr: StderrCallback | None, tuning: Tuning) -> ProcessOutcome:
    """Run ``spec`` to completion in this thread (the GIL released while it waits)."""
    lines = _Lines(spec, on_stderr)
    got = _native.run(*_arguments(spec, lines.feed, tuning))
    return _outcome(spec, got, lines, tuning[0])


def run_confined(spec: ProcessSpec, on_stderr: StderrCallback | None, tuning: Tuning) -> ProcessOutcome:
    """Run the confined ``spec`` to completion: spawned from its confiner's thread once that
    thread has confined itself, then waited for here, the GIL released while it waits.

    The confinement's failures read as the Python runner words them (``cannot confine
    ...``); the child's limits are applied (``started``) as soon as it runs.
    """
    lines = _Lines(spec, on_stderr)
    job = _Confined(spec, lines, tuning)
    call = job.spawn()
    if type(call) is not _native.Call:
        return job.failed(call)
    try:
        spec.confine.started(call.pid)
        call.wait()
    finally:
        call.close()  # an exception above: SIGKILL (the cgroup too) and a blocking reap
    return _outcome(spec, call.result(), lines, tuning[0])


async def arun_confined(
    spec: ProcessSpec,
    on_stderr: StderrCallback | None,
    tuning: Tuning,
    aside: Callable[..., concurrent.futures.Future[Any]] | None,
    mux: _drivers._Mux,
) -> ProcessOutcome:
    """:func:`run_confined` on the running event loop (``mux``: its mux, attached by the
    caller), which steps the call as :func:`arun`.

    ``aside``: another call is in flight on the loop, so the hand-over to the confined
    thread (which waits for it to confine itself and spawn) is made from this thread
    pool's ``submit``, not from the loop. A cancellation while it spawns waits for the
    spawn and then kills and reaps what it started.
    """
    lines = _Lines(spec, on_stderr)
    job = _Confined(spec, lines, tuning)
    if aside is None:
        call = job.spawn()
    else:
        future = aside(job.spawn)
        try:
            call = await asyncio.wrap_future(future)
        except asyncio.CancelledError:
            with contextlib.suppress(Exception):  # cancelled before a thread took it: nothing ran
                started = future.result()
                if type(started) is _native.Call:
                    started.close()
            raise
    if type(call) is not _native.Call:
        return job.failed(call)
    return await _see_through(spec, call, lines, tuning, spec.confine.started, mux)


class _Confined:
    """The spawn of one confined call, from its confiner's thread once that thread has
    confined itself: a ``Call``, the extension's ``(None, errno, stage)``, or the message
    of a confinement that failed (worded as the Python runner words it)."""

    __slots__ = ("arguments", "lines", "spec", "started", "tuning")

    def __init__(self, spec: ProcessSpec, lines: _Lines, tuning: Tuning) -> None:
        procs = spec.confine.procs_file()
        self.spec, self.lines, self.tuning = spec, lines, tuning
        self.arguments = _arguments(spec, lines.feed, tuning, None if procs is None else os.fsencode(procs))
        self.started = time.monotonic()

    def spawn(self) -> Any:
        plan, name = self.spec.confine, self.spec.argv[0]
        try:
            return plan.run(self._confined)
        except _spawn.SpawnError as exc:
            return str(exc)
        except OSError as exc:  # the thread could not be made ready (cgroup, namespace)
            return _spawn.cannot_confine(name, exc)

    def _confined(self) -> Any:
        try:
            self.spec.confine.apply()
        except OSError as exc:
            raise _spawn.SpawnError(_spawn.cannot_confine(self.spec.argv[0], exc)) from None
        return _native.start(*self.arguments)

    def failed(self, got: str | tuple[Any, ...]) -> ProcessOutcome:
        if isinstance(got, str):
            return ProcessOutcome.never_ran(got, time.monotonic() - self.started)
        return _outcome(self.spec, got, self.lines, self.tuning[0])


async def arun(
    spec: ProcessSpec,
    on_stderr: StderrCallback | None,
    tuning: Tuning,
    aside: bool | None = None,
) -> ProcessOutcome:
    """Run ``spec`` on the running event loop, which watches one descriptor for it.

    The loop watches the call's epoll (its pipes, pidfd and a timerfd for the deadline)
    through its mux (:class:`._drivers._Mux`, one reader per loop for every call on it)
    and steps the call when something is ready; stderr lines are reported on the loop.
    ``aside`` (by default: whether another call is in flight on the loop): the spawn is
    left to the extension's spawner threads (plain threads: no GIL, no future, no
    Python), which also start the call (stdin, the epoll, the timer), and the loop keeps
    serving the running children meanwhile. ``posix_spawn`` returns once its vfork
    child has exec'd, and with every CPU busy that child can wait for one: spawned on
    the loop, 8 concurrent calls ran at half their rate now and then. Alone on the loop,
    a call spawns where it is (no hand-off, the least latency). On cancellation the
    group is terminated (SIGTERM, up to ``kill_grace``, SIGKILL) and reaped before the
    cancellation propagates (a child still being spawned is killed once it is); a
    second cancellation kills it at once.

    One coroutine from the spawn to the outcome (the executor awaits it through
    :func:`._process.arun_process`, which only picks it): the loop runs a call's every
    step on its one thread, and each coroutine a call awaits through is paid there.
    """
    loop = asyncio.get_running_loop()
    mux = _drivers._Mux.attach(loop)  # its users are the calls in flight on the loop, this one too
    try:
        lines = _Lines(spec, on_stderr)
        if aside is None:
            aside = mux.users > 1
        call = (_native.start_aside if aside else _native.start)(*_arguments(spec, lines.feed, tuning))
        if type(call) is tuple:
            return _outcome(spec, call, lines, tuning[0])
        fd = call.fileno()
        stepper = _Stepper(call, loop.create_future())
        try:
            mux.watch(fd, _drivers._POLLIN, stepper)
            await stepper.waiter
        except BaseException:
            await _ending(call, stepper, mux, fd, loop)
            raise
        finally:
            mux.forget(fd, _drivers._POLLIN)  # before the call's descriptor is closed
            call.close()  # a second cancellation lands here: SIGKILL and a blocking reap
        return _outcome(spec, call.result(), lines, tuning[0])
    finally:
        mux.detach(loop)


async def _see_through(
    spec: ProcessSpec,
    call: Any,
    lines: _Lines,
    tuning: Tuning,
    started: Callable[[int], None],
    mux: _drivers._Mux,
) -> ProcessOutcome:
    """Step the started confined ``call`` on the running loop until it is over
    (``started(pid)`` first); on cancellation end it as :func:`arun` says."""
    loop = asyncio.get_running_loop()
    fd = call.fileno()
    stepper = _Stepper(call, loop.create_future())
    try:
        mux.watch(fd, _drivers._POLLIN, stepper)
        started(call.pid)
        await stepper.waiter
    except BaseException:
        await _ending(call, stepper, mux, fd, loop)
        raise
    finally:
        mux.forget(fd, _drivers._POLLIN)
        call.close()
    return _outcome(spec, call.result(), lines, tuning[0])


async def _ending(
    call: Any, stepper: _Stepper, mux: _drivers._Mux, fd: int, loop: asyncio.AbstractEventLoop
) -> None:
    """A call's wait was interrupted (a cancellation, or its stderr callback raised): stop
    the call and wait until its child is reaped."""
    call.terminate()
    # Done once the child is reaped; a call that was over before the cancellation came
    # has nothing left in its epoll to wake the loop: asked first, it says so at once.
    # Not watched (the watch failed): close() after this kills and reaps at once.
    if not call.step() and mux.owners.get(fd) is stepper:
        stepper.waiter = loop.create_future()
        await stepper.waiter


class _Stepper:
    """Steps one call for the mux and wakes the coroutine waiting for it when it is done."""

    __slots__ = ("call", "waiter")

    reads_itself = True  # the call reads its own events in step()

    def __init__(self, call: Any, waiter: asyncio.Future[None]) -> None:
        self.call = call
        self.waiter = waiter

    def ready(self, fd: int, events: int) -> bool:
        return True

    def step(self) -> None:
        try:
            finished = self.call.step()
        except BaseException as exc:  # the stderr callback raised: the caller ends the call
            if not self.waiter.done():
                self.waiter.set_exception(exc)
            return
        if finished and not self.waiter.done():
            self.waiter.set_result(None)


class _Lines:
    """The stderr line splitter, made when the first stderr bytes arrive."""

    __slots__ = ("lines", "on_stderr", "spec")

    def __init__(self, spec: ProcessSpec, on_stderr: StderrCallback | None) -> None:
        self.spec = spec
        self.on_stderr = on_stderr
        self.lines: StderrLines | None = None

    def feed(self, data: bytes) -> None:
        """Bytes as they arrive; empty bytes at stderr's end (the last line, if it had no newline)."""
        if not data:
            if self.lines is not None:
                self.lines.flush()
            return
        if self.lines is None:
            self.lines = StderrLines(self.spec, self.on_stderr)
        self.lines.feed(data)


def _arguments(spec: ProcessSpec, feed: Any, tuning: Tuning, group: bytes | None = None) -> tuple[Any, ...]:
    # Checked and encoded once per argv, cwd and environment, as for the ctypes spawn.
    (argv, _), cwd, (env, _) = _spawn._encoded(spec.argv, spec.cwd, spec.env)
    path = argv[0] if spec.exec_fd is None else _spawn._EXEC_PATH
    return (
        path, argv, env, cwd, -1 if spec.exec_fd is None else spec.exec_fd, spec.stdin,
        float(spec.timeout), float(spec.kill_grace), min(spec.stdout_cap, sys.maxsize), feed,
        3 if spec.exec_fd is None else 4,
        *tuning,
        group,
    )  # fmt: skip


def _outcome(spec: ProcessSpec, got: tuple[Any, ...], stderr: _Lines, eof_bound: float) -> ProcessOutcome:
    if got[0] is None:
        return _not_started(spec, got[1], got[2])
    stdout, status, timed_out, overflow, duration, left_open, reaped_elsewhere = got
    if reaped_elsewhere:  # the pid of a child someone else reaped: its status is lost
        logger.warning("child %d of %s was reaped by someone else", reaped_elsewhere, spec.argv[0])
    if left_open:
        logger.warning(
            "%s exited but its output pipes stayed open for %.1f s; a process it "
            "started left its process group and keeps running",
            spec.argv[0],
            eof_bound,
        )
    lines = stderr.lines
    if lines is not None:
        lines.flush()
    code = None if status is None else os.waitstatus_to_exitcode(status)
    return _new_outcome(
        stdout,
        code if code is not None and code >= 0 else None,  # exit_code
        -code if code is not None and code < 0 else None,  # signal
        timed_out,
        overflow,  # stdout_overflow
        lines.tail if lines is not None else (),  # stderr_tail
        duration,
    )


#: The fields :func:`_outcome` gives an outcome, in the order it passes them.
_OUTCOME_FIELDS = ("stdout", "exit_code", "signal", "timed_out", "stdout_overflow", "stderr_tail", "duration")
#: ``ProcessOutcome(...)`` of a call that ran, positionally: the same object, one per call.
_new_outcome: Callable[..., ProcessOutcome] = fast_init(ProcessOutcome, *_OUTCOME_FIELDS)


def _not_started(spec: ProcessSpec, errno: int, stage: str) -> ProcessOutcome:
    exc = OSError(errno, os.strerror(errno))
    if stage == "pipes":
        message = _spawn.pipes_error(spec.argv[0], exc)
    elif stage == "fds":
        message = f"cannot create the descriptors to wait for {spec.argv[0]}: {_spawn._reason(exc)}"
    else:
        message = _spawn._describe(exc, spec.argv[0], spec.cwd)
    return ProcessOutcome.never_ran(message, 0.0)
