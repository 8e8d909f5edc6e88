"""Remote workers under faults: redelivery, a worker killed mid-call, two queues, a ticket race.

One real redis-server serves the module, and two real workers (``w-a`` on queue ``qa``,
``w-b`` on ``qb``), each ``ongrid-skills worker`` in its own session with its own skill
root; the test that SIGKILLs a whole worker starts (and restarts) its own. Skills that
change something append a line to a file in ``runs/``: the number of lines is the
number of times the skill ran.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("celery")

import redis
from remotekit import Worker, key_file, opened, opened_task, sealed_task

from ongrid_plugins import ApprovalError, ApprovalRequired, SkillHost
from ongrid_plugins.models import CallRequest, CallResult, digest_json
from ongrid_plugins.remote.app import make_app
from ongrid_plugins.remote.wire import (
    LEASE,
    SAFE_TASK_NAME,
    TASK_NAME,
    cancelled_key,
    channel,
    payload,
    task_for,
)
from ongrid_plugins.testing import isolated_settings, make_skill

pytestmark = pytest.mark.timeout(120)

TOKEN = uuid.uuid4().hex[:12]
"""Marks this run's orphan processes in /proc (their command line carries it)."""

APPEND = """#!/bin/sh
cat >/dev/null
echo run >> {runs}/{name}
echo "ran" >&2
sleep {sleep}
echo '{{"ran": true}}'
"""

PEEK = """#!/bin/sh
cat >/dev/null
echo "peeking" >&2
sleep 1
echo '{"seen": true}'
"""

ORPHAN = f"""#!/bin/sh
cat >/dev/null
setsid sh -c 'sleep 300; :' ongrid-orphan-{TOKEN} &
echo "forked" >&2
sleep 60
echo '{{}}'
"""

LINGERING = f"""#!/bin/sh
cat >/dev/null
sh -c 'sleep 60; :' lingering-{TOKEN}
echo '{{}}'
"""

FAILING = """#!/bin/sh
cat >/dev/null
echo "no such disk" >&2
exit 4
"""


def _skills(root: Path, runs: Path) -> Path:
    """The same skills, byte for byte, in every root (the host's and each worker's)."""
    root.mkdir(parents=True, exist_ok=True)
    write = {"write": [str(runs)]}
    for name, cls, sleep in (("append_once", "mutating", 1.5), ("wipe_remote", "dangerous", 0.3)):
        make_skill(
            root,
            name,
            script=APPEND.format(runs=runs, name=name, sleep=sleep),
            sandbox=write,
            timeout_seconds=10,
            **{"class": cls},
        )
    make_skill(root, "peek", script=PEEK, timeout_seconds=10, **{"class": "safe"})
    make_skill(root, "orphan", script=ORPHAN, timeout_seconds=8, **{"class": "safe"})
    make_skill(root, "lingering", script=LINGERING, timeout_seconds=90, **{"class": "safe"})
    make_skill(root, "alpha", **{"class": "safe"})
    make_skill(root, "beta", **{"class": "safe"})
    make_skill(root, "failing", script=FAILING, **{"class": "safe"})
    return root


def _runs(runs: Path, name: str) -> int:
    path = runs / name
    return len(path.read_text().splitlines()) if path.exists() else 0


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("runs")
    folder.chmod(0o777)
    return folder


@pytest.fixture(scope="module")
def workers(broker: str, runs: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Worker]]:
    base = tmp_path_factory.mktemp("workers")
    started = {
        key: Worker(broker, base / key, f"{key}@test", queue, _skills(base / key / "skills", runs))
        for key, queue in (("w-a", "qa"), ("w-b", "qb"))
    }
    for worker in started.values():
        worker.ready()
    yield started
    for worker in started.values():
        worker.stop()


ROUTES = "beta=qb,failing=qb,*=qa"


def _host(tmp_path: Path, broker: str, runs: Path, routes: str = ROUTES, folder: str = "host") -> SkillHost:
    root = _skills(tmp_path / "host-skills", runs)
    return SkillHost(
        isolated_settings(
            tmp_path / folder, root, broker_url=broker, remote_key_file=key_file(), remote_routes=routes
        )
    )


def _request(host: SkillHost, name: str, call_id: str, ticket: str | None = None) -> CallRequest:
    tool = host.get(name)
    return CallRequest(
        tool=tool,
        args={},
        persona=host.persona("operator"),
        call_id=call_id,
        args_digest=digest_json(tool.name, "{}"),
        args_json="{}",
        ticket=ticket,
        sandbox=host.sandbox_profile(tool),
    )


def _send(broker: str, task: str, body: dict[str, Any], queue: str, task_id: str) -> None:
    sealed = sealed_task(body, task_id, queue)
    make_app(broker).send_task(task, args=[sealed], queue=queue, task_id=task_id, expires=60, retry=False)


def _listen(
    broker: str, call_id: str, on_message: Callable[[dict[str, Any]], None] | None = None
) -> Callable[[float], dict[str, Any]]:
    """Subscribe to the channel of a call sent as task ``task-CALL_ID`` (:func:`_send`) now;
    the returned function waits for its result message."""
    pubsub = redis.Redis.from_url(broker).pubsub(ignore_subscribe_messages=True)
    pubsub.subscribe(channel(call_id, f"task-{call_id}"))

    def result(within: float) -> dict[str, Any]:
        deadline = time.monotonic() + within
        try:
            while time.monotonic() < deadline:
                message = pubsub.get_message(timeout=0.1)
                if message is None or message.get("type") != "message":
                    continue
                data = opened(message["data"])
                if on_message is not None:
                    on_message(data)
                if data.get("k") == "result":
                    return data
            raise AssertionError(f"no result for call {call_id} within {within}s")
        finally:
            pubsub.close()

    return result


def _wait_for(check: Callable[[], bool], within: float) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.05)
    return check()


def _processes_with(marker: str) -> list[int]:
    """The pids of live processes whose command line contains ``marker``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = (entry / "stat").read_text().rpartition(")")[2].split()[0]
            if marker in cmdline and state != "Z":
                found.append(int(entry.name))
    return found


def _start_time(pid: int) -> str:
    """The process's start time in clock ticks; ``""`` for a zombie (it is dead)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return "" if fields[0] == "Z" else fields[19]


def _call_group_of(pid: int) -> list[tuple[int, str]]:
    """The processes in ``pid``'s per-call pids cgroup, with their start times (pids get reused)."""
    line = next(x for x in Path(f"/proc/{pid}/cgroup").read_text().splitlines() if ":pids:" in x)
    members = Path(f"/sys/fs/cgroup/pids{line.split(':', 2)[2]}/cgroup.procs").read_text().split()
    return [(int(m), _start_time(int(m))) for m in members]


def _orphan_group() -> list[tuple[int, str]]:
    """The processes of the orphan's call group once the orphan alone carries the marker."""
    found = _processes_with(f"ongrid-orphan-{TOKEN}")  # two while the orphan forks its sleep
    return _call_group_of(found[0]) if len(found) == 1 else []


def _why(pid: int, worker: Worker) -> str:
    line = next(x for x in Path(f"/proc/{pid}/cgroup").read_text().splitlines() if ":pids:" in x)
    owner = line.rpartition("/")[2].partition("-")[0]
    try:
        seen = Path(f"/proc/{owner}/stat").read_text()
    except OSError as exc:
        seen = str(exc)
    return f"the orphan survived in {line}; its owner {owner}: {seen}\n{worker.log.read_text()}"


def _alive(pid: int, start: str) -> bool:
    try:
        return _start_time(pid) == start
    except OSError:
        return False


# ---------------------------------------------------------------- acknowledgement per class


def test_each_class_is_sent_as_the_task_of_its_acknowledgement_mode(
    broker: str, workers: dict[str, Worker]
) -> None:
    assert task_for("safe") == SAFE_TASK_NAME
    assert task_for("mutating") == task_for("dangerous") == TASK_NAME
    from ongrid_plugins.remote.worker import build_app

    app = build_app(broker)
    safe, changing = app.tasks[SAFE_TASK_NAME], app.tasks[TASK_NAME]
    assert (safe.acks_late, safe.reject_on_worker_lost) == (True, True)
    assert changing.acks_late is False
    assert safe.ignore_result and changing.ignore_result  # the result travels on pub/sub


def test_a_safe_call_whose_pool_process_dies_is_redelivered_and_answered(
    broker: str, workers: dict[str, Worker], runs: Path, tmp_path: Path
) -> None:
    """At least once for safe calls: the host still gets the answer, from the second run."""
    host = _host(tmp_path, broker, runs)
    worker = workers["w-a"]
    starts: list[float] = []

    def on_event(event: Any) -> None:
        if event.kind == "start":
            starts.append(time.monotonic())
            if len(starts) == 1:
                [pool] = worker.pool()
                os.kill(pool, signal.SIGKILL)

    result = host.call("peek", {}, on_event=on_event)
    assert result.ok, result.error
    assert result.value == {"seen": True}
    assert len(starts) == 2, "the safe call was not run again after its pool process died"


# ---------------------------------------------------------------------------- redelivery


def test_a_redelivered_mutating_call_is_refused_as_claimed_and_ran_once(
    broker: str, workers: dict[str, Worker], runs: Path, tmp_path: Path
) -> None:
    """Even delivered acked-late (as an old host would send it) and really redelivered after its
    pool process was SIGKILLed mid-call, a mutating call runs once: the claim refuses the rerun."""
    host = _host(tmp_path, broker, runs)
    worker = workers["w-a"]
    before = _runs(runs, "append_once")
    call_id = f"redeliver-{uuid.uuid4().hex[:8]}"
    body = payload(_request(host, "append_once", call_id), 10, host.settings.stdout_cap)
    killed: list[int] = []

    def on_message(data: dict[str, Any]) -> None:
        if data.get("k") == "event" and data.get("kind") == "stderr" and not killed:
            [pool] = worker.pool()
            os.kill(pool, signal.SIGKILL)
            killed.append(pool)

    result = _listen(broker, call_id, on_message)
    _send(broker, SAFE_TASK_NAME, body, "qa", f"task-{call_id}")
    data = result(20)
    assert killed, "the skill never started"
    assert data["result"]["ok"] is False
    error = data["result"]["error"]
    assert f"call:{call_id} was already claimed (worker w-a@test, task task-{call_id}" in error
    assert "mutating call is never run twice" in error
    assert _runs(runs, "append_once") == before + 1


def test_a_republished_mutating_task_is_refused_and_the_skill_ran_once(
    broker: str, workers: dict[str, Worker], runs: Path, tmp_path: Path
) -> None:
    """The same message twice (a broker's redelivery of an early-acked task): one run."""
    host = _host(tmp_path, broker, runs)
    before = _runs(runs, "append_once")
    call_id = f"republished-{uuid.uuid4().hex[:8]}"
    body = payload(_request(host, "append_once", call_id), 10, host.settings.stdout_cap)
    first = _listen(broker, call_id)
    _send(broker, TASK_NAME, body, "qa", f"task-{call_id}")
    assert first(20)["result"]["ok"] is True
    second = _listen(broker, call_id)
    _send(broker, TASK_NAME, body, "qb", f"task-{call_id}")  # another worker, same message
    data = second(20)
    assert data["worker"] == "w-b@test"
    assert data["result"]["ok"] is False
    assert f"was already claimed (worker w-a@test, task task-{call_id}" in data["result"]["error"]
    assert _runs(runs, "append_once") == before + 1


# --------------------------------------------------------------- a worker killed mid-call


def test_a_worker_sigkilled_mid_call_names_itself_and_leaves_no_orphan_after_restart(
    broker: str, runs: Path, tmp_path: Path
) -> None:
    root = _skills(tmp_path / "victim" / "skills", runs)
    victim = Worker(broker, tmp_path / "victim", "victim@test", "q-victim", root).ready()
    host = _host(tmp_path, broker, runs, routes="orphan=q-victim")
    forked = threading.Event()
    box: list[CallResult] = []

    def call() -> None:
        box.append(host.call("orphan", {}, on_event=lambda e: e.kind == "stderr" and forked.set()))

    thread = threading.Thread(target=call)
    started = time.monotonic()
    thread.start()
    try:
        assert forked.wait(15), victim.log.read_text()
        # The skill (sh), its sleep, the orphan (sh) and its sleep, all started.
        # One scan gives both the orphan and its group: a second scan could catch the
        # orphan's shell between fork and exec (two processes with its command line).
        settled: list[tuple[int, list[tuple[int, str]]]] = []

        def settle() -> bool:
            found = _processes_with(f"ongrid-orphan-{TOKEN}")
            group = _call_group_of(found[0]) if len(found) == 1 else []
            settled[:] = [(found[0], group)] if len(group) == 4 else []
            return bool(settled)

        assert _wait_for(settle, 5), _orphan_group()
        [(orphan, left)] = settled
        victim.kill()
        killed = time.monotonic()
        # The worker is gone; its skill and the skill's setsid grandchild are not.
        assert [p for p in left if _alive(*p)] == left, "nothing was left to sweep"
        victim.start()  # a machine's worker restarts at once (systemd's Restart=always)
        thread.join(15)
        [result] = box
        answered = time.monotonic()
        # The worker's lease on the call expired: a failure naming it within the call's
        # timeout (8 s), a lease (3 s) and a few checks after the kill (the dead worker's
        # liveness key may outlive its lease by a renewal).
        assert result.outcome == "failed", result.error
        assert "worker victim@test stopped answering during the call (lease expired)" in str(result.error)
        assert answered - started < 8, f"{answered - started:.1f}s after the call"
        assert answered - killed < LEASE + 2.5, f"{answered - killed:.1f}s after the kill"
        victim.ready()
        assert _wait_for(lambda: not _processes_with(f"ongrid-orphan-{TOKEN}"), 5), _why(orphan, victim)
        assert not [p for p in left if _alive(*p)], "a process of the call survived"
    finally:
        victim.stop()
        for pid in _processes_with(f"ongrid-orphan-{TOKEN}"):
            os.kill(pid, signal.SIGKILL)


# ------------------------------------------------------------------ routing and the log


def test_two_queues_route_each_tool_to_its_worker_and_each_worker_logs_its_calls(
    broker: str, workers: dict[str, Worker], runs: Path, tmp_path: Path
) -> None:
    host = _host(tmp_path, broker, runs)
    alpha, beta, failing = host.call("alpha", {"a": 1}), host.call("beta", {"b": 2}), host.call("failing", {})
    assert (alpha.value, beta.value, failing.exit_code) == ({"a": 1}, {"b": 2}, 4)
    log_a, log_b = workers["w-a"].log.read_text(), workers["w-b"].log.read_text()
    assert f"ongrid worker w-a@test: call {alpha.call_id} of alpha: ok" in log_a
    assert f"ongrid worker w-b@test: call {beta.call_id} of beta: ok" in log_b
    assert f"ongrid worker w-b@test: call {failing.call_id} of failing: failed" in log_b
    assert beta.call_id not in log_a and alpha.call_id not in log_b
    line = next(x for x in log_a.splitlines() if alpha.call_id in x)
    assert "INFO/ForkPoolWorker" in line and "ongrid_plugins.remote.worker: " in line


# ------------------------------------------------------------------- two hosts, one ticket


def test_two_hosts_racing_one_approved_ticket_on_two_workers_run_it_once(
    broker: str, workers: dict[str, Worker], runs: Path, tmp_path: Path
) -> None:
    """Two SkillHosts sharing the approvals state, one routing to ``qa`` and one to ``qb``."""
    hosts = [
        _host(tmp_path, broker, runs, routes="wipe_remote=qa", folder="shared"),
        _host(tmp_path, broker, runs, routes="wipe_remote=qb", folder="shared"),
    ]
    args = {"path": "/srv/old"}
    with pytest.raises(ApprovalRequired) as caught:
        hosts[0].call("wipe_remote", args, persona="admin", caller="alice")
    ticket = caught.value.ticket
    assert ticket is not None
    hosts[0].approve(ticket.id, approver="bob")
    assert hosts[1].approve(ticket.id, approver="carol").status == "approved"
    before = _runs(runs, "wipe_remote")
    barrier = threading.Barrier(2)
    outcomes: list[Any] = []

    def race(host: SkillHost) -> None:
        barrier.wait()
        try:
            outcomes.append(host.call("wipe_remote", args, persona="admin", caller="alice", ticket=ticket.id))
        except ApprovalError as exc:
            outcomes.append(exc)

    threads = [threading.Thread(target=race, args=(h,)) for h in hosts]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    ran = [o for o in outcomes if isinstance(o, CallResult) and o.ok]
    assert len(outcomes) == 2 and len(ran) == 1, outcomes
    assert ran[0].value == {"ran": True}
    assert _runs(runs, "wipe_remote") == before + 1


# ------------------------------------------------------------------ cancelling on the host


def test_cancelling_a_remote_call_on_the_host_kills_the_skill_on_the_worker(
    broker: str, workers: dict[str, Worker], runs: Path, tmp_path: Path
) -> None:
    """The worker's one cancel subscription per process hears the host's cancel."""
    host = _host(tmp_path, broker, runs)
    started = asyncio.Event()

    async def main() -> None:
        task = asyncio.ensure_future(
            host.acall("lingering", {}, on_event=lambda e: e.kind == "start" and started.set())
        )
        await asyncio.wait_for(started.wait(), 15)
        assert _wait_for(lambda: bool(_processes_with(f"lingering-{TOKEN}")), 5)
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    asyncio.run(main())
    assert _wait_for(lambda: not _processes_with(f"lingering-{TOKEN}"), 5), "the skill outlived the cancel"


def test_a_cancel_sent_right_after_the_task_reaches_the_worker_and_the_call_is_cancelled(
    broker: str, workers: dict[str, Worker], runs: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The host cancels the instant the task is sent (before or after the worker registered
    the call, whichever comes first): the worker never runs the call to its end."""
    from ongrid_plugins.remote import client

    host = _host(tmp_path, broker, runs)
    sent: list[str] = []

    async def main() -> None:
        task = asyncio.ensure_future(host.acall("append_once", {}, confirm=True))
        loop = asyncio.get_running_loop()
        app = make_app(broker, host.settings.broker_timeout)
        send_task = app.send_task

        def send_then_cancel(*args: Any, **kwargs: Any) -> Any:
            handle = send_task(*args, **kwargs)
            sent.append(opened_task(kwargs["args"][0])["call_id"])
            loop.call_soon_threadsafe(task.cancel)
            return handle

        monkeypatch.setattr(app, "send_task", send_then_cancel)
        monkeypatch.setattr(client, "make_app", lambda *_a: app)
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    [call_id] = sent
    log = workers["w-a"].log
    line = f"ongrid worker w-a@test: call {call_id} of append_once: cancelled ("
    assert _wait_for(lambda: line in log.read_text(), 10), log.read_text()[-2000:]


def test_a_worker_takes_no_call_whose_cancelled_key_the_host_set(
    broker: str, workers: dict[str, Worker], runs: Path, tmp_path: Path
) -> None:
    """A cancel that lands before a worker registered the call (here: before it was sent)
    is not lost: the worker finds the host's ``cancelled`` key and never runs the skill."""
    host = _host(tmp_path, broker, runs)
    before = _runs(runs, "append_once")
    call_id = f"precancelled-{uuid.uuid4().hex[:8]}"
    body = payload(_request(host, "append_once", call_id), 10, host.settings.stdout_cap)
    redis.Redis.from_url(broker).set(cancelled_key(call_id), "1", ex=60)
    result = _listen(broker, call_id)
    _send(broker, TASK_NAME, body, "qa", f"task-{call_id}")
    data = result(20)["result"]
    assert (data["ok"], data["status"]) == (False, "cancelled")
    assert "cancelled by the host before worker w-a@test started it: the skill did not run" in data["error"]
    assert _runs(runs, "append_once") == before


# ----------------------------------------------------------- the host's result connection


def test_a_host_process_keeps_one_result_connection_for_all_its_calls(
    broker: str, workers: dict[str, Worker], runs: Path, tmp_path: Path
) -> None:
    host = _host(tmp_path, broker, runs)
    assert host.call("alpha", {"n": 0}).ok  # the host's connections are made
    stats = redis.Redis.from_url(broker)
    before = stats.info("stats")["total_connections_received"]
    results = [host.call("alpha", {"n": n}) for n in range(1, 6)]
    assert [r.value for r in results] == [{"n": n} for n in range(1, 6)]
    opened = stats.info("stats")["total_connections_received"] - before
    assert opened <= 1, f"{opened} connections for 5 calls (one per call is the old cost)"


def test_the_result_connection_comes_back_after_redis_dropped_it(
    broker: str, workers: dict[str, Worker], runs: Path, tmp_path: Path
) -> None:
    from ongrid_plugins.remote.results import subscriber as _subscriber

    host = _host(tmp_path, broker, runs)
    assert host.call("alpha", {"n": 1}).ok
    subscriber = _subscriber(broker, host.settings.broker_timeout)
    assert subscriber.current is not None
    port = subscriber.current.pubsub.connection._sock.getsockname()[1]
    assert redis.Redis.from_url(broker).client_kill(f"127.0.0.1:{port}")
    result = host.call("alpha", {"n": 2})
    assert result.ok, result.error
    assert result.value == {"n": 2}


def test_calls_subscribing_while_redis_drops_the_result_connection_all_get_a_live_one(
    broker: str, workers: dict[str, Worker], runs: Path, tmp_path: Path
) -> None:
    """Six calls subscribe around the moment Redis drops the shared connection, 40 times over.

    The attack: the reader thread finds the connection dead while callers send their
    SUBSCRIBE on it. redis-py then reconnected behind both threads' backs and cleared the
    parse buffer under a command (``AttributeError: 'NoneType' object has no attribute
    'readline'``), which failed a call as "not sent" (CI, 2026-12-03).
    """
    from concurrent.futures import ThreadPoolExecutor

    from ongrid_plugins.remote.results import subscriber as _subscriber

    host = _host(tmp_path, broker, runs)
    assert host.call("alpha", {"n": 0}).ok
    subscriber = _subscriber(broker, host.settings.broker_timeout)
    admin = redis.Redis.from_url(broker)
    failures: list[str] = []
    kills = 0
    with ThreadPoolExecutor(6) as pool:
        for round_ in range(40):
            with subscriber.lock:
                conn = subscriber._connected()
            port = conn.pubsub.connection._sock.getsockname()[1]
            names = [f"ongrid:test:{TOKEN}:{round_}:{k}" for k in range(6)]
            opening = [pool.submit(subscriber.open, name) for name in names[:3]]
            kills += admin.client_kill(f"127.0.0.1:{port}")
            opening += [pool.submit(subscriber.open, name) for name in names[3:]]
            for name, future in zip(names, opening, strict=True):
                try:
                    box, live = future.result(timeout=30)
                except Exception as exc:  # the defect: a call failed as "not sent"
                    failures.append(f"round {round_}: {exc!r}")
                    continue
                assert not live.dead or box.get(timeout=5)[0] == "lost"
                subscriber.close(name, live)
    assert not failures, failures
    assert kills == 40
    result = host.call("alpha", {"n": 1})  # and the host still works afterwards
    assert (result.ok, result.value) == (True, {"n": 1})


def test_a_subscribe_racing_the_reader_closing_a_dead_connection_gets_a_fresh_one(
    broker: str, workers: dict[str, Worker], runs: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The reader thread closes a dead connection's socket while a call subscribes on it."""
    from ongrid_plugins.remote.results import subscriber as _subscriber

    host = _host(tmp_path, broker, runs)
    assert host.call("alpha", {"n": 1}).ok
    dying = _subscriber(broker, host.settings.broker_timeout).current
    assert dying is not None

    def closed_under_us(*_channels: str) -> None:
        raise ValueError("I/O operation on closed file.")

    monkeypatch.setattr(dying.pubsub, "subscribe", closed_under_us)
    result = host.call("alpha", {"n": 2})
    assert result.ok, result.error
    assert result.value == {"n": 2}
    assert _subscriber(broker, host.settings.broker_timeout).current is not dying


def test_a_forked_host_process_gets_its_own_result_connection(
    broker: str, workers: dict[str, Worker], runs: Path, tmp_path: Path
) -> None:
    host = _host(tmp_path, broker, runs)
    assert host.call("alpha", {"n": 1}).ok  # the parent's subscriber exists before the fork
    pid = os.fork()
    if pid == 0:  # the child: a call of its own, then the parent's still works
        code = 1
        try:
            child = _host(tmp_path, broker, runs, folder="child")
            code = 0 if child.call("alpha", {"n": 2}).value == {"n": 2} else 2
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert host.call("alpha", {"n": 3}).value == {"n": 3}
