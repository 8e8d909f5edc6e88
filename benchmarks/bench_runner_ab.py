#!/usr/bin/env python3
"""The compiled runner of two trees in one process, interleaved: this tree's against ``--base``'s.

Both builds of ``executors/_fastrun`` are loaded side by side (each ``.so`` is its own
library, with its own state) and run the same spec in alternating blocks, so machine
noise hits both alike. The spec is what the subprocess executor hands the runner: the
entry opened, executed through its descriptor, the benchmark payload on stdin. A second
thread wakes every 0.5 ms meanwhile: a host has other threads (the audit writer), and
with them a spawn that unmaps memory costs a TLB shootdown across CPUs.

    git worktree add /tmp/base <rev>       # then build its extension (needs hatchling):
    (cd /tmp/base && python -c "import hatch_build, sysconfig; hatch_build.compile_extension(
        'ongrid_plugins/executors/_fastrun.c',
        'ongrid_plugins/executors/_fastrun' + sysconfig.get_config_var('EXT_SUFFIX'))")
    python benchmarks/bench_runner_ab.py --base /tmp/base --rounds 16

Prints, per entry, the median wall time of a call in each build, their quotient, and
each build's CPU per call in the calling thread.
"""

from __future__ import annotations

import argparse
import glob
import importlib.util
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "baselines"))
sys.path.insert(0, str(HERE.parent))

import exec_bench  # noqa: E402

from ongrid_plugins.executors import _fast, _process  # noqa: E402
from ongrid_plugins.executors._spec import ProcessSpec  # noqa: E402

BLOCK = 50


def load(tree: Path) -> Any:
    """The compiled runner built in ``tree``, loaded under its own name."""
    found = glob.glob(str(tree / "ongrid_plugins" / "executors" / "_fastrun*.so"))
    if not found:
        raise SystemExit(f"no compiled runner in {tree}: build it there first")
    spec = importlib.util.spec_from_file_location("ongrid_plugins.executors._fastrun", found[0])
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--base", type=Path, required=True, help="the other tree (its extension built)")
    parser.add_argument("--rounds", type=int, default=16, help=f"blocks of {BLOCK} calls per build and entry")
    parser.add_argument("--entries", default="sh,c")
    args = parser.parse_args()
    builds = {"base": load(args.base), "this": load(HERE.parent)}
    tuning = (_process._EOF_BOUND, _process._EOF_MIN, _process._USE_PIDFD)
    stop = threading.Event()

    def ticker() -> None:
        while not stop.is_set():
            time.sleep(0.0005)

    threading.Thread(target=ticker, daemon=True).start()
    workdir = tempfile.mkdtemp(prefix="ongrid-runner-ab-")
    paths, _ = exec_bench.build_entries(workdir)
    print(f"{'entry':5s} {'base us':>8s} {'this us':>8s} {'this/base':>9s} {'cpu base':>9s} {'cpu this':>9s}")
    for name in args.entries.split(","):
        entry = paths[name]
        fd = os.open(entry, os.O_RDONLY | os.O_CLOEXEC)
        spec = ProcessSpec(
            argv=(entry,), cwd=workdir, env={}, stdin=exec_bench.PAYLOAD, timeout=30, exec_fd=fd
        )
        arguments = _fast._arguments(spec, lambda data: None, tuning)
        wall: dict[str, list[float]] = {k: [] for k in builds}
        cpu = dict.fromkeys(builds, 0.0)
        for build in builds.values():
            for _ in range(20):
                build.run(*arguments)
        for r in range(args.rounds):
            for key in ("base", "this") if r % 2 == 0 else ("this", "base"):
                run = builds[key].run
                started_cpu = time.thread_time()
                for _ in range(BLOCK):
                    started = time.perf_counter()
                    got = run(*arguments)
                    wall[key].append(time.perf_counter() - started)
                    if got[1] != 0:
                        raise SystemExit(f"{name}: the entry failed in {key}: {got!r}")
                cpu[key] += time.thread_time() - started_cpu
        os.close(fd)
        n = len(wall["base"])
        base, this = statistics.median(wall["base"]), statistics.median(wall["this"])
        print(
            f"{name:5s} {base * 1e6:8.0f} {this * 1e6:8.0f} {this / base:9.3f}"
            f" {cpu['base'] / n * 1e6:9.0f} {cpu['this'] / n * 1e6:9.0f}"
        )
    stop.set()


if __name__ == "__main__":
    main()
