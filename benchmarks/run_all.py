#!/usr/bin/env python3
"""Run every benchmark in turn and print their tables (``tox -e bench``).

python benchmarks/run_all.py            # the figures of benchmarks/README.md
python benchmarks/run_all.py --quick    # smaller trees and fewer calls
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--only", help="comma-separated: load,call,audit,trust,remote,standards")
    args = parser.parse_args()
    quick = args.quick
    plan = {
        "load": [
            "bench_load.py",
            "--sizes",
            "1000" if quick else "1000,10000",
            "--runs",
            "3" if quick else "5",
        ],
        "call": ["bench_call.py", "--rounds", "5" if quick else "15"],
    }
    for script in sorted(HERE.glob("bench_*.py")):
        key = script.stem.removeprefix("bench_")
        plan.setdefault(key, [script.name])
    wanted = args.only.split(",") if args.only else list(plan)
    status = 0
    for key in wanted:
        print(f"\n=== {key}: {' '.join(plan[key])}", flush=True)
        status |= subprocess.run([sys.executable, str(HERE / plan[key][0]), *plan[key][1:]]).returncode
    return status


if __name__ == "__main__":
    sys.exit(main())
