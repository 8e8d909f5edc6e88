"""Runs against the installed pack, with servers on 127.0.0.1 only (no other network)."""

from __future__ import annotations

import http.server
import socket
import threading
from collections.abc import Iterator

import pytest

from ongrid_plugins.testing import assert_ok, pack_host, run_skill

DIST = "ongrid-pack-netcheck"


@pytest.fixture
def host(tmp_path):
    return pack_host(tmp_path, DIST)


@pytest.fixture
def listening() -> Iterator[int]:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    yield server.getsockname()[1]
    server.close()


@pytest.fixture
def closed_port() -> int:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()  # nobody listens there now
    return port


class Handler(http.server.BaseHTTPRequestHandler):
    def do_HEAD(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", "1000")
        self.end_headers()

    def do_GET(self) -> None:
        if self.path == "/moved":
            self.send_response(302)
            self.send_header("Location", "/elsewhere")
            self.end_headers()
            return
        body = b"x" * 1000
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def web() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_the_tools_are_native_and_come_from_the_installed_pack(host) -> None:
    for name in ("tcp_probe", "http_probe", "dns_lookup"):
        tool = host.get(name)
        assert tool.provenance.startswith(f"{DIST} ") and tool.kind == "native" and tool.available
        assert tool.impl == f"builtin:netcheck.{name}" and tool.tool_class == "safe"
    plugin = next(i for i in host.plugins() if i.name == "netcheck" and i.kind == "entrypoint")
    assert plugin.hooks == ("ongrid_native_tools",)


def test_tcp_probe_of_an_open_and_a_closed_port(host, listening: int, closed_port: int) -> None:
    result, _events = run_skill(host, "tcp_probe", {"host": "127.0.0.1", "port": listening}, persona="viewer")
    value = assert_ok(result)
    assert value["reachable"] is True and value["address"] == "127.0.0.1" and value["latency_ms"] >= 0
    value = assert_ok(host.call("tcp_probe", {"host": "127.0.0.1", "port": closed_port}))
    assert value["reachable"] is False and "ConnectionRefusedError" in value["error"]


def test_http_probe_times_out_on_a_server_that_never_answers(host, listening: int) -> None:
    # The kernel completes the handshake (the socket listens) but nobody ever replies.
    args = {"url": f"http://127.0.0.1:{listening}/", "timeout_seconds": 0.3}
    value = assert_ok(host.call("http_probe", args))
    assert (value["reachable"], value["error"]) == (False, "timed out")
    assert 250 <= value["latency_ms"] < 5000


def test_http_probe_reports_status_headers_and_body_size_not_the_body(host, web: str) -> None:
    value = assert_ok(host.call("http_probe", {"url": f"{web}/page", "max_bytes": 100}))
    assert (value["status"], value["bytes_read"], value["truncated"]) == (200, 100, True)
    assert value["headers"]["Content-Type"] == "text/plain" and "body" not in value
    value = assert_ok(host.call("http_probe", {"url": f"{web}/moved"}))
    assert (value["status"], value["headers"]["Location"]) == (302, "/elsewhere")  # not followed
    head = assert_ok(host.call("http_probe", {"url": f"{web}/page", "method": "HEAD"}))
    assert head["status"] == 200 and head["bytes_read"] == 0


def test_http_probe_of_nothing_listening(host, closed_port: int) -> None:
    value = assert_ok(host.call("http_probe", {"url": f"http://127.0.0.1:{closed_port}/"}))
    assert value["reachable"] is False and "ConnectionRefusedError" in value["error"]


def test_http_probe_refuses_other_schemes_before_running(host) -> None:
    from ongrid_plugins import InvalidArguments

    with pytest.raises(InvalidArguments):
        host.call("http_probe", {"url": "file:///etc/passwd"})


def test_dns_lookup_of_localhost(host) -> None:
    value = assert_ok(host.call("dns_lookup", {"name": "localhost", "family": "ipv4"}))
    assert value["resolved"] is True and "127.0.0.1" in value["addresses"]
    value = assert_ok(host.call("dns_lookup", {"name": "no-such-host.invalid"}))
    assert value["resolved"] is False and value["error"]


def test_instructions_are_available(host) -> None:
    assert "Three read-only probes" in host.instructions("netcheck").body
