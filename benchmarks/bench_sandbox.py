#!/usr/bin/env python3
"""What confinement costs per call: a trivial ``#!/bin/sh`` safe call, confined vs off.

Two hosts over the same skill, one with ``sandbox="auto"`` (Landlock, seccomp, no
capabilities, a per-call cgroup and a private /tmp mount, all applied in the spawn
path) and one with ``sandbox="off"``. Calls alternate between them in blocks so
machine noise hits both alike. Sequential: the median latency of one call.
Concurrency 8: eight threads calling at once; the median latency of a call and
the calls per second. The target (issue 9) is confined <= off + 5 ms, goal + 2 ms.

    python benchmarks/bench_sandbox.py --n 400
"""

from __future__ import annotations

import argparse
import concurrent.futures
import os
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


def sequential(hosts: dict[str, SkillHost], n: int, block: int) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {mode: [] for mode in hosts}
    for _ in range(max(1, n // block)):
        for mode, h in hosts.items():
            out[mode] += [one(h) for _ in range(block)]
    return out


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
    args = parser.parse_args()
    sup = support()
    print(
        f"machine: Landlock ABI {sup.landlock_abi}, seccomp {sup.seccomp}, cgroups {sup.cgroups}, "
        f"private /tmp {sup.mount_namespace}, root {sup.root}"
    )
    if sup.missing():
        print("missing: " + "; ".join(sup.missing()))
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        make_skill(root)
        hosts = {"off": host(root, "off"), "confined": host(root, "auto")}
        for h in hosts.values():  # warm up: caches, imports, cgroup pool
            for _ in range(20):
                one(h)
        seq = sequential(hosts, args.n, args.block)
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
    print(f"\ntarget: confined <= off + 5 ms (goal + 2 ms); pid {os.getpid()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
