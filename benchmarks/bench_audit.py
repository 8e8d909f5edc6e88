"""What the audit log and two-person approvals cost (a script, not a test).

1. Per-call overhead of the audit log: the median wall time of ``SkillHost.call``
   for a trivial ``#!/bin/sh`` skill (safe, and mutating with a confirmation), on
   two hosts that differ only in ``ONGRID_DISABLE_PLUGINS=audit``. Rounds are
   interleaved (each round calls both hosts, in alternating order) so drift and
   noise hit both alike. Target: audit on within 1.15x of audit off.
2. The audit log alone: rows per second journaled by ``ongrid_before_call`` +
   ``ongrid_after_call`` and chained by the writer thread (the clock stops after
   ``flush()``), without running anything, from 1 and from 4 threads.
3. Approvals per second: ``SkillHost.approve`` (each one a fsync'd SQLite
   transaction, plus the ``ongrid_verify_approval`` hooks), and whole ticket
   cycles (open, two approvals, claim) per second.
4. Where the audit's cost falls once calls run concurrently (issue 14's 8-thread
   target): calls per second from 8 threads of ``subprocess.run`` (the baseline), and
   of ``SkillHost.call`` on three unconfined hosts: the audit log as it is, one whose
   writer thread drops its batches (the calling thread's part only: rows built and
   journaled), and one without the audit plugin. Rounds interleave the four; each
   figure is the median over rounds of its rate over the baseline's in that round.

Usage: ``python benchmarks/bench_audit.py [--calls 400] [--approvals 300] [--conc-calls 400]``
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ongrid_plugins import ApprovalRequired, CallResult, SkillHost
from ongrid_plugins.models import CallRequest
from ongrid_plugins.testing import isolated_settings, make_skill

TRIVIAL_SH = "#!/bin/sh\necho '{\"ok\": true}'\n"


def per_call(base: Path, calls: int) -> list[tuple[str, float, float]]:
    root = base / "skills"
    make_skill(root, "trivial", script=TRIVIAL_SH)
    make_skill(root, "change", script=TRIVIAL_SH, class_="mutating")
    on = SkillHost(isolated_settings(base / "on", root))
    off = SkillHost(isolated_settings(base / "off", root, disable_plugins=("audit",)))
    rows = []
    for tool, confirm in (("trivial", False), ("change", True)):
        times: dict[str, list[float]] = {"on": [], "off": []}
        for host in (on, off):  # warm up: imports, validator compile, DB creation
            for _ in range(20):
                host.call(tool, {"n": 1}, confirm=confirm)
        for i in range(calls):
            order = (("on", on), ("off", off)) if i % 2 == 0 else (("off", off), ("on", on))
            for label, host in order:
                start = time.perf_counter()
                host.call(tool, {"n": i}, confirm=confirm)
                times[label].append(time.perf_counter() - start)
        rows.append((tool, statistics.median(times["off"]), statistics.median(times["on"])))
    assert on.audit.verify().ok
    return rows


def audit_rows_per_second(base: Path, rows: int, threads: int) -> float:
    root = base / "skills-rows"
    make_skill(root, "noop", script=TRIVIAL_SH)
    host = SkillHost(isolated_settings(base / f"rows-{threads}", root))
    tool = host.get("noop")
    log = host.audit
    persona = host.persona("operator")

    def work(n: int) -> None:
        for _ in range(n):
            request = CallRequest(tool, {"n": 1}, persona, uuid.uuid4().hex, "d" * 64, '{"n":1}', "bench")
            log.ongrid_before_call(request=request)
            log.ongrid_after_call(
                request=request, result=CallResult("noop", True, {"ok": True}, duration=0.001)
            )

    work(10)
    per_thread = rows // threads
    workers = [threading.Thread(target=work, args=(per_thread,)) for _ in range(threads)]
    start = time.perf_counter()
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert log.flush()  # the rows are chained, not just journaled
    elapsed = time.perf_counter() - start
    assert log.verify().ok
    return per_thread * threads / elapsed


def approvals(base: Path, n: int) -> tuple[float, float]:
    root = base / "skills-approvals"
    make_skill(root, "wipe", script=TRIVIAL_SH, class_="dangerous")
    host = SkillHost(isolated_settings(base / "approvals", root, disable_plugins=("audit",)))
    host.load()
    tickets = []
    for i in range(n):
        try:
            host.call("wipe", {"i": i}, persona="admin", caller="alice")
        except ApprovalRequired as exc:
            tickets.append(exc.ticket.id)
    start = time.perf_counter()
    for ticket in tickets:
        host.approve(ticket, approver="bob")
    approve_rate = n / (time.perf_counter() - start)
    start = time.perf_counter()
    cycles = max(n // 4, 1)
    for i in range(cycles):
        ticket = host.approvals.open_ticket(
            tool="wipe", args_digest=f"{i:064x}", persona="admin", requester="alice", args={"cycle": i}
        )
        host.approve(ticket.id, approver="bob")
        host.approve(ticket.id, approver="carol")
        host.approvals.claim(
            ticket.id, tool="wipe", args_digest=f"{i:064x}", persona="admin", caller="alice", call_id="x"
        )
    cycle_rate = cycles / (time.perf_counter() - start)
    return approve_rate, cycle_rate


def concurrent_split(base: Path, calls: int, rounds: int, threads: int = 8) -> dict[str, tuple[float, float]]:
    """``{method: (median calls/s, median paired ratio to the baseline)}`` (see item 4)."""
    # bench_exec.py's entry, payload and baseline (baselines/exec_bench.py), so the first
    # two rows are its "threads" row.
    sys.path.insert(0, str(Path(__file__).resolve().parent / "baselines"))
    import exec_bench

    root = base / "skills-conc"
    make_skill(root, "trivial", script=exec_bench.SH_ENTRY)
    entry = str(root / "trivial" / "run.sh")
    aged = time.time() - 10  # older than the 2 s in which an entry is hashed again per call
    for path in (root / "trivial").iterdir():
        os.utime(path, (aged, aged))
    args = json.loads(exec_bench.PAYLOAD)

    def host(name: str, disable: tuple[str, ...] = ()) -> SkillHost:
        return SkillHost(isolated_settings(base / name, root, disable_plugins=disable, sandbox="off"))

    full, dropped, without = host("conc-full"), host("conc-dropped"), host("conc-off", ("audit",))
    assert dropped.audit is not None
    dropped.audit._writer._write = lambda batch: None  # type: ignore[method-assign]  # rows built, never chained

    def call(on: SkillHost) -> Callable[[], object]:
        return lambda: on.call("trivial", args)

    methods: dict[str, Callable[[], object]] = {
        "subprocess.run": lambda: exec_bench.call_run_nt(entry),
        "host.call": call(full),
        "host.call, writer drops rows": call(dropped),
        "host.call, no audit plugin": call(without),
    }

    def rate(fn: Callable[[], object], n: int) -> float:
        with concurrent.futures.ThreadPoolExecutor(threads) as pool:
            start = time.perf_counter()
            list(pool.map(lambda _i: fn(), range(n)))
            return n / (time.perf_counter() - start)

    for fn in methods.values():
        rate(fn, 50)  # imports, validators, databases
    rates: dict[str, list[float]] = {m: [] for m in methods}
    for _ in range(rounds):
        for method, fn in methods.items():
            rates[method].append(rate(fn, calls))
    baseline = rates["subprocess.run"]
    return {
        m: (statistics.median(v), statistics.median(a / b for a, b in zip(v, baseline, strict=True)))
        for m, v in rates.items()
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=400, help="interleaved rounds per tool (default 400)")
    parser.add_argument("--approvals", type=int, default=300, help="approvals to time (default 300)")
    parser.add_argument(
        "--conc-calls", type=int, default=400, help="calls per method and round from 8 threads (0: skip)"
    )
    parser.add_argument("--conc-rounds", type=int, default=5, help="interleaved rounds of the 8-thread rates")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        calls = per_call(base, args.calls)
        one = audit_rows_per_second(base, 2000, 1)
        four = audit_rows_per_second(base, 2000, 4)
        approve_rate, cycle_rate = approvals(base, args.approvals)
        split = concurrent_split(base, args.conc_calls, args.conc_rounds) if args.conc_calls > 0 else {}
    print(f"SkillHost.call, trivial #!/bin/sh skill, median of {args.calls} interleaved rounds")
    print(f"{'tool':28} {'audit off':>10} {'audit on':>10} {'ratio':>7}")
    for tool, off, on in calls:
        label = f"{tool} ({'mutating, confirmed' if tool == 'change' else 'safe'})"
        print(f"{label:28} {off * 1e3:>8.3f}ms {on * 1e3:>8.3f}ms {on / off:>6.3f}x")
    print()
    print(f"{'audit rows/s, 1 thread':40} {one:>10.0f}")
    print(f"{'audit rows/s, 4 threads':40} {four:>10.0f}")
    print(f"{'approvals/s (SkillHost.approve)':40} {approve_rate:>10.0f}")
    print(f"{'ticket cycles/s (open, 2 approvals, claim)':40} {cycle_rate:>10.0f}")
    if split:
        print(f"\n8 threads, sandbox off, {args.conc_rounds} interleaved rounds of {args.conc_calls} calls")
        print(f"{'method':32} {'calls/s':>9} {'x subprocess.run':>17}")
        for method, (per_second, ratio) in split.items():
            print(f"{method:32} {per_second:>9.0f} {ratio:>17.2f}")


if __name__ == "__main__":
    main()
