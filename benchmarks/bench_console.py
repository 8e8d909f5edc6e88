"""How fast the operator console's pages come back: 1,000 tools, 10,000 audit rows.

``python benchmarks/bench_console.py [--tools 1000] [--rows 10000] [--runs 30]``

Builds a tree of skill.json tools and an audit log of that many rows (invalid calls:
no process per row), starts ``ongrid-skills serve`` in its own process on 127.0.0.1,
signs in through ``/login`` like a browser, then times each page: the whole HTML
answer (what the browser needs before its first paint, with the one stylesheet,
timed too). ``first`` is the first request after start; the others are medians and
p95 of ``--runs``. The audit page never waits for the hash chain's verification: it
shows the last result while the log is unchanged, else its script asks for it after
the first paint (``/audit?part=chain``: ``first`` is a full check, the rest cached).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from ongrid_plugins import Settings, SkillHost
from ongrid_plugins.errors import InvalidArguments, PermissionDenied
from ongrid_plugins.server.tokens import add_token

SCRIPT = "#!/bin/sh\nread -r args\nprintf '%s\\n' \"$args\"\n"


def build(base: Path, tools: int, rows: int) -> tuple[SkillHost, str]:
    for index in range(tools):
        folder = base / "skills" / f"tool_{index:04d}"
        folder.mkdir(parents=True)
        manifest = {
            "name": f"tool_{index:04d}",
            "description": f"tool number {index}, for the console benchmark",
            "entry": "run.sh",
            "class": ("safe", "mutating", "dangerous")[index % 3],
            "category": f"cat{index % 7}",
            "schema": {
                "type": "object",
                "properties": {"n": {"type": "integer", "minimum": 1}, "name": {"type": "string"}},
                "required": ["n"],
            },
        }
        (folder / "skill.json").write_text(json.dumps(manifest))
        (folder / "run.sh").write_text(SCRIPT)
        (folder / "run.sh").chmod(0o755)
    settings = Settings(
        skill_dirs=[str(base / "skills")], include_defaults=False, state_dir=str(base / "state")
    )
    host = SkillHost(settings)
    for row in range(rows):
        with contextlib.suppress(InvalidArguments, PermissionDenied):
            host.call(f"tool_{row % tools:04d}", {"n": 0}, persona="viewer", caller=f"user{row % 5}")
    host.audit.close()
    token = add_token(str(base / "tokens.json"), "ann", "admin")
    return host, token


def serve(base: Path) -> tuple[subprocess.Popen[str], str]:
    env = dict(os.environ, ONGRID_STATE_DIR=str(base / "state"))
    command = [sys.executable, "-m", "ongrid_plugins", "--no-defaults", "--dirs", str(base / "skills")]
    command += ["serve", "--port", "0", "--tokens", str(base / "tokens.json")]
    process = subprocess.Popen(command, env=env, stderr=subprocess.PIPE, text=True)
    assert process.stderr is not None
    for line in process.stderr:
        match = re.search(r"listening on (http://\S+)", line)
        if match:
            return process, match.group(1)
    raise SystemExit("the server did not start")


def timed(client: httpx.Client, path: str) -> float:
    start = time.perf_counter()
    answer = client.get(path)
    elapsed = (time.perf_counter() - start) * 1000
    assert answer.status_code == 200, (path, answer.status_code)
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tools", type=int, default=1000)
    parser.add_argument("--rows", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=30)
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="bench-console-"))
    started = time.perf_counter()
    _host, token = build(base, args.tools, args.rows)
    print(f"built {args.tools} tools and {args.rows} audit rows in {time.perf_counter() - started:.1f} s")
    process, url = serve(base)
    try:
        client = httpx.Client(base_url=url, timeout=60)
        login = client.get("/login")
        nonce = re.search(r'name="csrf" value="([^"]+)"', login.text)
        assert nonce is not None
        client.post("/login", data={"token": token, "csrf": nonce.group(1)})
        pages = {
            "catalog /": "/",
            "catalog /?q=tool_09": "/?q=tool_09",
            "tool /tools/tool_0001": "/tools/tool_0001",
            "approvals /approvals": "/approvals",
            "audit /audit (100 rows)": "/audit",
            "audit /audit?caller=user1": "/audit?caller=user1",
            "audit chain check (after paint)": "/audit?part=chain",
            "stylesheet": "/static/console.css",
        }
        print(f"\n{'page':32} {'bytes':>9} {'first ms':>9} {'p50 ms':>8} {'p95 ms':>8}")
        for name, path in pages.items():
            first = timed(client, path)
            size = len(client.get(path).content)
            times = sorted(timed(client, path) for _ in range(args.runs))
            p95 = times[min(len(times) - 1, int(len(times) * 0.95))]
            print(f"{name:32} {size:9d} {first:9.1f} {statistics.median(times):8.1f} {p95:8.1f}")
    finally:
        process.terminate()
        process.wait(10)


if __name__ == "__main__":
    main()
