"""A real console server on 127.0.0.1 for the console tests: skills, tokens, uvicorn in a thread."""

from __future__ import annotations

import json
import re
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import attrs
import httpx
import uvicorn

from ongrid_plugins import Settings, SkillHost
from ongrid_plugins.server.rest import create_app
from ongrid_plugins.server.tokens import TokenStore, add_token

#: Who signs in: identity -> persona.
PEOPLE = {"ann": "admin", "bob": "admin", "cid": "admin", "vic": "viewer"}

_ECHO = """#!/bin/sh
read -r args
echo "checking $args" >&2
sleep 0.4
echo "half way" >&2
sleep 0.4
echo "done" >&2
printf '%s\\n' "$args"
"""

_SCHEMA = {
    "type": "object",
    "properties": {
        "count": {"type": "integer", "minimum": 1, "maximum": 10, "description": "how many times"},
        "name": {
            "type": "string",
            "minLength": 2,
            "pattern": "^[a-z]+$",
            "description": "lower-case letters",
        },
        "loud": {"type": "boolean"},
        "mode": {"enum": ["fast", "slow"]},
        "tags": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["count"],
    "additionalProperties": False,
}


def write_skill(
    base: Path, name: str, tool_class: str, *, schema: dict | None = None, script: str = _ECHO
) -> None:
    folder = base / "skills" / name
    folder.mkdir(parents=True)
    manifest = {
        "name": name,
        "description": f"{name}: prints what it is given, with a log line on stderr",
        "entry": "run.sh",
        "class": tool_class,
        "category": "demo",
    }
    if schema is not None:
        manifest["schema"] = schema
    (folder / "skill.json").write_text(json.dumps(manifest))
    (folder / "run.sh").write_text(script)
    (folder / "run.sh").chmod(0o755)


@attrs.define
class Console:
    url: str
    host: SkillHost
    tokens: dict[str, str]
    base: Path
    server: uvicorn.Server

    def client(self, who: str | None = None) -> httpx.Client:
        """An HTTP client; signed in as ``who`` (through the login form) when given."""
        client = httpx.Client(base_url=self.url, follow_redirects=False, timeout=10)
        if who is not None:
            page = client.get("/login")
            nonce = csrf_of(page.text)
            answer = client.post("/login", data={"token": self.tokens[who], "csrf": nonce, "next": "/"})
            assert answer.status_code == 303, answer.text
        return client


def csrf_of(html: str) -> str:
    match = re.search(r'name="csrf" value="([^"]+)"', html)
    assert match, "no csrf field on the page"
    return match.group(1)


@contextmanager
def serve(base: Path, *, ttl: float = 900.0) -> Iterator[Console]:
    write_skill(base, "echo", "safe", schema=_SCHEMA)
    write_skill(base, "restart", "mutating")
    write_skill(
        base, "wipe", "dangerous", schema={"type": "object", "properties": {"path": {"type": "string"}}}
    )
    settings = Settings(
        skill_dirs=[str(base / "skills")],
        include_defaults=False,
        state_dir=str(base / "state"),
        approval_ttl=ttl,
    )
    host = SkillHost(settings)
    tokens = {who: add_token(str(base / "tokens.json"), who, persona) for who, persona in PEOPLE.items()}
    app = create_app(host, TokenStore.from_file(str(base / "tokens.json")))
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(
        uvicorn.Config(app, log_level="warning", lifespan="on", timeout_graceful_shutdown=1)
    )
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert time.monotonic() < deadline, "the server did not start"
        time.sleep(0.01)
    try:
        yield Console(f"http://127.0.0.1:{sock.getsockname()[1]}", host, tokens, base, server)
    finally:
        server.should_exit = True
        thread.join(10)
        host.audit.close()
        sock.close()
