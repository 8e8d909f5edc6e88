"""The shared key that makes the wire trustworthy: tasks the host signed, messages the worker signed.

Anyone who can write to the broker (on a Redis without a password: every local user)
can push a Celery task or publish on a call's channel. So a worker runs only a task
whose body carries an HMAC-SHA256 made with the key both sides load from
``ONGRID_REMOTE_KEY_FILE``, and a host accepts only the call's messages (``accepted``,
each event, the result) that carry one too. What is signed binds the call: the task
id, the call id, the tool, both digests, the arguments' digest, the decision and
ticket that allowed it and an expiry (:func:`.wire.payload`); each message on the
channel names its task. A label per direction (``task``, ``channel``) keeps a
message of one kind from being replayed as the other.

Why not Celery's own message signing (``task_serializer="auth"``): it signs the task
message only, not the results and events, which travel on Redis pub/sub outside
Celery; it needs a certificate and private key per side and an RSA signature and
verification per message; and it refuses messages only after Kombu decoded them.
One HMAC over the JSON text costs microseconds and covers both directions.

May import: the standard library and the core (errors, userfiles).
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import json
import os
import stat
from typing import Any
from urllib.parse import urlsplit

from ..core.userfiles import read_regular
from ..errors import ConfigError

__all__ = ["KEY_VARIABLE", "MIN_KEY_BYTES", "Signer", "broker_refusal", "load_signer"]

KEY_VARIABLE = "ONGRID_REMOTE_KEY_FILE"
MIN_KEY_BYTES = 32
_MAKE_KEY = "(umask 077; head -c 32 /dev/urandom | base64 > FILE)"
TASK = b"ongrid-task-v1\n"
CHANNEL = b"ongrid-channel-v1\n"


class Signer:
    """Seals and opens JSON bodies with one key: ``{"b": TEXT, "s": HMAC-SHA256 hex}``."""

    def __init__(self, key: bytes) -> None:
        self._base = hmac.new(key, digestmod=hashlib.sha256)
        """Keyed once: each message copies it (no key schedule per message)."""

    def __repr__(self) -> str:
        return "<Signer>"  # never the key

    def _mac(self, label: bytes, text: str) -> str:
        mac = self._base.copy()
        mac.update(label + text.encode())
        return mac.hexdigest()

    def seal(self, label: bytes, body: dict[str, Any]) -> dict[str, str]:
        text = json.dumps(body, ensure_ascii=False, separators=(",", ":"))
        return {"b": text, "s": self._mac(label, text)}

    def seal_text(self, label: bytes, body: dict[str, Any]) -> str:
        """The text published on a channel: the HMAC (64 hex digits), then the body's JSON
        (not JSON around JSON: the body's text is encoded once)."""
        text = json.dumps(body, ensure_ascii=False, separators=(",", ":"))
        return self._mac(label, text) + text

    def open(self, label: bytes, sealed: Any) -> dict[str, Any] | str:
        """The body ``sealed`` carries, or why it is refused (never raises)."""
        if not isinstance(sealed, dict) or set(sealed) != {"b", "s"}:
            return "it is not signed (no HMAC with the remote key)"
        text, mac = sealed["b"], sealed["s"]
        if not isinstance(text, str) or not isinstance(mac, str):
            return "its signature fields are not text"
        return self._verified(label, text, mac)

    def _verified(self, label: bytes, text: str, mac: str) -> dict[str, Any] | str:
        """The JSON object ``text`` holds if ``mac`` is its HMAC under ``label``, or why not."""
        if not hmac.compare_digest(self._mac(label, text), mac):
            return "its HMAC does not verify with the remote key"
        try:
            body = json.loads(text)
        except ValueError:
            return "its signed body is not JSON"
        if not isinstance(body, dict):
            return "its signed body is not a JSON object"
        return body

    def open_text(self, label: bytes, raw: Any) -> dict[str, Any] | str:
        """The body of a message :meth:`seal_text` made, or why it is refused (never raises)."""
        try:
            text = raw.decode() if isinstance(raw, bytes) else str(raw)
        except UnicodeDecodeError:
            return "it is not UTF-8 text"
        if text.startswith(("{", "[")):
            return "it is not signed (plain JSON, no HMAC with the remote key)"
        mac, text = text[:64], text[64:]
        return self._verified(label, text, mac)


def load_signer(path: str | None, who: str) -> Signer:
    """The signer for the key in ``path``; a ConfigError with the fix when there is none.

    The file must be a regular file, not readable by group or others, with at least
    :data:`MIN_KEY_BYTES` bytes (surrounding blanks removed). ``who`` says which side
    needs it (``the host``, ``this worker``).
    """
    if not path:
        raise ConfigError(
            f"{who} has no remote key: set {KEY_VARIABLE} to a file holding the same secret on the "
            f"host and every worker, e.g. {_MAKE_KEY} (docs/remote.md); tasks and results are "
            "signed with it, so nobody else who can write to the broker runs a skill"
        )
    try:
        key = read_regular(path, 4096)[:4096].strip()
        mode = os.stat(path).st_mode
    except OSError as exc:
        raise ConfigError(
            f"{KEY_VARIABLE} {path}: cannot read the remote key: {exc.strerror or exc}"
        ) from None
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise ConfigError(
            f"{KEY_VARIABLE} {path}: the remote key is readable by other users "
            f"(mode {stat.S_IMODE(mode):o}); chmod 600 {path}"
        )
    if len(key) < MIN_KEY_BYTES:
        raise ConfigError(
            f"{KEY_VARIABLE} {path}: the key has {len(key)} bytes, at least {MIN_KEY_BYTES} are needed, "
            f"e.g. {_MAKE_KEY}"
        )
    return Signer(key)


def broker_refusal(url: str) -> str:
    """Why ``url`` is refused as a broker (``""`` when it is not): no password, not loopback.

    A Redis on another machine without a password lets everyone on the network write
    tasks and results; the key stops them from running anything, but not from reading
    the calls' arguments and results or flooding the queues.
    """
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        password = parts.password
    except ValueError:
        return f"the broker URL {url!r} does not parse"
    if password or parts.scheme == "unix" or not host:
        return ""
    if host == "localhost":
        return ""
    try:
        if ipaddress.ip_address(host).is_loopback:
            return ""
    except ValueError:
        pass
    return (
        f"the broker {parts.scheme}://{host}{':' + str(parts.port) if parts.port else ''} has no password "
        "and is not on this machine: anyone who reaches it reads every call and result; set a password "
        "(requirepass in redis.conf, ACLs) and put it in the URL, redis://:PASSWORD@HOST:PORT/0, or use "
        "rediss:// with one"
    )
