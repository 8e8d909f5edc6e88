#!/usr/bin/env python3
"""Wall time of ``ongrid-skills list`` with the built-in skills, beside Python itself.

Each round runs, interleaved: ``python -c pass`` (the interpreter floor),
``python -c "import ongrid_plugins"`` and ``ongrid-skills list`` (default roots:
the built-in skills, /etc/ongrid/skills and the user folder, plus entry points).
Bytecode is compiled first, as ``pip install`` would have done.

    python benchmarks/bench_cli.py --runs 21
"""

from __future__ import annotations

import argparse
import compileall
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import ongrid_plugins


def wall(cmd: list[str], env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return (time.perf_counter() - t0) * 1e3


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=21)
    args = parser.parse_args()
    compileall.compile_dir(os.path.dirname(ongrid_plugins.__file__), quiet=1)
    env = {k: v for k, v in os.environ.items() if not k.startswith("ONGRID_")}
    script = str(Path(sys.executable).with_name("ongrid-skills"))
    commands = {
        "python -c pass": [sys.executable, "-c", "pass"],
        "python -c 'import ongrid_plugins'": [sys.executable, "-c", "import ongrid_plugins"],
        "ongrid-skills list": [script, "list"],
        "ongrid-skills list --json": [script, "list", "--json"],
    }
    times: dict[str, list[float]] = {name: [] for name in commands}
    for i in range(args.runs + 1):
        for name, cmd in commands.items():
            elapsed = wall(cmd, env)
            if i:
                times[name].append(elapsed)
    print(f"{'command':36} {'median ms':>10} {'min':>8} {'max':>8}")
    for name, values in times.items():
        print(f"{name:36} {statistics.median(values):>10.1f} {min(values):>8.1f} {max(values):>8.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
