"""What the audit log costs, and how many rows it writes with concurrent writers (a script, not a test).

Rows, each measured in new processes that import ``ongrid_plugins`` from the tree named
(this checkout, and with ``--against DIR`` another one, side by side in one table):

1. ``host.call`` of a trivial ``#!/bin/sh`` skill, sandbox off, audit plugin on and off:
   the median wall time per call (the two hosts alternate call by call).
2. Audit rows per second, the log alone: ``ongrid_before_call`` + ``ongrid_after_call``
   of a call that runs nothing, until every row is in the chain (``flush()``), from 1
   thread, from 8 threads of one process, and from 8 processes sharing one log. The
   chain is verified after each run.
3. Approvals per second (``host.approve``: a fsync'd transaction and the verify hooks)
   and whole ticket cycles per second (open, two approvals, claim).

Rounds alternate between the trees; each figure is the median over rounds.

Usage::

    python benchmarks/bench_audit.py [--rows 2000] [--calls 300] [--approvals 200] [--rounds 3]
        [--against DIR]

``DIR`` holds an ``ongrid_plugins`` package, e.g. an earlier commit's:
``mkdir /tmp/before && git archive main ongrid_plugins | tar -x -C /tmp/before``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent

WORKER = r"""
import json, os, statistics, sys, threading, time, uuid
from pathlib import Path
from ongrid_plugins import CallResult, SkillHost
from ongrid_plugins.models import CallRequest
from ongrid_plugins.testing import isolated_settings, make_skill

TRIVIAL_SH = "#!/bin/sh\necho '{\"ok\": true}'\n"
mode, base, count, threads = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
root = base / f"skills-{os.getpid()}"  # each process its own (they share the state folder)
make_skill(root, "trivial", script=TRIVIAL_SH)


def host(state, **more):
    return SkillHost(isolated_settings(base / state, root, sandbox="off", **more))


if mode == "call":
    on, off = host("on"), host("off", disable_plugins=("audit",))
    times = {"on": [], "off": []}
    for h in (on, off):
        for _ in range(20):
            h.call("trivial", {"n": 1})
    for i in range(count):
        order = (("on", on), ("off", off)) if i % 2 == 0 else (("off", off), ("on", on))
        for label, h in order:
            start = time.perf_counter()
            h.call("trivial", {"n": i})
            times[label].append(time.perf_counter() - start)
    assert on.audit.flush() and on.audit.verify().ok
    print(json.dumps({k: statistics.median(v) for k, v in times.items()}))
    sys.exit(0)

if mode == "approvals":
    from ongrid_plugins import ApprovalRequired

    make_skill(root, "wipe", script=TRIVIAL_SH, class_="dangerous")
    h = host("approvals", disable_plugins=("audit",))
    h.load()
    tickets = []
    for i in range(count):
        try:
            h.call("wipe", {"i": i}, persona="admin", caller="alice")
        except ApprovalRequired as exc:
            tickets.append(exc.ticket.id)
    start = time.perf_counter()
    for ticket in tickets:
        h.approve(ticket, approver="bob")
    approve_rate = count / (time.perf_counter() - start)
    cycles = max(count // 4, 1)
    start = time.perf_counter()
    for i in range(cycles):
        digest = f"{i:064x}"
        ticket = h.approvals.open_ticket(
            tool="wipe", args_digest=digest, persona="admin", requester="alice", args={"cycle": i}
        )
        h.approve(ticket.id, approver="bob")
        h.approve(ticket.id, approver="carol")
        h.approvals.claim(
            ticket.id, tool="wipe", args_digest=digest, persona="admin", caller="alice", call_id="x"
        )
    print(json.dumps({"approvals": approve_rate, "cycles": cycles / (time.perf_counter() - start)}))
    sys.exit(0)

h = host("rows")
log, tool, persona = h.audit, h.get("trivial"), h.persona("operator")


def work(n):
    for _ in range(n):
        request = CallRequest(tool, {"n": 1}, persona, uuid.uuid4().hex, "d" * 64, '{"n":1}', "bench")
        log.ongrid_before_call(request=request)
        result = CallResult("trivial", True, {"ok": True}, duration=0.001)
        log.ongrid_after_call(request=request, result=result)


work(5)
assert log.flush()
print("ready", flush=True)
sys.stdin.readline()  # go
workers = [threading.Thread(target=work, args=(count // threads,)) for _ in range(threads)]
start = time.perf_counter()
for w in workers:
    w.start()
for w in workers:
    w.join()
assert log.flush()  # chained, not just recorded
print(json.dumps({"elapsed": time.perf_counter() - start}), flush=True)
"""


def _spawn(tree: str, *args: str) -> subprocess.Popen[str]:
    env = dict(os.environ, PYTHONPATH=tree, ONGRID_SANDBOX="off")
    return subprocess.Popen(
        [sys.executable, "-c", WORKER, *args],
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=tempfile.gettempdir(),
    )


def per_call(tree: str, base: Path, calls: int) -> dict[str, float]:
    proc = _spawn(tree, "call", str(base), str(calls), "1")
    out, _ = proc.communicate()
    assert proc.returncode == 0, out
    result: dict[str, float] = json.loads(out)
    return result


def approvals(tree: str, base: Path, count: int) -> dict[str, float]:
    proc = _spawn(tree, "approvals", str(base), str(count), "1")
    out, _ = proc.communicate()
    assert proc.returncode == 0, out
    result: dict[str, float] = json.loads(out)
    return result


def rows_per_second(tree: str, base: Path, rows: int, processes: int, threads: int) -> float:
    """Rows/s of ``processes`` processes with ``threads`` threads each, all writing one log."""
    procs = [_spawn(tree, "rows", str(base), str(rows // processes), str(threads)) for _ in range(processes)]
    for proc in procs:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    start = time.perf_counter()
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.write("go\n")
        proc.stdin.flush()
    for proc in procs:
        proc.communicate()
        assert proc.returncode == 0
    elapsed = time.perf_counter() - start
    check = subprocess.run(
        [sys.executable, "-c", _VERIFY, str(base / "rows" / ".ongrid-state" / "audit.db")],
        env=dict(os.environ, PYTHONPATH=tree),
        capture_output=True,
        text=True,
        check=False,
    )
    assert check.returncode == 0, check.stderr[-2000:]
    return (rows // processes // threads) * threads * processes / elapsed


_VERIFY = "import sys\nfrom ongrid_plugins.audit import AuditLog\nassert AuditLog(sys.argv[1]).verify().ok\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=2000, help="rows per rows/s figure (default 2000)")
    parser.add_argument("--calls", type=int, default=300, help="calls per host per round (default 300)")
    parser.add_argument("--approvals", type=int, default=200, help="approvals per round (default 200)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds, alternating the trees (default 3)")
    parser.add_argument("--against", metavar="DIR", help="another tree holding ongrid_plugins/")
    args = parser.parse_args()
    trees = {"this tree": str(HERE)}
    if args.against:
        trees["--against"] = str(Path(args.against).resolve())
    rows = {
        "host.call, audit off (us)": lambda t, b: per_call(t, b, args.calls)["off"] * 1e6,
        "host.call, audit on (us)": None,  # filled from the same run as audit off
        "rows/s, 1 thread": lambda t, b: rows_per_second(t, b, args.rows, 1, 1),
        "rows/s, 8 threads": lambda t, b: rows_per_second(t, b, args.rows, 1, 8),
        "rows/s, 8 processes": lambda t, b: rows_per_second(t, b, args.rows, 8, 1),
        "approvals/s (host.approve)": None,
        "ticket cycles/s": None,  # open, two approvals, claim
    }
    found: dict[str, dict[str, list[float]]] = {row: {t: [] for t in trees} for row in rows}
    for n in range(args.rounds):
        order = list(trees) if n % 2 == 0 else list(trees)[::-1]
        for label in order:
            with tempfile.TemporaryDirectory() as tmp:
                base = Path(tmp)
                call = per_call(trees[label], base / "call", args.calls)
                found["host.call, audit off (us)"][label].append(call["off"] * 1e6)
                found["host.call, audit on (us)"][label].append(call["on"] * 1e6)
                signed = approvals(trees[label], base / "approvals", args.approvals)
                found["approvals/s (host.approve)"][label].append(signed["approvals"])
                found["ticket cycles/s"][label].append(signed["cycles"])
                for index, (row, measure) in enumerate(rows.items()):
                    if row.startswith("rows/s") and measure is not None:
                        found[row][label].append(measure(trees[label], base / f"rows-{index}"))
    print(f"audit log, median of {args.rounds} rounds ({args.rows} rows, {args.calls} calls a round)")
    print(f"{'':28}" + "".join(f"{label:>14}" for label in trees))
    for row, by_tree in found.items():
        print(f"{row:28}" + "".join(f"{statistics.median(by_tree[t]):>14.0f}" for t in trees))


if __name__ == "__main__":
    main()
