#!/usr/bin/env python3
"""What a wait costs the code that runs after it: the same work, timed after different pauses.

A call's code after the spawn runs several times slower than the same code in a loop.
This separates the two usual suspects. It times one fixed piece of the call's work
(``audit.rows.finish_row`` of a real call, C code) and one Python function of the
pipeline (``pipeline.check_arguments``), in the calling thread's CPU clock, right
after each of:

* nothing (a loop: what a microbenchmark sees);
* a sleep of 50 us and one of 500 us (the thread blocks; its CPU may go idle);
* a busy spin of 500 us in Python (the thread stays on its CPU and touches other memory);
* a whole ``host.call`` of a trivial ``#!/bin/sh`` entry (what the call path meets).

If a sleep costs the work after it more than a spin of the same length, the slowdown
comes from the CPU going idle (on a VM: the vCPU halting and the host running
something else meanwhile), not from what the thread itself touched in between.

    python benchmarks/after_sleep.py --n 2000
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE / "baselines"))
sys.path.insert(0, str(HERE))
os.environ.setdefault("ONGRID_BENCH_SANDBOX", "off")

import exec_bench  # noqa: E402
import hostcall  # noqa: E402

from ongrid_plugins import pipeline  # noqa: E402
from ongrid_plugins.audit import log as audit_log  # noqa: E402


def captured_work(host: Any, name: str, args: dict[str, Any]) -> dict[str, Callable[[], object]]:
    """The two pieces of work, with the arguments one real call gave them."""
    seen: dict[str, tuple[Any, ...]] = {}
    finish, check = audit_log.finish_row, pipeline.check_arguments

    def finish_spy(*a: Any) -> Any:
        seen["finish"] = a
        return finish(*a)

    def check_spy(*a: Any, **k: Any) -> Any:
        seen["check"] = (a, k)
        return check(*a, **k)

    audit_log.finish_row, pipeline.check_arguments = finish_spy, check_spy
    try:
        host.call(name, args)
    finally:
        audit_log.finish_row, pipeline.check_arguments = finish, check
    check_args, check_kwargs = seen["check"]
    return {
        "audit.rows.finish_row (C)": lambda: finish(*seen["finish"]),
        "pipeline.check_arguments (Python)": lambda: check(*check_args, **check_kwargs),
    }


def spin(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def timed_after(before: Callable[[], object], work: Callable[[], object], n: int) -> float:
    """Median CPU microseconds of ``work`` right after ``before``, in this thread."""
    spent = []
    for _ in range(n):
        before()
        start = time.thread_time_ns()
        work()
        spent.append(time.thread_time_ns() - start)
    return statistics.median(spent) / 1e3


def main() -> int:
    formatter = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=formatter)
    parser.add_argument("--n", type=int, default=2000, help="timings per cell (default 2000)")
    options = parser.parse_args()
    if options.n < 1:
        parser.error("--n must be at least 1")
    entries, _driver = exec_bench.build_entries(tempfile.mkdtemp(prefix="ongrid-after-sleep-"))
    host, name = hostcall._host_for(entries["sh"])
    args = json.loads(exec_bench.PAYLOAD)
    work = captured_work(host, name, args)
    pauses: dict[str, Callable[[], object]] = {
        "nothing (a loop)": lambda: None,
        "sleep 50 us": lambda: time.sleep(50e-6),
        "sleep 500 us": lambda: time.sleep(500e-6),
        "spin 500 us": lambda: spin(500e-6),
        "host.call": lambda: host.call(name, args),
    }
    print(f"CPU us of the work (median of {options.n}), in the calling thread, right after:")
    print(f"{'after':20s}" + "".join(f"{label:>36s}" for label in work))
    for pause, before in pauses.items():
        n = options.n if pause != "host.call" else max(1, options.n // 4)
        cells = [timed_after(before, piece, n) for piece in work.values()]
        print(f"{pause:20s}" + "".join(f"{cell:36.1f}" for cell in cells))
    return 0


if __name__ == "__main__":
    sys.exit(main())
