"""Native implementations of the netcheck tools, contributed through ``ongrid_native_tools``.

Each is ``fn(args, ctx) -> dict`` with arguments already checked against the
tool's schema. A probe that could not reach its target is a *result*
(``reachable: false`` with the error), not a failure: the probe itself worked.
Every network operation has its own timeout, below the tool's; ``http_probe``
never returns the body (only its size and digest), so the tool cannot be used
to read internal pages.
"""

from __future__ import annotations

import hashlib
import http.client
import socket
import ssl
import time
import urllib.parse
from typing import Any

from ongrid_plugins import hookimpl

__all__ = ["dns_lookup", "http_probe", "tcp_probe"]

HEADERS = ("content-type", "content-length", "server", "location", "cache-control")


def _ms(start: float) -> float:
    return round((time.perf_counter() - start) * 1e3, 3)


def tcp_probe(args: dict[str, Any], ctx: Any = None) -> dict[str, Any]:
    """Open a TCP connection to ``host:port`` and close it; report whether and how fast."""
    host, port, timeout = args["host"], args["port"], args.get("timeout_seconds", 3)
    out: dict[str, Any] = {"host": host, "port": port, "reachable": False}
    start = time.perf_counter()
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            out.update(reachable=True, address=sock.getpeername()[0])
    except OSError as exc:
        out["error"] = _reason(exc)
    out["latency_ms"] = _ms(start)
    return out


def http_probe(args: dict[str, Any], ctx: Any = None) -> dict[str, Any]:
    """Send one GET or HEAD; report status, a few headers, latency, and the body's size and sha256."""
    url, method = args["url"], args.get("method", "GET")
    timeout, limit = args.get("timeout_seconds", 5), args.get("max_bytes", 65536)
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        error = "only http:// and https:// URLs with a host are probed"
        return {"url": url, "reachable": False, "error": error}
    out: dict[str, Any] = {"url": url, "method": method, "reachable": False}
    conn_class = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    kwargs: dict[str, Any] = {"timeout": timeout}
    if parts.scheme == "https":
        kwargs["context"] = ssl.create_default_context()
    conn = conn_class(parts.hostname, parts.port, **kwargs)
    start = time.perf_counter()
    try:
        path = urllib.parse.urlunsplit(("", "", parts.path or "/", parts.query, ""))
        conn.request(method, path, headers={"User-Agent": "ongrid-netcheck/0.1"})
        response = conn.getresponse()
        body = response.read(limit + 1) if method != "HEAD" else b""
        out.update(
            reachable=True,
            status=response.status,
            reason=response.reason,
            headers={k: v for k, v in response.getheaders() if k.lower() in HEADERS},
            bytes_read=min(len(body), limit),
            truncated=len(body) > limit,
            sha256=hashlib.sha256(body[:limit]).hexdigest() if body else None,
        )
    except (OSError, http.client.HTTPException) as exc:
        out["error"] = _reason(exc)
    finally:
        conn.close()
    out["latency_ms"] = _ms(start)
    return out


def dns_lookup(args: dict[str, Any], ctx: Any = None) -> dict[str, Any]:
    """Resolve a name with the system resolver (``/etc/hosts`` included); addresses sorted, unique."""
    name, family = args["name"], args.get("family", "any")
    families = {"any": socket.AF_UNSPEC, "ipv4": socket.AF_INET, "ipv6": socket.AF_INET6}
    start = time.perf_counter()
    try:
        infos = socket.getaddrinfo(name, None, families[family], socket.SOCK_STREAM)
    except OSError as exc:
        return {
            "name": name,
            "family": family,
            "resolved": False,
            "error": _reason(exc),
            "latency_ms": _ms(start),
        }
    addresses = sorted({info[4][0] for info in infos})
    return {
        "name": name,
        "family": family,
        "resolved": True,
        "addresses": addresses,
        "latency_ms": _ms(start),
    }


def _reason(exc: BaseException) -> str:
    if isinstance(exc, TimeoutError | socket.timeout):
        return "timed out"
    return f"{type(exc).__name__}: {exc}"


@hookimpl
def ongrid_native_tools() -> dict[str, Any]:
    """The ``builtin:`` keys netcheck/SKILL.md names."""
    return {
        "netcheck.tcp_probe": tcp_probe,
        "netcheck.http_probe": http_probe,
        "netcheck.dns_lookup": dns_lookup,
    }
