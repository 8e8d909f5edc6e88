#!/usr/bin/env python3
"""Loading skill.json trees: cold, warm in-process and warm in a new process, against go-equiv.

Trees come from ``baselines/gen_tree.py`` (3-5 property schemas, ~5% broken
manifests). For each tree size, in one run:

* **new process**, interleaved round by round with ``go-equiv`` (the checks of
  the original Go loader, in Python, ``baselines/load_bench.py``) in a new
  process: **cold** = an empty ongrid cache folder (the first load on a
  machine: no load cache ``load-cache.bin``, no schema verdicts
  ``schema-verdicts-v1.bin``, nothing else; each child lists the folder before
  it loads and the run stops if a cold one finds anything; the load cache is
  written after the load, in the background, and that write is in the wall
  time), **warm** = a new process over the unchanged
  tree with the cache the cold run left (a cache hit). Cold and warm are about
  ongrid's own caches only: the bytecode is compiled (as an installed package's
  is) and the OS page cache is warm for every mode, go-equiv included. The time is the load call
  itself, measured inside the child; the child's wall time (interpreter start,
  imports, the cache write) is beside it. The ratio is the median of each
  round's ratio to that round's go-equiv.
* **in-process**: repeated loads in one process, round-robin with go-equiv and
  ``floor-opath+nogc`` (the fastest pure-Python walk + parse +
  canonicalisation, no checks): warm in-process.

``--digests`` adds ``+digests``, the load a ``SkillHost`` does (the loader,
then every skill's content digest, ``ongrid_plugins.catalog``). Dropping the
OS page cache would need root on the host.

    python benchmarks/bench_load.py --sizes 2000,10000 --runs 5
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
import gc, json, os, sys, time
sys.path.insert(0, {baselines!r})
sys.path.insert(0, {package_root!r})  # the ongrid_plugins this script compiled, not the one in the cwd
mode, root = sys.argv[1], sys.argv[2]
# what this child finds in every cache ongrid keeps (all under Settings.cache_dir)
cache_dir = os.path.join(os.environ["XDG_CACHE_HOME"], "ongrid")
found = sorted(os.listdir(cache_dir)) if os.path.isdir(cache_dir) else []
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
print(json.dumps({{"import_ms": (t1 - t0) * 1e3, "load_ms": (t2 - t1) * 1e3, "count": n, "found": found}}))
"""


def make_tree(workdir: Path, n: int) -> Path:
    root = workdir / f"tree_{n}"
    stamp = root / ".generated"
    if not stamp.exists():
        gen_tree.generate(str(root), n)
        stamp.write_text(str(n))
    return root


def in_process(root: Path, runs: int, digests: bool) -> dict[str, dict[str, float]]:
    """Repeated loads in one process (its own empty cache folder first): warm in-process."""
    import logging

    from ongrid_plugins.catalog.build import catalog_dirs
    from ongrid_plugins.loader import load_dirs

    logging.disable(logging.WARNING)
    modes = {
        "go-equiv": load_bench.load_go_equiv,
        "floor-opath+nogc": load_bench.nogc(
            lambda r: load_bench.load_floor(r, load_bench.iter_manifests_scandir, load_bench.realpath_opath)
        ),
        "ongrid warm": load_dirs,
    }
    if digests:
        modes["+digests warm"] = catalog_dirs
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


def fresh(root: Path, runs: int, digests: bool) -> dict[str, dict[str, float]]:
    """Cold, then warm, each in a new process, interleaved with go-equiv in a new process."""
    import ongrid_plugins

    # ``python -c`` puts the working directory first on sys.path: from a checkout, a child
    # would import the checkout's package whatever PYTHONPATH says (a before/after run
    # with PYTHONPATH=<other tree> then timed the same code twice).
    package_root = os.path.dirname(os.path.dirname(os.path.abspath(ongrid_plugins.__file__)))
    code = CHILD.format(baselines=str(HERE / "baselines"), package_root=package_root)
    modes = ["go-equiv", "ongrid cold", "ongrid warm"]
    if digests:
        modes += ["+digests cold", "+digests warm"]
    results: dict[str, list[dict[str, float]]] = {mode: [] for mode in modes}
    for _ in range(runs):
        with tempfile.TemporaryDirectory(prefix="ongrid-cache-") as cache:
            env = {**os.environ, "XDG_CACHE_HOME": cache}
            env.pop("ONGRID_CACHE_DIR", None)
            env.pop("ONGRID_LOAD_CACHE", None)
            for mode in modes:
                if mode.endswith("cold"):  # an empty cache folder: the first load on a machine
                    for entry in Path(cache).iterdir():
                        if entry.is_dir() and not entry.is_symlink():
                            shutil.rmtree(entry)
                        else:
                            entry.unlink()
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
                _check_cache_state(mode, data.pop("found"))
                results[mode].append(data)
    base = [r["load_ms"] for r in results["go-equiv"]]
    summary = {}
    for mode, rows in results.items():
        summary[mode] = {
            "count": rows[0]["count"],
            "load_ms": statistics.median(r["load_ms"] for r in rows),
            "wall_ms": statistics.median(r["wall_ms"] for r in rows),
            # each run against the go-equiv process of the same round: noise hits both
            "ratio": statistics.median(r["load_ms"] / b for r, b in zip(rows, base, strict=True)),
        }
    return summary


def _check_cache_state(mode: str, found: list[str]) -> None:
    """Cold means no cache file at all (load cache, schema verdicts); warm means the cold run's."""
    if mode.endswith("cold") and found:
        raise SystemExit(f"{mode}: the cache folder was not empty: {found}")
    if mode.endswith("warm") and "load-cache.bin" not in found:
        raise SystemExit(f"{mode}: the cold run left no load cache: {found}")


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default="2000,10000")
    parser.add_argument("--digests", action="store_true", help="also time the catalog load (+digests)")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--workdir", default=os.path.join(tempfile.gettempdir(), "ongrid-bench-trees"))
    parser.add_argument("--json", dest="json_out")
    args = parser.parse_args()
    workdir = Path(args.workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    # as an installed package is: byte-compiled (PYTHONDONTWRITEBYTECODE would make every
    # new process compile the package again, inside the time measured)
    import compileall

    import ongrid_plugins

    compileall.compile_dir(os.path.dirname(ongrid_plugins.__file__), quiet=1)
    out: dict[str, object] = {"python": sys.version.split()[0]}
    header = ("tree", "mode", "count", "load ms", "us/manifest", "x go-equiv", "wall ms")
    print("{:>6} {:22} {:>6} {:>9} {:>12} {:>11} {:>9}".format(*header))
    for size in (int(s) for s in args.sizes.split(",")):
        root = make_tree(workdir, size)
        with tempfile.TemporaryDirectory(prefix="ongrid-cache-") as cache:
            os.environ["XDG_CACHE_HOME"] = cache  # never the user's own cache folder
            inproc = in_process(root, args.runs, args.digests)
        cold_warm = fresh(root, args.runs, args.digests)
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
