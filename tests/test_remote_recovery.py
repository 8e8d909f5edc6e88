"""Remote calls across a broker outage and against messages that are not the call's own.

The module has a redis-server of its own (:class:`remotekit.RedisServer`), which tests
stop and start again on the same port, and one worker (``w1@test``, queue ``q1``). The
host routes ``x*`` to ``q1``, as in the outside tester's report.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

pytest.importorskip("celery")

from remotekit import RedisServer, Worker

from ongrid_plugins import SkillHost
from ongrid_plugins.remote.results import subscriber as _subscriber
from ongrid_plugins.testing import isolated_settings, make_skill

pytestmark = pytest.mark.timeout(120)

ROUTES = "x*=q1"


def _skills(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    make_skill(root, "x_echo", **{"class": "safe"})
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
        tmp_path, _skills(tmp_path / "host-skills"), broker_url=server.url, remote_routes=ROUTES
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
