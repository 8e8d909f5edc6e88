"""A real HTTP server for tests: an ASGI app served by uvicorn on 127.0.0.1, in a thread."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import uvicorn


@contextlib.contextmanager
def running(app: Any, config: Any = None, before_stop: Callable[[Any], None] | None = None) -> Iterator[str]:
    """Serve ``app`` with uvicorn on 127.0.0.1 (a free port) in a thread; yield its base URL.

    ``config``: a ``uvicorn.Config`` of the caller's (``serve``'s limits); ``before_stop``
    is called with the app before the server is told to stop (end endless streams).
    """
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(config or uvicorn.Config(app, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert time.monotonic() < deadline and thread.is_alive(), "the server did not start"
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        if before_stop is not None:
            before_stop(app)
        server.should_exit = True
        thread.join(10)
        sock.close()
