"""The compiled runner (``executors/_fastrun.c``) beyond what every runner test checks.

tests/test_process.py runs all of its tests against the compiled runner, the Python
runner with ctypes posix_spawn, and subprocess.Popen. Here: which calls get the
compiled runner, the threads its callbacks run on, what its own arguments refuse,
and that a call object dropped mid-run never leaves a process behind.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import math
import os
import re
import select
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from ongrid_plugins.executors import _fast, _process, _spawn
from ongrid_plugins.executors._process import ProcessOutcome, ProcessSpec, arun_process, run_process

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="the compiled runner is Linux-only"
)


TUNING = (_process._EOF_BOUND, _process._EOF_MIN, _process._USE_PIDFD)


def spec(tmp_path: Path, body: str, **kw: Any) -> ProcessSpec:
    entry = tmp_path / "entry.sh"
    entry.write_text("#!/bin/sh\n" + body + "\n")
    entry.chmod(0o755)
    return ProcessSpec(
        argv=(str(entry),), cwd=str(tmp_path), env={}, stdin=kw.pop("stdin", b""), **{"timeout": 10, **kw}
    )


def open_fds() -> int:
    """Open pipes and anonymous inodes (epoll, timerfd, pidfd): what the runner makes.

    Not files: an idle audit writer of an earlier test closes its database whenever it stops.
    """
    count = 0
    for name in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):  # the listing's own descriptor, closed by now
            target = os.readlink(f"/proc/self/fd/{name}")
            count += target.startswith(("pipe:", "anon_inode:"))
    return count


class Counting:
    """The extension module, counting the calls of each function."""

    def __init__(self, native: Any) -> None:
        self.native = native
        self.counts = {"run": 0, "start": 0, "start_aside": 0}

    def __getattr__(self, name: str) -> Any:
        function = getattr(self.native, name)
        if name not in self.counts:
            return function

        def counted(*args: Any) -> Any:
            self.counts[name] += 1
            return function(*args)

        return counted


@pytest.fixture
def counting(monkeypatch: pytest.MonkeyPatch) -> Counting:
    assert _fast.available(), "the compiled runner was not built: reinstall with gcc and Python's headers"
    proxy = Counting(_fast._native)
    monkeypatch.setattr(_fast, "_native", proxy)
    return proxy


def test_the_extension_is_built_where_the_suite_runs() -> None:
    assert _fast.available()


def test_unconfined_calls_run_in_the_compiled_runner_sync_and_async(
    tmp_path: Path, counting: Counting
) -> None:
    call = spec(tmp_path, "cat", stdin=b"hello")
    assert run_process(call).stdout == b"hello"
    assert asyncio.run(arun_process(call)).stdout == b"hello"
    assert counting.counts == {"run": 1, "start": 1, "start_aside": 0}


def test_fallback_switches_and_a_confiner_that_names_no_cgroup_take_the_python_runner(
    tmp_path: Path, counting: Counting, monkeypatch: pytest.MonkeyPatch
) -> None:
    plain = spec(tmp_path, "cat")
    assert _fast.usable(plain)
    confined = ProcessSpec(argv=plain.argv, cwd=plain.cwd, env={}, stdin=b"", timeout=5, confine=object())
    assert not _fast.usable(confined)  # its confiner applies in a thread of its own
    assert not _fast.confinable(confined)  # and this one has no procs_file to kill through

    class Naming:  # a confiner that names its cgroup's list
        def procs_file(self) -> str | None:
            return None

    named = ProcessSpec(argv=plain.argv, cwd=plain.cwd, env={}, stdin=b"", timeout=5, confine=Naming())
    assert _fast.confinable(named) and not _fast.usable(named)
    monkeypatch.setattr(counting, "CONFINES", False, raising=False)  # a build older than the source
    assert not _fast.confinable(named)
    monkeypatch.setattr(_spawn, "_BACKEND", "popen")
    assert not _fast.usable(plain)
    monkeypatch.setattr(_spawn, "_BACKEND", "auto")
    monkeypatch.setattr(_spawn, "_USE_CLOSEFROM", False)
    assert not _fast.usable(plain)
    monkeypatch.setattr(_spawn, "_USE_CLOSEFROM", True)
    monkeypatch.setattr(_spawn._LIBC, "fa_closefrom", None)  # a glibc before 2.34: the C spawn needs none
    assert _fast.usable(plain)
    monkeypatch.setattr(counting, "SPAWNS", False, raising=False)  # a kernel without close_range
    assert not _fast.usable(plain)
    assert run_process(plain).exit_code == 0
    assert asyncio.run(arun_process(plain)).exit_code == 0
    assert counting.counts == {"run": 0, "start": 0, "start_aside": 0}


def test_stderr_lines_reach_the_callback_on_the_calling_thread_and_on_the_loop_thread(tmp_path: Path) -> None:
    call = spec(tmp_path, "echo one >&2; echo two >&2")
    seen: list[tuple[str, int]] = []

    def record(line: str) -> None:
        seen.append((line, threading.get_ident()))

    out = run_process(call, record)
    assert out.stderr_tail == ("one", "two")
    assert seen == [("one", threading.get_ident()), ("two", threading.get_ident())]

    async def on_loop() -> int:
        await arun_process(call, record)
        return threading.get_ident()

    seen.clear()
    loop_thread = asyncio.run(on_loop())
    assert [line for line, _ in seen] == ["one", "two"]
    assert {ident for _, ident in seen} == {loop_thread}


def test_other_threads_run_python_while_a_call_waits(tmp_path: Path) -> None:
    call = spec(tmp_path, "sleep 0.5")
    counted = 0
    stop = threading.Event()

    def count() -> None:
        nonlocal counted
        while not stop.is_set():
            counted += 1

    counter = threading.Thread(target=count)
    counter.start()
    try:
        time.sleep(0.05)
        before = counted
        assert run_process(call).exit_code == 0
        during = counted - before
    finally:
        stop.set()
        counter.join()
    assert during > 10_000  # held the GIL, it would be a handful (one switch interval's worth)


def test_the_extension_refuses_malformed_arguments_before_starting_anything(tmp_path: Path) -> None:
    native = _fast._native
    good = spec(tmp_path, "cat")
    arguments = list(_fast._arguments(good, lambda data: None, TUNING))
    before = open_fds()
    with pytest.raises(TypeError, match="takes 15 arguments"):
        native.run(*arguments[:3])
    for index, bad, error in [
        (1, (), TypeError),  # an empty argv
        (1, ("not bytes",), TypeError),
        (2, ("A=1", b"B=2"), TypeError),
        (6, math.nan, ValueError),  # timeout
        (7, -1.0, ValueError),  # kill_grace
        (8, -5, ValueError),  # stdout cap
        (9, "not callable", TypeError),
        (10, 1, ValueError),  # closefrom would close stdout and stderr
        (14, "/sys/fs/cgroup/pids/x/cgroup.procs", TypeError),  # the cgroup's list: bytes or None
        (14, b"/sys/fs/cgroup/pids\0/x", ValueError),
    ]:
        wrong = list(arguments)
        wrong[index] = bad
        with pytest.raises(error):
            native.run(*wrong)
        with pytest.raises(error):
            native.start(*wrong)
        with pytest.raises(error):
            native.start_aside(*wrong)
    assert open_fds() == before


def test_a_nan_limit_is_refused_when_the_spec_is_made(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="not NaN"):
        spec(tmp_path, "cat", timeout=math.nan)
    with pytest.raises(ValueError, match="not NaN"):
        spec(tmp_path, "cat", kill_grace=math.nan)


@pytest.mark.parametrize("compiled", [True, False])
def test_a_nul_in_the_working_directory_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, compiled: bool
) -> None:
    # libc would stop at the NUL and run the child in another folder than the one named.
    monkeypatch.setattr(_fast, "USE", compiled)
    good = spec(tmp_path, "cat")
    bad = ProcessSpec(argv=good.argv, cwd=good.cwd + "\0x", env={}, stdin=b"", timeout=5)
    with pytest.raises(ValueError, match="null byte"):
        run_process(bad)


def test_a_stdout_cap_beyond_a_machine_word_is_no_cap(tmp_path: Path) -> None:
    out = run_process(spec(tmp_path, "cat", stdin=b"x" * 1000, stdout_cap=2**80))
    assert (out.stdout, out.stdout_overflow) == (b"x" * 1000, False)


def fd_targets() -> dict[int, str]:
    """This process's descriptors and what each is (``pipe:[123]``, ``anon_inode:[eventpoll]``)."""
    found = {}
    for name in os.listdir("/proc/self/fd"):
        with contextlib.suppress(FileNotFoundError):  # the listing's own descriptor, gone already
            found[int(name)] = os.readlink(f"/proc/self/fd/{name}")
    return found


# -- the spawn (clone and exec, "The spawn" in _fastrun.c) ------------------------------


def through_fd(tmp_path: Path, entry: Path, *args: str, fd: int, stdin: bytes = b"") -> ProcessSpec:
    """A spec that executes ``fd`` (open on ``entry``), as the subprocess executor does."""
    return ProcessSpec(
        argv=(str(entry), *args), cwd=str(tmp_path), env={}, stdin=stdin, timeout=10, exec_fd=fd
    )


#: The first 20 bytes of an ELF file of this machine (its e_machine included), and no more.
ELF_HEAD = (
    b"\x7fELF\x02\x01\x01"
    + bytes(11)
    + {"x86_64": 62, "aarch64": 183}.get(os.uname().machine, 0).to_bytes(2, "little")
)


def kernel() -> tuple[int, int]:
    major, minor = re.match(r"(\d+)\.(\d+)", os.uname().release).groups()  # type: ignore[union-attr]
    return int(major), int(minor)


def children_of_this_process() -> list[int]:
    """Our children still in the process table (zombies included)."""
    me = str(os.getpid())
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            with contextlib.suppress(OSError):
                stat = Path(f"/proc/{name}/stat").read_text()
                if stat.rsplit(")", 1)[1].split()[1] == me:
                    found.append(int(name))
    return found


def test_a_compiled_entry_runs_from_its_descriptor_under_its_own_name(tmp_path: Path) -> None:
    entry = tmp_path / "show-name"
    entry.write_bytes(Path("/bin/cat").read_bytes())
    entry.chmod(0o755)
    fd = os.open(entry, os.O_RDONLY | os.O_CLOEXEC)
    try:
        out = run_process(through_fd(tmp_path, entry, "/proc/self/comm", "/proc/self/cmdline", fd=fd))
    finally:
        os.close(fd)
    comm, cmdline = out.stdout.split(b"\n", 1)
    assert cmdline.split(b"\0")[:3] == [str(entry).encode(), b"/proc/self/comm", b"/proc/self/cmdline"]
    if kernel() >= (6, 14):
        # execveat of the descriptor: the kernel names the process after its file (comm_from_dentry,
        # Linux 6.14); executed through /proc/self/fd/3 it would be called "3"
        assert comm == b"show-name"


def test_a_script_entry_keeps_proc_self_fd_3_as_its_name(tmp_path: Path) -> None:
    entry = tmp_path / "name.sh"
    entry.write_text('#!/bin/sh\nprintf "%s" "$0"\n')
    entry.chmod(0o755)
    fd = os.open(entry, os.O_RDONLY | os.O_CLOEXEC)
    try:
        out = run_process(through_fd(tmp_path, entry, fd=fd))
    finally:
        os.close(fd)
    assert out.stdout == b"/proc/self/fd/3"  # what docs/writing-skills.md tells authors to resolve


@pytest.mark.parametrize(
    ("kind", "head", "mode", "reason"),
    [
        ("elf-garbage", ELF_HEAD + b" garbage", 0o755, "Exec format error (errno 8)"),  # execveat
        ("no-magic", b"\x00\x01 not a program", 0o755, "Exec format error (errno 8)"),  # by its path
        ("elf-not-executable", b"", 0o644, "Permission denied (errno 13)"),
        ("script-not-executable", b"#!/bin/sh\necho hi\n", 0o644, "Permission denied (errno 13)"),
    ],
)
def test_a_descriptor_that_cannot_be_executed_fails_to_spawn_and_leaves_no_child(
    tmp_path: Path, kind: str, head: bytes, mode: int, reason: str
) -> None:
    entry = tmp_path / kind
    entry.write_bytes(head or Path("/bin/true").read_bytes())
    entry.chmod(mode)
    fd = os.open(entry, os.O_RDONLY | os.O_CLOEXEC)
    before, fds = children_of_this_process(), open_fds()
    try:
        out = run_process(through_fd(tmp_path, entry, fd=fd))
    finally:
        os.close(fd)
    assert out.spawn_error == f"cannot execute {entry}: {reason}"
    assert (out.exit_code, out.stdout) == (None, b"")
    assert set(children_of_this_process()) <= set(before)  # the child that failed was reaped
    assert open_fds() == fds


@contextlib.contextmanager
def occupied(fd: int, source: int | None) -> Any:
    """Descriptor ``fd`` of this process made a close-on-exec copy of ``source`` (None: closed),
    and put back afterwards."""
    saved = None
    with contextlib.suppress(OSError):
        saved = os.dup(fd)
    try:
        if source is None:
            with contextlib.suppress(OSError):
                os.close(fd)
        else:
            os.dup2(source, fd, inheritable=False)
        yield
    finally:
        if saved is None:
            with contextlib.suppress(OSError):
                os.close(fd)
        else:
            os.dup2(saved, fd, inheritable=fd < 3)
            os.close(saved)


@pytest.mark.parametrize("where", ["entry-on-3", "entry-on-0", "pipe-on-3"])
def test_descriptors_already_on_the_childs_numbers_land_where_they_belong(tmp_path: Path, where: str) -> None:
    entry = tmp_path / "echo.sh"
    entry.write_text('#!/bin/sh\ncat; echo "err" >&2\n')
    entry.chmod(0o755)
    fd = os.open(entry, os.O_RDONLY | os.O_CLOEXEC)
    target, source = {"entry-on-3": (3, fd), "entry-on-0": (0, fd), "pipe-on-3": (3, None)}[where]
    try:
        with occupied(target, source):
            exec_fd = target if source is not None else fd
            if source is None:  # fd 3 is free: the first pipe made (the child's stdin) takes it
                with pytest.raises(OSError):
                    os.fstat(3)
            out = run_process(through_fd(tmp_path, entry, fd=exec_fd, stdin=b"payload"))
    finally:
        os.close(fd)
    assert (out.stdout, out.stderr_tail, out.exit_code, out.spawn_error) == (b"payload", ("err",), 0, None)


def test_dispositions_the_host_set_are_defaults_in_the_child(tmp_path: Path) -> None:
    caught: list[int] = []
    old = {
        signal.SIGUSR1: signal.signal(signal.SIGUSR1, lambda signum, frame: caught.append(signum)),
        signal.SIGUSR2: signal.signal(signal.SIGUSR2, signal.SIG_IGN),
        signal.SIGHUP: signal.signal(signal.SIGHUP, signal.SIG_IGN),
    }
    try:
        status = ProcessSpec(
            argv=("/bin/cat", "/proc/self/status"), cwd=str(tmp_path), env={}, stdin=b"", timeout=10
        )
        out = run_process(status)
    finally:
        for signum, handler in old.items():
            signal.signal(signum, handler)
    fields = dict(line.split(":\t", 1) for line in out.stdout.decode().splitlines())
    masks = {name: int(fields[name], 16) for name in ("SigIgn", "SigBlk", "SigCgt")}
    # cat catches nothing itself: nothing ignored (not even glibc's internal 32 and 33), nothing
    # blocked, nothing caught
    assert masks == {"SigIgn": 0, "SigBlk": 0, "SigCgt": 0}
    assert caught == []


def test_every_signal_the_host_ignores_or_catches_is_default_in_the_child(tmp_path: Path) -> None:
    # Every signal a host can set, 1 to 64 (glibc keeps 32 and 33 from Python), odd ones
    # ignored and even ones caught: none of it reaches the skill.
    ours = [s for s in range(1, 65) if s not in (signal.SIGKILL, signal.SIGSTOP, 32, 33)]
    old = {s: signal.signal(s, signal.SIG_IGN if s % 2 else (lambda signum, frame: None)) for s in ours}
    try:
        status = ProcessSpec(
            argv=("/bin/cat", "/proc/self/status"), cwd=str(tmp_path), env={}, stdin=b"", timeout=10
        )
        assert _fast.usable(status)
        out = run_process(status)
    finally:
        for signum, handler in old.items():
            signal.signal(signum, handler)
    fields = dict(line.split(":\t", 1) for line in out.stdout.decode().splitlines())
    assert {name: int(fields[name], 16) for name in ("SigIgn", "SigCgt")} == {"SigIgn": 0, "SigCgt": 0}


def test_a_call_object_dropped_while_running_kills_and_reaps_its_child(tmp_path: Path) -> None:
    call = spec(tmp_path, "sleep 100 & wait")
    before = fd_targets()
    started = _fast._native.start(*_fast._arguments(call, lambda data: None, TUNING))
    pid = started.pid
    assert Path(f"/proc/{pid}").exists() and not started.reaped
    ours = {fd: target for fd, target in fd_targets().items() if before.get(fd) != target}
    # its epoll, timerfd and pidfd, its stdout and stderr (stdin was closed at once: no payload)
    assert sorted(target.split(":")[0] for target in ours.values()) == ["anon_inode"] * 3 + ["pipe"] * 2
    del started  # no other reference: freed now
    assert not Path(f"/proc/{pid}").exists()  # killed and reaped: not even a zombie
    now = fd_targets()
    assert [fd for fd, target in ours.items() if now.get(fd) == target] == []  # each closed


def test_terminate_then_step_ends_once_the_child_is_reaped(tmp_path: Path) -> None:
    call = spec(tmp_path, "trap '' TERM; echo ready >&2; sleep 100 & wait", kill_grace=0.2)
    said: list[bytes] = []
    started = _fast._native.start(*_fast._arguments(call, said.append, TUNING))
    deadline = time.monotonic() + 5
    while not said and time.monotonic() < deadline:  # the trap is set
        started.step()
        time.sleep(0.01)
    started.terminate()  # SIGTERM (ignored), SIGKILL 0.2 s later
    while not started.step() and time.monotonic() < deadline:
        time.sleep(0.01)
    stdout, status, timed_out, overflow, duration, left_open, reaped_elsewhere = started.result()
    assert started.reaped and os.waitstatus_to_exitcode(status) == -9
    assert (stdout, timed_out, overflow, left_open, reaped_elsewhere) == (b"", False, False, False, 0)
    assert 0.15 < duration < 2
    started.close()


def test_open_beneath_in_c_refuses_what_the_python_walk_refuses(tmp_path: Path) -> None:
    import errno

    root = tmp_path / "root"
    (root / "sub").mkdir(parents=True)
    (root / "sub" / "entry").write_text("x")
    (tmp_path / "outside").write_text("secret")
    (root / "link").symlink_to(root / "sub")
    (root / "escape").symlink_to(tmp_path / "outside")
    native, flags = _fast._native, os.O_RDONLY
    fd = native.open_beneath(os.fsencode(root), b"sub/entry", flags)
    try:
        assert os.read(fd, 10) == b"x" and not os.get_inheritable(fd)
    finally:
        os.close(fd)
    for relative, code in [
        (b"link/entry", errno.ELOOP),
        (b"escape", errno.ELOOP),
        (b"../outside", errno.EXDEV),
    ]:
        with pytest.raises(OSError) as caught:
            native.open_beneath(os.fsencode(root), relative, flags)
        assert (caught.value.errno, caught.value.filename) == (code, relative)
    with pytest.raises(OSError) as missing:
        native.open_beneath(os.fsencode(tmp_path / "gone"), b"entry", flags)
    assert missing.value.filename == os.fsencode(tmp_path / "gone")  # the root's fault, not the entry's
    with pytest.raises(ValueError, match="null byte"):
        native.open_beneath(os.fsencode(root), b"sub/entry\0x", flags)
    # str paths are encoded as os.fsencode encodes them (the call path passes the tool's str)
    odd = root / "sub" / "caf\udce9"  # a byte that is not UTF-8, as os.fsdecode gives it
    odd.write_bytes(b"y")
    fd = native.open_beneath(str(root), "sub/caf\udce9", flags)
    try:
        assert os.read(fd, 10) == b"y"
    finally:
        os.close(fd)
    with pytest.raises(OSError) as caught:
        native.open_beneath(str(root), "link/entry", flags)
    assert (caught.value.errno, caught.value.filename) == (errno.ELOOP, "link/entry")
    for bad in ("sub/entry\0x", 7):
        with pytest.raises((ValueError, TypeError)):
            native.open_beneath(str(root), bad, flags)
    # The wrapper answers None for every refusal: the Python path meets it again and words it.
    assert _fast.open_beneath(str(root), "link/entry", flags) is None
    assert _fast.open_beneath(str(tmp_path / "gone"), "entry", flags) is None


def test_open_beneath_in_c_steps_aside_when_openat2_is_switched_off(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ongrid_plugins.discovery import roots

    (tmp_path / "entry").write_text("x")
    fd = _fast.open_beneath(str(tmp_path), "entry", os.O_RDONLY)
    assert fd is not None
    os.close(fd)
    monkeypatch.setattr(roots, "_openat2", False)  # as on a kernel without it: the walk
    assert _fast.open_beneath(str(tmp_path), "entry", os.O_RDONLY) is None


def test_a_cancellation_that_lands_after_the_last_step_ends_the_call_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The last step reaps the child and closes every pipe; a cancellation that comes
    # before the task resumes must not wait on an epoll with nothing left in it.
    call = spec(tmp_path, "cat", stdin=b"x")
    step = _fast._Stepper.step
    task: asyncio.Task[Any] | None = None

    def step_then_cancel(self: Any) -> None:
        step(self)
        if self.waiter.done() and task is not None:
            task.cancel()

    monkeypatch.setattr(_fast._Stepper, "step", step_then_cancel)

    async def main() -> float:
        nonlocal task
        task = asyncio.ensure_future(arun_process(call))
        started = time.monotonic()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(task, 3)  # a hang would be TimeoutError
        return time.monotonic() - started

    assert asyncio.run(main()) < 1


def test_without_a_pidfd_a_child_reaped_by_someone_else_is_reported_and_not_signalled(tmp_path: Path) -> None:
    call = spec(tmp_path, "exit 3")
    started = _fast._native.start(*_fast._arguments(call, lambda data: None, (1.0, 0.1, False)))
    pid = started.pid
    _, status = os.waitpid(pid, 0)  # the host's own SIGCHLD handler, say
    assert os.waitstatus_to_exitcode(status) == 3
    deadline = time.monotonic() + 5
    while not started.step() and time.monotonic() < deadline:
        time.sleep(0.005)
    stdout, status_seen, timed_out, *_, reaped_elsewhere = started.result()
    assert (stdout, status_seen, timed_out, reaped_elsewhere) == (b"", None, False, pid)  # not the deadline
    started.close()


def test_a_last_stderr_line_without_newline_is_reported_when_stderr_ends_not_when_the_call_does(
    tmp_path: Path,
) -> None:
    call = spec(tmp_path, "printf partial >&2; exec 2>&-; sleep 0.4")
    seen: list[tuple[str, float]] = []
    started = time.monotonic()
    out = run_process(call, lambda line: seen.append((line, time.monotonic() - started)))
    ended = time.monotonic() - started
    assert out.stderr_tail == ("partial",)
    assert [line for line, _ in seen] == ["partial"] and seen[0][1] < ended - 0.25


def test_concurrent_compiled_calls_spawn_aside_and_a_cancelled_one_leaves_no_process(
    tmp_path: Path, counting: Counting, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Spawned on the loop, a concurrent call's vfork child can wait behind the running
    # children for a CPU, and the whole loop with it: while one call is in flight, the
    # next spawns go to the extension's own threads, never to the Python spawner.
    def no_python_thread() -> Any:
        raise AssertionError("the compiled runner handed a spawn to a Python thread")

    monkeypatch.setattr(_process, "_spawner", no_python_thread)
    (tmp_path / "holder").mkdir()
    holder = spec(tmp_path / "holder", "echo $$ >&2\nexec /bin/sleep 60", kill_grace=0.2)
    echo = spec(tmp_path, "cat", stdin=b"hello")
    pids: list[str] = []

    async def main() -> list[ProcessOutcome]:
        waiting = asyncio.ensure_future(arun_process(holder, pids.append))
        for _ in range(500):  # one call in flight: the next ones spawn beside it
            if pids:
                break
            await asyncio.sleep(0.01)
        echoes = await asyncio.gather(*(arun_process(echo) for _ in range(8)))
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        return echoes

    before = open_fds()
    echoes = asyncio.run(main())
    assert [(o.stdout, o.exit_code) for o in echoes] == [(b"hello", 0)] * 8
    assert counting.counts == {"run": 0, "start": 1, "start_aside": 8}
    with pytest.raises(ProcessLookupError):  # terminated and reaped before the cancellation propagated
        os.kill(int(pids[0]), 0)
    assert open_fds() == before


class CountingEpoll:
    """A loop mux's epoll, counting its ``poll`` calls; ``refuse`` makes ``register`` fail."""

    def __init__(self, epoll: Any, refuse: bool = False) -> None:
        self.epoll, self.refuse, self.polls = epoll, refuse, 0

    def poll(self, *args: Any) -> Any:
        self.polls += 1
        return self.epoll.poll(*args)

    def register(self, fd: int, events: int) -> None:
        if self.refuse:
            raise OSError(errno.ENOSPC, "No space left on device (max_user_watches)")
        self.epoll.register(fd, events)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.epoll, name)


async def counting_mux(tmp_path: Path, refuse: bool = False) -> CountingEpoll:
    """The running loop's mux, made by a first call (and kept: it closes only when idle
    for a while), its epoll wrapped: later calls find the loop as callers do."""
    from ongrid_plugins.executors import _drivers

    (tmp_path / "first").mkdir()
    assert (await arun_process(spec(tmp_path / "first", "true"))).exit_code == 0
    mux = _drivers._muxes[asyncio.get_running_loop()]
    mux.epoll = CountingEpoll(mux.epoll, refuse)
    return mux.epoll


def test_a_call_alone_on_its_loop_is_stepped_without_polling_the_mux_and_concurrent_ones_are_polled(
    tmp_path: Path,
) -> None:
    # A lone compiled call reads its own events: asking the shared epoll which descriptor
    # is ready would be one system call a call for nothing. Two calls: the mux must ask.
    (tmp_path / "slow").mkdir()
    echo = spec(tmp_path, "cat", stdin=b"hi")
    slow = spec(tmp_path / "slow", "sleep 0.3; cat", stdin=b"slow")

    async def main() -> tuple[list[bytes], int, list[bytes], int]:
        epoll = await counting_mux(tmp_path)
        alone = [(await arun_process(echo)).stdout for _ in range(3)]
        polls_alone = epoll.polls
        together = await asyncio.gather(arun_process(slow), arun_process(slow))
        return alone, polls_alone, [o.stdout for o in together], epoll.polls - polls_alone

    alone, polls_alone, together, polls_together = asyncio.run(main())
    assert (alone, polls_alone) == ([b"hi"] * 3, 0)
    assert together == [b"slow", b"slow"]
    assert polls_together >= 1


def test_a_call_the_loop_cannot_watch_fails_and_leaves_no_process_or_descriptor(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # epoll_ctl refusing the call's descriptor (ENOSPC: max_user_watches) after the child
    # started: the call must kill and reap it, close its descriptors and say why.
    from ongrid_plugins.executors import _drivers

    monkeypatch.setattr(_drivers, "IDLE_CLOSE", 0.2)  # the loop's own epoll goes too, soon
    (tmp_path / "holder").mkdir()
    holder = spec(tmp_path / "holder", "echo $$ >&2\nexec /bin/sleep 60", kill_grace=0.2)
    before = open_fds()
    spawned_before = children()

    async def main() -> None:
        await counting_mux(tmp_path, refuse=True)
        try:
            await asyncio.wait_for(arun_process(holder), 10)
        finally:
            await asyncio.sleep(0.6)  # idle for longer than IDLE_CLOSE: the loop's epoll closes

    with pytest.raises(OSError, match="max_user_watches"):
        asyncio.run(main())
    assert children() - spawned_before == set()  # killed and reaped: not even a zombie
    assert open_fds() == before


def children() -> set[int]:
    """This process's living children (every thread's), zombies included."""
    found: set[int] = set()
    for task in os.listdir("/proc/self/task"):
        with contextlib.suppress(OSError), open(f"/proc/self/task/{task}/children") as f:
            found.update(int(pid) for pid in f.read().split())
    return found


def step_until_done(call: Any, seconds: float = 5.0) -> None:
    deadline = time.monotonic() + seconds
    while not call.step():
        assert time.monotonic() < deadline, "the call never ended"
        time.sleep(0.002)


def test_a_spawn_aside_that_fails_is_the_calls_result_worded_as_inline(tmp_path: Path) -> None:
    missing = ProcessSpec(argv=(str(tmp_path / "nope"),), cwd=str(tmp_path), env={}, stdin=b"", timeout=5)
    script = spec(tmp_path, "true")
    no_cwd = ProcessSpec(argv=script.argv, cwd=str(tmp_path / "gone"), env={}, stdin=b"", timeout=5)
    for bad in (missing, no_cwd):
        arguments = _fast._arguments(bad, lambda data: None, TUNING)
        inline = _fast._native.start(*arguments)
        call = _fast._native.start_aside(*arguments)
        assert type(inline) is tuple and type(call) is not tuple
        wait_readable_and_step(call)  # the failure wakes the loop: nothing else would
        assert call.result() == inline  # (None, ENOENT, "spawn")
        call.close()

        async def busy_loop(target: ProcessSpec = bad) -> ProcessOutcome:
            return await _fast.arun(target, None, TUNING, True)

        assert (
            asyncio.run(busy_loop()).spawn_error
            == _fast._outcome(bad, inline, _fast._Lines(bad, None), 1).spawn_error
        )


def test_a_call_stopped_or_dropped_while_it_spawns_aside_leaves_no_process(tmp_path: Path) -> None:
    forever = spec(tmp_path, "exec /bin/sleep 60", kill_grace=5)
    arguments = _fast._arguments(forever, lambda data: None, TUNING)
    before = open_fds()
    for end in ("terminate", "close", "drop"):
        for _ in range(20):  # caught at every point of the spawn, some before, some after it
            call = _fast._native.start_aside(*arguments)
            if end == "terminate":
                call.terminate()
                started = time.monotonic()
                step_until_done(call)
                assert time.monotonic() - started < 2  # SIGKILL, not the 5 s grace: it never ran for anyone
                outcome = call.result()
                assert os.WIFSIGNALED(outcome[1]) and os.WTERMSIG(outcome[1]) == 9
                call.close()
            elif end == "close":
                call.close()
                assert call.reaped
            else:
                del call
    assert children() == set()
    assert open_fds() == before


def in_a_forked_child(action: Any) -> None:
    """Run ``action()`` in a forked child, which must exit 0 within 10 s."""
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            action()
            code = 0
        finally:
            os._exit(code)
    deadline = time.monotonic() + 10
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() > deadline:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            raise AssertionError("the forked child hung")
        time.sleep(0.01)
    assert os.waitstatus_to_exitcode(status) == 0


def wait_readable_and_step(call: Any) -> None:
    """As an event loop does: step only when ``fileno()`` is readable (a lost wake-up hangs)."""
    while True:
        ready, _, _ = select.select([call.fileno()], [], [], 5)
        assert ready, "the call's descriptor never became readable"
        if call.step():
            return


@pytest.mark.parametrize("child_does", ["close", "step", "drop", "result"])
def test_a_forked_childs_copies_of_calls_leave_the_parents_calls_alone(
    tmp_path: Path, child_does: str
) -> None:
    # The child shares the parent's epolls, pipes and pidfds: its copies must end without
    # taking anything out of them, writing to them or signalling the parent's children.
    slow = spec(tmp_path, "sleep 0.3\ncat", stdin=b"hello")
    arguments = _fast._arguments(slow, lambda data: None, TUNING)
    calls = [_fast._native.start_aside(*arguments) for _ in range(6)]
    calls += [_fast._native.start(*arguments)]
    select.select([calls[0].fileno()], [], [], 5)  # some spawns over, not yet stepped

    def in_child() -> None:
        for call in calls:
            if child_does == "close":
                call.close()
            elif child_does == "step":
                assert call.step() is True  # over at once: it is the parent's
            elif child_does == "result":
                assert call.result()[:2] == (None, errno.ECHILD)
        calls.clear()  # "drop": freed here

    in_a_forked_child(in_child)
    for call in calls:
        wait_readable_and_step(call)
        assert call.result()[:2] == (b"hello", 0)  # ran to its end, not killed by the child
        call.close()


def test_a_forked_child_can_reuse_the_descriptor_numbers_of_its_parents_calls(tmp_path: Path) -> None:
    # The copies' descriptors are closed at the fork itself: a number the child reuses
    # afterwards (a log file, say) is never closed under it when a copy is dropped.
    call = _fast._native.start_aside(
        *_fast._arguments(spec(tmp_path, "cat", stdin=b"x"), lambda data: None, TUNING)
    )
    number = call.fileno()
    log = tmp_path / "child.log"

    def in_child() -> None:
        nonlocal call
        fd = os.open(log, os.O_WRONLY | os.O_CREAT, 0o600)
        assert fd <= number  # the parent's numbers are free here
        del call  # dropped: nothing of the child's is closed
        os.write(fd, b"still open\n")

    in_a_forked_child(in_child)
    assert log.read_bytes() == b"still open\n"
    wait_readable_and_step(call)
    assert call.result()[:2] == (b"x", 0)
    call.close()


def test_a_forked_childs_copy_of_a_finished_call_keeps_its_outcome(tmp_path: Path) -> None:
    call = _fast._native.start(*_fast._arguments(spec(tmp_path, "echo hi"), lambda data: None, TUNING))
    wait_readable_and_step(call)
    parent = call.result()

    def in_child() -> None:
        assert call.result() == parent
        assert call.step() is True

    in_a_forked_child(in_child)
    assert parent[:2] == (b"hi\n", 0)
    call.close()


def test_a_forked_childs_copy_of_a_call_still_draining_is_not_over_with_part_of_its_output(
    tmp_path: Path,
) -> None:
    # Reaped, but a grandchild that left the group still holds stdout: the copy has seen
    # only part of the output, so it is the parent's call, not a success of its own.
    body = "echo part\nsetsid -f sh -c 'sleep 0.5; echo rest'\nsleep 0.2\n"
    call = _fast._native.start(*_fast._arguments(spec(tmp_path, body), lambda data: None, (5.0, 5.0, True)))
    while not call.reaped:
        select.select([call.fileno()], [], [], 1)
        call.step()

    def in_child() -> None:
        assert call.step() is True
        assert call.result()[:2] == (None, errno.ECHILD)

    in_a_forked_child(in_child)
    wait_readable_and_step(call)
    assert call.result()[:2] == (b"part\nrest\n", 0)
    call.close()


@pytest.mark.parametrize("how", ["run", "start", "start_aside"])
def test_a_fork_in_another_thread_never_holds_a_running_calls_pipes(tmp_path: Path, how: str) -> None:
    # A forked child that lives on (a worker) must not keep a copy of a running call's
    # pipes: the call would see stdin's and stdout's end only once that child exits.
    arguments = _fast._arguments(spec(tmp_path, "cat", stdin=b"x"), lambda data: None, TUNING)
    native = _fast._native
    slow: list[float] = []
    stop = threading.Event()

    def calls() -> None:
        while not stop.is_set():
            started = time.monotonic()
            if how == "run":
                got = native.run(*arguments)
            else:
                call = getattr(native, how)(*arguments)
                wait_readable_and_step(call)
                got = call.result()
                call.close()
            assert got[:2] == (b"x", 0)
            if time.monotonic() - started > 0.8:  # a held pipe shows as the fork's 1.2 s
                slow.append(time.monotonic() - started)

    worker = threading.Thread(target=calls)
    worker.start()
    try:
        for _ in range(4):  # each fork lands somewhere in a call: spawning, waiting, draining
            pid = os.fork()
            if pid == 0:
                time.sleep(1.2)  # the worker lives on, and exits without exec
                os._exit(0)
            os.waitpid(pid, 0)
    finally:
        stop.set()
        worker.join()
    assert slow == []
