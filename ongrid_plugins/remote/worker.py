"""The worker side: the ``ongrid.run`` tasks and ``ongrid-skills worker``.

A worker loads its own skills (its own roots, packs and settings, read from its
environment) once, before Celery forks its pool, and runs each call with the local
:class:`~ongrid_plugins.executors.subprocess.SubprocessExecutor`: its sandbox, limits,
env allow-list, timeout and output caps. Before anything runs it checks that it has
the tool, that the tool's digests equal the host's, narrows the host's profile and
limits with its own (:func:`.wire.narrower`), and, for a call that changes something,
claims the call's idempotency key. It holds no approval state: the host's gate decided
before the task was sent.

Delivery, per class (the worker's own copy of the tool decides, not the payload):

- ``safe`` calls are sent as ``ongrid.run_safe``, acknowledged *late* and rejected
  back onto the queue when the pool process running them dies
  (``acks_late`` + ``reject_on_worker_lost``): at least once. Running a read-only call
  twice is harmless, and a call whose worker process was lost is then answered by
  another one while the host still waits. The task's expiry (the host's wait) bounds
  the redeliveries: a task nobody can finish in time is dropped, not retried forever.
  A safe call claims nothing.
- ``mutating`` and ``dangerous`` calls are sent as ``ongrid.run``, acknowledged *early*
  (when a worker takes the task): at most once from the broker's side. Early acks are
  not enough on their own (a visibility-timeout restore, a republished message, two
  hosts spending one ticket), so before running the worker claims an idempotency key
  atomically (``SET NX`` in Redis, kept :data:`CLAIM_TTL` seconds): the ticket id for a
  two-person call, else the call id. A task whose key is already claimed is answered
  with a failure that says so and names the worker and task that hold the claim; the
  skill does not run. A call whose worker died mid-call is therefore never retried:
  the host's caller gets a failure (its lease expired, naming the worker) and decides.

While it runs a call the worker holds the call's lease in Redis (renewed every second
by the pool process; its main process holds its own liveness key): the host learns
within seconds that a worker died mid-call (:mod:`.client`). The host's cancels are
never lost: a call is registered for cancels before the worker looks for the host's
``cancelled`` key, which the host sets before it publishes the cancel.

A worker killed mid-call (SIGKILL, machine loss) cannot kill its skill's processes.
They stay in the call's cgroup (the sandbox's per-call pids group, which ``setsid``
cannot leave), and the next worker started on that machine kills them before it
takes any call (:func:`~ongrid_plugins.executors.confine.cgroups.sweep_stale`); so
does each pool process Celery starts to replace one that died. Without cgroups
(unconfined, not root) nothing tracks them and the worker says so at start.

Each call is logged at INFO on ``ongrid_plugins.remote.worker`` (to stderr, in Celery's
line format, unless the embedder gave that logger a handler): the worker, the call id,
the tool and the outcome, with the error when it failed, e.g.
``[... INFO/ForkPoolWorker-1] ongrid_plugins.remote.worker: ongrid worker w1@db1: call
c8ed...03 of disk_usage: ok``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import socket
import sys
import threading
import time
import uuid
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import redis

from ..core.echo import printable
from ..errors import ConfigError, OngridError
from ..models import CallRequest, CallResult, Event
from .app import make_app
from .calls import Calls, publish_end
from .checks import tool_for
from .signing import CHANNEL, TASK, Signer, broker_refusal, load_signer
from .wire import (
    LEASE,
    LEASE_RENEW,
    SAFE_TASK_NAME,
    TASK_NAME,
    alive_key,
    cancelled_key,
    channel,
    claim_key,
    lease_key,
    narrower,
    profile_from_dict,
    result_to_dict,
)

if TYPE_CHECKING:
    from ..host.facade import SkillHost
    from ..models import Tool
    from ..settings import Settings

__all__ = ["build_app", "execute", "run_worker"]

logger = logging.getLogger(__name__)

CLAIM_TTL = 7 * 24 * 3600
"""Seconds an idempotency claim is kept: longer than any ticket or redelivery lives."""


class _State:
    host: SkillHost | None = None
    broker_url: str = ""
    redis: redis.Redis | None = None
    pid: int = 0
    instance: str = ""
    """This worker's instance id (its pool processes inherit it): see :func:`.wire.alive_key`."""
    signer: Signer | None = None
    """The remote key's signer (:mod:`.signing`): no task runs without it."""


_state = _State()


def _client() -> redis.Redis:
    if _state.redis is None or _state.pid != os.getpid():  # one connection per pool process
        _state.redis = redis.Redis.from_url(_state.broker_url, socket_connect_timeout=5)
        _state.pid = os.getpid()
    return _state.redis


def _signer() -> Signer | str:
    """This worker's signer, loaded on first use; why there is none (with the fix) if not."""
    if _state.signer is None:
        try:
            _state.signer = load_signer(_host().settings.remote_key_file, "this worker")
        except ConfigError as exc:
            return str(exc)
    return _state.signer


def _host() -> SkillHost:
    if _state.host is None:
        from ..host.facade import SkillHost

        _state.host = SkillHost()
        _state.host.load()
    return _state.host


def build_app(broker_url: str, host: SkillHost | None = None) -> Any:
    """The worker's Celery app with the ``ongrid.run`` task; ``host`` holds its skills."""
    _state.broker_url = broker_url
    _calls.broker_url = broker_url
    if host is not None:
        _state.host = host
    refused = broker_refusal(broker_url)
    if refused:
        raise ConfigError(f"the worker refuses to start: {refused}")
    app = make_app(broker_url)
    # A worker outlives a broker outage: its consumer reconnects (after 2 s, backing off to
    # every 30 s) instead of shutting down. Only a worker's consumer reads these; a host's
    # calls keep make_app's no-retry settings and fail within the broker timeout. A call
    # running at the loss goes on under its own timeout (said explicitly: Celery 6 flips it).
    app.conf.update(
        broker_connection_retry=True,
        broker_connection_max_retries=None,
        worker_cancel_long_running_tasks_on_connection_loss=False,
    )
    if TASK_NAME not in app.tasks:
        # The result travels on the call's channel: nothing is stored in the backend, and
        # the task returns only the status (for Celery's own log line, through the pool pipe).
        @app.task(name=TASK_NAME, bind=True, ignore_result=True, acks_late=False)  # type: ignore[untyped-decorator]
        def run(self: Any, body: dict[str, Any]) -> str:
            return str(execute(body, str(self.request.hostname), str(self.request.id))["status"])

        @app.task(  # type: ignore[untyped-decorator]
            name=SAFE_TASK_NAME, bind=True, ignore_result=True, acks_late=True, reject_on_worker_lost=True
        )
        def run_safe(self: Any, body: dict[str, Any]) -> str:
            return str(execute(body, str(self.request.hostname), str(self.request.id))["status"])

    return app


def execute(body: dict[str, Any], worker: str, task_id: str) -> dict[str, Any]:
    """Run one call sent by a host; publish its events and result on the call's channel.

    From the ``accepted`` message to the result the worker holds the call's lease
    (:func:`.wire.lease_key`, renewed by :class:`.calls.Calls`): a host that sees it expire
    without a result knows the worker died. The call is registered for cancels before
    the worker looks for a cancel the host sent earlier (:func:`.wire.cancelled_key`),
    so a cancel sent at any time after the task reaches it.
    """
    signer = _signer()
    opened = signer.open(TASK, body) if isinstance(signer, Signer) else signer
    if isinstance(opened, str) or not isinstance(signer, Signer):
        _unsigned(worker, task_id, str(opened))
        return {"status": "refused"}
    body = opened
    client = _client()
    call_id = str(body.get("call_id", ""))
    topic = channel(call_id, task_id)

    held: list[str] = []  # the ``exit`` event, sent with the result in one round trip

    def publish(message: dict[str, Any]) -> None:
        text = signer.seal_text(CHANNEL, {**message, "task_id": task_id})
        if message.get("kind") == "exit":
            held.append(text)
        else:
            client.publish(topic, text)

    _calls.register(call_id)
    try:
        pipe = client.pipeline(transaction=False)
        pipe.set(lease_key(call_id), worker, px=int(LEASE * 1000))
        pipe.exists(cancelled_key(call_id))
        accepted = {"k": "accepted", "worker": worker, "task_id": task_id, "instance": _state.instance}
        pipe.publish(topic, signer.seal_text(CHANNEL, accepted))
        if pipe.execute()[1]:
            _calls.cancel(call_id)
        result, digest = _execute(body, worker, task_id, client, publish)
    finally:
        _calls.unregister(call_id)
    logger.info(
        "ongrid worker %s: call %s of %s: %s%s",
        printable(worker),
        printable(call_id, 80),
        printable(str(body.get("tool")), 80),
        result.outcome,
        f" ({printable(result.error)})" if result.error else "",
    )
    data = result_to_dict(result)
    result_message = {"k": "result", "result": data, "worker": worker, "task_id": task_id, "digest": digest}
    publish_end(client, topic, [*held, signer.seal_text(CHANNEL, result_message)], call_id, task_id)
    return data


def _unsigned(worker: str, task_id: str, why: str) -> None:
    """Log a task that is not the host's: nothing is published (its channel would be the
    sender's choice, and a refusal there would tell it what the worker has)."""
    logger.warning(
        "ongrid worker %s: refused task %s: %s; nothing ran and nothing was answered",
        printable(worker),
        printable(task_id, 80),
        why,
    )


def _execute(
    body: dict[str, Any], worker: str, task_id: str, client: redis.Redis, publish: Any
) -> tuple[CallResult, str]:
    name = str(body.get("tool", ""))
    call_id = str(body.get("call_id", ""))

    def fail(error: str, digest: str = "") -> tuple[CallResult, str]:
        return CallResult(name, False, error=error, call_id=call_id), digest

    host = _host()
    found = tool_for(host, body, worker, task_id)
    if isinstance(found, tuple):
        return fail(*found)
    tool = found
    if not tool.available:
        return fail(f"on worker {worker}: {name} is unavailable: {'; '.join(tool.unavailable)}", tool.digest)
    if _calls.cancelled(call_id):
        error = f"cancelled by the host before worker {worker} started it: the skill did not run"
        return CallResult(name, False, error=error, call_id=call_id, status="cancelled"), tool.digest
    refusal = _claim(tool, body, worker, task_id, client)
    if refusal:
        return fail(refusal, tool.digest)
    own = host.sandbox_profile(tool)
    sent = body.get("sandbox")
    try:
        profile = narrower(profile_from_dict(sent) if sent else None, own)
    except (TypeError, ValueError) as exc:  # checked field by field already: a profile's own checks
        return fail(f"refused on worker {worker}: the sandbox profile is not valid ({exc})", tool.digest)
    if isinstance(profile, str):
        return fail(f"on worker {worker}: {profile}", tool.digest)
    settings = host.settings

    def on_event(event: Event) -> None:
        publish({"k": "event", "kind": event.kind, "data": event.data})

    args_json = str(body.get("args_json") or "{}")
    try:
        persona = host.persona(str(body.get("persona") or "operator"))
    except OngridError:
        persona = host.persona("operator")  # unused by the executor; the host's gate decided
    request = CallRequest(
        tool=tool,
        args=json.loads(args_json),  # checked against the tool's schema in _checks
        persona=persona,
        call_id=call_id,
        args_digest=str(body.get("args_digest") or ""),
        args_json=args_json,
        caller=str(body.get("caller") or ""),
        ticket=body.get("ticket"),
        on_event=on_event,
        timeout=_lower(body.get("timeout"), tool.timeout),
        sandbox=profile,
    )
    stdout_cap = min(body["stdout_cap"], settings.stdout_cap)  # at least 1: task_refusal
    return _loop().run_until_complete(_run(request, stdout_cap, settings, call_id)), tool.digest


def _claim(tool: Tool, body: dict[str, Any], worker: str, task_id: str, client: redis.Redis) -> str:
    """Claim a changing call's idempotency key; why the call is refused, or ``""`` to run it."""
    if tool.tool_class.value == "safe":
        return ""  # at least once: a redelivered safe call runs again
    key = claim_key(body)
    mark = f"worker {worker}, task {task_id}, call {body.get('call_id', '')}"
    if client.set(key, mark, nx=True, ex=CLAIM_TTL):
        return ""
    owner = client.get(key)
    held = owner.decode() if isinstance(owner, bytes) else str(owner)
    return (
        f"refused on worker {worker}: {key.split(':', 2)[2]} was already claimed ({held}); "
        f"a redelivered or repeated {tool.tool_class.value} call is never run twice"
    )


def _lower(sent: Any, own: float) -> float:
    if isinstance(sent, int | float) and not isinstance(sent, bool) and 0 < sent < float("inf"):
        return min(float(sent), own)
    return own


async def _run(request: CallRequest, stdout_cap: int, settings: Settings, call_id: str) -> CallResult:
    """Run the call; a cancel published by the host kills its process group."""
    from ..executors.subprocess import SubprocessExecutor

    executor = SubprocessExecutor(stdout_cap, settings.kill_grace, settings)
    task = asyncio.ensure_future(executor.arun(request))
    with _calls.watching(call_id, task):
        try:
            return await task
        except asyncio.CancelledError:
            error = "cancelled by the host (timeout or cancellation): the process group was killed"
            return CallResult(request.tool.name, False, error=error, call_id=call_id, status="cancelled")


def _loop() -> asyncio.AbstractEventLoop:
    """This thread's event loop, kept from call to call (a new loop per call costs a millisecond)."""
    loop: asyncio.AbstractEventLoop | None = getattr(_local, "loop", None)
    if loop is None or loop.is_closed() or getattr(_local, "pid", 0) != os.getpid():
        loop = _local.loop = asyncio.new_event_loop()
        _local.pid = os.getpid()
    return loop


_local = threading.local()


_calls = Calls()


def run_worker(
    broker_url: str,
    queues: Sequence[str] = ("ongrid",),
    concurrency: int = 1,
    name: str = "",
    host: SkillHost | None = None,
) -> None:
    """Start a Celery worker for ``queues`` (blocks until it stops).

    Loads the skills first (``host``, else a host from this process's settings), so a
    broken skill root shows before the worker takes any call, and the pool inherits it.
    """
    app = build_app(broker_url, host)
    loaded = _host()
    signer = _signer()
    if isinstance(signer, str):
        raise ConfigError(f"the worker refuses to start: {signer}")
    name = name or f"ongrid-{os.getpid()}@{socket.gethostname()}"
    tools = loaded.tools()
    _log_to_stderr()
    logger.info("ongrid worker %s: %d tool(s), queues %s", name, len(tools), ",".join(queues))
    _sweep(name, "at start")
    _sweep_in_each_pool_process(name)
    _state.instance = uuid.uuid4().hex
    alive = threading.Thread(target=_keep_alive, args=(name, _state.instance), name="ongrid-alive")
    alive.daemon = True
    alive.start()
    try:
        info = {"skills": len(loaded.skills()), "tools": len(tools), "queues": list(queues)}
        _client().set(f"ongrid:worker:{name}", json.dumps(info), ex=CLAIM_TTL)
    except redis.RedisError as exc:
        logger.warning("ongrid worker %s: cannot reach the broker yet: %s", name, exc)
    argv = [
        "worker",
        "--queues",
        ",".join(queues),
        "--concurrency",
        str(concurrency),
        "--hostname",
        name,
        "--loglevel",
        "INFO",
        "--without-gossip",
        "--without-mingle",
        "--prefetch-multiplier",
        "1",
        "--optimization",
        "fair",
    ]
    app.worker_main(argv)


def _keep_alive(name: str, instance: str) -> None:
    """Hold :func:`.wire.alive_key` for this worker while its main process lives."""
    client = redis.Redis.from_url(_state.broker_url, socket_connect_timeout=5, socket_timeout=5)
    while True:
        try:
            client.set(alive_key(name), instance, px=int(LEASE * 1000))
        except redis.RedisError as exc:
            logger.warning("ongrid worker %s: cannot renew its liveness key: %s", name, exc)
        time.sleep(LEASE_RENEW)


def _log_to_stderr() -> None:
    """Log the worker's lines at INFO to stderr, timed and levelled like Celery's own lines.

    Left alone when the embedder gave ``ongrid_plugins.remote.worker`` a handler.
    """
    logger.setLevel(logging.INFO)
    if logger.handlers:
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(
        logging.Formatter("[%(asctime)s: %(levelname)s/%(processName)s] %(name)s: %(message)s")
    )
    logger.addHandler(handler)
    logger.propagate = False


def _sweep(name: str, when: str, *, quiet: bool = False) -> None:
    """Kill the processes left by calls whose worker process died (see the module docs)."""
    from ..executors.confine import cgroups

    killed = cgroups.sweep_stale()
    if killed is None:
        if quiet:
            return
        logger.warning(
            "ongrid worker %s: no per-call cgroups here (needs root and cgroup v1 pids): "
            "a skill's processes that left its process group can outlive a killed worker",
            name,
        )
    elif killed:
        logger.warning(
            "ongrid worker %s: killed %d process(es) left by calls of a worker that died (%s)",
            name,
            killed,
            when,
        )


def _sweep_in_each_pool_process(name: str) -> None:
    """A pool process Celery starts (also to replace one that died) sweeps before its first call."""
    from celery.signals import worker_process_init  # type: ignore[import-untyped]

    def swept(**_kwargs: Any) -> None:
        _sweep(name, "in a new pool process", quiet=True)
        _calls.start()

    worker_process_init.connect(swept, weak=False)


def live_workers(broker_url: str, timeout: float = 1.0) -> list[dict[str, Any]]:
    """The workers answering on ``broker_url``: name, queues, load and skill count (Celery inspect)."""
    app = make_app(broker_url)
    inspect = app.control.inspect(timeout=timeout)
    queues = inspect.active_queues() or {}
    active = inspect.active() or {}
    stats = inspect.stats() or {}
    client = redis.Redis.from_url(broker_url, socket_connect_timeout=timeout)
    rows = []
    for worker in sorted(set(queues) | set(stats)):
        raw = client.get(f"ongrid:worker:{worker}")
        info = json.loads(raw) if raw else {}
        pool = stats.get(worker, {}).get("pool", {})
        rows.append(
            {
                "worker": worker,
                "queues": sorted(q["name"] for q in queues.get(worker, [])),
                "running": len(active.get(worker, [])),
                "concurrency": pool.get("max-concurrency"),
                "skills": info.get("skills"),
                "tools": info.get("tools"),
            }
        )
    return rows
