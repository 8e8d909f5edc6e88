"""Attacks on remote calls from anyone who can write to the broker, as an outside tester ran them.

One real redis-server (no password, 127.0.0.1, as in the docs' example) and one real
worker (``wx@test``, queue ``qx``) serve the module. The attacker talks to Redis
directly: without the remote key it can push tasks and publish on a call's channel;
some tests also play a holder of the key (a compromised worker, or a host with a bug)
to show what the checks behind the signature still refuse. Skills append a line to a
file in ``runs/`` when they run: no line, the skill did not run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("celery")

import redis
from remotekit import REPO, Worker, key_file, opened, sealed_task, signer

from ongrid_plugins import SkillHost
from ongrid_plugins.models import CallRequest, digest_json
from ongrid_plugins.remote.app import make_app
from ongrid_plugins.remote.signing import CHANNEL, TASK, Signer
from ongrid_plugins.remote.wire import TASK_NAME, channel, payload, profile_to_dict
from ongrid_plugins.testing import isolated_settings, make_skill

pytestmark = pytest.mark.timeout(120)

WIPE = """#!/bin/sh
cat >/dev/null
echo wiped >> {runs}/disk_wipe
echo '{{"wiped": true}}'
"""

SCHEMA = {
    "type": "object",
    "properties": {"path": {"type": "string", "pattern": "^/srv/"}},
    "required": ["path"],
    "additionalProperties": False,
}


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("runs")


def _skills(root: Path, runs: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    make_skill(root, "disk_wipe", script=WIPE.format(runs=runs), schema=SCHEMA, **{"class": "dangerous"})
    make_skill(root, "w_probe", timeout_seconds=2, **{"class": "safe"})
    return root


@pytest.fixture(scope="module")
def worker(broker: str, runs: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Worker]:
    base = tmp_path_factory.mktemp("wx")
    started = Worker(broker, base, "wx@test", "qx", _skills(base / "skills", runs))
    yield started
    started.stop()


@pytest.fixture
def host(broker: str, worker: Worker, runs: Path, tmp_path: Path) -> SkillHost:
    settings = isolated_settings(
        tmp_path,
        _skills(tmp_path / "host-skills", runs),
        broker_url=broker,
        remote_key_file=key_file(),
        remote_routes="disk_wipe=qx,w_*=q-none",
    )
    return SkillHost(settings)


def _wiped(runs: Path) -> int:
    path = runs / "disk_wipe"
    return len(path.read_text().splitlines()) if path.exists() else 0


def _body(host: SkillHost, args: dict[str, Any], call_id: str) -> dict[str, Any]:
    """The task body a host sends for ``disk_wipe`` with ``args`` (digests and all right)."""
    tool = host.get("disk_wipe")
    text = json.dumps(args, separators=(",", ":"), sort_keys=True)
    request = CallRequest(
        tool=tool,
        args=args,
        persona=host.persona("operator"),
        call_id=call_id,
        args_digest=digest_json(tool.name, text),
        args_json=text,
        sandbox=host.sandbox_profile(tool),
    )
    return payload(request, 10, host.settings.stdout_cap)


def _wait_for(check: Callable[[], bool], within: float) -> bool:
    deadline = time.monotonic() + within
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


# ------------------------------------------------------------------ tasks without the key


def test_a_forged_task_for_a_dangerous_skill_runs_nothing_and_answers_nobody(
    host: SkillHost, broker: str, worker: Worker, runs: Path
) -> None:
    """The attack: a task for ``disk_wipe`` with the worker's real digests, out of schema,
    no ticket, ran and returned ok; one with an empty digest got a refusal naming the
    worker's digests on a channel the sender chose. Now neither runs nor is answered."""
    before = _wiped(runs)
    listener = redis.Redis.from_url(broker).pubsub(ignore_subscribe_messages=True)
    listener.psubscribe("ongrid:call:*")
    body = _body(host, {"path": "/etc", "not_in_schema": True}, f"forged-{uuid.uuid4().hex[:6]}")
    wrong_key = Signer(os.urandom(32)).seal(
        TASK, {**body, "task_id": "t-wrong-key", "expires": time.time() + 60}
    )
    sent = {
        "t-unsigned": {**body, "task_id": "t-unsigned", "expires": time.time() + 60},
        "t-empty-digest": {**body, "digest": "", "task_id": "t-empty-digest", "expires": time.time() + 60},
        "t-wrong-key": wrong_key,
    }
    app = make_app(broker)
    for task_id, task in sent.items():
        app.send_task(TASK_NAME, args=[task], queue="qx", task_id=task_id, expires=60, retry=False)
    assert _wait_for(lambda: all(f"refused task {t}" in worker.log.read_text() for t in sent), 20), (
        worker.log.read_text()
    )
    time.sleep(0.3)
    heard = [m for m in iter(lambda: listener.get_message(timeout=0.1), None) if m["type"] == "pmessage"]
    listener.close()
    assert heard == []  # no refusal, no digest, on any channel
    assert _wiped(runs) == before
    log = worker.log.read_text()
    assert "it is not signed" in log and "does not verify" in log
    assert host.get("disk_wipe").digest not in log


# --------------------------------------------------------- what the worker checks under the key


def _with_limits(host: SkillHost, body: dict[str, Any], **limits: Any) -> dict[str, Any]:
    profile = profile_to_dict(host.sandbox_profile(host.get("disk_wipe")))
    profile["limits"] = {**profile["limits"], **limits}
    return {**body, "sandbox": profile}


SIGNED_BUT_WRONG: dict[str, tuple[Callable[[SkillHost, dict[str, Any]], dict[str, Any]], str]] = {
    "negative limits": (
        lambda h, b: _with_limits(h, b, cpu_seconds=-1, file_size_mb=-1, open_files=-1),
        "sandbox limit cpu_seconds=-1 is not between 1",
    ),
    "a limit above the worker's cap": (
        lambda h, b: _with_limits(h, b, open_files=10**9),
        "is not between 1 and this worker's cap",
    ),
    "a limit that is text": (lambda h, b: _with_limits(h, b, cpu_seconds="x"), "not a whole number"),
    "an unknown limit": (lambda h, b: _with_limits(h, b, stack_mb=1), "not one this worker knows"),
    "stdout_cap below 1": (lambda _h, b: {**b, "stdout_cap": -1}, "stdout_cap is below 1"),
    "args that are not JSON": (lambda _h, b: {**b, "args_json": "not json"}, "arguments are not JSON"),
    "args outside the schema": (
        lambda _h, b: {
            **b,
            "args_json": '{"not_in_schema":true,"path":"/etc"}',
            "args_digest": digest_json("disk_wipe", '{"not_in_schema":true,"path":"/etc"}'),
        },
        "arguments do not match disk_wipe's schema",
    ),
    "args that are not the digest's": (
        lambda _h, b: {**b, "args_json": '{"path":"/srv/other"}'},
        "not the ones their digest was taken of",
    ),
    "a class other than the worker's": (lambda _h, b: {**b, "tool_class": "safe"}, "decided for a safe call"),
    "a timeout that is text": (lambda _h, b: {**b, "timeout": "10"}, "'timeout' is a str"),
    "a ticket that is a number": (lambda _h, b: {**b, "ticket": 5}, "'ticket' is a int"),
}


@pytest.mark.parametrize("case", list(SIGNED_BUT_WRONG))
def test_a_signed_task_with_a_field_out_of_range_or_shape_is_refused_and_runs_nothing(
    host: SkillHost, broker: str, worker: Worker, runs: Path, case: str
) -> None:
    """The attack: ``cpu_seconds: -1`` widened the worker's own limit to unlimited, and
    ``cpu_seconds: "x"``, ``stdout_cap: -1``, ``args_json: "not json"`` raised in the task."""
    mutate, said = SIGNED_BUT_WRONG[case]
    before = _wiped(runs)
    call_id = f"wrong-{uuid.uuid4().hex[:8]}"
    task_id = f"task-{call_id}"
    body = mutate(host, _body(host, {"path": "/srv/data"}, call_id))
    listener = redis.Redis.from_url(broker).pubsub(ignore_subscribe_messages=True)
    listener.subscribe(channel(call_id, task_id))
    make_app(broker).send_task(
        TASK_NAME, args=[sealed_task(body, task_id, "qx")], queue="qx", task_id=task_id, expires=60
    )
    result = _result(listener, 20)
    assert result["result"]["ok"] is False
    error = result["result"]["error"]
    assert "refused on worker wx@test" in error and said in error, error
    assert "the skill did not run" in error
    assert _wiped(runs) == before
    assert "Traceback" not in worker.log.read_text()


def test_a_signed_task_replayed_as_another_task_or_after_its_expiry_is_refused(
    host: SkillHost, broker: str, worker: Worker, runs: Path
) -> None:
    before = _wiped(runs)
    for task_id, ttl, said in (("t-replayed", 60.0, "another task id"), ("t-expired", -1.0, "expired")):
        call_id = f"{task_id}-{uuid.uuid4().hex[:6]}"
        listener = redis.Redis.from_url(broker).pubsub(ignore_subscribe_messages=True)
        listener.subscribe(channel(call_id, task_id))
        signed_for = "t-original" if task_id == "t-replayed" else task_id
        sealed = sealed_task(_body(host, {"path": "/srv/data"}, call_id), signed_for, "qx", ttl)
        make_app(broker).send_task(TASK_NAME, args=[sealed], queue="qx", task_id=task_id, expires=60)
        error = _result(listener, 20)["result"]["error"]
        assert said in error, error
    assert _wiped(runs) == before


def _result(listener: Any, within: float) -> dict[str, Any]:
    deadline = time.monotonic() + within
    try:
        while time.monotonic() < deadline:
            message = listener.get_message(timeout=0.1)
            if message is not None and message["type"] == "message":
                data = opened(message["data"])
                if data.get("k") == "result":
                    return data
        raise AssertionError("no result")
    finally:
        listener.close()


# ----------------------------------------------------------------- what the host checks


def _play_worker(broker: str, messages: Callable[[str, str], list[Any]]) -> threading.Thread:
    """Answer the next call sent to the unserved queue ``q-none`` as a worker would: find its
    channel (``PUBSUB CHANNELS``, open to anyone on the broker) and publish ``messages``:
    dicts signed with the remote key, texts as they are."""

    def run() -> None:
        client = redis.Redis.from_url(broker)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            names = [n.decode() for n in client.pubsub_channels("ongrid:call:*")]
            if names:
                _prefix, _call, call_id, task_id = names[0].split(":")
                for message in messages(call_id, task_id):
                    text = message if isinstance(message, str) else signer().seal_text(CHANNEL, message)
                    client.publish(names[0], text)
                return
            time.sleep(0.02)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def _answer(
    worker_name: str = "wz@test", digest: str | None = None, **fields: Any
) -> Callable[[str, str], list[Any]]:
    def messages(call_id: str, task_id: str) -> list[Any]:
        result = {
            "tool": "w_probe",
            "ok": True,
            "status": "ok",
            "value": {"forged": True},
            "call_id": call_id,
        }
        result.update(fields)
        accepted = {"k": "accepted", "worker": worker_name, "task_id": task_id, "instance": "i"}
        answer = {"k": "result", "worker": worker_name, "task_id": task_id, "result": result}
        answer["digest"] = digest if digest is not None else _HOST_DIGEST[0]
        return [accepted, answer]

    return messages


_HOST_DIGEST: list[str] = [""]


@pytest.mark.parametrize(
    ("fields", "said"),
    [
        ({"duration": "abc"}, "'duration' is a str"),
        ({"stderr_tail": 5}, "'stderr_tail' is a int"),
        ({"ok": False, "status": "ok"}, "ok=False but status 'ok'"),
        ({"ok": True, "status": "failed"}, "ok=True but status 'failed'"),
        ({"status": "approved"}, "status 'approved' is not one a worker sends"),
    ],
    ids=["duration", "stderr_tail", "not-ok-but-ok", "ok-but-failed", "unknown-status"],
)
def test_a_malformed_result_is_a_recorded_failure_never_a_traceback(
    host: SkillHost, broker: str, fields: dict[str, Any], said: str
) -> None:
    """The attack: ``"duration": "abc"`` raised ValueError in the host (CLI traceback, REST
    500) and the audit said "ran on: local"; ``ok: false, status: "ok"`` was recorded ok."""
    _HOST_DIGEST[0] = host.get("w_probe").digest
    thread = _play_worker(broker, _answer(**fields))
    result = host.call("w_probe", {})
    thread.join(5)
    assert result.ok is False and result.outcome == "failed"
    assert "the worker sent a malformed result" in str(result.error) and said in str(result.error)
    assert result.remote is not None and result.remote.worker == "wz@test"
    host.audit.flush()
    [row] = host.audit.entries(call_id=result.call_id)
    assert row.outcome == "failed" and "malformed result" in str(row.error)
    assert isinstance(row.remote, dict) and row.remote["worker"] == "wz@test"


def test_a_result_with_another_worker_digest_is_not_ok_and_names_both(host: SkillHost, broker: str) -> None:
    """The attack: a result with a worker digest of zeros was recorded ok, never compared."""
    thread = _play_worker(broker, _answer(digest="0" * 64))
    result = host.call("w_probe", {})
    thread.join(5)
    assert result.ok is False and result.value == {"forged": True}
    assert f"the host sent skill digest {host.get('w_probe').digest}" in str(result.error)
    assert f"worker wz@test has skill digest {'0' * 64}" in str(result.error)


def test_a_worker_name_with_control_characters_is_escaped_in_the_result_audit_and_log(
    host: SkillHost, broker: str, caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    """The attack: a worker named ``w\\nfake line`` printed a fake line in ``audit show`` and
    in the host's INFO log line."""
    _HOST_DIGEST[0] = host.get("w_probe").digest
    caplog.set_level("INFO", "ongrid_plugins.remote")
    thread = _play_worker(broker, _answer(worker_name="wz\n2026-01-01 INFO forged line"))
    result = host.call("w_probe", {})
    thread.join(5)
    assert result.ok, result.error
    assert result.remote is not None and result.remote.worker == "wz\\x0a2026-01-01 INFO forged line"
    assert all("\n" not in r.getMessage() for r in caplog.records)
    host.audit.flush()
    env = {k: v for k, v in os.environ.items() if not k.startswith("ONGRID_")}
    env.update(ONGRID_STATE_DIR=host.settings.state_dir, PYTHONPATH=str(REPO))
    shown = subprocess.run(
        [sys.executable, "-m", "ongrid_plugins", "--no-defaults", "audit", "show", result.call_id],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert shown.returncode == 0, shown.stderr
    assert "forged line" in shown.stdout
    assert not any(line.startswith("2026-01-01") for line in shown.stdout.splitlines()), shown.stdout


def test_a_result_published_without_the_key_is_never_taken(host: SkillHost, broker: str) -> None:
    """The attack: with no worker on the queue, a forged result printed ``{"forged": true}``, exit 0."""
    _HOST_DIGEST[0] = host.get("w_probe").digest

    def unsigned(call_id: str, task_id: str) -> list[Any]:
        return [json.dumps(m) for m in _answer()(call_id, task_id)]

    thread = _play_worker(broker, unsigned)
    result = host.call("w_probe", {})
    thread.join(5)
    assert result.ok is False and result.timed_out and result.value is None
    assert result.remote is not None and result.remote.worker == ""


# ----------------------------------------------------------------- refused configurations


def test_a_routed_call_without_a_key_or_to_a_password_less_remote_broker_is_refused_with_the_fix(
    tmp_path: Path, runs: Path
) -> None:
    root = _skills(tmp_path / "skills", runs)
    no_key = SkillHost(
        isolated_settings(tmp_path / "a", root, broker_url="redis://127.0.0.1:9/0", remote_routes="*=q")
    )
    error = str(no_key.call("w_probe", {}).error)
    assert "ONGRID_REMOTE_KEY_FILE" in error and "head -c 32 /dev/urandom" in error, error
    far = isolated_settings(
        tmp_path / "b",
        root,
        broker_url="redis://10.0.0.7:6379/0",
        remote_key_file=key_file(),
        remote_routes="*=q",
    )
    error = str(SkillHost(far).call("w_probe", {}).error)
    assert "has no password and is not on this machine" in error and "redis://:PASSWORD@" in error, error
    readable = tmp_path / "shared.key"
    readable.write_text("k" * 40)
    readable.chmod(0o644)
    loose = isolated_settings(
        tmp_path / "c",
        root,
        broker_url="redis://127.0.0.1:9/0",
        remote_key_file=str(readable),
        remote_routes="*=q",
    )
    assert "chmod 600" in str(SkillHost(loose).call("w_probe", {}).error)


def test_a_worker_without_a_key_refuses_to_start_and_says_how_to_make_one(
    broker: str, runs: Path, tmp_path: Path
) -> None:
    root = _skills(tmp_path / "skills", runs)
    env = {k: v for k, v in os.environ.items() if not k.startswith("ONGRID_")}
    env.update(ONGRID_STATE_DIR=str(tmp_path / "state"), ONGRID_CACHE_DIR="off", PYTHONPATH=str(REPO))
    argv = [sys.executable, "-m", "ongrid_plugins", "--no-defaults", "--dirs", str(root), "worker"]
    for broker_url, said in ((broker, "ONGRID_REMOTE_KEY_FILE"), ("redis://10.0.0.7:6379/0", "no password")):
        done = subprocess.run(
            [*argv, "--broker", broker_url, "--name", "nokey@test"],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode != 0 and said in done.stderr, done.stderr


def test_the_cli_answers_a_malformed_result_with_exit_1_and_no_traceback(
    host: SkillHost, broker: str, runs: Path, tmp_path: Path
) -> None:
    """The attack: ``"duration": "abc"`` made ``ongrid-skills run`` print a traceback."""
    _HOST_DIGEST[0] = host.get("w_probe").digest
    env = {k: v for k, v in os.environ.items() if not k.startswith("ONGRID_")}
    env.update(
        ONGRID_STATE_DIR=str(tmp_path / "cli-state"),
        ONGRID_CACHE_DIR="off",
        ONGRID_BROKER_URL=broker,
        ONGRID_REMOTE_KEY_FILE=key_file(),
        ONGRID_REMOTE_ROUTES="w_*=q-none",
        PYTHONPATH=str(REPO),
    )
    root = _skills(tmp_path / "cli-skills", runs)
    thread = _play_worker(broker, _answer(duration="abc"))
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "ongrid_plugins",
            "--no-defaults",
            "--dirs",
            str(root),
            "run",
            "w_probe",
            "{}",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    thread.join(5)
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert (
        "Traceback" not in done.stderr and "the worker sent a malformed result" in done.stdout + done.stderr
    )
