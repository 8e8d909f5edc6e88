#!/usr/bin/env python3
"""Load a skill.json tree in a new process, side by side with the go-equivalent loader.

Trees come from ``baselines/gen_tree.py`` (3-5 property schemas, ~5% broken
manifests). Each round starts one new process per mode, in turn:

* ``go-equiv``: the checks of the original Go loader, in Python
  (``baselines/load_bench.py``: walk, read, ``json.loads``, realpath, field checks);
* ``ongrid``: ``ongrid_plugins.catalog.loader.load_dirs`` (every check of the specification,
  the schema's metaschema check and its defaults included).

``wall`` is the whole process as the parent sees it (interpreter start, imports,
the load, exit); ``load`` is the load call alone, timed inside the child. Each
ratio is the median over rounds of ``ongrid / go-equiv`` of the same round. The
bytecode is compiled first (as an installed package's is) and the OS page cache
is warm for both modes.

    python benchmarks/bench_load.py --sizes 2000,10000 --runs 5
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "baselines"))

import gen_tree  # noqa: E402

CHILD = r"""
import json, sys, time
t0 = time.perf_counter()
sys.path[:0] = [{baselines!r}, {package_root!r}]
mode, root = sys.argv[1], sys.argv[2]
if mode == "go-equiv":
    from load_bench import load_go_equiv as load
else:
    import logging
    logging.disable(logging.WARNING)
    from ongrid_plugins.catalog.loader import load_dirs as load
t1 = time.perf_counter()
n = len(load([root]))
t2 = time.perf_counter()
print(json.dumps({{"import_ms": (t1 - t0) * 1e3, "load_ms": (t2 - t1) * 1e3, "count": n}}))
"""

MODES = ("go-equiv", "ongrid")


def make_tree(workdir: Path, n: int) -> Path:
    root = workdir / f"tree_{n}"
    stamp = root / ".generated"
    if not stamp.exists():
        gen_tree.generate(str(root), n)
        stamp.write_text(str(n))
    return root


def rounds(root: Path, runs: int, code: str) -> dict[str, list[dict[str, float]]]:
    """``runs`` rounds of one new process per mode; each child gets an empty cache folder."""
    results: dict[str, list[dict[str, float]]] = {mode: [] for mode in MODES}
    for _ in range(runs + 1):  # the first round warms the page cache: not counted
        for mode in MODES:
            with tempfile.TemporaryDirectory(prefix="ongrid-cache-") as cache:
                env = {**os.environ, "XDG_CACHE_HOME": cache}
                env.pop("ONGRID_CACHE_DIR", None)
                t0 = time.perf_counter()
                out = subprocess.run(
                    [sys.executable, "-c", code, mode, str(root)],
                    capture_output=True, text=True, check=True, env=env,
                ).stdout  # fmt: skip
                data = json.loads(out)
                data["wall_ms"] = (time.perf_counter() - t0) * 1e3
                results[mode].append(data)
    return {mode: rows[1:] for mode, rows in results.items()}


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default="2000,10000")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--workdir", default=os.path.join(tempfile.gettempdir(), "ongrid-bench-trees"))
    args = parser.parse_args()
    workdir = Path(args.workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    import ongrid_plugins

    package = os.path.dirname(os.path.abspath(ongrid_plugins.__file__))
    compileall.compile_dir(package, quiet=1)
    # ``python -c`` puts the working directory first on sys.path: the child is told which package to import.
    code = CHILD.format(baselines=str(HERE / "baselines"), package_root=os.path.dirname(package))
    print(f"ongrid_plugins from {package}; medians of {args.runs} rounds")
    header = ("tree", "mode", "count", "wall ms", "x go", "import ms", "load ms", "x go", "us/manifest")
    print("{:>6} {:9} {:>6} {:>8} {:>5} {:>9} {:>8} {:>5} {:>11}".format(*header))
    for size in (int(s) for s in args.sizes.split(",")):
        results = rounds(make_tree(workdir, size), args.runs, code)
        base = results["go-equiv"]
        for mode, rows in results.items():
            wall = statistics.median(r["wall_ms"] for r in rows)
            load = statistics.median(r["load_ms"] for r in rows)
            x_wall = statistics.median(r["wall_ms"] / b["wall_ms"] for r, b in zip(rows, base, strict=True))
            x_load = statistics.median(r["load_ms"] / b["load_ms"] for r, b in zip(rows, base, strict=True))
            imports = statistics.median(r["import_ms"] for r in rows)
            print(
                f"{size:>6} {mode:9} {rows[0]['count']:>6} {wall:>8.1f} {x_wall:>5.2f} {imports:>9.1f} "
                f"{load:>8.1f} {x_load:>5.2f} {load * 1000 / size:>11.1f}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
