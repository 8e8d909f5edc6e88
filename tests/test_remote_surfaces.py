"""Remote calls through every surface, routes from the config file, audit rows, broker faults.

One redis-server and one worker (queue ``s1``) serve the module (the fixtures of
tests/test_remote.py); the revoke test starts one more worker late. The ``gate`` skill
prints a line, then waits for a file the test creates only after that line reached it:
a surface that delivers stderr at the end, not while the skill runs, never finishes.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("celery")

from remotekit import REPO, Worker, free_port, key_file

from ongrid_plugins import SkillHost
from ongrid_plugins.errors import ConfigError
from ongrid_plugins.models import Event
from ongrid_plugins.remote.plugin import routes, where
from ongrid_plugins.remote.routes import route_table, unmatched
from ongrid_plugins.settings import Settings
from ongrid_plugins.testing import isolated_settings, make_skill

pytestmark = pytest.mark.timeout(120)

GATE = """#!/bin/sh
read -r args
flag=$(printf '%s' "$args" | sed 's/.*"flag": *"\\([^"]*\\)".*/\\1/')
echo "waiting" >&2
i=0
while [ ! -e "$flag" ]; do
  sleep 0.02; i=$((i+1))
  if [ $i -gt 500 ]; then echo "nobody released me" >&2; exit 4; fi
done
echo "released" >&2
printf '{"released": true}\\n'
"""
FAILING = "#!/bin/sh\ncat >/dev/null\necho 'disk full' >&2\nexit 3\n"
ROUTES = "gate=s1,failing=s1,category:ops=s1,late_*=q-late"


def _skills(root: Path) -> Path:
    make_skill(root, "gate", script=GATE, **{"class": "safe"})
    make_skill(root, "failing", script=FAILING, **{"class": "safe"})
    make_skill(root, "restart", category="ops", **{"class": "mutating"})
    make_skill(root, "late_gate", script=GATE, **{"class": "safe"})
    make_skill(root, "here", **{"class": "safe"})
    return root


@pytest.fixture(scope="module")
def worker(broker: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Worker]:
    base = tmp_path_factory.mktemp("surfaces-worker")
    started = Worker(broker, base, "s1@test", "s1", _skills(base / "skills"))
    yield started
    started.stop()


@pytest.fixture
def roots(tmp_path: Path) -> Path:
    return _skills(tmp_path / "host-skills")


@pytest.fixture
def host(broker: str, worker: Worker, tmp_path: Path, roots: Path) -> SkillHost:
    return SkillHost(
        isolated_settings(
            tmp_path, roots, broker_url=broker, remote_key_file=key_file(), remote_routes=ROUTES
        )
    )


def _local(tmp_path: Path, roots: Path) -> SkillHost:
    return SkillHost(isolated_settings(tmp_path / "local", roots))


class Gate:
    """An ``on_event`` callback that opens the gate when the skill's first line arrives."""

    def __init__(self, flag: Path) -> None:
        self.flag = flag
        self.events: list[Event] = []
        self.opened_at_event = -1

    def __call__(self, event: Event) -> None:
        self.events.append(event)
        if event.kind == "stderr" and event.data == "waiting":
            self.opened_at_event = len(self.events)
            self.flag.touch()

    def lines(self) -> list[str]:
        return [str(e.data) for e in self.events if e.kind == "stderr"]


def _env(broker_url: str, tmp_path: Path, **more: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ONGRID_")}
    env.update(
        ONGRID_BROKER_URL=broker_url,
        ONGRID_REMOTE_KEY_FILE=key_file(),
        ONGRID_REMOTE_ROUTES=ROUTES,
        ONGRID_CACHE_DIR="off",
        ONGRID_STATE_DIR=str(tmp_path / "cli-state"),
        ONGRID_CONFIG_DIR=str(tmp_path / "cli-config"),
        PYTHONPATH=str(REPO),
    )
    env.update(more)
    return env


def _cli(roots: Path) -> list[str]:
    return [sys.executable, "-m", "ongrid_plugins", "--no-defaults", "--dirs", str(roots)]


# ---------------------------------------------------------------------- routes and settings


def test_routes_come_from_the_config_file_and_the_environment_wins(tmp_path: Path) -> None:
    config = tmp_path / "config"
    config.mkdir()
    (config / "config.toml").write_text(
        '[remote]\nbroker_url = "redis://10.0.0.5:6379/0"\n'
        'routes = ["disk_*=storage", "category:network=edge"]\nbroker_timeout = 1.5\n'
    )
    env = {"ONGRID_CONFIG_DIR": str(config)}
    from_file = Settings.from_env(env)
    assert from_file.broker_url == "redis://10.0.0.5:6379/0"
    assert from_file.remote_routes == "disk_*=storage,category:network=edge"
    assert from_file.broker_timeout == 1.5
    assert from_file.remote_routes_from == f"routes in [remote] of {config / 'config.toml'}"
    env_wins = Settings.from_env({**env, "ONGRID_REMOTE_ROUTES": "x=q", "ONGRID_BROKER_TIMEOUT": "4"})
    assert (env_wins.remote_routes, env_wins.remote_routes_from) == ("x=q", "ONGRID_REMOTE_ROUTES")
    assert env_wins.broker_timeout == 4.0 and env_wins.broker_url == "redis://10.0.0.5:6379/0"
    (config / "config.toml").write_text('[remote.routes]\n"disk_*" = "storage"\n"*" = "rest"\n')
    assert Settings.from_env(env).remote_routes == "disk_*=storage,*=rest"  # a table keeps its order
    (config / "config.toml").write_text('[remote]\nroutes = ["disk_*=storage", "edge"]\n')
    [problem] = routes(Settings.from_env(env)).problems
    assert problem.startswith(f"routes in [remote] of {config / 'config.toml'}: 'edge' is not PATTERN=QUEUE")


def test_a_bad_broker_timeout_in_the_config_file_names_the_file(tmp_path: Path) -> None:
    (tmp_path / "config.toml").write_text("[remote]\nbroker_timeout = -1\n")
    with pytest.raises(
        ConfigError, match=r"broker_timeout in \[remote\] of .*config.toml must be a positive"
    ):
        Settings.from_env({"ONGRID_CONFIG_DIR": str(tmp_path)})
    (tmp_path / "config.toml").write_text("[remote\nbroken")
    assert Settings.from_env({"ONGRID_CONFIG_DIR": str(tmp_path)}).remote_routes == ""  # logged, not fatal


@pytest.mark.parametrize(
    ("item", "why"),
    [
        ("disk_*", "is not PATTERN=QUEUE (no '=')"),
        ("disk_*=", "has an empty queue"),
        ("disk_*=a b", "has a bad queue 'a b'"),
        ("=storage", "has an empty pattern"),
        ("disk/*=storage", "has a bad pattern"),
        ("disk_[a=storage", "has a bad pattern"),
        ("category:=storage", "names no category"),
    ],
)
def test_a_bad_route_is_named_with_its_setting_and_a_fix(item: str, why: str) -> None:
    [problem] = route_table(f"here=s1,{item}").problems
    assert problem.startswith(f"ONGRID_REMOTE_ROUTES: {item!r} {why}")
    assert problem.endswith("fix or remove it (e.g. disk_*=storage,category:network=edge)")


def test_a_bad_route_never_stops_the_host_and_refuses_only_what_it_leaves_undecided(
    tmp_path: Path, roots: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from clirun import run

    settings = isolated_settings(
        tmp_path, roots, broker_url="redis://127.0.0.1:9/0", remote_routes="here=s1,oops"
    )
    host = SkillHost(settings)
    assert {"gate", "here"} <= {t.name for t in host.tools()}
    assert where(host.get("here"), settings) == "remote queue s1"  # matched before the bad item
    assert where(host.get("gate"), settings).startswith(
        "refused: gate is not run: ONGRID_REMOTE_ROUTES: 'oops'"
    )
    refused = host.call("gate", {"flag": "/nonexistent"})
    assert not refused.ok and "'oops' is not PATTERN=QUEUE" in str(refused.error)
    assert refused.remote is None  # nothing was sent anywhere, nothing ran locally

    monkeypatch.setenv("ONGRID_BROKER_URL", "redis://127.0.0.1:9/0")
    monkeypatch.setenv("ONGRID_REMOTE_KEY_FILE", key_file())
    monkeypatch.setenv("ONGRID_REMOTE_ROUTES", "here=s1,category:opz=s1,oops")
    monkeypatch.setenv("ONGRID_STATE_DIR", str(tmp_path / "state"))
    code, out, err = run(capsys, "--no-defaults", "--dirs", str(roots), "list")
    assert code == 0
    rows = {line.split()[0]: line for line in out.splitlines()[1:]}
    assert "remote queue s1" in rows["here"] and "REFUSED (bad route)" in rows["gate"]
    assert "warning: ONGRID_REMOTE_ROUTES: 'oops' is not PATTERN=QUEUE" in err
    assert "names an unknown category 'opz' (the loaded tools' categories: external, ops)" in err


def test_unmatched_routes_are_warnings_not_errors(roots: Path, tmp_path: Path) -> None:
    host = SkillHost(isolated_settings(tmp_path, roots))
    table = route_table("nothing_*=a,category:ops=b,gate=c")
    assert unmatched(table, host.tools()) == ["ONGRID_REMOTE_ROUTES: nothing_*=a matches no loaded tool"]


def test_list_and_show_say_where_each_tool_runs(
    roots: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from clirun import run

    monkeypatch.setenv("ONGRID_BROKER_URL", "redis://127.0.0.1:9/0")
    monkeypatch.setenv("ONGRID_REMOTE_KEY_FILE", key_file())
    monkeypatch.setenv("ONGRID_REMOTE_ROUTES", ROUTES)
    monkeypatch.setenv("ONGRID_STATE_DIR", str(tmp_path / "state"))
    base = ("--no-defaults", "--dirs", str(roots))
    code, out, _ = run(capsys, *base, "list", "--json")
    runs = {item["name"]: item["runs"] for item in json.loads(out)["items"]}
    assert code == 0
    assert runs == {
        "failing": "remote queue s1",
        "gate": "remote queue s1",
        "here": "local",
        "late_gate": "remote queue q-late",
        "restart": "remote queue s1",  # by its category
    }
    code, out, _ = run(capsys, *base, "list")
    header = out.splitlines()[0].split()
    assert header[:5] == ["NAME", "CLASS", "CATEGORY", "FROM", "RUNS"]
    assert "remote queue s1" in next(line for line in out.splitlines() if line.startswith("restart"))
    code, out, _ = run(capsys, *base, "show", "restart")
    assert "runs:             remote queue s1" in out.splitlines()
    code, out, _ = run(capsys, *base, "show", "here", "--json")
    assert json.loads(out)["runs"] == "local"
    monkeypatch.delenv("ONGRID_REMOTE_ROUTES")
    code, out, _ = run(capsys, *base, "list")
    assert "RUNS" not in out.splitlines()[0]  # no routes: every tool runs here, no column


# ---------------------------------------------------------------------- every surface


def _same(remote: Any, local: Any) -> None:
    assert remote.ok and local.ok, (remote.error, local.error)
    fields = ("value", "exit_code", "signal", "timed_out", "outcome", "stderr_tail")
    assert {f: getattr(remote, f) for f in fields} == {f: getattr(local, f) for f in fields}


def test_sync_call_streams_while_the_skill_runs_and_returns_what_a_local_call_does(
    host: SkillHost, tmp_path: Path, roots: Path
) -> None:
    gate = Gate(tmp_path / "open-remote")
    remote = host.call("gate", {"flag": str(gate.flag)}, on_event=gate)
    local_gate = Gate(tmp_path / "open-local")
    local = _local(tmp_path, roots).call("gate", {"flag": str(local_gate.flag)}, on_event=local_gate)
    _same(remote, local)
    assert remote.value == {"released": True}
    assert gate.lines() == ["waiting", "released"] == local_gate.lines()
    assert [e.kind for e in gate.events] == ["start", "stderr", "stderr", "exit"]
    assert gate.opened_at_event == 2  # the gate opened on the line, before "released" and "exit"
    assert remote.remote is not None and remote.remote.worker == "s1@test" and local.remote is None


def test_async_acall_streams_on_the_loop(host: SkillHost, tmp_path: Path) -> None:
    gate = Gate(tmp_path / "open")
    seen_on: list[bool] = []

    async def main() -> Any:
        loop = asyncio.get_running_loop()

        def on_event(event: Event) -> None:
            seen_on.append(asyncio.get_running_loop() is loop)  # callbacks run on the caller's loop
            gate(event)

        return await host.acall("gate", {"flag": str(gate.flag)}, on_event=on_event)

    result = asyncio.run(main())
    assert result.ok and result.value == {"released": True}
    assert gate.lines() == ["waiting", "released"] and all(seen_on)


def test_dispatch_answers_a_remote_tool_call_like_a_local_one(
    host: SkillHost, tmp_path: Path, roots: Path
) -> None:
    def call(h: SkillHost, flag: Path) -> dict[str, Any]:
        gate = Gate(flag)
        arguments = json.dumps({"flag": str(flag)})
        message = h.dispatch(
            {"id": "call_1", "type": "function", "function": {"name": "gate", "arguments": arguments}},
            on_event=gate,
        )
        assert gate.lines() == ["waiting", "released"]
        return message

    remote = call(host, tmp_path / "open-remote")
    local = call(_local(tmp_path, roots), tmp_path / "open-local")
    assert remote == local
    assert json.loads(remote["content"]) == {"released": True}


def test_the_cli_streams_stderr_live_and_keeps_the_exit_codes(
    broker: str,
    worker: Worker,
    tmp_path: Path,
    roots: Path,
) -> None:
    flag = tmp_path / "open"
    proc = subprocess.Popen(
        [*_cli(roots), "run", "gate", json.dumps({"flag": str(flag)}), "--json"],
        env=_env(broker, tmp_path),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr is not None and proc.stdout is not None
    first = proc.stderr.readline()
    assert "waiting" in first and proc.poll() is None  # the line came while the skill runs
    flag.touch()
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert json.loads(out)["value"] == {"released": True} and "released" in err
    codes = {}
    for env in (_env(broker, tmp_path), _env(broker, tmp_path, ONGRID_REMOTE_ROUTES="")):
        failed = subprocess.run(
            [*_cli(roots), "run", "failing"], env=env, capture_output=True, text=True, timeout=60
        )
        codes[env["ONGRID_REMOTE_ROUTES"] or "local"] = (failed.returncode, "disk full" in failed.stderr)
    assert codes == {ROUTES: (1, True), "local": (1, True)}


def test_rest_executes_and_streams_a_remote_call(host: SkillHost, tmp_path: Path) -> None:
    import httpx
    from httpserve import running

    from ongrid_plugins.server.rest import create_app
    from ongrid_plugins.server.tokens import TokenStore

    token = "t" * 43
    app = create_app(host, TokenStore.single(token, "ann", "operator"))
    headers = {"Authorization": f"Bearer {token}"}
    flag = tmp_path / "open"
    with running(app) as url, httpx.Client(base_url=url, timeout=60) as client:
        events: list[tuple[str, Any]] = []
        body = {"params": {"flag": str(flag)}}
        with client.stream("POST", "/v1/skills/gate/execute/stream", headers=headers, json=body) as response:
            assert response.status_code == 200
            kind = ""
            for line in response.iter_lines():
                if line.startswith("event: "):
                    kind = line[len("event: ") :]
                elif line.startswith("data: "):
                    events.append((kind, json.loads(line[len("data: ") :])))
                    if kind == "log" and events[-1][1]["line"] == "waiting":
                        flag.touch()  # only now can the skill finish
        assert [k for k, _ in events] == ["start", "log", "log", "exit", "result"]
        assert events[-1][1]["result"] == {"released": True}
        failed = client.post("/v1/skills/failing/execute", headers=headers, json={})
        assert failed.status_code == 200
        data = failed.json()
        assert (data["status"], data["exit_code"]) == ("failed", 3)


def test_mcp_streams_a_remote_call_as_progress(
    broker: str,
    worker: Worker,
    tmp_path: Path,
    roots: Path,
) -> None:
    import anyio
    import mcp.types as types
    from mcp import Client, StdioServerParameters

    flag = tmp_path / "open"
    progress: list[str | None] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append(message)
        if message == "waiting":
            flag.touch()

    params = StdioServerParameters(
        command=sys.executable,
        args=[*_cli(roots)[1:], "mcp", "--persona", "operator"],
        env=_env(broker, tmp_path),
    )
    box: dict[str, Any] = {}

    async def main() -> None:
        async with Client(params, read_timeout_seconds=60) as client:
            box["ok"] = await client.call_tool("gate", {"flag": str(flag)}, progress_callback=on_progress)
            box["failed"] = await client.call_tool("failing", {})

    anyio.run(main)
    assert progress == ["waiting", "released"]
    assert not box["ok"].is_error and box["ok"].structured_content == {"released": True}
    failed = box["failed"]
    assert failed.is_error
    block = failed.content[0]
    assert isinstance(block, types.TextContent)
    data = json.loads(block.text)
    assert (data["code"], data["exit_code"], data["stderr_tail"]) == ("failed", 3, ["disk full"])
    assert data["error"] == "the skill exited with status 3: disk full"  # a local call's words


# ---------------------------------------------------------------------- audit


def test_the_audit_row_records_the_worker_queue_task_and_worker_digest(
    host: SkillHost, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from clirun import run

    result = host.call("restart", {"n": 1}, confirm=True)
    assert result.ok, result.error
    host.call("here", {})
    host.audit.flush()
    remote_row, local_row = host.audit.entries()
    assert remote_row.remote == {
        "queue": "s1",
        "task_id": result.remote.task_id if result.remote else None,
        "worker": "s1@test",
        "worker_digest": host.get("restart").digest,
    }
    assert local_row.remote is None
    assert host.audit.verify().ok
    monkeypatch.setenv("ONGRID_STATE_DIR", host.settings.state_dir)
    code, out, _ = run(capsys, "--no-defaults", "audit", "list")
    assert code == 0 and out.splitlines()[0].split()[-2:] == ["RAN", "ON"]
    assert out.splitlines()[1].endswith("s1@test (queue s1)") and out.splitlines()[2].endswith("local")
    code, out, _ = run(capsys, "--no-defaults", "audit", "show", remote_row.call_id)
    shown = dict(line.split(":", 1) for line in out.splitlines() if ":" in line)
    assert code == 0
    assert shown["worker"].strip() == "s1@test" and shown["queue"].strip() == "s1"
    assert shown["task id"].strip() == remote_row.remote["task_id"]
    assert shown["worker digest"].strip() == host.get("restart").digest
    code, out, _ = run(capsys, "--no-defaults", "audit", "show", "2", "--json")
    assert json.loads(out)["remote"] is None
    assert run(capsys, "--no-defaults", "audit", "show", "99")[0] == 4  # no such row: not found
    assert run(capsys, "--no-defaults", "audit", "verify")[0] == 0


def test_an_audit_log_from_before_remote_columns_migrates_and_verifies(tmp_path: Path, roots: Path) -> None:
    from ongrid_plugins.audit.chain import COLUMNS, GENESIS
    from ongrid_plugins.models import canonical_json

    old = [c for c in COLUMNS if c != "remote"]  # the schema of the release before remote workers
    state = tmp_path / ".ongrid-state"
    state.mkdir()
    conn = sqlite3.connect(state / "audit.db")
    conn.execute(f"CREATE TABLE entries (seq INTEGER PRIMARY KEY, {', '.join(old[1:])}, hash TEXT NOT NULL)")
    conn.execute("CREATE TABLE head (id INTEGER PRIMARY KEY CHECK (id = 1), seq INTEGER NOT NULL, hash TEXT)")
    row = dict.fromkeys(old) | {
        "seq": 1,
        "time": 1.0,
        "call_id": "old",
        "tool": "here",
        "sandbox": '{"confined":false}',
        "skill_digest": "sha256:" + "1" * 64,
        "prev_hash": GENESIS,
    }
    import hashlib

    digest = hashlib.sha256(canonical_json([row[c] for c in old]).encode()).hexdigest()
    conn.execute(
        f"INSERT INTO entries ({', '.join(old)}, hash) VALUES ({', '.join('?' * len(old))}, ?)",
        (*[row[c] for c in old], digest),
    )
    conn.execute("INSERT INTO head VALUES (1, 1, ?)", (digest,))
    conn.commit()
    conn.close()
    host = SkillHost(isolated_settings(tmp_path, roots))
    assert host.call("here", {}).ok
    host.audit.flush()
    assert [e.remote for e in host.audit.entries()] == [None, None]
    report = host.audit.verify()
    assert report.ok and report.entries == 2
    columns = [r[1] for r in sqlite3.connect(state / "audit.db").execute("PRAGMA table_info(entries)")]
    assert "remote" in columns


# ---------------------------------------------------------------------- broker faults, timeouts


@pytest.fixture
def silent_broker() -> Iterator[str]:
    """A 127.0.0.1 port that accepts connections and never answers (a hung broker)."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    yield f"redis://127.0.0.1:{sock.getsockname()[1]}/0"
    sock.close()


@pytest.mark.parametrize("kind", ["refused", "silent"])
def test_a_broker_down_or_silent_fails_the_call_within_the_broker_timeout(
    kind: str, silent_broker: str, tmp_path: Path, roots: Path
) -> None:
    url = silent_broker if kind == "silent" else f"redis://127.0.0.1:{free_port()}/0"
    settings = isolated_settings(
        tmp_path, roots, broker_url=url, remote_key_file=key_file(), remote_routes=ROUTES, broker_timeout=0.5
    )
    host = SkillHost(settings)
    assert "gate" in [t.name for t in host.tools()]
    started = time.monotonic()
    result = host.call("gate", {"flag": "/nonexistent"})
    elapsed = time.monotonic() - started
    assert elapsed < 0.5 * 2 + 1.0, f"took {elapsed:.1f}s with a 0.5s broker timeout"
    assert not result.ok and result.outcome == "failed"
    assert f"the broker {url} is unreachable" in str(result.error)
    assert "gave up after 0.5s (ONGRID_BROKER_TIMEOUT)" in str(result.error)
    assert result.remote is not None and result.remote.queue == "s1" and result.remote.worker == ""


def test_with_the_broker_down_the_cli_starts_lists_and_fails_a_call_fast(tmp_path: Path, roots: Path) -> None:
    env = _env(f"redis://127.0.0.1:{free_port()}/0", tmp_path, ONGRID_BROKER_TIMEOUT="1")
    listed = subprocess.run(
        [*_cli(roots), "list", "--json"], env=env, capture_output=True, text=True, timeout=60
    )
    assert listed.returncode == 0, listed.stderr
    assert {i["name"]: i["runs"] for i in json.loads(listed.stdout)["items"]}["gate"] == "remote queue s1"
    started = time.monotonic()
    ran = subprocess.run(
        [*_cli(roots), "run", "gate", '{"flag": "/x"}'], env=env, capture_output=True, text=True, timeout=60
    )
    assert ran.returncode == 1 and "is unreachable" in ran.stderr
    assert time.monotonic() - started < 10  # interpreter start-up included; the broker part is ~0 s


def test_an_unanswered_call_times_out_on_the_host_and_its_task_is_revoked(
    broker: str,
    worker: Worker,
    tmp_path: Path,
    roots: Path,
) -> None:
    from ongrid_plugins.remote.app import make_app
    from ongrid_plugins.remote.client import GRACE
    from ongrid_plugins.remote.wire import channel

    settings = isolated_settings(
        tmp_path, roots, broker_url=broker, remote_key_file=key_file(), remote_routes=ROUTES, kill_grace=0.2
    )
    host = SkillHost(settings)
    host.load()  # the catalog's first load is not part of the call's time
    started = time.monotonic()
    result = host.call("late_gate", {"flag": str(tmp_path / "never")}, timeout=0.5)
    elapsed = time.monotonic() - started
    assert result.outcome == "timed_out" and result.timed_out
    assert elapsed < 0.5 + 0.2 + GRACE + 2.5, f"took {elapsed:.1f}s"  # not the skill's own timeout
    assert result.remote is not None and result.remote.worker == "" and result.remote.queue == "q-late"
    task_id = result.remote.task_id
    assert f"the task {task_id} was revoked" in str(result.error)
    # The revoke reached the workers: the live one (of another queue) lists the task as revoked.
    app = make_app(broker)
    revoked = app.control.inspect(destination=["s1@test"], timeout=10).revoked() or {}
    assert task_id in revoked.get("s1@test", [])
    # A worker of that queue started later does not run it (revoked and expired).
    import redis

    pubsub = redis.Redis.from_url(broker).pubsub(ignore_subscribe_messages=True)
    pubsub.subscribe(channel(result.call_id, task_id))
    late = Worker(broker, tmp_path / "late", "late@test", "q-late", _skills(tmp_path / "late" / "skills"))
    try:
        deadline = time.monotonic() + 3
        messages = []
        while time.monotonic() < deadline:
            message = pubsub.get_message(timeout=0.2)
            if message is not None:
                messages.append(message)
        assert messages == [], "a late worker picked up the revoked call"
        log = late.log.read_text()
        assert task_id in log and ("revoked" in log.lower() or "expired" in log.lower()), log[-2000:]
    finally:
        pubsub.close()
        late.stop()


def test_cancelling_an_async_remote_call_kills_it_on_the_worker(
    host: SkillHost, worker: Worker, tmp_path: Path
) -> None:
    flag = tmp_path / "never"
    started = threading.Event()

    def on_event(event: Event) -> None:
        if event.kind == "stderr":
            started.set()

    async def main() -> None:
        task = asyncio.ensure_future(host.acall("gate", {"flag": str(flag)}, on_event=on_event))
        while not started.is_set():
            await asyncio.sleep(0.02)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    cancelled_at = time.monotonic()
    asyncio.run(main())
    host.audit.flush()
    [row] = host.audit.entries()
    assert row.outcome == "cancelled"
    wanted = f"call {row.call_id} of gate: cancelled (cancelled by the host"
    while wanted not in worker.log.read_text():  # the worker killed the skill and said so
        assert time.monotonic() - cancelled_at < 5, worker.log.read_text()[-2000:]
        time.sleep(0.05)
