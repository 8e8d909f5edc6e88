#!/usr/bin/env python3
"""Hot reload: time from a file write to the new catalog being served.

For each tree size and watch backend, one skill's manifest is rewritten
``--runs`` times (a new description each time); the time is taken from just
before the write to the moment the host announces the change, which happens
right after the new registry snapshot was swapped in (every call, listing and
REST / MCP request from then on sees it). ``reload ms`` is one
``host.reload()`` of the same tree, for comparison: the part of the latency
that is the load itself. The default debounce (0.2 s) is used: with
watchfiles a burst ends 50 ms after its last event (the debounce caps how long
a burst may grow); polling looks every 0.25 s and waits for the tree to be
quiet for one debounce.

    python benchmarks/bench_watch.py --sizes 10,100,1000 --runs 15

Target (issue 12): median <= 300 ms on this machine.
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

from ongrid_plugins import SkillHost
from ongrid_plugins.catalog import CatalogChange
from ongrid_plugins.testing import isolated_settings, make_skill


def build(base: Path, size: int) -> Path:
    root = base / f"tree_{size}"
    for i in range(size):
        make_skill(root, f"skill_{i:05d}", description=f"Skill {i}.")
    return root


def latencies(host: SkillHost, manifest: Path, runs: int) -> list[float]:
    arrived = threading.Event()

    def listener(changes: list[CatalogChange]) -> None:
        if any(c.name == "skill_00000" for c in changes):
            arrived.set()

    unsubscribe = host.subscribe(listener)
    data = json.loads(manifest.read_text())
    out = []
    try:
        for run in range(runs):
            arrived.clear()
            text = json.dumps({**data, "description": f"Run {run}."})
            t0 = time.perf_counter()
            manifest.write_text(text)
            if not arrived.wait(30):
                raise SystemExit(f"no change announced within 30 s (run {run})")
            out.append((time.perf_counter() - t0) * 1e3)
            time.sleep(0.3)  # let the watcher settle between runs
    finally:
        unsubscribe()
    return out


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default="10,100,1000")
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    logging.disable(logging.WARNING)
    header = ("tree", "backend", "runs", "median ms", "p90 ms", "max ms", "reload ms")
    print("{:>6} {:10} {:>5} {:>10} {:>8} {:>8} {:>10}".format(*header))
    with tempfile.TemporaryDirectory(prefix="ongrid-bench-watch-") as tmp:
        base = Path(tmp)
        for size in (int(s) for s in args.sizes.split(",")):
            root = build(base, size)
            for backend in ("watchfiles", "polling"):
                host = SkillHost(isolated_settings(base / f"state_{size}_{backend}", root))
                host.load()
                reload_ms = []
                for _ in range(3):
                    t0 = time.perf_counter()
                    host.reload()
                    reload_ms.append((time.perf_counter() - t0) * 1e3)
                with host.watch(force_polling=backend == "polling") as watch:
                    times = latencies(host, root / "skill_00000" / "skill.json", args.runs)
                    assert watch.polling is (backend == "polling")
                times.sort()
                p90 = times[max(0, int(len(times) * 0.9) - 1)]
                print(
                    f"{size:>6} {backend:10} {len(times):>5} {statistics.median(times):>10.1f} "
                    f"{p90:>8.1f} {times[-1]:>8.1f} {statistics.median(reload_ms):>10.1f}"
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
