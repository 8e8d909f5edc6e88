#!/usr/bin/env python3
"""Loading skill.json trees: ongrid's loader beside the baselines, in one run.

Trees come from ``baselines/gen_tree.py`` (3-5 property schemas, ~5% broken
manifests). Two measurements per tree size:

* in-process, interleaved round-robin with the baselines of
  ``baselines/load_bench.py`` (``go-equiv``: the checks of the original Go
  loader in Python; ``floor-opath+nogc``: the fastest pure-Python walk + parse
  + canonicalisation, no checks) -- repeated loads in one process, i.e. warm;
* fresh processes: **cold** = first load on the machine (empty ongrid cache
  directory), **warm** = a new process over the unchanged tree (the cache the
  cold run left behind), next to ``go-equiv`` in a fresh process.
  ``+digests`` is the load a ``SkillHost`` does: the loader, then every skill's
  content digest (``ongrid_plugins.catalog``). The time is
  the load call itself, measured inside the child; the child's wall time
  (interpreter start and imports included) is printed beside it. The OS page
  cache is warm for every mode (dropping it needs root on the host).

    python benchmarks/bench_load.py --sizes 1000,10000 --runs 5
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "baselines"))

import gen_tree  # noqa: E402
import load_bench  # noqa: E402

CHILD = r"""
import gc, json, sys, time
sys.path.insert(0, {baselines!r})
mode, root = sys.argv[1], sys.argv[2]
t0 = time.perf_counter()
if mode == "go-equiv":
    import load_bench
    t1 = time.perf_counter()
    n = len(load_bench.load_go_equiv([root]))
elif mode == "catalog":
    import logging
    logging.disable(logging.WARNING)
    from ongrid_plugins.catalog.build import catalog_dirs
    t1 = time.perf_counter()
    n = len(catalog_dirs([root]))
else:
    import logging
    logging.disable(logging.WARNING)
    from ongrid_plugins.loader import load_dirs
    t1 = time.perf_counter()
    n = len(load_dirs([root]))
t2 = time.perf_counter()
print(json.dumps({{"import_ms": (t1 - t0) * 1e3, "load_ms": (t2 - t1) * 1e3, "count": n}}))
"""


def make_tree(workdir: Path, n: int) -> Path:
    root = workdir / f"tree_{n}"
    stamp = root / ".generated"
    if not stamp.exists():
        gen_tree.generate(str(root), n)
        stamp.write_text(str(n))
    return root


def in_process(root: Path, runs: int) -> dict[str, dict[str, float]]:
    import logging

    from ongrid_plugins.catalog.build import catalog_dirs
    from ongrid_plugins.loader import load_dirs

    logging.disable(logging.WARNING)
    modes = {
        "go-equiv": load_bench.load_go_equiv,
        "floor-opath+nogc": load_bench.nogc(
            lambda r: load_bench.load_floor(r, load_bench.iter_manifests_scandir, load_bench.realpath_opath)
        ),
        "ongrid (warm)": load_dirs,
        "+digests (warm)": catalog_dirs,
    }
    times: dict[str, list[float]] = {m: [] for m in modes}
    counts: dict[str, int] = {}
    for i in range(runs + 1):  # the first round warms up
        for mode, fn in modes.items():
            gc.collect()
            t0 = time.perf_counter()
            counts[mode] = len(fn([str(root)]))
            if i:
                times[mode].append((time.perf_counter() - t0) * 1e3)
    logging.disable(logging.NOTSET)
    base = times["go-equiv"]
    return {
        m: {
            "count": counts[m],
            "median_ms": statistics.median(t),
            "ratio": statistics.median(x / y for x, y in zip(t, base, strict=True)),
        }
        for m, t in times.items()
    }


def fresh(root: Path, runs: int) -> dict[str, dict[str, float]]:
    code = CHILD.format(baselines=str(HERE / "baselines"))
    modes = ("go-equiv", "ongrid cold", "ongrid warm", "+digests cold", "+digests warm")
    results: dict[str, list[dict[str, float]]] = {mode: [] for mode in modes}
    for _ in range(runs):
        with tempfile.TemporaryDirectory(prefix="ongrid-cache-") as cache:
            env = {**os.environ, "XDG_CACHE_HOME": cache}
            for mode in modes:
                if mode == "+digests cold":  # an empty cache again
                    for entry in Path(cache).iterdir():
                        shutil.rmtree(entry)
                t0 = time.perf_counter()
                out = subprocess.run(
                    [
                        sys.executable,
                        "-c",
                        code,
                        {"go-equiv": "go-equiv", "+digests": "catalog"}.get(mode.split()[0], "ongrid"),
                        str(root),
                    ],
                    capture_output=True,
                    text=True,
                    check=True,
                    env=env,
                ).stdout
                data = json.loads(out)
                data["wall_ms"] = (time.perf_counter() - t0) * 1e3
                results[mode].append(data)
    summary = {}
    for mode, rows in results.items():
        summary[mode] = {
            "count": rows[0]["count"],
            "load_ms": statistics.median(r["load_ms"] for r in rows),
            "wall_ms": statistics.median(r["wall_ms"] for r in rows),
        }
    base = summary["go-equiv"]["load_ms"]
    for row in summary.values():
        row["ratio"] = row["load_ms"] / base
    return summary


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default="1000,10000")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--workdir", default=os.path.join(tempfile.gettempdir(), "ongrid-bench-trees"))
    parser.add_argument("--json", dest="json_out")
    args = parser.parse_args()
    workdir = Path(args.workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    out: dict[str, object] = {"python": sys.version.split()[0]}
    header = ("tree", "mode", "count", "load ms", "us/manifest", "x go-equiv", "wall ms")
    print("{:>6} {:22} {:>6} {:>9} {:>12} {:>11} {:>9}".format(*header))
    for size in (int(s) for s in args.sizes.split(",")):
        root = make_tree(workdir, size)
        inproc = in_process(root, args.runs)
        cold_warm = fresh(root, args.runs)
        out[str(size)] = {"in_process": inproc, "fresh_process": cold_warm}
        for mode, row in inproc.items():
            per = row["median_ms"] * 1000 / size
            print(
                f"{size:>6} {'in-proc ' + mode:22} {row['count']:>6} {row['median_ms']:>9.1f} {per:>12.1f} "
                f"{row['ratio']:>11.2f} {'':>9}"
            )
        for mode, row in cold_warm.items():
            per = row["load_ms"] * 1000 / size
            print(
                f"{size:>6} {'new proc ' + mode:22} {row['count']:>6} {row['load_ms']:>9.1f} {per:>12.1f} "
                f"{row['ratio']:>11.2f} {row['wall_ms']:>9.1f}"
            )
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
