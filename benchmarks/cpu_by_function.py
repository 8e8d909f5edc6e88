#!/usr/bin/env python3
"""CPU time of chosen functions per ``host.call``, in place, in whichever thread runs them.

Between two spawns code runs several times slower than in a tight loop (cold caches, a
thread just woken), and a confined call runs in three threads, so neither a
microbenchmark nor a profiler of one thread says what a piece costs a call. This wraps
each named function to add up the CPU clock of the thread that runs it (inclusive of
what it calls, the kernel's part of its system calls too), runs ``--n`` calls of a
trivial ``#!/bin/sh`` entry through :mod:`hostcall`, and prints microseconds per call.
The wrappers themselves cost ~1 us a call each: name a few functions at a time.
``--wall`` adds up wall-clock time instead (what waits cost, not only what runs), and
``--threads N`` makes the calls from N threads at once (where a call waits under load).

    python benchmarks/cpu_by_function.py --sandbox auto \\
        ongrid_plugins.executors.confine.grants:Static.fresh \\
        ongrid_plugins.executors.confine.warm:Covers.refresh \\
        ongrid_plugins.executors.confine.plan:Plan.apply

A function imported by name elsewhere (``from .profile import secret_paths``) is wrapped
where it is looked up: name that module (``...confine.warm:secret_paths``).
"""

from __future__ import annotations

import argparse
import collections
import concurrent.futures
import functools
import importlib
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))


def wrap(
    spec: str,
    spent: collections.Counter[str],
    calls: collections.Counter[str],
    clock: Callable[[], int] = time.thread_time_ns,
) -> None:
    module_name, _, qualname = spec.partition(":")
    if not qualname:
        raise SystemExit(f"{spec}: name a function as module:qualname")
    owner: Any = importlib.import_module(module_name)
    *parents, name = qualname.split(".")
    for part in parents:
        owner = getattr(owner, part)
    original = getattr(owner, name)

    @functools.wraps(original)
    def timed(*args: Any, **kwargs: Any) -> Any:
        started = clock()
        try:
            return original(*args, **kwargs)
        finally:
            spent[spec] += clock() - started
            calls[spec] += 1

    setattr(owner, name, timed)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("functions", nargs="+", help="module:qualname of each function to time")
    parser.add_argument("--n", type=int, default=400, help="calls timed (after 30 to warm up)")
    parser.add_argument("--sandbox", choices=("auto", "off"), default="auto")
    parser.add_argument(
        "--wall", action="store_true", help="wall-clock time instead of the thread's CPU (waits count)"
    )
    parser.add_argument("--threads", type=int, default=1, help="calls made from this many threads at once")
    args = parser.parse_args()
    os.environ["ONGRID_BENCH_SANDBOX"] = args.sandbox
    import hostcall

    spent: collections.Counter[str] = collections.Counter()
    calls: collections.Counter[str] = collections.Counter()
    clock = time.perf_counter_ns if args.wall else time.thread_time_ns
    for spec in args.functions:
        wrap(spec, spent, calls, clock)
    with tempfile.TemporaryDirectory() as tmp:
        entry = os.path.join(tmp, "sh")
        with open(entry, "w") as f:
            f.write('#!/bin/sh\necho "{}"\n')
        os.chmod(entry, 0o755)
        for _ in range(30):
            hostcall.call(entry, b"{}")
        time.sleep(0.1)
        spent.clear()
        calls.clear()
        per_call: list[int] = []

        def one(_i: int) -> None:
            started = clock()
            hostcall.call(entry, b"{}")
            per_call.append(clock() - started)

        with concurrent.futures.ThreadPoolExecutor(args.threads) as pool:
            list(pool.map(one, range(args.n)))
        calling = sum(per_call)
    width = max(len(spec) for spec in args.functions)
    what = "wall-clock" if args.wall else "CPU"
    print(
        f"sandbox {args.sandbox}, {args.n} calls from {args.threads} thread(s); "
        f"{what} us per call, inclusive, in the thread that ran it"
    )
    print(f"{'function':<{width}}  {'us/call':>8}  {'runs/call':>9}")
    for spec in args.functions:
        print(f"{spec:<{width}}  {spent[spec] / args.n / 1e3:>8.1f}  {calls[spec] / args.n:>9.2f}")
    print(f"{'(the calling thread, whole call)':<{width}}  {calling / args.n / 1e3:>8.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
