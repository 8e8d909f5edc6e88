"""Remote workers: a real redis-server and real Celery workers, each with its own skill root.

One Redis and two workers (queues ``q1`` and ``q2``) serve the whole module; the test
that kills a worker starts its own. Skills are written twice, once for the host and
once per worker, byte for byte the same unless a test says otherwise.
"""

from __future__ import annotations

import asyncio
import json
import os
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
from ongrid_plugins.remote.plugin import where
from ongrid_plugins.remote.routes import parse_routes, route_for
from ongrid_plugins.remote.wire import LEASE
from ongrid_plugins.testing import EventRecorder, isolated_settings, make_skill

pytestmark = pytest.mark.timeout(120)


CHATTY = """#!/bin/sh
cat >/dev/null
echo "first line" >&2
sleep 0.6
echo "second line" >&2
sleep 0.6
echo "third line" >&2
echo '{"done": true}'
"""

SLEEPY = """#!/bin/sh
cat >/dev/null
echo "going to sleep" >&2
sleep 10
echo '{}'
"""

FAILING = """#!/bin/sh
cat >/dev/null
echo "bad things" >&2
exit 3
"""


def _skills(root: Path, *, echo_extra: str = "") -> Path:
    root.mkdir(parents=True, exist_ok=True)
    make_skill(root, "echo_remote", **{"class": "safe"})
    if echo_extra:
        (root / "echo_remote" / "run.sh").write_text(
            (root / "echo_remote" / "run.sh").read_text() + echo_extra
        )
    make_skill(root, "chatty", script=CHATTY, **{"class": "safe"})
    make_skill(root, "sleepy", script=SLEEPY, timeout_seconds=8, **{"class": "safe"})
    make_skill(root, "failing", script=FAILING, **{"class": "safe"})
    make_skill(root, "change_it", category="ops", **{"class": "mutating"})
    make_skill(root, "skewed", **{"class": "safe"})
    make_skill(root, "nowhere", **{"class": "safe"})
    return root


@pytest.fixture(scope="module")
def workers(broker: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Worker]]:
    base = tmp_path_factory.mktemp("workers")
    one = _skills(base / "w1" / "skills")
    two = _skills(base / "w2" / "skills")
    # The worker of q1 has another version of ``skewed``: same manifest, other entry bytes.
    (one / "skewed" / "run.sh").write_text((one / "skewed" / "run.sh").read_text() + "# v2\n")
    started = {
        "w1": Worker(broker, base / "w1", "w1@test", "q1", one),
        "w2": Worker(broker, base / "w2", "w2@test", "q2", two),
    }
    yield started
    for worker in started.values():
        worker.stop()


ROUTES = "change_it=q2,category:ops=q2,nowhere=q-nobody,*=q1"


@pytest.fixture
def host(broker: str, workers: dict[str, Worker], tmp_path: Path) -> SkillHost:
    root = _skills(tmp_path / "host-skills")
    return SkillHost(
        isolated_settings(tmp_path, root, broker_url=broker, remote_key_file=key_file(), remote_routes=ROUTES)
    )


def test_a_remote_call_returns_the_same_result_as_a_local_one(host: SkillHost, tmp_path: Path) -> None:
    remote = host.call("echo_remote", {"n": 1})
    local = SkillHost(isolated_settings(tmp_path / "local", tmp_path / "host-skills")).call(
        "echo_remote", {"n": 1}
    )
    assert remote.ok, remote.error
    assert remote.value == local.value == {"n": 1}
    assert (remote.outcome, remote.exit_code, remote.call_id != "") == (local.outcome, local.exit_code, True)


def test_stderr_streams_back_while_the_skill_runs_in_order(host: SkillHost) -> None:
    seen: list[tuple[float, str, Any]] = []
    result = host.call("chatty", {}, on_event=lambda e: seen.append((time.monotonic(), e.kind, e.data)))
    done = time.monotonic()
    assert result.ok and result.value == {"done": True}
    assert [k for _t, k, _d in seen] == ["start", "stderr", "stderr", "stderr", "exit"]
    assert [d for _t, k, d in seen if k == "stderr"] == ["first line", "second line", "third line"]
    first = seen[1][0]
    assert done - first > 1.0, "the first stderr line arrived only at the end"
    assert "w1" in seen[0][2]["entry"]  # the entry that ran is the worker's copy


def test_a_failure_keeps_its_exit_code_and_stderr_tail(host: SkillHost) -> None:
    result = host.call("failing", {})
    assert (result.ok, result.exit_code, result.outcome) == (False, 3, "failed")
    assert result.stderr_tail == ("bad things",)


def test_async_calls_stream_events_on_the_loop(host: SkillHost) -> None:
    recorder = EventRecorder()

    async def main() -> Any:
        return await asyncio.gather(
            host.acall("chatty", {}, on_event=recorder), host.acall("echo_remote", {"a": 2})
        )

    chatty, echo = asyncio.run(main())
    assert chatty.ok and echo.value == {"a": 2}
    assert recorder.stderr() == ["first line", "second line", "third line"]


def test_routes_send_tools_to_their_queue_by_name_or_category(host: SkillHost) -> None:
    recorder = EventRecorder()
    assert host.call("change_it", {"x": 1}, confirm=True, on_event=recorder).value == {"x": 1}
    assert "/w2/" in recorder.events[0].data["entry"]
    assert where(host.get("change_it"), host.settings) == "remote queue q2"
    assert where(host.get("echo_remote"), host.settings) == "remote queue q1"
    assert route_for(host.get("change_it"), parse_routes("category:ops=edge")) == "edge"
    assert route_for(host.get("echo_remote"), parse_routes("category:ops=edge")) is None


def test_a_malformed_route_is_a_config_error_naming_it() -> None:
    with pytest.raises(ConfigError, match=r"'disk_\*' is not PATTERN=QUEUE"):
        parse_routes("x=q1, disk_*")


def test_a_digest_mismatch_is_refused_naming_both_digests(host: SkillHost) -> None:
    tool = host.get("skewed")
    result = host.call("skewed", {})
    assert not result.ok
    assert f"the host sent skill digest {tool.digest}" in str(result.error)
    assert "worker w1@test has skill digest" in str(result.error)
    assert str(result.error).count("sha256") >= 2 or len(set(str(result.error).split())) > 10


def test_a_repeated_task_is_never_run_twice(host: SkillHost) -> None:
    """A redelivery carries the same call id: the worker's claim refuses the second run."""
    from ongrid_plugins.models import CallRequest, digest_json

    tool = host.get("change_it")
    executor = host.pm.hook.ongrid_executor(tool=tool, settings=host.settings)
    request = CallRequest(
        tool=tool,
        args={},
        persona=host.persona("operator"),
        call_id="redelivered-1",
        args_digest=digest_json(tool.name, "{}"),
        args_json="{}",
        sandbox=host.sandbox_profile(tool),
    )
    first, second = executor.run(request), executor.run(request)
    assert first.ok, first.error
    assert not second.ok
    assert "call:redelivered-1 was already claimed (worker w2@test" in str(second.error)


def test_two_hosts_racing_one_ticket_execute_it_once(host: SkillHost, tmp_path: Path, broker: str) -> None:
    from ongrid_plugins.models import CallRequest, digest_json

    other = SkillHost(
        isolated_settings(
            tmp_path / "other",
            tmp_path / "host-skills",
            broker_url=broker,
            remote_key_file=key_file(),
            remote_routes=ROUTES,
        )
    )
    results: list[Any] = []

    def run(h: SkillHost, n: int) -> None:
        tool = h.get("change_it")
        request = CallRequest(
            tool=tool,
            args={},
            persona=h.persona("operator"),
            call_id=f"race-{n}",
            args_digest=digest_json(tool.name, "{}"),
            args_json="{}",
            ticket="T-race",
            sandbox=h.sandbox_profile(tool),
        )
        results.append(h.pm.hook.ongrid_executor(tool=tool, settings=h.settings).run(request))

    threads = [threading.Thread(target=run, args=(h, n)) for n, h in enumerate((host, other))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(r.ok for r in results) == [False, True]
    assert "ticket:T-race was already claimed" in str(next(r.error for r in results if not r.ok))


def test_a_queue_nobody_serves_times_out_on_the_host(host: SkillHost) -> None:
    host.load()  # the catalog's first load is not part of the call's time
    started = time.monotonic()
    result = host.call("nowhere", {}, timeout=0.5)
    elapsed = time.monotonic() - started
    assert result.outcome == "timed_out" and result.timed_out
    assert "no worker of queue 'q-nobody' took it" in str(result.error)
    assert elapsed < 0.5 + host.settings.kill_grace + 3  # the call's timeout, not the skill's


def test_the_worker_enforces_the_timeout_and_kills_the_skill(host: SkillHost) -> None:
    result = host.call("sleepy", {}, timeout=0.5)
    assert result.outcome == "timed_out", result.error
    assert result.stderr_tail == ("going to sleep",)


def test_broker_down_fails_fast_and_the_host_still_lists_its_tools(tmp_path: Path) -> None:
    root = _skills(tmp_path / "skills")
    url = f"redis://127.0.0.1:{free_port()}/0"
    down = SkillHost(
        isolated_settings(
            tmp_path,
            root,
            broker_url=url,
            remote_key_file=key_file(),
            remote_routes="*=q1",
            broker_timeout=1.0,
        )
    )
    assert "echo_remote" in [t.name for t in down.tools()]
    started = time.monotonic()
    result = down.call("echo_remote", {})
    assert time.monotonic() - started < 3
    assert (
        not result.ok
        and "is unreachable" in str(result.error)
        and "ONGRID_BROKER_TIMEOUT" in str(result.error)
    )


def test_a_worker_killed_mid_call_gives_a_failure_naming_it(
    host: SkillHost, broker: str, tmp_path: Path
) -> None:
    victim = Worker(
        broker, tmp_path / "victim", "victim@test", "q-victim", _skills(tmp_path / "victim" / "skills")
    )
    settings = isolated_settings(
        tmp_path / "h",
        tmp_path / "host-skills",
        broker_url=broker,
        remote_key_file=key_file(),
        remote_routes="sleepy=q-victim",
    )
    h = SkillHost(settings)
    started = threading.Event()
    box: list[Any] = []

    def on_event(event: Any) -> None:
        if event.kind == "stderr":
            started.set()

    thread = threading.Thread(target=lambda: box.append(h.call("sleepy", {}, on_event=on_event)))
    t0 = time.monotonic()
    thread.start()
    assert started.wait(10)
    victim.kill()
    thread.join(15)
    [result] = box
    # Its lease expired: the host knows well within the call's timeout (8 s), not after it.
    assert time.monotonic() - t0 < 8, f"{time.monotonic() - t0:.1f}s: {result.error}"
    assert result.outcome == "failed"
    assert "worker victim@test stopped answering during the call (lease expired)" in str(result.error)
    assert result.remote is not None and result.remote.worker == "victim@test"
    # The answer the host made still says how long the call took and what it streamed.
    assert LEASE <= result.duration <= time.monotonic() - t0, result.duration
    assert result.stderr_tail == ("going to sleep",)


def test_the_cli_runs_a_remote_tool_with_the_same_exit_codes(
    host: SkillHost, broker: str, tmp_path: Path
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ONGRID_")}
    env.update(
        ONGRID_BROKER_URL=broker,
        ONGRID_REMOTE_KEY_FILE=key_file(),
        ONGRID_REMOTE_ROUTES=ROUTES,
        ONGRID_CACHE_DIR="off",
        ONGRID_STATE_DIR=str(tmp_path / "cli-state"),
        PYTHONPATH=str(REPO),
    )
    base = [sys.executable, "-m", "ongrid_plugins", "--no-defaults", "--dirs", str(tmp_path / "host-skills")]
    ok = subprocess.run(
        [*base, "run", "echo_remote", '{"k": 1}', "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)["value"] == {"k": 1}
    failed = subprocess.run([*base, "run", "failing"], env=env, capture_output=True, text=True, timeout=60)
    assert failed.returncode == 1
    listed = subprocess.run([*base, "workers", "--json"], env=env, capture_output=True, text=True, timeout=60)
    rows = {r["worker"]: r for r in json.loads(listed.stdout)}
    assert rows["w1@test"]["queues"] == ["q1"] and rows["w2@test"]["queues"] == ["q2"]
    assert rows["w1@test"]["tools"] >= 7
