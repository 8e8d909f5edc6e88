"""What the remote tests share: a private redis-server and ``ongrid-skills worker`` subprocesses.

Imported by ``test_remote*.py`` (pytest puts ``tests/`` on the path); ``broker``
(``conftest.py``) is a module-scoped fixture over :func:`redis_server`, so each
test module starts one redis-server.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ongrid_plugins.remote.app import make_app

REPO = Path(__file__).resolve().parent.parent


_KEY: list[str] = []


def key_file() -> str:
    """The remote key (``ONGRID_REMOTE_KEY_FILE``) this test process's hosts and workers share:
    32 random bytes, base64, in a file of mode 600 made on first use."""
    if not _KEY:
        import base64
        import tempfile

        folder = tempfile.mkdtemp(prefix="ongrid-remote-key-")
        path = os.path.join(folder, "remote.key")
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write(base64.b64encode(os.urandom(32)).decode() + "\n")
        _KEY.append(path)
    return _KEY[0]


def signer() -> Any:
    """The :class:`~ongrid_plugins.remote.signing.Signer` of :func:`key_file` (what a host has)."""
    from ongrid_plugins.remote.signing import load_signer

    return load_signer(key_file(), "the tests")


def sealed_task(body: dict[str, Any], task_id: str, queue: str = "", ttl: float = 60.0) -> dict[str, Any]:
    """``body`` (from :func:`~ongrid_plugins.remote.wire.payload`) bound to ``task_id`` and
    signed as a host signs it: what a test sends to play the host."""
    from ongrid_plugins.remote.signing import TASK

    body = {**body, "task_id": task_id, "queue": queue, "expires": time.time() + ttl}
    return dict(signer().seal(TASK, body))


def opened_task(sealed: Any) -> dict[str, Any]:
    """A task body a host sent, its signature checked (an AssertionError if it fails)."""
    from ongrid_plugins.remote.signing import TASK

    data = signer().open(TASK, sealed)
    assert isinstance(data, dict), f"a task did not verify: {data}"
    return data


def opened(raw: Any) -> dict[str, Any]:
    """A message from a call's channel, its signature checked (an AssertionError if it fails)."""
    from ongrid_plugins.remote.signing import CHANNEL

    data = signer().open_text(CHANNEL, raw)
    assert isinstance(data, dict), f"a message on the channel did not verify: {data}"
    return data


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class RedisServer:
    """A private redis-server on a free 127.0.0.1 port, no persistence, that a test can stop
    and start again on the same port (a broker outage)."""

    def __init__(self, folder: Path) -> None:
        self.folder, self.port = folder, free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.start()

    def start(self) -> None:
        server = shutil.which("redis-server")
        if server is None:
            pytest.fail("redis-server is not installed: apt-get install redis-server (scripts/bootstrap)")
        argv = [server, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
        self.proc = subprocess.Popen(
            [*argv, "--dir", str(self.folder)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return
            except OSError:
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    self.proc.kill()
                    pytest.fail("redis-server did not start")
                time.sleep(0.05)

    def stop(self) -> None:
        """Kill it (SIGKILL: an outage, not a shutdown) and wait until the port is free."""
        self.proc.kill()
        self.proc.wait()


def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A private redis-server for a module (:class:`RedisServer`); killed at teardown."""
    server = RedisServer(tmp_path_factory.mktemp("redis"))
    yield server.url
    server.stop()


class Worker:
    """``ongrid-skills worker`` as a subprocess in its own session, with its own root and state."""

    def __init__(
        self, broker: str, base: Path, name: str, queue: str, root: Path, *, wait: bool = True
    ) -> None:
        self.broker, self.name, self.log = broker, name, base / "worker.log"
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("ONGRID_")}
        self.env.update(
            ONGRID_STATE_DIR=str(base / "state"),
            ONGRID_CACHE_DIR="off",
            ONGRID_CONFIG_DIR=str(base / "config"),
            ONGRID_USER_SKILLS_DIR=str(base / "user"),
            ONGRID_SYSTEM_SKILLS_DIR=str(base / "system"),
            PYTHONPATH=str(REPO),
            ONGRID_REMOTE_KEY_FILE=key_file(),
        )
        self.argv = [sys.executable, "-m", "ongrid_plugins", "--no-defaults", "--dirs", str(root)]
        self.argv += ["worker", "--broker", broker, "--queue", queue, "--name", name]
        self.start()
        if wait:
            self.ready()

    def start(self) -> None:
        """Start the process (appending to its log); :meth:`ready` waits for it."""
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(
                self.argv, env=self.env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )

    def ready(self) -> Worker:
        deadline = time.monotonic() + 30
        while not self.pong():
            if time.monotonic() > deadline or self.proc.poll() is not None:
                self.stop()
                pytest.fail(f"worker {self.name} did not start:\n{self.log.read_text()}")
        return self

    def pong(self) -> bool:
        """Whether the worker answers a ping now."""
        try:
            return bool(make_app(self.broker).control.ping(destination=[self.name], timeout=0.3))
        except Exception:  # a broker that just came back: this process's pool still holds the old sockets
            return False

    def pool(self) -> list[int]:
        """The pids of the worker's pool processes (its children)."""
        pids: list[int] = []
        for task in Path(f"/proc/{self.proc.pid}/task").iterdir():
            with contextlib.suppress(OSError):
                pids += [int(p) for p in (task / "children").read_text().split()]
        return pids

    def kill(self) -> None:
        """SIGKILL the worker and its pool (its process group), like a machine's power loss."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.kill()
