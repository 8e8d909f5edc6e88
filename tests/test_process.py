"""The hardened process runner, with real subprocesses, against both spawn backends."""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import resource
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from procs import dead

from ongrid_plugins.executors import _process, _spawn
from ongrid_plugins.executors._process import (
    ProcessOutcome,
    ProcessSpec,
    arun_process,
    run_process,
)

ENV = {"PATH": "/usr/bin:/bin"}
MIB = 1024 * 1024
Runner = Callable[..., ProcessOutcome]


@pytest.fixture(autouse=True, scope="module")
def _earlier_hosts_settled() -> None:
    """Tests here count this process's open files. Hosts of earlier test modules close their
    audit files later -- their writer threads idle out after a second, their journals go when
    the host is collected -- so let them settle first, or a count drops mid-test."""
    gc.collect()
    deadline = time.monotonic() + 5
    while any(t.name == "ongrid-audit-writer" for t in threading.enumerate()) and time.monotonic() < deadline:
        time.sleep(0.05)
    gc.collect()


@pytest.fixture(autouse=True, params=["posix_spawn", "popen"])
def backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every test runs with libc posix_spawn (the default) and with subprocess.Popen."""
    name: str = request.param
    monkeypatch.setattr(_spawn, "_BACKEND", name)
    assert _spawn.backend() == name
    return name


@pytest.fixture(params=["sync", "async"])
def call(request: pytest.FixtureRequest) -> Runner:
    """run_process, or arun_process on a fresh event loop."""
    if request.param == "sync":
        return run_process

    def run_async(spec: ProcessSpec, on_stderr: Callable[[str], None] | None = None) -> ProcessOutcome:
        return asyncio.run(arun_process(spec, on_stderr))

    return run_async


def sh(tmp_path: Path, body: str, name: str = "entry.sh") -> str:
    """An executable ``#!/bin/sh`` script; returns its absolute path."""
    path = tmp_path / name
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(0o755)
    return str(path)


def py(tmp_path: Path, body: str, name: str = "entry.py") -> str:
    """An executable Python script with an absolute shebang (works with an empty env)."""
    path = tmp_path / name
    path.write_text(f"#!{sys.executable}\n" + body + "\n")
    path.chmod(0o755)
    return str(path)


def make_spec(tmp_path: Path, *argv: str, **overrides: Any) -> ProcessSpec:
    values: dict[str, Any] = {
        "argv": argv,
        "cwd": str(tmp_path),
        "env": ENV,
        "stdin": b"{}",
        "timeout": 5.0,
        "kill_grace": 0.2,
    }
    values.update(overrides)
    return ProcessSpec(**values)


def open_fds() -> int:
    # Collect first: a file or connection an earlier test dropped is closed whenever
    # the collector runs, and must not count as opened (or closed) by this test.
    gc.collect()
    return len(os.listdir("/proc/self/fd"))


def read_pids(path: Path) -> list[int]:
    return [int(word) for word in path.read_text().split()]


# -- 1. spawning -------------------------------------------------------------------


def test_stdin_reaches_child_and_stdout_comes_back(tmp_path: Path, call: Runner) -> None:
    out = call(make_spec(tmp_path, "/bin/cat", stdin=b'{"a": 1}'))
    assert out == ProcessOutcome(
        stdout=b'{"a": 1}',
        exit_code=0,
        signal=None,
        timed_out=False,
        stdout_overflow=False,
        stderr_tail=(),
        duration=out.duration,
    )
    assert 0 < out.duration < 2


@pytest.mark.parametrize("code", [0, 1, 42, 255])
def test_exit_codes(tmp_path: Path, code: int) -> None:
    out = run_process(make_spec(tmp_path, sh(tmp_path, f"echo out; exit {code}")))
    assert (out.exit_code, out.signal, out.stdout) == (code, None, b"out\n")


def test_killed_by_its_own_signal(tmp_path: Path, call: Runner) -> None:
    out = call(make_spec(tmp_path, sh(tmp_path, "ulimit -c 0; kill -SEGV $$")))
    assert (out.exit_code, out.signal, out.timed_out) == (None, signal.SIGSEGV, False)


def test_cwd_is_applied(tmp_path: Path) -> None:
    workdir = tmp_path / "work dir"
    workdir.mkdir()
    out = run_process(make_spec(tmp_path, sh(tmp_path, "/bin/pwd"), cwd=str(workdir)))
    assert out.stdout == f"{workdir}\n".encode()


def test_empty_env_is_really_empty(tmp_path: Path) -> None:
    out = run_process(make_spec(tmp_path, "/usr/bin/env", env={}))
    assert (out.stdout, out.exit_code) == (b"", 0)
    out = run_process(make_spec(tmp_path, "/bin/cat", "/proc/self/environ", env={}))
    assert (out.stdout, out.exit_code) == (b"", 0)
    # A shebang script still starts: /bin/sh needs no PATH to be found.
    out = run_process(make_spec(tmp_path, sh(tmp_path, "echo ok"), env={}))
    assert out.stdout == b"ok\n"


def test_env_is_exactly_the_given_mapping(tmp_path: Path) -> None:
    env = {"A": "1", "B": "x y", "UNICODE": "é"}
    out = run_process(make_spec(tmp_path, "/usr/bin/env", env=env))
    assert sorted(out.stdout.decode().splitlines()) == ["A=1", "B=x y", "UNICODE=é"]


def test_argv_is_passed(tmp_path: Path) -> None:
    entry = sh(tmp_path, 'printf "%s|" "$@"')
    out = run_process(make_spec(tmp_path, entry, "a b", "", "--x=é"))
    assert out.stdout == "a b||--x=é|".encode()


def test_binary_stdout_is_returned_as_bytes(tmp_path: Path) -> None:
    data = bytes(range(256)) * 64 + os.urandom(5000)
    (tmp_path / "blob").write_bytes(data)
    out = run_process(make_spec(tmp_path, "/bin/cat", str(tmp_path / "blob")))
    assert out.stdout == data


@pytest.mark.parametrize(
    ("kind", "reason"),
    [
        ("missing", "No such file or directory (errno 2)"),
        ("not-executable", "Permission denied (errno 13)"),
        ("directory", "Permission denied (errno 13)"),
        ("garbage", "Exec format error (errno 8)"),
    ],
)
def test_exec_errors_are_reported_not_raised(tmp_path: Path, kind: str, reason: str) -> None:
    path = tmp_path / kind
    if kind == "not-executable":
        path.write_text("#!/bin/sh\necho hi\n")
        path.chmod(0o644)
    elif kind == "directory":
        path.mkdir()
    elif kind == "garbage":
        path.write_bytes(b"\x00\x01\x02 not a program\n")
        path.chmod(0o755)
    out = run_process(make_spec(tmp_path, str(path)))
    assert out.spawn_error == f"cannot execute {path}: {reason}"
    assert (out.exit_code, out.signal, out.stdout, out.stderr_tail) == (None, None, b"", ())
    assert not out.timed_out and out.duration < 1


def test_missing_cwd_is_reported(tmp_path: Path, call: Runner) -> None:
    cwd = tmp_path / "gone"
    out = call(make_spec(tmp_path, sh(tmp_path, "echo hi"), cwd=str(cwd)))
    reason = "No such file or directory (errno 2)"
    assert out.spawn_error == f"cannot change directory to {cwd}: {reason}"
    assert out.exit_code is None


def test_bad_arguments_raise_value_error(tmp_path: Path) -> None:
    entry = sh(tmp_path, "echo hi")
    with pytest.raises(ValueError, match="absolute"):
        make_spec(tmp_path, "relative/entry.sh")
    with pytest.raises(ValueError, match="must be >= 0"):
        make_spec(tmp_path, entry, timeout=-1)
    with pytest.raises(ValueError, match="environment variable name"):
        run_process(make_spec(tmp_path, entry, env={"A=B": "1"}))
    with pytest.raises(ValueError, match="null byte"):
        run_process(make_spec(tmp_path, entry, "a\0b"))


def test_bad_payload_type_raises_before_spawning(tmp_path: Path) -> None:
    fds = open_fds()
    marker = tmp_path / "ran"
    entry = sh(tmp_path, f"touch {marker}")
    with pytest.raises(TypeError):
        run_process(make_spec(tmp_path, entry, stdin="not bytes"))
    assert open_fds() == fds and not marker.exists()


def test_absurd_timeout_is_fine(tmp_path: Path, call: Runner) -> None:
    out = call(make_spec(tmp_path, sh(tmp_path, "echo ok"), timeout=1e12))
    assert (out.stdout, out.exit_code, out.timed_out) == (b"ok\n", 0, False)


def test_zero_timeout_terminates_at_once(tmp_path: Path) -> None:
    out = run_process(make_spec(tmp_path, sh(tmp_path, "sleep 10"), timeout=0))
    assert (out.timed_out, out.signal) == (True, signal.SIGTERM)
    assert out.duration < 0.5


def test_backend_switch_is_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_spawn, "_BACKEND", "fork")
    with pytest.raises(ValueError, match="_BACKEND"):
        _spawn.backend()
    monkeypatch.setattr(_spawn, "_BACKEND", "auto")
    assert _spawn.backend() == "posix_spawn"  # this machine: glibc >= 2.29


def _status_masks(tmp_path: Path) -> dict[str, int]:
    out = run_process(make_spec(tmp_path, "/bin/cat", "/proc/self/status"))
    fields = dict(line.split(":\t", 1) for line in out.stdout.decode().splitlines())
    return {name: int(fields[name], 16) for name in ("SigIgn", "SigBlk")}


def test_sigpipe_and_sigxfsz_are_restored(tmp_path: Path, backend: str) -> None:
    assert signal.getsignal(signal.SIGPIPE) == signal.SIG_IGN  # Python's default
    masks = _status_masks(tmp_path)
    for sig in (signal.SIGPIPE, signal.SIGXFSZ):
        assert not masks["SigIgn"] & (1 << (sig - 1))
    if backend == "native":  # every disposition reset, glibc's internal 32 and 33 too
        assert masks["SigIgn"] == 0
    elif backend != "popen":  # every disposition reset, not only Python's...
        glibc_internal = (1 << 31) | (1 << 32)  # ...but glibc's posix_spawn keeps its 32 and 33 ignored
        assert masks["SigIgn"] & ~glibc_internal == 0


def test_yes_pipe_head_ends_quietly(tmp_path: Path) -> None:
    # With SIGPIPE inherited as ignored, `yes` would report EPIPE on stderr.
    out = run_process(make_spec(tmp_path, sh(tmp_path, "yes | head -1")))
    assert (out.stdout, out.exit_code, out.stderr_tail) == (b"y\n", 0, ())


def test_signal_mask_is_emptied(tmp_path: Path, backend: str) -> None:
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})
    try:
        blocked = _status_masks(tmp_path)["SigBlk"]
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)
    if backend != "popen":
        assert blocked == 0
    else:  # documented: Popen passes the calling thread's mask on
        assert blocked & (1 << (signal.SIGUSR1 - 1))


@pytest.mark.parametrize("closefrom", [True, False])
def test_only_stdio_is_inherited(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, closefrom: bool) -> None:
    monkeypatch.setattr(_spawn, "_USE_CLOSEFROM", closefrom)
    read_end, write_end = os.pipe()
    os.set_inheritable(write_end, True)
    try:
        out = run_process(make_spec(tmp_path, "/bin/ls", "/proc/self/fd"))
    finally:
        os.close(read_end)
        os.close(write_end)
    names = set(out.stdout.decode().split())
    assert names <= {"0", "1", "2", "3"}  # 3: the directory ls is reading
    assert write_end > 3


# -- 2, 3. waiting and stdin --------------------------------------------------------


def test_duration_covers_spawn_to_reap(tmp_path: Path, call: Runner) -> None:
    out = call(make_spec(tmp_path, sh(tmp_path, "sleep 0.2")))
    assert out.exit_code == 0
    assert 0.2 <= out.duration < 1.0


def test_the_duration_is_a_whole_number_of_microseconds(tmp_path: Path, call: Runner) -> None:
    out = call(make_spec(tmp_path, sh(tmp_path, "sleep 0.01")))
    assert out.exit_code == 0 and 0.01 <= out.duration < 1.0
    assert round(out.duration * 1e6) / 1e6 == out.duration


def test_large_stdin_is_streamed(tmp_path: Path, call: Runner) -> None:
    payload = os.urandom(MIB)
    out = call(make_spec(tmp_path, "/bin/cat", stdin=payload))
    assert out.stdout == payload and out.exit_code == 0


@pytest.mark.parametrize(
    "body",
    [
        "exit 0",  # exits without reading
        "sleep 0.1; exit 0",  # never reads, exits later
        "exec 0<&-; sleep 0.1; echo done",  # closes stdin early, keeps running
        "head -c 10 >/dev/null; echo done",  # reads a little, then stops
    ],
)
def test_child_ignoring_large_stdin_does_not_hang(tmp_path: Path, call: Runner, body: str) -> None:
    out = call(make_spec(tmp_path, sh(tmp_path, body), stdin=b"x" * MIB))
    assert out.exit_code == 0 and not out.timed_out
    assert out.stdout in (b"", b"done\n")
    assert out.duration < 2


def test_empty_stdin_gives_eof(tmp_path: Path) -> None:
    out = run_process(make_spec(tmp_path, "/bin/cat", stdin=b""))
    assert (out.stdout, out.exit_code) == (b"", 0)


# -- 4. timeout ------------------------------------------------------------------------


def test_timeout_terminates_the_whole_group(tmp_path: Path, call: Runner) -> None:
    entry = sh(tmp_path, "sleep 100 & echo $! >&2; sleep 100")
    started = time.monotonic()
    out = call(make_spec(tmp_path, entry, timeout=0.3))
    assert time.monotonic() - started < 2
    assert (out.timed_out, out.signal, out.exit_code) == (True, signal.SIGTERM, None)
    assert 0.3 <= out.duration < 0.3 + 0.2 + 0.5
    assert dead(int(out.stderr_tail[0]))


def test_timeout_escalates_to_sigkill(tmp_path: Path, call: Runner) -> None:
    # Ignored signals are inherited: the background sleep ignores SIGTERM too.
    entry = sh(tmp_path, "trap '' TERM; sleep 100 & echo $! >&2; wait; wait")
    out = call(make_spec(tmp_path, entry, timeout=0.3, kill_grace=0.2))
    assert (out.timed_out, out.signal, out.exit_code) == (True, signal.SIGKILL, None)
    assert 0.5 <= out.duration < 1.5
    assert dead(int(out.stderr_tail[0]))


def test_child_closing_stdout_early_is_still_killed(tmp_path: Path) -> None:
    entry = sh(tmp_path, "echo partial; exec 1>&-; echo log >&2; sleep 100")
    out = run_process(make_spec(tmp_path, entry, timeout=0.3))
    assert (out.stdout, out.stderr_tail, out.timed_out) == (b"partial\n", ("log",), True)
    assert out.signal == signal.SIGTERM


# -- 5. leftovers -----------------------------------------------------------------------


def test_leftovers_are_killed_when_child_exits(tmp_path: Path, call: Runner) -> None:
    # The background sleep holds stdout and stderr open: without the group kill the
    # call would wait for it.
    entry = sh(tmp_path, "sleep 100 & echo $! >&2; echo done")
    started = time.monotonic()
    out = call(make_spec(tmp_path, entry))
    assert time.monotonic() - started < 0.5
    assert (out.exit_code, out.stdout, out.timed_out) == (0, b"done\n", False)
    assert dead(int(out.stderr_tail[0]))


def test_setsid_escapee_only_delays_by_the_eof_bound(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_process, "_EOF_BOUND", 0.3)  # 1 s in production
    entry = py(
        tmp_path,
        """
import os, sys, time
pid = os.fork()
if pid == 0:
    os.setsid()
    time.sleep(30)
    os._exit(0)
print(pid, file=sys.stderr, flush=True)
print('{"ok": true}', flush=True)
""",
    )
    started = time.monotonic()
    out = run_process(make_spec(tmp_path, entry))
    elapsed = time.monotonic() - started
    escapee = int(out.stderr_tail[0])
    try:
        # the wait for EOF (the 0.3 s bound, not the escapee's 30 s) comes after the reap, so
        # it is not in the duration (spawn to reap)
        assert elapsed - out.duration >= 0.25 and elapsed < 5
        assert (out.exit_code, out.stdout) == (0, b'{"ok": true}\n')
        assert "left its process group" in caplog.text
    finally:
        os.kill(escapee, signal.SIGKILL)


# -- 6. stdout cap ------------------------------------------------------------------


def test_endless_stdout_is_cut_at_the_cap(tmp_path: Path, call: Runner) -> None:
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    started = time.monotonic()
    spec = make_spec(tmp_path, "/usr/bin/head", "-c", "1073741824", "/dev/zero", stdout_cap=MIB, timeout=10)
    out = call(spec)
    assert time.monotonic() - started < 2
    assert (out.stdout_overflow, out.signal, out.timed_out) == (True, signal.SIGKILL, False)
    assert out.stdout == b"\0" * MIB
    grown_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    assert grown_kib < 64 * 1024


def test_stdout_beyond_the_pipes_capacity_is_read_while_the_child_runs(tmp_path: Path, call: Runner) -> None:
    # A child that fills the pipe must be read while it runs, or it could never finish
    # writing its 1 MiB and would run into the timeout.
    entry = sh(tmp_path, "head -c 1048576 /dev/zero; echo written >&2")
    out = call(make_spec(tmp_path, entry, timeout=5))
    assert (out.timed_out, out.exit_code, out.stderr_tail) == (False, 0, ("written",))
    assert out.stdout == b"\0" * MIB


@pytest.mark.parametrize(("size", "overflow"), [(1000, False), (1001, True)])
def test_stdout_cap_boundary(tmp_path: Path, size: int, overflow: bool) -> None:
    out = run_process(make_spec(tmp_path, "/usr/bin/head", "-c", str(size), "/dev/zero", stdout_cap=1000))
    assert out.stdout_overflow is overflow
    assert out.stdout == b"\0" * 1000


@pytest.mark.parametrize("size", [65535, 65536, 65537, 131072, 131073, 300001])
def test_output_across_the_read_buffer_edges_arrives_whole_and_in_order(
    tmp_path: Path, call: Runner, size: int
) -> None:
    # The runner reads 64 KiB at a time: sizes at and around each edge, in a pattern that
    # shows a lost, repeated or moved byte.
    pattern = tmp_path / "pattern"
    pattern.write_bytes(bytes(range(251)) * (size // 251 + 1))
    exact = call(make_spec(tmp_path, "/usr/bin/head", "-c", str(size), str(pattern), stdout_cap=size))
    assert (exact.stdout_overflow, exact.exit_code) == (False, 0)
    assert exact.stdout == pattern.read_bytes()[:size]
    short = call(make_spec(tmp_path, "/usr/bin/head", "-c", str(size), str(pattern), stdout_cap=size - 1))
    assert short.stdout_overflow is True
    assert short.stdout == pattern.read_bytes()[: size - 1]


# -- 7. stderr ------------------------------------------------------------------------


def test_stderr_lines_are_reported_as_they_come(tmp_path: Path, call: Runner) -> None:
    entry = sh(tmp_path, "echo first >&2; sleep 0.6; echo second >&2; echo out")
    seen: list[tuple[str, float]] = []
    started = time.monotonic()
    out = call(make_spec(tmp_path, entry), lambda line: seen.append((line, time.monotonic() - started)))
    assert [line for line, _ in seen] == ["first", "second"]
    assert seen[0][1] < 0.3  # well before the child exits
    assert seen[1][1] >= 0.6
    assert out.stderr_tail == ("first", "second") and out.stdout == b"out\n"


def test_long_partial_and_invalid_stderr_lines(tmp_path: Path, call: Runner) -> None:
    accented = "a" + "é" * 5000  # 10001 bytes: a cut at 8192 would split an "é"
    script = (
        "import sys\n"
        "w = sys.stderr.buffer.write\n"
        "w(b'one\\n\\n' + b'x' * 20000 + b'\\n')\n"
        f"w({accented!r}.encode() + b'\\n')\n"
        "w(b'bad \\xff\\xfe\\n')\n"
        "w(b'no newline at the end')\n"
    )
    lines: list[str] = []
    out = call(make_spec(tmp_path, py(tmp_path, script), stderr_tail_bytes=100_000), lines.append)
    assert lines[:5] == ["one", "", "x" * 8192, "x" * 8192, "x" * 3616]
    assert "".join(lines[5:7]) == accented and "\ufffd" not in accented
    assert [len(line.encode()) for line in lines[5:7]] == [8191, 1810]
    assert lines[7:] == ["bad \ufffd\ufffd", "no newline at the end"]
    assert out.stderr_tail == tuple(lines)


def test_long_line_arriving_in_pieces_is_chunked(tmp_path: Path) -> None:
    entry = py(
        tmp_path,
        """
import sys, time
for _ in range(5):
    sys.stderr.write("y" * 3000); sys.stderr.flush(); time.sleep(0.01)
sys.stderr.write("\\nz" * 3 + "\\n")
""",
    )
    lines: list[str] = []
    run_process(make_spec(tmp_path, entry, max_line_bytes=4096), lines.append)
    assert lines == ["y" * 4096] * 3 + ["y" * (15000 - 3 * 4096), "z", "z", "z"]


def test_stderr_tail_is_bounded(tmp_path: Path) -> None:
    entry = sh(tmp_path, 'i=0; while [ $i -lt 200 ]; do echo "line-$i" >&2; i=$((i+1)); done')
    out = run_process(make_spec(tmp_path, entry, stderr_tail_lines=50))
    assert out.stderr_tail == tuple(f"line-{i}" for i in range(150, 200))
    line = "z" * 99
    entry = sh(tmp_path, f"for i in $(seq 100); do echo {line} >&2; done", name="b.sh")
    out = run_process(make_spec(tmp_path, entry, stderr_tail_bytes=1000))
    assert out.stderr_tail == (line,) * 10


def test_failing_stderr_callback_is_logged_once(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    calls: list[str] = []

    def callback(line: str) -> None:
        calls.append(line)
        raise RuntimeError("sink broken")

    entry = sh(tmp_path, "echo a >&2; echo b >&2; echo c >&2; echo '{}'")
    with caplog.at_level(logging.ERROR, logger=_process.__name__):
        out = run_process(make_spec(tmp_path, entry), callback)
    assert calls == ["a", "b", "c"]
    assert (out.exit_code, out.stdout, out.stderr_tail) == (0, b"{}\n", ("a", "b", "c"))
    records = [r for r in caplog.records if r.name == _process.__name__]
    assert len(records) == 1 and "on_stderr" in records[0].getMessage()


# -- 8. cancellation ------------------------------------------------------------------


def test_keyboard_interrupt_kills_the_group(tmp_path: Path) -> None:
    pidfile = tmp_path / "pids"
    entry = sh(tmp_path, f'sleep 100 & echo "$$ $!" > {pidfile}; wait')

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    fds = open_fds()
    old = signal.signal(signal.SIGALRM, interrupt)
    signal.setitimer(signal.ITIMER_REAL, 0.3)
    try:
        with pytest.raises(KeyboardInterrupt):
            run_process(make_spec(tmp_path, entry, timeout=30))
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    child, grandchild = read_pids(pidfile)
    assert not Path(f"/proc/{child}").exists()  # reaped, no zombie
    assert dead(grandchild)
    assert open_fds() == fds


def test_exception_from_callback_cleans_up(tmp_path: Path) -> None:
    entry = sh(tmp_path, 'sleep 100 & echo "$$ $!" >&2; wait')
    seen: list[str] = []

    def callback(line: str) -> None:
        seen.append(line)
        raise KeyboardInterrupt  # a BaseException is not swallowed

    fds = open_fds()
    with pytest.raises(KeyboardInterrupt):
        run_process(make_spec(tmp_path, entry, timeout=30), callback)
    child, grandchild = (int(word) for word in seen[0].split())
    assert not Path(f"/proc/{child}").exists()
    assert dead(grandchild)
    assert open_fds() == fds


def test_async_wait_for_timeout_kills_the_group(tmp_path: Path) -> None:
    pidfile = tmp_path / "pids"
    entry = sh(tmp_path, f'sleep 100 & echo "$$ $!" > {pidfile}; wait')
    fds = open_fds()

    async def main() -> None:
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(arun_process(make_spec(tmp_path, entry, timeout=30)), 0.3)

    started = time.monotonic()
    asyncio.run(main())
    assert time.monotonic() - started < 1.5
    child, grandchild = read_pids(pidfile)
    assert not Path(f"/proc/{child}").exists()
    assert dead(grandchild)
    assert open_fds() == fds


async def pids_written(pidfile: Path, timeout: float = 10.0) -> None:
    """Wait until the entry has written its pid line (after it set its trap)."""
    deadline = time.monotonic() + timeout
    while not (pidfile.exists() and pidfile.read_text().endswith("\n")) and time.monotonic() < deadline:
        await asyncio.sleep(0.01)


def test_arun_process_starts_nothing_before_it_is_awaited(tmp_path: Path) -> None:
    # A coroutine function: the spawn waits for the first await, so
    # a coroutine made outside a loop (asyncio.run(arun_process(...))) or dropped runs nothing.
    marker = tmp_path / "ran"
    entry = sh(tmp_path, f"echo x > {marker}")
    dropped = arun_process(make_spec(tmp_path, entry))
    time.sleep(0.3)
    dropped.close()
    assert not marker.exists()
    assert asyncio.run(arun_process(make_spec(tmp_path, entry))).exit_code == 0
    assert marker.read_text() == "x\n"


def test_async_task_cancel_sends_sigterm_first(tmp_path: Path) -> None:
    pidfile, marker = tmp_path / "pids", tmp_path / "terminated"
    entry = sh(
        tmp_path,
        f"trap 'echo term > {marker}; exit 0' TERM\nsleep 100 & echo \"$$ $!\" > {pidfile}; wait",
    )
    fds = open_fds()

    async def main() -> None:
        task = asyncio.create_task(arun_process(make_spec(tmp_path, entry, timeout=30)))
        await pids_written(pidfile)  # the trap is set
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    child, grandchild = read_pids(pidfile)
    assert marker.read_text() == "term\n"  # the grace was given
    assert not Path(f"/proc/{child}").exists()
    assert dead(grandchild)
    assert open_fds() == fds


def test_async_cancel_of_a_term_ignoring_child_uses_sigkill(tmp_path: Path) -> None:
    pidfile = tmp_path / "pids"
    entry = sh(tmp_path, f"trap '' TERM; sleep 100 & echo \"$$ $!\" > {pidfile}; wait; wait")

    async def main() -> float:
        task = asyncio.create_task(arun_process(make_spec(tmp_path, entry, timeout=30)))
        await pids_written(pidfile)  # the trap is set
        started = time.monotonic()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return time.monotonic() - started

    assert 0.2 <= asyncio.run(main()) < 1.0  # kill_grace, then SIGKILL
    child, grandchild = read_pids(pidfile)
    assert not Path(f"/proc/{child}").exists()
    assert dead(grandchild)


# -- 9. no leaks ------------------------------------------------------------------------


def test_no_fd_leak_over_many_calls(tmp_path: Path) -> None:
    ok = sh(tmp_path, 'cat; echo "$$" >&2', name="ok.sh")
    failing = sh(tmp_path, "echo oops >&2; exit 3", name="fail.sh")
    chatty = sh(tmp_path, "head -c 5000 /dev/zero", name="chatty.sh")
    not_executable = tmp_path / "plain.sh"
    not_executable.write_text("echo hi\n")
    specs = [
        make_spec(tmp_path, ok, stdin=b"hello"),
        make_spec(tmp_path, failing),
        make_spec(tmp_path, chatty, stdout_cap=100),
        make_spec(tmp_path, str(tmp_path / "missing")),
        make_spec(tmp_path, str(not_executable)),
    ]
    fds = open_fds()
    pids = []
    for i in range(200):
        out = run_process(specs[i % len(specs)])
        if i % len(specs) == 0:
            assert out.stdout == b"hello"
            pids.append(int(out.stderr_tail[-1]))
    out = run_process(
        make_spec(tmp_path, sh(tmp_path, "sleep 10", name="slow.sh"), timeout=0.05, kill_grace=0.05)
    )
    assert out.timed_out
    assert open_fds() == fds
    assert not any(Path(f"/proc/{pid}").exists() for pid in pids)  # all reaped


def test_no_zombie_left(tmp_path: Path, call: Runner) -> None:
    out = call(make_spec(tmp_path, sh(tmp_path, "echo $$")))
    assert not Path(f"/proc/{int(out.stdout)}").exists()


# -- 10. concurrency ----------------------------------------------------------------------


def test_many_threads_at_once(tmp_path: Path) -> None:
    entry = sh(tmp_path, "cat; echo err-$1 >&2")
    fds = open_fds()

    def worker(thread: int) -> list[bool]:
        results = []
        for i in range(50):
            tag = f"{thread}-{i}"
            out = run_process(make_spec(tmp_path, entry, tag, stdin=tag.encode()))
            results.append(out.stdout == tag.encode() and out.stderr_tail == (f"err-{tag}",))
        return results

    with ThreadPoolExecutor(8) as pool:
        results = [ok for chunk in pool.map(worker, range(8)) for ok in chunk]
    assert results == [True] * 400
    assert open_fds() == fds


def test_many_tasks_at_once(tmp_path: Path) -> None:
    entry = sh(tmp_path, "cat; echo err-$1 >&2; sleep 0.05")
    fds = open_fds()

    async def main() -> list[ProcessOutcome]:
        return await asyncio.gather(
            *(arun_process(make_spec(tmp_path, entry, str(i), stdin=f"task-{i}".encode())) for i in range(50))
        )

    started = time.monotonic()
    outcomes = asyncio.run(main())
    assert time.monotonic() - started < 3  # they overlap: 50 x 50 ms in sequence is 2.5 s
    assert [out.stdout for out in outcomes] == [f"task-{i}".encode() for i in range(50)]
    assert [out.stderr_tail for out in outcomes] == [(f"err-{i}",) for i in range(50)]
    assert open_fds() == fds


def test_async_call_does_not_block_the_loop(tmp_path: Path) -> None:
    entry = sh(tmp_path, "sleep 0.3; echo done")

    async def main() -> tuple[ProcessOutcome, int]:
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            while True:
                await asyncio.sleep(0.01)
                ticks += 1

        tick_task = asyncio.create_task(ticker())
        out = await arun_process(make_spec(tmp_path, entry))
        tick_task.cancel()
        return out, ticks

    out, ticks = asyncio.run(main())
    assert out.stdout == b"done\n" and ticks >= 10


# -- fallbacks ------------------------------------------------------------------------------


@pytest.fixture
def no_pidfd(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(_process, "_USE_PIDFD", False)
    yield


@pytest.mark.usefixtures("no_pidfd")
def test_waitid_fallback_without_pidfd(tmp_path: Path, call: Runner) -> None:
    out = call(make_spec(tmp_path, "/bin/cat", stdin=b"abc"))
    assert (out.stdout, out.exit_code) == (b"abc", 0)
    entry = sh(tmp_path, "sleep 100 & echo $! >&2; exit 4", name="left.sh")
    out = call(make_spec(tmp_path, entry))
    assert out.exit_code == 4 and out.duration < 0.5
    assert dead(int(out.stderr_tail[0]))
    out = call(make_spec(tmp_path, sh(tmp_path, "sleep 100"), timeout=0.2))
    assert (out.timed_out, out.signal) == (True, signal.SIGTERM)


def test_the_loop_driver_moves_big_stdin_stderr_and_timeouts(tmp_path: Path) -> None:
    payload = b"x" * (3 * MIB)  # more than a pipe holds: stdin waits for room (POLLOUT)
    out = asyncio.run(arun_process(make_spec(tmp_path, "/bin/cat", stdin=payload, stdout_cap=4 * MIB)))
    assert (out.exit_code, len(out.stdout)) == (0, len(payload))
    lines: list[str] = []
    entry = sh(tmp_path, "echo one >&2; echo two >&2; echo '{}'", name="err.sh")
    out = asyncio.run(arun_process(make_spec(tmp_path, entry), lines.append))
    assert (lines, out.stderr_tail, out.stdout) == (["one", "two"], ("one", "two"), b"{}\n")
    slow = sh(tmp_path, "sleep 100", name="slow.sh")
    out = asyncio.run(arun_process(make_spec(tmp_path, slow, timeout=0.2)))
    assert (out.timed_out, out.signal) == (True, signal.SIGTERM)
    before = len(os.listdir("/proc/self/fd"))
    asyncio.run(arun_process(make_spec(tmp_path, "/bin/true")))
    assert len(os.listdir("/proc/self/fd")) == before  # every descriptor of the call is closed


@pytest.mark.parametrize("size", [1, 65535, 65536, 65537, 300_000])
def test_output_written_just_before_exit_is_read_to_the_last_byte(
    tmp_path: Path, call: Runner, size: int
) -> None:
    # A pipe that hung up is closed after a short read, without waiting for its EOF:
    # around a read's size the data must still arrive whole, on stdout and stderr.
    entry = py(tmp_path, f"import os\nos.write(2, b'e' * {size} + b'\\n')\nos.write(1, b'o' * {size})")
    out = call(make_spec(tmp_path, entry, stderr_tail_bytes=10 * MIB, max_line_bytes=10 * MIB))
    assert out.exit_code == 0 and out.stdout == b"o" * size
    assert out.stderr_tail == ("e" * size,)


def test_concurrent_calls_on_one_loop_get_their_own_output_and_leave_no_descriptor(tmp_path: Path) -> None:
    slow = sh(tmp_path, "sleep 100", name="slow.sh")
    talk = sh(tmp_path, "sleep 1.5; cat; echo line >&2", name="talk.sh")

    async def main() -> tuple[list[ProcessOutcome], int]:
        before = len(os.listdir("/proc/self/fd"))
        calls = [arun_process(make_spec(tmp_path, talk, stdin=str(i).encode())) for i in range(6)]
        calls.append(arun_process(make_spec(tmp_path, slow, timeout=1.5)))
        calls.append(arun_process(make_spec(tmp_path, "/bin/cat", stdin=b"y" * MIB, stdout_cap=1000)))
        outs = await asyncio.gather(*calls)
        return outs, len(os.listdir("/proc/self/fd")) - before

    outs, extra_fds = asyncio.run(main())
    assert extra_fds == 0
    assert [(o.stdout, o.stderr_tail) for o in outs[:6]] == [(str(i).encode(), ("line",)) for i in range(6)]
    assert (outs[6].timed_out, outs[6].signal) == (True, signal.SIGTERM)
    assert outs[7].stdout_overflow and len(outs[7].stdout) == 1000
