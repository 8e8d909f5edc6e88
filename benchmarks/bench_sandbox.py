#!/usr/bin/env python3
"""What confinement costs per call: a trivial ``#!/bin/sh`` safe call, confined vs off.

Two hosts over the same skill, one with ``sandbox="auto"`` (Landlock, seccomp, no
capabilities, a per-call cgroup and a private /tmp mount, all applied in the spawn
path) and one with ``sandbox="off"``. Calls alternate between them in blocks so
machine noise hits both alike. Sequential: the median latency of one call.
Concurrency 8: eight threads calling at once; the median latency of a call and
the calls per second. The target (issue 9) is confined <= off + 5 ms, goal + 2 ms.
A second table splits the CPU time of a sequential call between the calling thread,
the host's other threads (where a confined call spawns, and what makes and releases
its namespace and cgroup) and the entry's own process.

    python benchmarks/bench_sandbox.py --n 400
"""

from __future__ import annotations

import argparse
import concurrent.futures
import os
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ongrid_plugins import SkillHost
from ongrid_plugins.executors.confine import support
from ongrid_plugins.settings import Settings


def make_skill(root: Path) -> None:
    folder = root / "skills" / "triv"
    folder.mkdir(parents=True)
    (folder / "skill.json").write_text('{"name": "triv", "description": "trivial", "entry": "run.sh"}')
    entry = folder / "run.sh"
    entry.write_text('#!/bin/sh\necho "{}"\n')
    entry.chmod(0o755)


def host(root: Path, mode: str) -> SkillHost:
    settings = Settings(
        skill_dirs=[str(root / "skills")],
        include_defaults=False,
        state_dir=str(root / "state"),
        config_dir=str(root / "config"),
        cache_dir=str(root / "cache"),
        sandbox=mode,
    )
    h = SkillHost(settings)
    h.load()
    return h


def one(h: SkillHost) -> float:
    t0 = time.perf_counter()
    result = h.call("triv", {})
    elapsed = time.perf_counter() - t0
    if not result.ok:
        raise SystemExit(f"call failed: {result.error}")
    return elapsed


def _usage() -> tuple[float, float]:
    """CPU seconds (user + system) of this process and of its reaped children."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, children.ru_utime + children.ru_stime


class Cpu:
    """CPU seconds of one mode's sequential calls: (calling thread, whole host, children)."""

    def __init__(self) -> None:
        self.calls = 0
        self.calling = self.host = self.children = 0.0

    def per_call_us(self) -> tuple[float, float, float]:
        n = max(1, self.calls)
        return self.calling / n * 1e6, (self.host - self.calling) / n * 1e6, self.children / n * 1e6


def sequential(
    hosts: dict[str, SkillHost], n: int, block: int
) -> tuple[dict[str, list[float]], dict[str, Cpu]]:
    out: dict[str, list[float]] = {mode: [] for mode in hosts}
    cpu = {mode: Cpu() for mode in hosts}
    for _ in range(max(1, n // block)):
        for mode, h in hosts.items():
            # Let the last block's releases finish: they are charged to their own mode.
            time.sleep(0.05)
            before, thread_before = _usage(), time.thread_time()
            out[mode] += [one(h) for _ in range(block)]
            time.sleep(0.05)
            after, thread_after = _usage(), time.thread_time()
            used = cpu[mode]
            used.calls += block
            used.calling += thread_after - thread_before
            used.host += after[0] - before[0]
            used.children += after[1] - before[1]
    return out, cpu


def concurrently(hosts: dict[str, SkillHost], n: int, rounds: int) -> dict[str, tuple[list[float], float]]:
    out: dict[str, tuple[list[float], float]] = {mode: ([], 0.0) for mode in hosts}
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        for _ in range(rounds):
            for mode, h in hosts.items():
                t0 = time.perf_counter()
                lat = list(pool.map(one, [h] * (n // rounds)))
                wall = time.perf_counter() - t0
                prev_lat, prev_wall = out[mode]
                out[mode] = (prev_lat + lat, prev_wall + wall)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--n", type=int, default=400, help="calls per mode, sequential")
    parser.add_argument("--conc-n", type=int, default=800, help="calls per mode at concurrency 8")
    parser.add_argument("--block", type=int, default=20)
    parser.add_argument(
        "--dir",
        help="where the skill root is made (default: the temp folder; a root under /tmp costs a "
        "confined call a bind mount into its private /tmp, one elsewhere does not)",
    )
    args = parser.parse_args()
    sup = support()
    print(
        f"machine: Landlock ABI {sup.landlock_abi}, seccomp {sup.seccomp}, cgroups {sup.cgroups}, "
        f"private /tmp {sup.mount_namespace}, root {sup.root}"
    )
    if sup.missing():
        print("missing: " + "; ".join(sup.missing()))
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        root = Path(tmp)
        make_skill(root)
        hosts = {"off": host(root, "off"), "confined": host(root, "auto")}
        for h in hosts.values():  # warm up: caches, imports, cgroup pool
            for _ in range(20):
                one(h)
        seq, cpu = sequential(hosts, args.n, args.block)
        conc = concurrently(hosts, args.conc_n, 4)
    off_seq = statistics.median(seq["off"]) * 1e3
    off_conc = statistics.median(conc["off"][0]) * 1e3
    print()
    head = ("mode", "seq median ms", "+ms vs off", "c8 median ms", "+ms vs off", "c8 calls/s")
    print(f"{head[0]:<10} {head[1]:>14} {head[2]:>11} {head[3]:>13} {head[4]:>11} {head[5]:>11}")
    for mode in hosts:
        s_med = statistics.median(seq[mode]) * 1e3
        lat, wall = conc[mode]
        c_med = statistics.median(lat) * 1e3
        rate = len(lat) / wall
        seq_delta, conc_delta = s_med - off_seq, c_med - off_conc
        cells = f"{s_med:>14.3f} {seq_delta:>+11.3f} {c_med:>13.3f} {conc_delta:>+11.3f} {rate:>11.0f}"
        print(f"{mode:<10} {cells}")
    print()
    head = ("mode", "calling thread", "other threads", "entry process", "total")
    print(f"{'CPU us per call, sequential':<28} {head[1]:>14} {head[2]:>14} {head[3]:>14} {head[4]:>8}")
    for mode in hosts:
        calling, others, child = cpu[mode].per_call_us()
        total = calling + others + child
        print(f"{mode:<28} {calling:>14.0f} {others:>14.0f} {child:>14.0f} {total:>8.0f}")
    print(f"\nskill root under {args.dir or tempfile.gettempdir()}")
    print(f"target: confined <= off + 5 ms (goal + 2 ms); pid {os.getpid()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
