"""Remote calls across a broker outage and against messages that are not the call's own.

The module has a redis-server of its own (:class:`remotekit.RedisServer`), which tests
stop and start again on the same port, and one worker (``w1@test``, queue ``q1``). The
host routes ``x*`` to ``q1``, as in the outside tester's report.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

pytest.importorskip("celery")

from remotekit import RedisServer, Worker, key_file, signer

from ongrid_plugins import SkillHost
from ongrid_plugins.remote.results import subscriber as _subscriber
from ongrid_plugins.remote.signing import CHANNEL
from ongrid_plugins.testing import isolated_settings, make_skill

pytestmark = pytest.mark.timeout(120)

ROUTES = "x*=q1"


SLOW = """#!/bin/sh
cat >/dev/null
echo "working" >&2
sleep 1.5
echo '{"slow": true}'
"""


LATER = """#!/bin/sh
cat >/dev/null
sleep 5
echo '{"done": "later"}'
"""


def _skills(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    make_skill(root, "x_echo", **{"class": "safe"})
    make_skill(root, "x_later", script=LATER, timeout_seconds=20, **{"class": "mutating"})
    make_skill(root, "x_slow", script=SLOW, timeout_seconds=10, **{"class": "safe"})
    return root


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    found = RedisServer(tmp_path_factory.mktemp("redis"))
    yield found
    found.stop()


@pytest.fixture(scope="module")
def worker(server: RedisServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Worker]:
    base = tmp_path_factory.mktemp("w1")
    started = Worker(server.url, base, "w1@test", "q1", _skills(base / "skills"))
    yield started
    started.stop()


@pytest.fixture
def host(server: RedisServer, worker: Worker, tmp_path: Path) -> SkillHost:
    settings = isolated_settings(
        tmp_path,
        _skills(tmp_path / "host-skills"),
        broker_url=server.url,
        remote_key_file=key_file(),
        remote_routes=ROUTES,
    )
    return SkillHost(settings)


def _back(server: RedisServer, worker: Worker) -> None:
    """Start Redis again (same port) and wait until the worker answers, restarting it if it exited."""
    server.start()
    deadline = time.monotonic() + 30
    while not worker.pong():
        assert time.monotonic() < deadline, (
            f"worker {worker.name} did not come back:\n{worker.log.read_text()}"
        )
        if worker.proc.poll() is not None:  # it gave up on the broker (Celery's default)
            worker.start()


def _wait_for(check: Callable[[], bool], within: float) -> bool:
    deadline = time.monotonic() + within
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


# ------------------------------------------------------------- the host's result connection


def test_a_call_during_a_broker_outage_does_not_poison_the_calls_after_it(
    host: SkillHost, server: RedisServer, worker: Worker
) -> None:
    """One call while Redis is down used to leave a half-made result connection behind.

    It was kept as the live one with no thread reading it, so every later call's
    subscription went unconfirmed ("Redis did not confirm the subscription within 3s")
    until the host restarted.
    """
    assert host.call("x_echo", {"n": 1}).value == {"n": 1}
    server.stop()
    try:
        down = host.call("x_echo", {"n": 2})
    finally:
        _back(server, worker)
    assert not down.ok
    assert "the call was not sent" in str(down.error) and "Connection refused" in str(down.error)
    after = host.call("x_echo", {"n": 3})
    assert (after.ok, after.value) == (True, {"n": 3}), after.error


def test_a_call_the_worker_finished_after_the_host_gave_up_gets_a_follow_up_audit_row(
    host: SkillHost, server: RedisServer, worker: Worker
) -> None:
    """The report: after Redis restarted mid-call the audit row said ``failed`` while the
    skill ran to completion on the worker, and nothing reconciled the row later."""
    answers: list[Any] = []
    thread = threading.Thread(target=lambda: answers.append(host.call("x_later", {}, confirm=True)))
    thread.start()
    client = redis.Redis.from_url(server.url)
    assert _wait_for(lambda: any(client.scan_iter("ongrid:lease:*")), 10), "the worker never took the call"
    server.stop()
    thread.join(15)
    _back(server, worker)
    [first] = answers
    assert not first.ok and "lost the broker mid-call" in str(first.error), first.error

    def late() -> list[Any]:
        return host.audit.entries(call_id=f"{first.call_id}.late")

    assert _wait_for(lambda: bool(late()), 30), "no follow-up row"
    [row] = late()
    assert row.outcome == "ok", row
    assert "completed on worker w1@test after the host gave up (it lost the broker mid-call)" in str(
        row.error
    )
    assert f"the row of call {first.call_id} says it failed" in str(row.error)
    assert isinstance(row.remote, dict) and row.remote["worker"] == "w1@test"
    host.audit.flush()
    [original] = host.audit.entries(call_id=first.call_id)
    assert original.outcome == "failed"


def test_a_result_reader_thread_that_died_is_noticed_and_replaced(
    host: SkillHost, server: RedisServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert host.call("x_echo", {"n": 1}).ok
    subscriber = _subscriber(server.url, host.settings.broker_timeout)
    dying = subscriber.current
    assert dying is not None
    real = dying.pubsub.get_message
    readers: list[threading.Thread] = []

    def garbled(**kwargs: object) -> object:
        if readers:
            return real(**kwargs)
        readers.append(threading.current_thread())
        return {"type": "message"}  # no channel: the reader's own code raises, between two calls

    monkeypatch.setattr(dying.pubsub, "get_message", garbled)
    assert _wait_for(lambda: bool(readers), 5)
    readers[0].join(5)
    assert not readers[0].is_alive()
    result = host.call("x_echo", {"n": 2})
    assert (result.ok, result.value) == (True, {"n": 2}), result.error
    assert subscriber.current is not dying


# ------------------------------------------------------------------- the worker's broker


def test_a_worker_outlives_a_broker_outage_and_serves_calls_when_it_is_back(
    host: SkillHost, server: RedisServer, worker: Worker
) -> None:
    assert host.call("x_echo", {"n": 1}).ok
    pid = worker.proc.pid
    server.stop()
    time.sleep(1.5)  # Celery's consumer sees the loss at once
    _back(server, worker)  # restarts the worker if it exited
    assert worker.proc.pid == pid, (
        f"the worker exited when it lost the broker:\n{worker.log.read_text()[-3000:]}"
    )
    result = host.call("x_echo", {"n": 2})
    assert (result.ok, result.value) == (True, {"n": 2}), result.error
    assert result.remote is not None and result.remote.worker == "w1@test"


# ------------------------------------------------------- messages that are not the call's own


class Tap:
    """Every message on every call channel of the broker, as a process with the broker's
    password sees them; ``on_message(channel, data)`` may publish messages of its own.
    ``data`` is the message's signed body (checked with the remote key), its text as sent
    under ``"_raw"`` (what a broker writer without the key can replay)."""

    def __init__(self, url: str, on_message: Callable[[str, dict[str, Any]], None]) -> None:
        self.client = redis.Redis.from_url(url)
        self.pubsub = self.client.pubsub(ignore_subscribe_messages=True)
        self.pubsub.psubscribe("ongrid:call:*")
        self.on_message, self.stopped = on_message, threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stopped.is_set():
            message = self.pubsub.get_message(timeout=0.1)
            if message is not None and message["type"] == "pmessage":
                data = signer().open_text(CHANNEL, message["data"])
                if isinstance(data, dict):
                    self.on_message(message["channel"].decode(), {**data, "_raw": message["data"]})

    def close(self) -> None:
        self.stopped.set()
        self.thread.join(5)
        self.pubsub.close()


def _slow_call_with(
    host: SkillHost, url: str, forge: Callable[[str, dict[str, Any]], list[Any]], on_event: Any = None
) -> Any:
    """Call ``x_slow``; when its worker accepts it, publish ``forge(call_id, accepted)`` on its
    channel: a text as it is (a replay, or junk), a dict signed with the remote key (what only
    a holder of the key, such as another worker, can send), ``Unsigned(dict)`` as plain JSON."""

    def on_message(name: str, data: dict[str, Any]) -> None:
        if data.get("k") == "accepted" and data.get("worker") == "w1@test":
            for message in forge(name.split(":")[2], data):
                if isinstance(message, Unsigned):
                    text = json.dumps(message.data)
                elif isinstance(message, dict):
                    text = signer().seal_text(CHANNEL, message)
                else:
                    text = message
                tap.client.publish(name, text)

    tap = Tap(url, on_message)
    try:
        return host.call("x_slow", {}, on_event=on_event)
    finally:
        tap.close()


class Unsigned:
    """A message a broker writer without the remote key publishes: plain JSON."""

    def __init__(self, data: dict[str, Any]) -> None:
        self.data = data


def _refusals(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "refused a message" in r.getMessage()]


def test_a_genuine_result_of_another_call_replayed_on_a_calls_channel_is_refused(
    host: SkillHost, server: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    captured: list[dict[str, Any]] = []
    tap = Tap(server.url, lambda _name, data: captured.append(data) if data.get("k") == "result" else None)
    try:
        assert host.call("x_echo", {"n": 7}).value == {"n": 7}
        assert _wait_for(lambda: bool(captured), 5)
    finally:
        tap.close()
    caplog.set_level(logging.WARNING, "ongrid_plugins.remote")
    result = _slow_call_with(host, server.url, lambda _call_id, _accepted: [captured[0]["_raw"]])
    assert (result.tool, result.ok, result.value) == ("x_slow", True, {"slow": True}), result.error
    assert result.remote is not None and result.remote.worker == "w1@test"
    [refused] = _refusals(caplog)
    assert f"its task is {captured[0]['task_id']!r}" in refused, refused


def test_a_result_without_the_remote_key_is_refused_and_the_real_one_wins(
    host: SkillHost, server: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    """The attack: with no key, a broker writer who saw the channel published a result of
    the right shape for the call (its task, its worker), and the host printed it."""

    def forge(call_id: str, accepted: dict[str, Any]) -> list[Any]:
        result = {"tool": "x_slow", "ok": True, "value": {"forged": True}, "call_id": call_id}
        message = {"k": "result", "worker": "w1@test", "task_id": accepted["task_id"], "result": result}
        return [Unsigned(message), "0" * 64 + json.dumps(message)]

    caplog.set_level(logging.WARNING, "ongrid_plugins.remote")
    result = _slow_call_with(host, server.url, forge)
    assert (result.ok, result.value) == (True, {"slow": True}), result.error
    refused = _refusals(caplog)
    assert len(refused) == 2, refused
    assert "it is not signed" in refused[0] and "does not verify" in refused[1], refused


def test_a_forged_result_naming_another_worker_is_refused_and_the_real_one_wins(
    host: SkillHost, server: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    def forge(call_id: str, accepted: dict[str, Any]) -> list[Any]:
        # The forger holds the key (another worker) and knows all the channel shows: the
        # call id, the task id, the worker's name.
        accepted = {k: v for k, v in accepted.items() if k != "_raw"}
        accepted_elsewhere = {**accepted, "worker": "evil@test", "task_id": "another-task"}
        result = {"tool": "x_slow", "ok": True, "value": {"forged": True}, "call_id": call_id}
        return [
            "not json at all",
            accepted_elsewhere,
            {"k": "result", "worker": "evil@test", "task_id": accepted["task_id"], "result": result},
        ]

    caplog.set_level(logging.WARNING, "ongrid_plugins.remote")
    result = _slow_call_with(host, server.url, forge)
    assert (result.ok, result.value) == (True, {"slow": True}), result.error
    assert result.remote is not None and result.remote.worker == "w1@test"
    refused = _refusals(caplog)
    assert len(refused) == 3, refused
    assert "task is 'another-task'" in refused[1] and "worker is 'evil@test'" in refused[2], refused


def test_events_a_worker_never_sends_are_refused_and_the_call_goes_on(
    host: SkillHost, server: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    """The attack: an event with no kind raised KeyError in the waiting host, and any kind
    or shape (a fake ``exit``, a megabyte "line") reached the caller's on_event."""
    forged = [
        {"k": "event"},  # no kind
        {"k": "event", "kind": "exit2", "data": None},
        {"k": "event", "kind": ["stderr"], "data": "x"},
        {"k": "event", "kind": "stderr", "data": {"not": "text"}},
        {"k": "event", "kind": "stderr", "data": "x" * 9000},
        {"k": "event", "kind": "exit", "data": "done"},
        {"k": "event", "kind": "stderr", "data": "a forged line of the right shape"},
    ]
    seen: list[tuple[str, Any]] = []
    caplog.set_level(logging.WARNING, "ongrid_plugins.remote")

    def forge(_call_id: str, accepted: dict[str, Any]) -> list[Any]:  # signed: a key holder's
        return [{**message, "task_id": accepted["task_id"]} for message in forged]

    result = _slow_call_with(host, server.url, forge, lambda e: seen.append((e.kind, e.data)))
    assert (result.ok, result.value) == (True, {"slow": True}), result.error
    refused = _refusals(caplog)
    assert len(refused) == 6, refused
    assert "kind is 'None'" in refused[0] and "kind is 'exit2'" in refused[1], refused
    assert "at most 8192 characters" in refused[3] and "exit data is a str" in refused[5], refused
    kinds = [kind for kind, _data in seen]
    assert "start" in kinds and kinds[-1] == "exit" and set(kinds) <= {"start", "stderr", "exit"}, seen
    assert ("stderr", "working") in seen  # the skill's own line; a well-shaped forgery gets through
    assert all(isinstance(data, str) and len(data) <= 8192 for kind, data in seen if kind == "stderr"), seen


def test_the_stderr_line_cap_is_the_runners() -> None:
    from ongrid_plugins.executors._spec import ProcessSpec
    from ongrid_plugins.remote import client

    assert (
        ProcessSpec(argv=("/bin/true",), cwd="/", env={}, stdin=b"", timeout=1.0).max_line_bytes
        == client._STDERR_LINE_MAX
    )


def test_a_calls_channel_cannot_be_guessed_from_its_call_id(host: SkillHost, server: RedisServer) -> None:
    """Call ids are a per-process prefix and a counter: the next one is known from any
    one seen. The channel also carries the task id, a random uuid4 the host picks per call."""
    seen: list[str] = []
    tap = Tap(server.url, lambda name, data: seen.append(name) if data.get("k") == "accepted" else None)
    try:
        result = host.call("x_echo", {"n": 1})
        assert _wait_for(lambda: bool(seen), 5)
    finally:
        tap.close()
    assert result.remote is not None and len(result.remote.task_id) == 32
    assert seen == [f"ongrid:call:{result.call_id}:{result.remote.task_id}"]
