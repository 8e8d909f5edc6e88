#!/usr/bin/env python3
"""bench_exec.py for two source trees in one run, alternating, so that noise hits both alike.

Compare this tree with another checkout (e.g. ``git worktree add /tmp/base main``):

    python benchmarks/bench_side_by_side.py --base /tmp/base --pairs 3 --n 300

Each pair runs ``bench_exec.py`` once with ``PYTHONPATH`` set to the base tree and once
to this one (order swapped every pair); the table shows, per entry and method, the
median over pairs of the x-spawn ratio in each tree and their quotient (1.00 = as fast).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
THIS_TREE = HERE.parent


def run(tree: Path, extra: list[str]) -> dict[str, dict[str, float]]:
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
        out = Path(f.name)
    env = {**os.environ, "PYTHONPATH": str(tree)}
    subprocess.run(
        [sys.executable, str(HERE / "bench_exec.py"), *extra, "--json", str(out)],
        env=env,
        check=True,
        stdout=subprocess.DEVNULL,
    )
    data = json.loads(out.read_text())
    out.unlink()
    ratios: dict[str, dict[str, float]] = {}
    for entry, rows in data["seq_us"].items():
        ratios[entry] = {method: us / rows["spawn"] for method, us in rows.items()}
    for entry, rows in data["conc_calls_per_s"].items():
        base = rows["threads-notimeout"]
        ratios[entry].update({f"{method} (conc)": base / rate for method, rate in rows.items()})
    return ratios


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--base", required=True, type=Path, help="the other source tree")
    parser.add_argument("--pairs", type=int, default=3)
    args, extra = parser.parse_known_args()
    runs: dict[str, list[dict[str, dict[str, float]]]] = {"base": [], "this": []}
    for pair in range(args.pairs):
        order = [("base", args.base), ("this", THIS_TREE)]
        for label, tree in order if pair % 2 == 0 else order[::-1]:
            runs[label].append(run(tree, extra))
    print(f"{'entry':6} {'method':28} {'base x':>8} {'this x':>8} {'this/base':>10}")
    for entry, methods in runs["this"][0].items():
        for method in methods:
            base = statistics.median(r[entry][method] for r in runs["base"])
            this = statistics.median(r[entry][method] for r in runs["this"])
            print(f"{entry:6} {method:28} {base:>8.3f} {this:>8.3f} {this / base:>10.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
