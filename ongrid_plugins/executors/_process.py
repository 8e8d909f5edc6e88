"""The hardened process runner behind subprocess skills.

Wire protocol: the child gets a JSON args object on stdin (bytes, then EOF), prints
one JSON object on stdout and log lines on stderr. This module does not parse JSON:
it moves bytes, enforces limits and reports how the child ended.

Design
------
Spawning (:mod:`._spawn`)
    libc ``posix_spawn`` through ctypes: vfork-speed like :func:`os.posix_spawn`, but
    with a working directory (``addchdir_np``), a new session, default signal
    dispositions and an empty signal mask. ``subprocess.Popen`` is the fallback. The
    entry runs from the descriptor that was checked (``spec.exec_fd``), and a confined
    call is started from a thread that first confines itself (``spec.confine``).

Waiting: pidfd + poll, no sleeps
    ``os.pidfd_open(pid)`` gives a descriptor that becomes readable when the child
    exits, so one :func:`select.poll` (or the asyncio selector) waits for output,
    stdin room, child exit and the deadline at once, and wakes exactly when something
    happened. ``subprocess.run(timeout=...)`` instead polls ``waitpid(WNOHANG)`` with
    growing sleeps, which costs milliseconds per call. Without ``pidfd_open`` (Linux
    < 5.3) the fallback polls ``waitid(WEXITED | WNOHANG | WNOWAIT)`` after every
    wake-up, with poll timeouts from 1 to 50 ms.

Killing the whole group
    The child leads its own session and process group, so ``killpg`` reaches the
    grandchildren a shell script starts. At the deadline the group gets SIGTERM, then
    SIGKILL ``kill_grace`` seconds later. When the child exits on its own, what is
    left of its group is SIGKILLed *before* the child is reaped: until then the
    zombie pins the pid, so the group id cannot have been reused by an unrelated
    process. Only after that is the child reaped with ``os.waitpid``, and the pipes are
    drained to EOF for a short while (at most 1 s, not past the deadline, but at least
    100 ms): a process that left the group (``setsid``, ``setpgid``) can keep them
    open. A confined call (``spec.confine``, :mod:`.confine`) has a cgroup of its own,
    and every process still in it is killed wherever it went, at exit and at kill.

Limits
    stdout is read in chunks and the group is SIGKILLed as soon as it goes past
    ``stdout_cap``, so host memory stays bounded. stderr is split into lines as it
    arrives (``on_stderr`` sees each one at once), long lines are cut into chunks of
    ``max_line_bytes``, and only a bounded tail is kept.

One state machine, two drivers
    :class:`_Run` holds one child's state and reacts to events ("fd readable",
    "time passed"). :func:`run_process` drives it with ``select.poll``;
    :func:`arun_process` from the event loop (its readers, writers and a timer
    handle; only the spawn of a call that is not alone on its loop runs in a thread).
    Either way, an exception (KeyboardInterrupt,
    CancelledError) terminates the group (SIGTERM, up to ``kill_grace``, SIGKILL), reaps
    the child and closes every descriptor before it propagates.

The host must not reap children it did not start (``waitpid(-1)`` in a SIGCHLD
handler), and must keep SIGPIPE ignored (Python's default) so that writing to a
child that closed its stdin gives EPIPE instead of killing the host.

Modules: this one holds the state machine and the two entry points; the values are
in :mod:`._spec` (re-exported here), the stderr line splitter in :mod:`._stderr`,
the drivers in :mod:`._drivers`, the spawn in :mod:`._spawn`. Every call, confined or
not, goes through this one state machine.
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
import select
import signal
import time
from collections.abc import Callable

from ._drivers import LoopDriver, PollDriver, _launch_aside, in_flight
from ._spawn import Child, SpawnError, spawn
from ._spec import ProcessOutcome, ProcessSpec, StderrCallback
from ._stderr import StderrLines

__all__ = ["ProcessOutcome", "ProcessSpec", "StderrCallback", "arun_process", "run_process"]

logger = logging.getLogger(__name__)

_USE_PIDFD = hasattr(os, "pidfd_open")
"""Tests set this to False to exercise the ``waitid(WNOWAIT)`` polling fallback."""

_CHUNK = 65536  # one pipe buffer
_EOF_BOUND = 1.0  # longest wait for EOF once the child is reaped
_EOF_MIN = 0.1  # ... but always this long, even past the deadline
_EXIT_POLL_MIN = 0.001  # waitid polling (no pidfd): first interval
_EXIT_POLL_MAX = 0.05  # ... doubling up to this
_POLLIN = select.POLLIN
_POLLOUT = select.POLLOUT
_POLLHUP = select.POLLHUP  # the same bit as EPOLLHUP


def run_process(spec: ProcessSpec, on_stderr: StderrCallback | None = None) -> ProcessOutcome:
    """Run ``spec`` to completion in this thread (safe from many threads at once)."""
    run = _Run(spec, on_stderr)
    driver = PollDriver(run)
    try:
        error = run.launch()
        if error is not None:
            return ProcessOutcome.never_ran(error, run.duration)
        run.start()
        driver.wait(lambda: run.finished)
    except BaseException:
        # KeyboardInterrupt & co: give the group its grace, then SIGKILL, then re-raise.
        run.terminate(time.monotonic())
        driver.wait(lambda: run.reaped)
        raise
    finally:
        run.close()
        run.before_close = _ignore  # no cycle left (run -> driver -> run): freed at once, not by the gc
    return run.outcome()


async def arun_process(spec: ProcessSpec, on_stderr: StderrCallback | None = None) -> ProcessOutcome:
    """Run ``spec`` on the running event loop: readers, writers and timers, no threads.

    Alone on its loop a call spawns on the loop (a few hundred microseconds); while
    another is in flight the spawn runs in a spawner thread, so the loop keeps serving
    the running children. On cancellation the group is terminated (SIGTERM, up to
    ``kill_grace``, SIGKILL) before re-raising.
    """
    loop = asyncio.get_running_loop()
    run = _Run(spec, on_stderr)
    driver = LoopDriver(run, loop)
    busy = in_flight.get(loop, 0)
    in_flight[loop] = busy + 1
    try:
        error = await _launch_aside(run) if busy else run.launch()
        if error is not None:
            return ProcessOutcome.never_ran(error, run.duration)
        run.start()
        await driver.wait(lambda: run.finished)
    except BaseException:
        run.terminate(time.monotonic())
        await driver.wait(lambda: run.reaped)
        raise
    finally:
        driver.detach()
        run.close()  # a second cancellation lands here: SIGKILL and a blocking waitpid
        run.before_close = _ignore
        in_flight[loop] -= 1
    return run.outcome()


class _Run:
    """One child's state. Drivers call the ``on_*`` methods; none of them blocks."""

    def __init__(self, spec: ProcessSpec, on_stderr: StderrCallback | None) -> None:
        self.spec = spec
        self.child: Child | None = None
        self.pid = -1
        # Nothing to signal or reap until launch() succeeds: every kill checks this.
        self.reaped = True
        self.started = self._ended = time.monotonic()
        self.deadline = math.inf
        self.stdin_fd: int | None = None
        self.stdout_fd: int | None = None
        self.stderr_fd: int | None = None
        self.pidfd: int | None = None
        self.before_close: Callable[[int], None] = _ignore  # the drivers' hook
        self._payload = memoryview(spec.stdin)  # before spawning: it may raise
        self._stdout: list[bytes] = []
        self._stdout_size = 0
        self._on_stderr = on_stderr
        self._stderr: StderrLines | None = None  # made when the first stderr bytes arrive
        self._status: int | None = None
        self.timed_out = False
        self.overflow = False
        self._kill_at: float | None = None  # SIGTERM sent, SIGKILL due then
        self._sigkilled = False
        self._drain_until = math.inf
        self._exit_poll = _EXIT_POLL_MIN  # only without pidfd
        self._exit_poll_at = math.inf

    def launch(self) -> str | None:
        """Spawn the child; returns the spawn error message, or None when it runs."""
        self.started = time.monotonic()
        try:
            child = spawn(
                self.spec.argv,
                self.spec.cwd,
                self.spec.env,
                exec_fd=self.spec.exec_fd,
                confine=self.spec.confine,
            )
        except SpawnError as exc:
            self._ended = time.monotonic()
            return str(exc)
        self.child, self.pid, self.reaped = child, child.pid, False
        if self.spec.confine is not None:
            self.spec.confine.started(child.pid)
        self.stdin_fd, self.stdout_fd, self.stderr_fd = child.stdin, child.stdout, child.stderr
        self.pidfd = _open_pidfd(child.pid)
        self.deadline = self.started + self.spec.timeout
        self._exit_poll_at = self.started + _EXIT_POLL_MIN
        return None

    @property
    def duration(self) -> float:
        """Seconds from the spawn to the end, to the microsecond."""
        return round((self._ended - self.started) * 1e6) / 1e6

    @property
    def finished(self) -> bool:
        return self.reaped and self.stdout_fd is None and self.stderr_fd is None

    def start(self) -> None:
        """Write what can be written now; the rest goes through the wait loop.

        A write of at most PIPE_BUF bytes to a fresh pipe never blocks (its capacity is
        at least one page), so small payloads take one blocking write and no fcntl.
        Bigger ones make the pipe non-blocking and fill what fits.
        """
        assert self.stdin_fd is not None
        if len(self._payload) > select.PIPE_BUF:
            os.set_blocking(self.stdin_fd, False)
        if self._payload:
            self.on_stdin()
        else:
            self._close("stdin_fd")

    def watches(self) -> list[tuple[int, int]]:
        """The descriptors to wait on, with POLLIN or POLLOUT."""
        wanted = [
            (self.stdout_fd, _POLLIN),
            (self.stderr_fd, _POLLIN),
            (self.pidfd, _POLLIN),
            (self.stdin_fd, _POLLOUT),
        ]
        return [(fd, events) for fd, events in wanted if fd is not None]

    def next_wakeup(self) -> float:
        """When :meth:`on_time` has something to do (``math.inf``: nothing planned)."""
        if not self.reaped:
            if self._sigkilled:
                when = math.inf  # only the exit is left to wait for
            else:
                when = self.deadline if self._kill_at is None else self._kill_at
            return min(when, self._exit_poll_at) if self.pidfd is None else when
        return self._drain_until if not self.finished else math.inf

    def on_ready(self, fd: int, events: int = 0) -> None:
        """``fd`` is readable, writable or hung up (stale descriptors are ignored).

        ``events``: what poll said, when the driver knows. A pipe that hung up (no writer
        left) and gave less than a full read is drained: it is closed at once, without
        another wake-up to read its EOF.
        """
        if fd == self.stdout_fd:
            self.on_stdout(events & _POLLHUP)
        elif fd == self.stderr_fd:
            self.on_stderr(events & _POLLHUP)
        elif fd == self.stdin_fd:
            self.on_stdin()
        elif fd == self.pidfd:
            self.on_exit()

    def on_stdin(self) -> None:
        assert self.stdin_fd is not None
        try:
            written = os.write(self.stdin_fd, self._payload)
        except BlockingIOError:
            return
        except OSError as exc:  # EPIPE: the child closed stdin or exited; stop writing
            logger.debug("stdin of %s closed early: %s", self.spec.argv[0], exc)
            self._close("stdin_fd")
            return
        self._payload = self._payload[written:]
        if not self._payload:
            self._close("stdin_fd")

    def on_stdout(self, hup: int = 0) -> None:
        assert self.stdout_fd is not None
        room = self.spec.stdout_cap - self._stdout_size
        size = min(_CHUNK, room + 1)  # +1 detects overflow
        data = self._read(self.stdout_fd, size)
        if data is None:
            return
        if not data:
            self._close("stdout_fd")
            return
        if len(data) > room:
            # Stop at once: the child could print gigabytes.
            self.overflow = True
            data = data[:room]
            self.kill(signal.SIGKILL)
            self._close("stdout_fd")
        self._stdout.append(data)
        self._stdout_size += len(data)
        if hup and len(data) < size and self.stdout_fd is not None:
            self._close("stdout_fd")  # hung up and drained: the next read could only say EOF

    def on_stderr(self, hup: int = 0) -> None:
        assert self.stderr_fd is not None
        data = self._read(self.stderr_fd, _CHUNK)
        if data is None:
            return
        if data:
            self._stderr_lines().feed(data)
        if not data or (hup and len(data) < _CHUNK):  # EOF, or hung up and drained
            if self._stderr is not None:
                self._stderr.flush()
            self._close("stderr_fd")

    def on_exit(self) -> None:
        """The child died: SIGKILL its leftovers while its zombie pins the group id,
        then reap it, then allow a short while for the pipes to reach EOF."""
        self._killpg(signal.SIGKILL)
        self._kill_all()
        self._reap()
        now = time.monotonic()
        self._drain_until = min(now + _EOF_BOUND, max(self.deadline, now + _EOF_MIN))

    def on_time(self, now: float) -> None:
        """Apply whatever became due: exit check (no pidfd), SIGTERM, SIGKILL, EOF bound."""
        if not self.reaped and self.pidfd is None and now >= self._exit_poll_at:
            self._poll_exit(now)
        if not self.reaped:
            if self._kill_at is None and not self._sigkilled and now >= self.deadline:
                self.timed_out = True
                self.terminate(now)
            elif self._kill_at is not None and now >= self._kill_at:
                self.kill(signal.SIGKILL)
        elif not self.finished and now >= self._drain_until:
            logger.warning(
                "%s exited but its output pipes stayed open for %.1f s; a process it "
                "started left its process group and keeps running",
                self.spec.argv[0],
                _EOF_BOUND,
            )
            if self._stderr is not None:
                self._stderr.flush()
            self._close("stdout_fd")
            self._close("stderr_fd")

    def terminate(self, now: float) -> None:
        """SIGTERM the group now and SIGKILL it after the grace (no-op once reaped)."""
        if not self.reaped and self._kill_at is None and not self._sigkilled:
            self._kill_at = now + self.spec.kill_grace
            self.kill(signal.SIGTERM)

    def kill(self, sig: int) -> None:
        """Signal the group, and the child itself should it have left the group."""
        if self.reaped or self._sigkilled:
            return
        self._sigkilled = sig == signal.SIGKILL
        self._killpg(sig)
        if self._sigkilled:
            self._kill_all()
        try:
            if os.getpgid(self.pid) != self.pid:
                os.kill(self.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass

    def close(self) -> None:
        """Last resort on every path: SIGKILL and a blocking reap, then close every fd."""
        try:
            if not self.reaped:
                self.kill(signal.SIGKILL)
                self._reap()
        finally:
            for name in ("stdin_fd", "stdout_fd", "stderr_fd", "pidfd"):
                if getattr(self, name) is not None:
                    self._close(name)

    def outcome(self) -> ProcessOutcome:
        code = None if self._status is None else os.waitstatus_to_exitcode(self._status)
        return ProcessOutcome(
            stdout=b"".join(self._stdout),
            exit_code=code if code is not None and code >= 0 else None,
            signal=-code if code is not None and code < 0 else None,
            timed_out=self.timed_out,
            stdout_overflow=self.overflow,
            stderr_tail=self._stderr.tail if self._stderr is not None else (),
            duration=self.duration,
        )

    def _stderr_lines(self) -> StderrLines:
        if self._stderr is None:
            self._stderr = StderrLines(self.spec, self._on_stderr)
        return self._stderr

    def _poll_exit(self, now: float) -> None:
        # WNOWAIT leaves the zombie in place, so the group can still be killed safely.
        flags = os.WEXITED | os.WNOHANG | os.WNOWAIT
        if os.waitid(os.P_PID, self.pid, flags) is not None:
            self.on_exit()
            return
        self._exit_poll = min(self._exit_poll * 2, _EXIT_POLL_MAX)
        self._exit_poll_at = now + self._exit_poll

    def _reap(self) -> None:
        try:
            _, self._status = os.waitpid(self.pid, 0)
        except ChildProcessError:  # someone else reaped it: the status is lost
            logger.warning("child %d of %s was reaped by someone else", self.pid, self.spec.argv[0])
        self._ended = time.monotonic()
        self.reaped = True
        if self.child is not None:
            self.child.forget(self._status)
        self._close("pidfd")
        self._close("stdin_fd")

    def _kill_all(self) -> None:
        """Every process of a confined call, wherever it went (its cgroup), gets SIGKILL."""
        if self.spec.confine is not None:
            self.spec.confine.kill_all()

    def _killpg(self, sig: int) -> None:
        if self.reaped:  # never signal a pid (group) that may have been reused
            return
        # Not contextlib.suppress: this runs on every call, and the manager costs more.
        try:  # noqa: SIM105
            os.killpg(self.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass

    def _read(self, fd: int, size: int) -> bytes | None:
        try:
            return os.read(fd, size)
        except BlockingIOError:
            return None

    def _close(self, name: str) -> None:
        fd: int | None = getattr(self, name)
        if fd is not None:
            setattr(self, name, None)
            self.before_close(fd)
            os.close(fd)


def _ignore(fd: int) -> None:
    pass


def _open_pidfd(pid: int) -> int | None:
    if not _USE_PIDFD:
        return None
    try:
        return os.pidfd_open(pid)
    except OSError as exc:  # ENOSYS (old kernel, seccomp), EMFILE: fall back to waitid
        logger.debug("pidfd_open(%d) failed, polling waitid instead: %s", pid, exc)
        return None
