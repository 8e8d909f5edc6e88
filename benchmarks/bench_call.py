#!/usr/bin/env python3
"""One call of a trivial ``#!/bin/sh`` skill, next to what a user would compare it with.

Every method runs in the same process, in interleaved rounds (each round runs a block
of calls of every method of its group, in an order that rotates from round to round),
so machine noise hits them alike; each figure is the median over all calls (latency)
or over the rounds (calls/s). Rows:

* ``host.call`` with ``sandbox="off"`` against ``subprocess.run`` of the same entry
  (same stdin, stdout, stderr, environment, and a timeout) and against a bare
  ``os.posix_spawn`` round trip (``call_spawn`` of ``baselines/exec_bench.py``);
* confined ``host.call`` (``sandbox="auto"``) against the same entry under bubblewrap,
  and the confined call without the cached Landlock rules (``confine/grants.py``:
  every call opens them anew), to show what the cache pays;
* 8 concurrent ``acall`` (asyncio, ``sandbox="off"``) against eight threads each running
  ``subprocess.run``: batches of 40 calls, a quarter as many rounds, all on one event loop
  (as the threads all run in one pool).

    python benchmarks/bench_call.py --rounds 60 --block 3
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE / "baselines")]

from exec_bench import call_spawn  # type: ignore[import-not-found]  # noqa: E402

from ongrid_plugins import SkillHost  # noqa: E402
from ongrid_plugins.executors.confine import grants  # noqa: E402
from ongrid_plugins.settings import Settings  # noqa: E402

ENTRY = """#!/bin/sh
while IFS= read -r _l || [ -n "$_l" ]; do :; done
printf '{"ok":true,"items":[1,2,3]}\\n'
"""
BWRAP = ["bwrap", "--unshare-all", "--die-with-parent", "--new-session", "--cap-drop", "ALL",
         "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]  # fmt: skip
CONCURRENCY = 8


def make_host(root: Path, sandbox: str) -> SkillHost:
    settings = Settings(
        skill_dirs=[str(root / "skills")], include_defaults=False, state_dir=str(root / f"state-{sandbox}"),
        config_dir=str(root / "config"), cache_dir=str(root / "cache"), sandbox=sandbox,
    )  # fmt: skip
    host = SkillHost(settings)
    host.load()
    return host


def host_call(host: SkillHost) -> Callable[[], object]:
    def call() -> object:
        result = host.call("triv", {})
        assert result.ok, result.error
        return result.value

    return call


def run_with(argv: list[str], env: dict[str, str], payload: bytes) -> Callable[[], object]:
    def call() -> object:
        done = subprocess.run(argv, input=payload, capture_output=True, env=env, timeout=30, check=True)
        return done.stdout

    return call


def without_cached_rules(call: Callable[[], object]) -> Callable[[], object]:
    """``call`` with the Landlock rule base and the tool's grants opened anew."""

    def uncached() -> object:
        base, static = grants.Base.fresh, grants.Static.fresh
        grants.Base.fresh = lambda self: False  # type: ignore[method-assign]
        grants.Static.fresh = lambda self: False  # type: ignore[method-assign]
        try:
            return call()
        finally:
            grants.Base.fresh, grants.Static.fresh = base, static  # type: ignore[method-assign]

    return uncached


def acalls(host: SkillHost, n: int) -> Callable[[], tuple[float, float]]:
    async def batch() -> None:
        gate = asyncio.Semaphore(CONCURRENCY)

        async def one() -> None:
            async with gate:
                assert (await host.acall("triv", {})).ok

        await asyncio.gather(*(one() for _ in range(n)))

    # One loop for every batch, as an agent keeps its loop (and the anchor its thread
    # pool): asyncio.run per batch timed a new loop's set-up and shut-down with each.
    loop = asyncio.new_event_loop()

    def rate() -> tuple[float, float]:
        started, cpu = time.perf_counter(), time.process_time()
        loop.run_until_complete(batch())
        return n / (time.perf_counter() - started), (time.process_time() - cpu) / n

    return rate


def threads(call: Callable[[], object], n: int) -> Callable[[], tuple[float, float]]:
    pool = concurrent.futures.ThreadPoolExecutor(CONCURRENCY)

    def rate() -> tuple[float, float]:
        started, cpu = time.perf_counter(), time.process_time()
        list(pool.map(lambda _: call(), range(n)))
        return n / (time.perf_counter() - started), (time.process_time() - cpu) / n

    return rate


def main() -> None:
    raw = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=raw)
    parser.add_argument("--rounds", type=int, default=60)
    parser.add_argument("--block", type=int, default=3, help="calls of each method per round")
    parser.add_argument("--no-confined", action="store_true", help="skip the confined rows (faster)")
    args = parser.parse_args()

    # Not under /tmp: bubblewrap puts a tmpfs there, which would hide the entry.
    root = Path(tempfile.mkdtemp(prefix="bench-call-", dir="/var/tmp"))
    folder = root / "skills" / "triv"
    folder.mkdir(parents=True)
    (folder / "skill.json").write_text('{"name": "triv", "description": "trivial", "entry": "run.sh"}')
    entry = folder / "run.sh"
    entry.write_text(ENTRY)
    entry.chmod(0o755)
    off, confined = make_host(root, "off"), make_host(root, "auto")
    tool = off.get("triv")
    env = {name: os.environ[name] for name in tool.env_allow if name in os.environ}
    payload = b"{}"

    unconfined: dict[str, Callable[[], object]] = {
        "host.call, sandbox off": host_call(off),
        "subprocess.run": run_with([str(entry)], env, payload),
        "posix_spawn (call_spawn)": lambda: call_spawn(str(entry), payload),
    }
    confining: dict[str, Callable[[], object]] = {
        "host.call, confined": host_call(confined),
        "host.call, confined, no cached rules": without_cached_rules(host_call(confined)),
    }
    if shutil.which("bwrap"):
        confining["bwrap"] = run_with([*BWRAP, str(entry)], env, payload)
    n = 40  # calls per concurrent batch
    rates = {"8 concurrent acall, sandbox off": acalls(off, n), "8 threads x subprocess.run": threads(
        unconfined["subprocess.run"], n)}  # fmt: skip

    # The confining rows run last: the kernel tears a network namespace down (bwrap's)
    # in the background, which slowed every spawn made meanwhile by 2-3x.
    times: dict[str, list[float]] = {}
    cpus: dict[str, list[float]] = {}
    interleaved(unconfined, args.rounds, args.block, times, cpus)
    per_round: dict[str, list[float]] = {name: [] for name in rates}
    for _ in range(max(3, args.rounds // 4)):
        for name, rate in rates.items():
            calls_per_s, cpu_per_call = rate()
            per_round[name].append(calls_per_s)
            cpus.setdefault(name, []).append(cpu_per_call)
    if not args.no_confined:
        interleaved(confining, args.rounds, args.block, times, cpus)
    shutil.rmtree(root, ignore_errors=True)

    us = {name: statistics.median(values) * 1e6 for name, values in times.items()}
    cpu_us = {name: statistics.median(values) * 1e6 for name, values in cpus.items()}
    per_s = {name: statistics.median(values) for name, values in per_round.items()}
    rows = [
        ("host.call, sandbox off", "subprocess.run", "<= 1.1x"),
        ("host.call, sandbox off", "posix_spawn (call_spawn)", "<= 1.6x (goal 1.2x)"),
        ("host.call, confined", "bwrap", "<= 0.5x (goal 0.35x)"),
        ("host.call, confined, no cached rules", "host.call, confined", "keep if > 1.25x or +0.5 ms"),
    ]
    print(f"{args.rounds} rounds x {args.block} calls per method, medians, {os.cpu_count()} CPUs,", end=" ")
    print(f"load average {os.getloadavg()[0]:.1f}")
    line("row", "us/call", "anchor", "us/call", "ratio", "target")
    line("-" * 40, "-" * 8, "-" * 26, "-" * 8, "-" * 6, "-" * 26)
    for row, anchor, target in rows:
        if row in us and anchor in us:
            line(row, f"{us[row]:.0f}", anchor, f"{us[anchor]:.0f}", f"{us[row] / us[anchor]:.2f}x", target)
    row, anchor = "8 concurrent acall, sandbox off", "8 threads x subprocess.run"
    ratio = f"{per_s[row] / per_s[anchor]:.2f}x"
    line(row, f"{per_s[row]:.0f}/s", anchor, f"{per_s[anchor]:.0f}/s", ratio, ">= 0.8x (goal 1.0x)")
    print()
    print("CPU time of this process per call (children excluded), medians:")
    for name, value in cpu_us.items():
        print(f"| {name:<40} | {value:>8.0f} us |")


def interleaved(
    methods: dict[str, Callable[[], object]],
    rounds: int,
    block: int,
    times: dict[str, list[float]],
    cpus: dict[str, list[float]],
) -> None:
    """``block`` timed calls of each method per round, in an order that rotates each round.

    ``cpus`` gets each call's CPU time in this process (children excluded): on a busy
    machine it varies less than the wall time, and it is the host's own cost."""
    for call in methods.values():  # warm up: imports, caches, parked threads
        for _ in range(3):
            call()
    order = list(methods)
    for name in order:
        times[name], cpus[name] = [], []
    for turn in range(rounds):
        for name in order[turn % len(order) :] + order[: turn % len(order)]:
            for _ in range(block):
                started, cpu = time.perf_counter(), time.process_time()
                methods[name]()
                times[name].append(time.perf_counter() - started)
                cpus[name].append(time.process_time() - cpu)


def line(row: str, mine: str, anchor: str, theirs: str, ratio: str, target: str) -> None:
    print(f"| {row:<40} | {mine:>8} | {anchor:<26} | {theirs:>8} | {ratio:>6} | {target}")


if __name__ == "__main__":
    main()
