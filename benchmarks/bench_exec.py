#!/usr/bin/env python3
"""Per-call latency and throughput of SkillHost.call / acall beside the baselines.

Entries (a trivial ``#!/bin/sh`` script and a tiny C program, built with gcc)
come from ``baselines/exec_bench.py``. Sequential methods run in blocks,
interleaved round-robin, so machine noise hits all of them alike:

* ``spawn``: bare ``os.posix_spawn`` + pipes + poll + waitpid (the baseline,
  about the Go executor of the original system);
* ``run-notimeout``: ``subprocess.run`` without a timeout;
* ``runner only``: the hardened runner alone (the compiled one, where it was built),
  and ``runner (python)``: the same with the Python runner;
* ``host.call`` / ``host.acall``: the whole ongrid pipeline -- lookup,
  argument validation, the permission gate, the call hooks, the hardened
  runner (entry re-check, process group, caps) and result parsing.

``cpu us`` is the calling thread's CPU per call (``time.thread_time``), the figure
that decides how many calls a second the host can make once they run concurrently.

Concurrency 8 (calls/s): threads + ``subprocess.run`` (``threads-notimeout``,
the baseline), threads + ``host.call``, asyncio + ``host.acall``.

    python benchmarks/bench_exec.py --n 500                 # the host's default sandbox (auto)
    python benchmarks/bench_exec.py --n 500 --sandbox off   # skills unconfined

The last table checks the targets of issue 14 for each entry.
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "baselines"))
sys.path.insert(0, str(HERE))

import exec_bench  # noqa: E402
import hostcall  # noqa: E402

PAYLOAD = exec_bench.PAYLOAD


def sequential(
    entry: str, n: int, block: int, warm: int, cpu: dict[str, float], paired: dict[str, float]
) -> dict[str, float]:
    """Median µs per call of each method; ``cpu`` gets each method's mean CPU µs per call
    in the calling thread (what decides throughput once calls run concurrently), and
    ``paired`` each method's paired ratio to ``spawn``: the median, over rounds, of its
    block's median over the spawn block's median of the same round. A shared VM's speed
    drifts within seconds; the blocks of one round are adjacent in time, so the paired
    ratio cancels a drift the ratio of the pooled medians keeps."""
    loop = asyncio.new_event_loop()

    def sync_block(fn: Callable[[], Any], k: int) -> list[float]:
        out = []
        for _ in range(k):
            t0 = time.perf_counter()
            fn()
            out.append((time.perf_counter() - t0) * 1e6)
        return out

    def async_block(k: int) -> list[float]:
        # Like exec_bench's asyncio method: a block of awaits inside one coroutine.
        async def go() -> list[float]:
            out = []
            for _ in range(k):
                t0 = time.perf_counter()
                await hostcall.acall(entry, PAYLOAD)
                out.append((time.perf_counter() - t0) * 1e6)
            return out

        return loop.run_until_complete(go())

    runner, minimal = _runner_floors(entry)
    methods: dict[str, Callable[[int], list[float]]] = {
        "spawn": lambda k: sync_block(lambda: exec_bench.call_spawn(entry), k),
        "run-notimeout": lambda k: sync_block(lambda: exec_bench.call_run_nt(entry), k),
        "runner only": lambda k: sync_block(runner, k),
        "runner (python)": lambda k: _python_runner(lambda: sync_block(runner, k)),
        "minimal pipeline": lambda k: sync_block(minimal, k),
        "host.call": lambda k: sync_block(lambda: hostcall.call(entry, PAYLOAD), k),
        "host.acall": async_block,
    }
    lat: dict[str, list[float]] = {m: [] for m in methods}
    spent = dict.fromkeys(methods, 0.0)
    for fn in methods.values():
        fn(warm)
    done = 0
    ratios: dict[str, list[float]] = {m: [] for m in methods}
    while done < n:
        k = min(block, n - done)
        medians = {}
        for method, fn in methods.items():
            start = time.thread_time()
            got = fn(k)
            spent[method] += time.thread_time() - start
            lat[method] += got
            medians[method] = statistics.median(got)
        for method, median in medians.items():
            ratios[method].append(median / medians["spawn"])
        done += k
    loop.close()
    cpu.update({m: spent[m] / n * 1e6 for m in methods})
    paired.update({m: statistics.median(r) for m, r in ratios.items()})
    return {m: statistics.median(v) for m, v in lat.items()}


def _python_runner(block: Callable[[], list[float]]) -> list[float]:
    """``block`` with the compiled runner switched off (what a call costs without it)."""
    try:
        from ongrid_plugins.executors import _fast
    except ImportError:  # a tree from before the compiled runner (bench_side_by_side --base)
        return block()
    _fast.USE = False
    try:
        return block()
    finally:
        _fast.USE = True


def _runner_floors(entry: str) -> tuple[Callable[[], Any], Callable[[], Any]]:
    """Two floors that explain the host's figure: the hardened runner alone (spec
    built once), and the least a safe pipeline does (validate, canonical JSON,
    build the spec, run, parse) without the gate, hooks, entry re-check or
    result objects."""
    from jsonschema import Draft202012Validator

    from ongrid_plugins.executors._process import ProcessSpec, run_process

    cwd = str(Path(entry).parent)
    spec = ProcessSpec(argv=(entry,), cwd=cwd, env={}, stdin=PAYLOAD, timeout=30)
    validator = Draft202012Validator({"type": "object", "properties": {}})

    def minimal() -> Any:
        args = json.loads(PAYLOAD)
        if not validator.is_valid(args):
            raise RuntimeError("invalid")
        payload = json.dumps(args, sort_keys=True, separators=(",", ":")).encode()
        out = run_process(ProcessSpec(argv=(entry,), cwd=cwd, env={}, stdin=payload, timeout=30))
        return json.loads(out.stdout)

    return (lambda: run_process(spec)), minimal


def concurrent_rate(entry: str, n: int, conc: int, rounds: int) -> dict[str, float]:
    def threads(fn: Callable[[], Any]) -> float:
        with concurrent.futures.ThreadPoolExecutor(conc) as pool:
            t0 = time.perf_counter()
            list(pool.map(lambda _i: fn(), range(n)))
            return n / (time.perf_counter() - t0)

    def aio() -> float:
        async def go() -> None:
            sem = asyncio.Semaphore(conc)

            async def one() -> None:
                async with sem:
                    await hostcall.acall(entry, PAYLOAD)

            await asyncio.gather(*(one() for _ in range(n)))

        t0 = time.perf_counter()
        asyncio.run(go())
        return n / (time.perf_counter() - t0)

    methods: dict[str, Callable[[], float]] = {
        "threads-notimeout": lambda: threads(lambda: exec_bench.call_run_nt(entry)),
        "threads host.call": lambda: threads(lambda: hostcall.call(entry, PAYLOAD)),
        "asyncio host.acall": aio,
    }
    rates: dict[str, list[float]] = {m: [] for m in methods}
    for _ in range(rounds):
        for method, fn in methods.items():
            rates[method].append(fn())
    return {m: statistics.median(v) for m, v in rates.items()}


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--entries", default="sh,c")
    parser.add_argument("--n", type=int, default=500)
    parser.add_argument("--block", type=int, default=50)
    parser.add_argument("--warm", type=int, default=20)
    parser.add_argument("--conc", type=int, default=8)
    parser.add_argument("--conc-n", type=int, default=800)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", dest="json_out")
    parser.add_argument(
        "--sandbox",
        choices=("auto", "off"),
        default=os.environ.get("ONGRID_BENCH_SANDBOX", "auto"),
        help="the host's sandbox mode (default: auto, as Settings; confined where the kernel can)",
    )
    args = parser.parse_args()
    os.environ["ONGRID_BENCH_SANDBOX"] = args.sandbox  # read by hostcall when it builds a host
    workdir = tempfile.mkdtemp(prefix="ongrid-exec-bench-")
    out: dict[str, Any] = {
        "python": sys.version.split()[0],
        "seq_us": {},
        "seq_cpu_us": {},
        "seq_paired_x_spawn": {},
        "conc_calls_per_s": {},
    }
    try:
        paths, _cfloor = exec_bench.build_entries(workdir)
        for name in args.entries.split(","):
            entry = paths[name]
            cpu: dict[str, float] = {}
            paired: dict[str, float] = {}
            out["seq_us"][name] = sequential(entry, args.n, args.block, args.warm, cpu, paired)
            out["seq_cpu_us"][name] = cpu
            out["seq_paired_x_spawn"][name] = paired
            out["conc_calls_per_s"][name] = concurrent_rate(entry, args.conc_n, args.conc, args.rounds)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    print(f"{'entry':6} {'method':20} {'median us':>10} {'x spawn':>8} {'paired x':>9} {'cpu us':>8}")
    for name, rows in out["seq_us"].items():
        for method, us in rows.items():
            cpu_us = out["seq_cpu_us"][name][method]
            pair = out["seq_paired_x_spawn"][name][method]
            print(f"{name:6} {method:20} {us:>10.0f} {us / rows['spawn']:>8.2f} {pair:>9.2f} {cpu_us:>8.0f}")
    print(f"\n{'entry':6} {'concurrency ' + str(args.conc):20} {'calls/s':>10} {'x baseline':>10}")
    for name, rows in out["conc_calls_per_s"].items():
        for method, rate in rows.items():
            print(f"{name:6} {method:20} {rate:>10.0f} {rate / rows['threads-notimeout']:>10.2f}")
    print(f"\ntargets (sandbox {args.sandbox}; issue 14; sequential: pooled medians, then paired)")
    for name in out["seq_us"]:
        seq, conc = out["seq_us"][name], out["conc_calls_per_s"][name]
        pair = out["seq_paired_x_spawn"][name]
        base = conc["threads-notimeout"]
        checks = [
            ("host.call x spawn", seq["host.call"] / seq["spawn"], pair["host.call"], "<=", 1.2),
            ("host.acall x spawn", seq["host.acall"] / seq["spawn"], pair["host.acall"], "<=", 1.35),
            ("threads host.call (conc) x baseline", conc["threads host.call"] / base, None, ">=", 1.0),
            ("asyncio host.acall (conc) x baseline", conc["asyncio host.acall"] / base, None, ">=", 1.0),
        ]
        for label, value, paired_value, op, bound in checks:
            verdicts = []
            for figure in (value, paired_value):
                if figure is not None:
                    met = figure <= bound if op == "<=" else figure >= bound
                    verdicts.append(f"{figure:5.2f} {'met' if met else 'NOT met':8}")
            print(f"{name:6} {label:38} {'  '.join(verdicts):32} target {op} {bound}")
    out["sandbox"] = args.sandbox
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
