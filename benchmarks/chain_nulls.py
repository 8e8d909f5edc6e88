#!/usr/bin/env python3
"""What binding a None costs the audit writer: ``append_prepared`` with a None bound as None
and as a NaN (which SQLite stores as the same NULL), alternating in one process.

The rows are copies of a real call's row (an unconfined ``#!/bin/sh`` skill: four of its
columns are None), each with its own call id, chained in batches as the writer thread
chains them. The figure is the thread's CPU time a row (``time.thread_time``), median over
rounds, so other processes on the machine do not count.

    python benchmarks/chain_nulls.py [--batch 50] [--rounds 40]
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # this tree's package

from ongrid_plugins.audit import chain
from ongrid_plugins.models import canonical_json

#: The values of a real row (COLUMNS[1:-1]) of an unconfined call of a trivial skill.
ROW = [
    1796353926.165038, "91b66c62677f0000000001", "bench_entry_sh", "safe", "operator", "root", "{}",
    "b8f00d53f1f9098497aceaed052b7edd0f8fd21c21c787f2e72f85115d6a15fe", "[]", "allow",
    "safe tools run for any persona", "ongrid.gate", "ok", None, 0, None, 0.005407, "[]", 8,
    "39f94024cbcf740958d8bb6e25095e33ee260776744698ff4e0d43a4454bf72f", None, "[]", 21396, "vm",
    '{"confined":false,"reason":"ONGRID_SANDBOX=off"}',
    "ef428372d83b52300aa3fd3c6bed58ed7809c7907401655f89b9ff8d4261f9e0", None,
]  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=50, help="rows a transaction (default 50)")
    parser.add_argument("--rounds", type=int, default=40, help="rounds of each way (default 40)")
    args = parser.parse_args()
    assert len(ROW) == len(chain.COLUMNS) - 2
    folder = tempfile.TemporaryDirectory(prefix="ongrid-bench-")
    conn = sqlite3.connect(os.path.join(folder.name, "audit.db"), isolation_level=None)
    conn.executescript(chain.SCHEMA)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    ways = {"None as None": None, "None as NaN": float("nan")}
    per_row: dict[str, list[float]] = {name: [] for name in ways}
    made = 0
    for round_ in range(args.rounds):
        for name in ways if round_ % 2 else reversed(list(ways)):
            batches = []
            for _ in range(10):
                rows = []
                for _ in range(args.batch):
                    made += 1
                    values = list(ROW)
                    values[1] = f"{made:022x}"
                    rows.append((values, canonical_json(values)[1:-1]))
                batches.append(rows)
            chain._NULL = ways[name]
            started = time.thread_time()
            for rows in batches:
                conn.execute("BEGIN IMMEDIATE")
                chain.append_prepared(conn, rows)
                conn.commit()
            per_row[name].append((time.thread_time() - started) / (10 * args.batch) * 1e6)
    base = statistics.median(per_row["None as None"])
    print(f"{'binding':<14} {'us a row':>9} {'x None':>7}   (batches of {args.batch}, {args.rounds} rounds)")
    for name, values in per_row.items():
        median = statistics.median(values)
        print(f"{name:<14} {median:9.2f} {median / base:7.3f}")
    conn.close()
    folder.cleanup()


if __name__ == "__main__":
    main()
