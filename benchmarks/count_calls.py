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

Thread 1 is the calling thread, thread 2 the audit writer. ``--acall`` awaits
``host.acall`` in sequence on an event loop instead. ``--baseline`` runs the
bare ``posix_spawn`` round trip of ``baselines/exec_bench.py`` instead of the host.
``ONGRID_BENCH_SANDBOX`` (default ``off`` here) and ``ONGRID_BENCH_DISABLE`` work as
for ``hostcall.py``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "baselines"))
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))  # this tree's package, not whichever one is installed
os.environ.setdefault("ONGRID_BENCH_SANDBOX", "off")

import exec_bench  # noqa: E402
import hostcall  # noqa: E402

WARM = 20


def run(calls: int, entry_kind: str, baseline: bool, on_loop: bool = False) -> None:
    paths, _driver = exec_bench.build_entries(tempfile.mkdtemp(prefix="ongrid-count-"))
    entry = paths[entry_kind]
    if on_loop:  # like bench_exec's asyncio rows: awaits in sequence inside one coroutine

        async def go() -> None:
            for _ in range(WARM + calls):
                await hostcall.acall(entry, exec_bench.PAYLOAD)

        asyncio.run(go())
        return
    for _ in range(WARM + calls):
        if baseline:
            exec_bench.call_spawn(entry)
        else:
            hostcall.call(entry, exec_bench.PAYLOAD)


def read_run(prefix: str) -> tuple[int, dict[int, int]]:
    """``(calls, instructions per thread)`` of one ``--separate-threads=yes`` run.

    Its files are ``prefix-NN``, one a thread; the call count is the number on the
    command line each of them records.
    """
    calls, found = -1, {}
    for path in sorted(Path(prefix).parent.glob(Path(prefix).name + "-*")):
        text = path.read_text(errors="replace")
        summary = re.search(r"^summary: (\d+)", text, re.MULTILINE)
        command = re.search(r"^cmd: .*count_calls\.py\b(.*)$", text, re.MULTILINE)
        numbers = re.findall(r"(?<!\S)\d+(?!\S)", command.group(1)) if command else []
        if summary is None or not numbers:
            raise SystemExit(f"{path}: not a callgrind file of count_calls.py")
        calls = int(numbers[0])
        found[int(path.name.rsplit("-", 1)[1])] = int(summary.group(1))
    if not found:
        raise SystemExit(f"no callgrind files {prefix}-NN: run with --separate-threads=yes")
    return calls, found


def diff(few: str, many: str) -> None:
    (calls_a, a), (calls_b, b) = read_run(few), read_run(many)
    calls = calls_b - calls_a
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
    parser.add_argument("--acall", action="store_true", help="await host.acall on an event loop")
    parser.add_argument("--diff", nargs=2, metavar=("FEW", "MANY"), help="callgrind out-file prefixes")
    args = parser.parse_args()
    if args.diff:
        diff(*args.diff)
    elif args.calls is None or args.calls < 0:
        parser.error("give the number of calls (or --diff FEW MANY)")
    else:
        run(args.calls, args.entry, args.baseline, args.acall)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
