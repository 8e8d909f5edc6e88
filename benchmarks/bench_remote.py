#!/usr/bin/env python3
"""Remote calls over Celery + Redis: latency against the local call and the broker's floor.

Starts its own ``redis-server`` on a free 127.0.0.1 port (no persistence) and its own
workers as subprocesses (``ongrid-skills worker``, each with the skill root of the run),
then prints, in one run:

* **latency** (sequential, interleaved blocks so machine noise hits every method alike):
  ``floor`` = an empty Celery task on the same app configuration, its result read back
  through Celery's Redis result backend (``send_task(...).get()``): the broker round trip
  no remote call can beat; ``local`` = ``host.call`` of a trivial ``safe`` skill here;
  ``remote safe`` / ``remote mutating`` = the same skill routed to a worker (the mutating
  one also claims its idempotency key in Redis); ``remote safe, unsigned`` = the same
  call on a worker of this script (``--plain-worker``) and a host executor whose signer
  computes no HMAC and whose worker skips the task checks (:mod:`ongrid_plugins.remote.checks`):
  what signing and checking cost, side by side with ``remote safe``;
* **signing and checking**, CPU per call step by step (timed in this process, no broker):
  seal and open the task, the worker's checks, seal and open the four channel messages
  (accepted, start, exit, result) and the host's result check;
* **throughput** with 1, 2 and 4 worker pool processes (``--concurrency N``), calls
  issued by ``--clients`` threads of one host (``host.call``), beside the local host
  with the same threads.

    python benchmarks/bench_remote.py --n 300 --calls 400
    python benchmarks/bench_remote.py --n 200 --procs 1    # a short run: latency and one pool size

Needs the ``[celery]`` extra and ``redis-server`` on the PATH.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from ongrid_plugins import SkillHost  # noqa: E402
from ongrid_plugins.testing import isolated_settings, make_skill  # noqa: E402

try:
    from ongrid_plugins.remote.app import make_app
except ImportError as exc:  # the optional extra: skipped, like a missing redis-server
    print(f"bench_remote skipped: {exc}; pip install 'ongrid-plugins[celery]'")
    sys.exit(0)

NOOP = "bench.noop"
KEY = Path("remote.key")
"""The remote key file of the run (made in its temporary folder by :func:`main`)."""


def _plain_signer() -> Any:
    """A signer that seals and opens like the real one but computes no HMAC: the unsigned baseline."""
    from ongrid_plugins.remote.signing import Signer

    class Plain(Signer):
        def _mac(self, label: bytes, text: str) -> str:
            return "-" * 64

    return Plain(b"")


def plain_worker(broker: str, name: str, root: str) -> None:
    """An ongrid worker without the HMAC and the task checks (the benchmark's baseline only)."""
    from ongrid_plugins import Settings
    from ongrid_plugins.host.facade import SkillHost as Host
    from ongrid_plugins.remote import checks, worker

    worker._state.signer = _plain_signer()
    checks.task_refusal = lambda *_a: ""
    checks.call_refusal = lambda *_a: ""
    host = Host(Settings.from_env(skill_dirs=[root], include_defaults=False))
    worker.run_worker(broker, ("plain",), 1, name, host)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_redis(folder: Path) -> tuple[subprocess.Popen[bytes], str]:
    server = shutil.which("redis-server")
    if server is None:
        print("bench_remote skipped: redis-server is not installed (apt-get install redis-server)")
        sys.exit(0)
    port = _free_port()
    argv = [server, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
    proc = subprocess.Popen([*argv, "--dir", str(folder)], stdout=subprocess.DEVNULL)
    deadline = time.monotonic() + 10
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return proc, f"redis://127.0.0.1:{port}/0"
        except OSError:
            if time.monotonic() > deadline:
                sys.exit("redis-server did not start")
            time.sleep(0.05)


def start_worker(
    broker: str, base: Path, root: Path, name: str, queue: str, concurrency: int, noop: bool | str = False
) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ONGRID_")}
    env.update(
        ONGRID_STATE_DIR=str(base / "state"),
        ONGRID_CACHE_DIR=str(base / "cache"),
        ONGRID_CONFIG_DIR=str(base / "config"),
        ONGRID_USER_SKILLS_DIR=str(base / "user"),
        ONGRID_SYSTEM_SKILLS_DIR=str(base / "system"),
        PYTHONPATH=str(REPO),
        ONGRID_REMOTE_KEY_FILE=str(KEY),
    )
    if noop == "plain":
        argv = [sys.executable, __file__, "--plain-worker", broker, "--name", name, "--root", str(root)]
    elif noop:
        argv = [sys.executable, __file__, "--noop-worker", broker, "--name", name]
    else:
        argv = [sys.executable, "-m", "ongrid_plugins", "--no-defaults", "--dirs", str(root), "worker"]
        argv += ["--broker", broker, "--queue", queue, "--name", name, "--concurrency", str(concurrency)]
    base.mkdir(parents=True, exist_ok=True)
    log = (base / f"{name}.log").open("ab")
    proc = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    app = make_app(broker)
    deadline = time.monotonic() + 60
    while not app.control.ping(destination=[name], timeout=0.5):
        if time.monotonic() > deadline or proc.poll() is not None:
            sys.exit(f"worker {name} did not start: see {base / f'{name}.log'}")
    return proc


def stop(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(15)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def noop_worker(broker: str, name: str) -> None:
    """A Celery worker with one empty task, configured as the ongrid workers are."""
    app = make_app(broker)

    @app.task(name=NOOP)  # type: ignore[untyped-decorator]
    def noop() -> None:
        return None

    argv = ["worker", "--queues", "floor", "--concurrency", "1", "--hostname", name, "--loglevel", "WARNING"]
    argv += ["--without-gossip", "--without-mingle", "--prefetch-multiplier", "1", "-O", "fair"]
    app.worker_main(argv)


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def latency(methods: dict[str, Callable[[], Any]], n: int, block: int) -> dict[str, list[float]]:
    samples: dict[str, list[float]] = {name: [] for name in methods}
    for fn in methods.values():  # warm: connections, pools, caches
        for _ in range(5):
            fn()
    done = 0
    while done < n:
        k = min(block, n - done)
        for name, fn in methods.items():
            for _ in range(k):
                t0 = time.perf_counter()
                fn()
                samples[name].append((time.perf_counter() - t0) * 1e3)
        done += k
    return samples


def cpu_seconds(pid: int, tree: bool = True) -> float:
    """User + system CPU of ``pid`` and its reaped children (and, with ``tree``, its live children)."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0.0
    pids = [pid]
    if tree:
        with contextlib.suppress(OSError):
            for task in Path(f"/proc/{pid}/task").iterdir():
                pids += [int(c) for c in (task / "children").read_text().split()]
    for one in pids:
        with contextlib.suppress(OSError, IndexError):
            fields = Path(f"/proc/{one}/stat").read_text().rpartition(")")[2].split()
            total += sum(int(f) for f in fields[11:15]) / tick  # utime stime cutime cstime
    return total


def throughput(
    call: Callable[[], Any], calls: int, clients: int, others: dict[str, int]
) -> tuple[float, dict[str, float]]:
    """Calls per second, and CPU ms per call spent by this host and each process in ``others``."""
    with concurrent.futures.ThreadPoolExecutor(clients) as pool:
        list(pool.map(lambda _i: call(), range(clients * 2)))  # warm every thread's path
        before = {name: cpu_seconds(pid) for name, pid in others.items()}
        own = os.times()
        t0 = time.perf_counter()
        list(pool.map(lambda _i: call(), range(calls)))
        elapsed = time.perf_counter() - t0
        after = os.times()
        cpu = {name: (cpu_seconds(pid) - before[name]) * 1e3 / calls for name, pid in others.items()}
        spent = sum(after[:4]) - sum(own[:4])  # user, system and the reaped skills' (local calls)
        cpu["host"] = spent * 1e3 / calls
        return calls / elapsed, cpu


def steps(host: SkillHost, n: int = 2000) -> None:
    """CPU per call of each signing and checking step, timed here (no broker, no worker)."""
    from ongrid_plugins.models import CallRequest, digest_json
    from ongrid_plugins.remote.checks import call_refusal, result_refusal, task_refusal
    from ongrid_plugins.remote.signing import CHANNEL, TASK, load_signer
    from ongrid_plugins.remote.wire import payload

    tool = host.get("echo_remote")
    signer = load_signer(str(KEY), "the benchmark")
    request = CallRequest(
        tool=tool,
        args={"x": 1},
        persona=host.persona("operator"),
        call_id="c1",
        args_digest=digest_json(tool.name, '{"x":1}'),
        args_json='{"x":1}',
        sandbox=host.sandbox_profile(tool),
    )
    body = payload(request, 10, host.settings.stdout_cap, "t1", "bench", time.time() + 3600)
    result = {
        "tool": tool.name,
        "ok": True,
        "status": "ok",
        "value": {"x": 1},
        "call_id": "c1",
        "duration": 0.01,
    }
    message = {"k": "result", "result": result, "worker": "w", "task_id": "t1", "digest": tool.digest}
    now = time.time()

    def timed(sign: Any, check: bool) -> dict[str, Callable[[], Any] | None]:
        sealed, texts = sign.seal(TASK, body), [sign.seal_text(CHANNEL, message)] * 4
        return {
            "host: seal the task": lambda: sign.seal(TASK, body),
            "worker: open the task": lambda: sign.open(TASK, sealed),
            "worker: check the task's fields": (lambda: task_refusal(body, "t1", now)) if check else None,
            "worker: check class, arguments (schema), limits": (
                (lambda: call_refusal(tool, body, host.settings)) if check else None
            ),
            "worker: seal 4 channel messages": lambda: [sign.seal_text(CHANNEL, message) for _ in range(4)],
            "host: open 4 channel messages": lambda: [sign.open_text(CHANNEL, t) for t in texts],
            "host: check the result": lambda: result_refusal(result),  # both: the host always checks
        }

    def clock(fn: Callable[[], Any] | None) -> float:
        if fn is None:
            return 0.0
        fn()
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        return (time.perf_counter() - t0) * 1e6 / n

    signed, unsigned = timed(signer, True), timed(_plain_signer(), False)
    print(f"signing and checking, CPU µs per call ({n} runs each, this process; the unsigned column")
    print("still encodes and decodes the same JSON, without the HMAC and the worker's checks)\n")
    print("| step | signed, checked | unsigned | difference |\n|---|---:|---:|---:|")
    totals = [0.0, 0.0]
    for name in signed:
        a, b = clock(signed[name]), clock(unsigned[name])
        totals[0] += a
        totals[1] += b
        print(f"| {name} | {a:.1f} | {b:.1f} | {a - b:+.1f} |")
    a, b = totals
    print(f"| **one call** | **{a:.1f}** | **{b:.1f}** | **{a - b:+.1f}** |")


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--n", type=int, default=300, help="sequential calls per method (default 300)")
    parser.add_argument("--block", type=int, default=25)
    parser.add_argument("--calls", type=int, default=400, help="calls per throughput run (default 400)")
    parser.add_argument("--clients", type=int, default=8, help="client threads for throughput (default 8)")
    parser.add_argument("--procs", default="1,2,4", help="worker pool sizes (default 1,2,4)")
    parser.add_argument("--noop-worker", metavar="URL", help=argparse.SUPPRESS)
    parser.add_argument("--name", default="floor@bench", help=argparse.SUPPRESS)
    parser.add_argument("--plain-worker", metavar="URL", help=argparse.SUPPRESS)
    parser.add_argument("--root", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.noop_worker:
        noop_worker(args.noop_worker, args.name)
        return 0
    if args.plain_worker:
        plain_worker(args.plain_worker, args.name, args.root)
        return 0

    load0 = " ".join(f"{x:.2f}" for x in os.getloadavg())
    base = Path(tempfile.mkdtemp(prefix="ongrid-bench-remote-"))
    global KEY
    KEY = base / "remote.key"
    root = base / "skills"
    make_skill(root, "echo_remote", **{"class": "safe"})
    make_skill(root, "echo_mutating", **{"class": "mutating"})
    KEY.write_text(os.urandom(32).hex() + "\n")
    KEY.chmod(0o600)
    redis_proc, broker = start_redis(base)
    procs: list[subprocess.Popen[bytes]] = []
    try:
        procs.append(start_worker(broker, base / "floor", root, "floor@bench", "floor", 1, noop=True))
        procs.append(start_worker(broker, base / "plain", root, "plain@bench", "plain", 1, noop="plain"))
        worker = start_worker(broker, base / "w1", root, "w1@bench", "bench", 1)
        local = SkillHost(isolated_settings(base / "local", root))
        keyed = {"broker_url": broker, "remote_key_file": str(KEY)}
        remote = SkillHost(isolated_settings(base / "host", root, remote_routes="*=bench", **keyed))
        plain = SkillHost(isolated_settings(base / "plain-host", root, remote_routes="*=plain", **keyed))
        executor = plain.pm.hook.ongrid_executor(tool=plain.get("echo_remote"), settings=plain.settings)
        executor.signer = _plain_signer()
        app = make_app(broker)

        def floor() -> None:
            app.send_task(NOOP, queue="floor").get(timeout=10)

        def checked(host: SkillHost, name: str, **kw: Any) -> Callable[[], Any]:
            def call() -> Any:
                result = host.call(name, {"x": 1}, **kw)
                if not result.ok:
                    raise SystemExit(f"{name} failed: {result.error}")
                return result

            return call

        methods = {
            "floor (empty Celery task)": floor,
            "local host.call": checked(local, "echo_remote"),
            "remote safe": checked(remote, "echo_remote"),
            "remote safe, unsigned": checked(plain, "echo_remote"),
            "remote mutating (+claim)": checked(remote, "echo_mutating", confirm=True),
        }
        samples = latency(methods, args.n, args.block)
        p50 = {name: statistics.median(values) for name, values in samples.items()}
        print(f"latency, ms ({args.n} sequential calls per method, interleaved blocks of {args.block})\n")
        print("| method | p50 | p95 | p50 - floor - local |\n|---|---:|---:|---:|")
        fl, lo = p50["floor (empty Celery task)"], p50["local host.call"]
        for name, values in samples.items():
            extra = f"{p50[name] - fl - lo:+.2f}" if name.startswith("remote") else ""
            print(f"| {name} | {p50[name]:.2f} | {pct(values, 0.95):.2f} | {extra} |")
        print(
            f"\ntarget: remote p50 <= floor + 3 ms = {fl + 3:.2f} (as written); "
            f"<= floor + local + 3 ms = {fl + lo + 3:.2f} (the skill still has to run)"
        )
        signed_cost = p50["remote safe"] - p50["remote safe, unsigned"]
        print(f"signed and checked - unsigned, p50: {signed_cost:+.2f} ms (target: at most +1 ms)\n")
        steps(remote)

        stop(worker)
        sizes = [int(p) for p in args.procs.split(",") if p]
        local_rate, local_cpu = throughput(checked(local, "echo_remote"), args.calls, args.clients, {})
        rows: dict[int, tuple[float, dict[str, float]]] = {}
        for size in sizes:
            worker = start_worker(broker, base / f"w{size}", root, f"w{size}x@bench", "bench", size)
            others = {"worker": worker.pid, "redis": redis_proc.pid}
            rows[size] = throughput(checked(remote, "echo_remote"), args.calls, args.clients, others)
            stop(worker)
        cpus = os.cpu_count()
        print(f"\nthroughput, calls/s ({args.calls} calls from {args.clients} client threads; {cpus} CPUs)")
        print("CPU ms per call: host = this process and the skills it ran (gate, audit, Celery client);")
        print("worker = its main process, pool processes and the skills they ran; redis = redis-server\n")
        print("| worker processes | calls/s | x one | CPU ms/call host | worker | redis | total |")
        print("|---:|---:|---:|---:|---:|---:|---:|")
        one = rows[sizes[0]][0]
        for size, (rate, cpu) in rows.items():
            total = sum(cpu.values())
            print(
                f"| {size} | {rate:.0f} | {rate / one:.2f} | {cpu['host']:.2f} | {cpu['worker']:.2f} "
                f"| {cpu['redis']:.2f} | {total:.2f} |"
            )
        own = local_cpu["host"]
        print(f"| local host.call | {local_rate:.0f} | | {own:.2f} | | | {own:.2f} |")
        load = os.getloadavg()
        print(f"\nload average: {load0} at the start, {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} at the end")
    finally:
        for proc in procs:
            stop(proc)
        redis_proc.kill()
        redis_proc.wait()
        shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
