#!/usr/bin/env python3
"""Instructions a ``host.call`` executes, per thread, counted by callgrind (not timed).

The wall clock of a shared VM moves by more than a few percent between runs of the
same tree; an instruction count does not. Run the calls twice under callgrind, with
few and with many calls, and divide the difference by the difference in calls: what
loading and the warm-up cost cancels out.

    valgrind --tool=callgrind --separate-threads=yes --callgrind-out-file=/tmp/cg.20 \\
        python benchmarks/count_calls.py 20
    valgrind --tool=callgrind --separate-threads=yes --callgrind-out-file=/tmp/cg.120 \\
        python benchmarks/count_calls.py 120
    python benchmarks/count_calls.py --diff /tmp/cg.20 /tmp/cg.120

Thread 1 is the calling thread, thread 2 the audit writer. ``--baseline`` runs the
bare ``posix_spawn`` round trip of ``baselines/exec_bench.py`` instead of the host.
``ONGRID_BENCH_SANDBOX`` (default ``off`` here) and ``ONGRID_BENCH_DISABLE`` work as
for ``hostcall.py``.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "baselines"))
sys.path.insert(0, str(HERE))
os.environ.setdefault("ONGRID_BENCH_SANDBOX", "off")

import exec_bench  # noqa: E402
import hostcall  # noqa: E402

WARM = 20


def run(calls: int, entry_kind: str, baseline: bool) -> None:
    paths, _driver = exec_bench.build_entries(tempfile.mkdtemp(prefix="ongrid-count-"))
    entry = paths[entry_kind]
    for _ in range(WARM + calls):
        if baseline:
            exec_bench.call_spawn(entry)
        else:
            hostcall.call(entry, exec_bench.PAYLOAD)


def totals(prefix: str) -> dict[int, int]:
    """Instructions per thread of one ``--separate-threads=yes`` run (files ``prefix-NN``)."""
    found: dict[int, int] = {}
    for path in sorted(Path(prefix).parent.glob(Path(prefix).name + "-*")):
        thread = int(path.name.rsplit("-", 1)[1])
        match = re.search(r"^summary: (\d+)", path.read_text(errors="replace"), re.MULTILINE)
        if match:
            found[thread] = int(match.group(1))
    if not found:
        raise SystemExit(f"no callgrind files {prefix}-NN: run with --separate-threads=yes")
    return found


def calls_in(prefix: str) -> int:
    """The call count of a run, read back from its command line (the last number)."""
    first = sorted(Path(prefix).parent.glob(Path(prefix).name + "-*"))[0].read_text(errors="replace")
    match = re.search(r"^cmd: .*count_calls\.py(?:\s+--?\S+(?:\s+[a-z]\S*)?)*\s+(\d+)\b", first, re.MULTILINE)
    if not match:
        raise SystemExit(f"{prefix}: no call count on its cmd: line")
    return int(match.group(1))


def diff(few: str, many: str) -> None:
    a, b = totals(few), totals(many)
    calls = calls_in(many) - calls_in(few)
    if calls <= 0:
        raise SystemExit("the second run must make more calls than the first")
    print(f"{'thread':>6}  {'instructions per call':>22}")
    for thread in sorted(set(a) | set(b)):
        print(f"{thread:>6}  {(b.get(thread, 0) - a.get(thread, 0)) / calls:>22,.0f}")


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("calls", nargs="?", type=int, help="timed calls after the warm-up")
    parser.add_argument("--entry", default="sh", choices=["sh", "c"])
    parser.add_argument("--baseline", action="store_true", help="the bare posix_spawn round trip")
    parser.add_argument("--diff", nargs=2, metavar=("FEW", "MANY"), help="callgrind out-file prefixes")
    args = parser.parse_args()
    if args.diff:
        diff(*args.diff)
    elif args.calls is None or args.calls < 0:
        parser.error("give the number of calls (or --diff FEW MANY)")
    else:
        run(args.calls, args.entry, args.baseline)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
