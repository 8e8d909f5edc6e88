"""Per-call latency of the process runner against bare spawning (a script, not a test).

Compares, interleaved in one run (every round calls each method once, in a rotating
order, so drift and noise hit all of them alike), the median wall time of:

* ``os.posix_spawn`` + pipes + pidfd + ``select.poll``: the baseline, the least work
  Python can do to run a child with the wire protocol;
* ``subprocess.run`` without and with a timeout;
* ``run_process`` with the ctypes ``posix_spawn`` backend and the ``Popen`` backend;
* ``arun_process`` (``posix_spawn`` backend) awaited on a running event loop;

for a trivial ``#!/bin/sh`` entry and a tiny gcc-compiled C entry.

Usage: ``python benchmarks/bench_process.py [--calls 500]``
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import select
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ongrid_plugins.executors import _spawn
from ongrid_plugins.executors._process import (
    ProcessSpec,
    arun_process,
    run_process,
)

ENV = {"PATH": "/usr/bin:/bin"}
PAYLOAD = b'{"name": "bench"}'
C_SOURCE = r"""
#include <stdio.h>
#include <unistd.h>
int main(void) {
    char buf[4096];
    while (read(0, buf, sizeof buf) > 0) {}
    puts("{\"ok\": true}");
    return 0;
}
"""

Method = Callable[[str, str], Awaitable[bytes]]


def bare_posix_spawn(entry: str, cwd: str) -> bytes:
    """The baseline: no cwd support, no caps, no timeout, no group kill."""
    stdin_r, stdin_w = os.pipe2(os.O_CLOEXEC)
    stdout_r, stdout_w = os.pipe2(os.O_CLOEXEC)
    stderr_r, stderr_w = os.pipe2(os.O_CLOEXEC)
    actions = [
        (os.POSIX_SPAWN_DUP2, stdin_r, 0),
        (os.POSIX_SPAWN_DUP2, stdout_w, 1),
        (os.POSIX_SPAWN_DUP2, stderr_w, 2),
    ]
    pid = os.posix_spawn(entry, [entry], ENV, file_actions=actions, setsid=True)
    for fd in (stdin_r, stdout_w, stderr_w):
        os.close(fd)
    with contextlib.suppress(BrokenPipeError):  # the child exited without reading
        os.write(stdin_w, PAYLOAD)  # fits the pipe buffer: never blocks
    os.close(stdin_w)
    pidfd = os.pidfd_open(pid)
    poller = select.poll()
    for fd in (stdout_r, stderr_r, pidfd):
        poller.register(fd, select.POLLIN)
    chunks: list[bytes] = []
    open_fds = {stdout_r, stderr_r, pidfd}
    while open_fds:
        for fd, _ in poller.poll():
            data = b"" if fd == pidfd else os.read(fd, 65536)
            if fd == stdout_r and data:
                chunks.append(data)
            elif not data:
                poller.unregister(fd)
                open_fds.discard(fd)
                if fd == pidfd:
                    os.waitpid(pid, 0)
                os.close(fd)
    return b"".join(chunks)


def subprocess_run(entry: str, cwd: str) -> bytes:
    done = subprocess.run([entry], input=PAYLOAD, capture_output=True, cwd=cwd, env=ENV, check=False)
    return done.stdout


def subprocess_run_timeout(entry: str, cwd: str) -> bytes:
    done = subprocess.run(
        [entry], input=PAYLOAD, capture_output=True, cwd=cwd, env=ENV, check=False, timeout=30
    )
    return done.stdout


def _spec(entry: str, cwd: str) -> ProcessSpec:
    return ProcessSpec(argv=(entry,), cwd=cwd, env=ENV, stdin=PAYLOAD, timeout=30.0)


def with_backend(name: str) -> Callable[[str, str], bytes]:
    def call(entry: str, cwd: str) -> bytes:
        _spawn._BACKEND = name
        try:
            return run_process(_spec(entry, cwd)).stdout
        finally:
            _spawn._BACKEND = "auto"

    return call


async def arun(entry: str, cwd: str) -> bytes:
    return (await arun_process(_spec(entry, cwd))).stdout


def make_entries(workdir: Path) -> dict[str, str]:
    entries = {}
    sh_entry = workdir / "entry.sh"
    sh_entry.write_text("#!/bin/sh\necho '{\"ok\": true}'\n")
    sh_entry.chmod(0o755)
    entries["sh"] = str(sh_entry)
    gcc = shutil.which("gcc") or shutil.which("cc")
    if gcc:
        source = workdir / "entry.c"
        source.write_text(C_SOURCE)
        subprocess.run([gcc, "-O2", "-o", str(workdir / "entry"), str(source)], check=True)
        entries["C"] = str(workdir / "entry")
    return entries


async def measure(
    methods: dict[str, Callable[[str, str], object]], entry: str, cwd: str, calls: int
) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {name: [] for name in methods}
    names = list(methods)
    for name in names:  # warm-up, and check they all agree
        result = methods[name](entry, cwd)
        if asyncio.iscoroutine(result):
            result = await result
        assert isinstance(result, bytes) and result.startswith(b"{"), (name, result)
    for round_ in range(calls):
        shift = round_ % len(names)
        for name in names[shift:] + names[:shift]:
            started = time.perf_counter()
            result = methods[name](entry, cwd)
            if asyncio.iscoroutine(result):
                await result
            times[name].append(time.perf_counter() - started)
    return times


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=500)
    args = parser.parse_args()
    methods: dict[str, Callable[[str, str], object]] = {
        "os.posix_spawn + poll (baseline)": bare_posix_spawn,
        "subprocess.run": subprocess_run,
        "subprocess.run(timeout=30)": subprocess_run_timeout,
        "run_process [posix_spawn]": with_backend("posix_spawn"),
        "run_process [popen]": with_backend("popen"),
        "arun_process [posix_spawn]": arun,
    }
    with tempfile.TemporaryDirectory() as tmp:
        entries = make_entries(Path(tmp))
        results = {kind: await measure(methods, entry, tmp, args.calls) for kind, entry in entries.items()}
    print(f"median of {args.calls} calls per method, interleaved; ratio to the baseline")
    header = f"{'method':36}" + "".join(f"{kind + ' µs':>10}{'ratio':>8}" for kind in results)
    print(header)
    print("-" * len(header))
    for name in methods:
        row = f"{name:36}"
        for times in results.values():
            median = statistics.median(times[name])
            base = statistics.median(times["os.posix_spawn + poll (baseline)"])
            row += f"{median * 1e6:>10.0f}{median / base:>8.2f}"
        print(row)


if __name__ == "__main__":
    asyncio.run(main())
