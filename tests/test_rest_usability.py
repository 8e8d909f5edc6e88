"""The REST server as a new user meets it: the access log, the API reference page, the token file."""

from __future__ import annotations

import json
import logging
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from test_rest import running

from ongrid_plugins import SkillHost
from ongrid_plugins.cli import main
from ongrid_plugins.server.openapi import document
from ongrid_plugins.server.rest import create_app
from ongrid_plugins.server.tokens import TokenStore, add_token, hash_token, list_tokens, revoke_token
from ongrid_plugins.testing import isolated_settings, make_skill

ACCESS = "ongrid_plugins.server.access"


@pytest.fixture
def server(tmp_path: Path) -> Iterator[dict[str, Any]]:
    make_skill(tmp_path / "skills", "echo")
    host = SkillHost(isolated_settings(tmp_path, tmp_path / "skills"))
    tokens_file = tmp_path / "tokens.json"
    token = add_token(str(tokens_file), "alice", "admin")
    with running(create_app(host, TokenStore.from_file(str(tokens_file)))) as url:
        yield {"url": url, "token": token}


def test_every_request_gets_one_access_line_without_secrets(
    server: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    secret = "s3cr3t-value"
    headers = {"Authorization": f"Bearer {server['token']}"}
    access = logging.getLogger(ACCESS)
    access.addHandler(caplog.handler)  # directly: a CLI run may have stopped propagation above it
    with caplog.at_level(logging.INFO, logger=ACCESS), httpx.Client(base_url=server["url"]) as client:
        client.post("/v1/skills/echo/execute", headers=headers, json={"params": {"password": secret}})
        client.get(f"/v1/audit?tool=echo&limit=5&api_key={secret}", headers=headers)
        client.get("/v1/skills", headers={"Authorization": "Bearer wrong-token"})
        client.get("/healthz")
        client.get(f"/v1/skills?{server['token']}", headers=headers)  # the token pasted as a query
        client.get(f"/v1/skills/{server['token']}", headers=headers)  # ... and as a path
        lines = access_lines(caplog, 6)
    access.removeHandler(caplog.handler)
    pattern = r'rest: 127\.0\.0\.1:\d+ (\S+) "(\S+) (\S+)" (\d{3}) [\d.]+ms'
    parsed = [re.fullmatch(pattern, line) for line in lines]
    assert all(parsed), lines
    assert [m.groups() for m in parsed if m] == [
        ("alice", "POST", "/v1/skills/echo/execute", "200"),
        ("alice", "GET", "/v1/audit?api_key&limit&tool", "400"),  # api_key: unknown, named not shown
        ("-", "GET", "/v1/skills", "401"),
        ("-", "GET", "/healthz", "200"),
        ("alice", "GET", "/v1/skills?(other:1)", "400"),  # counted, not shown
        ("alice", "GET", "/v1/skills/[redacted]", "404"),
    ]
    text = "\n".join(lines)
    assert secret not in text and server["token"] not in text and "wrong-token" not in text


def access_lines(caplog: pytest.LogCaptureFixture, count: int, timeout: float = 10.0) -> list[str]:
    """The access lines logged so far, once there are ``count`` of them (or the timeout has passed).

    The server logs a request after its last byte is sent, so the client can read the answer
    before the server thread has written the line.
    """
    deadline = time.monotonic() + timeout
    while True:
        lines = list(dict.fromkeys(r.getMessage() for r in caplog.records if r.name == ACCESS))
        if len(lines) >= count or time.monotonic() > deadline:
            return lines
        time.sleep(0.01)


def test_the_api_reference_is_served_locally_with_nothing_from_elsewhere(server: dict[str, Any]) -> None:
    response = httpx.get(f"{server['url']}/docs")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/html")
    assert "default-src 'none'" in response.headers["content-security-policy"]
    assert "frame-ancestors 'none'" in response.headers["content-security-policy"]  # no clickjacking frame
    assert response.headers["x-frame-options"] == "DENY"
    page = response.text
    for path, item in document()["paths"].items():
        for method in item:
            assert f'<span class="m">{method.upper()}</span>{path}</a>' in page, (method, path)
    assert "<script" not in page.lower()
    assert not re.search(r'(src|href)\s*=\s*["\']?(https?:)?//', page), "the page loads something remote"


def tokens_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["--no-defaults", "serve", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_list_and_revoke_tokens_from_the_command_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = str(tmp_path / "tokens.json")
    alice = add_token(path, "alice", "admin", "laptop")
    add_token(path, "alice", "admin")
    bob = add_token(path, "bob", "operator")
    code, out, _err = tokens_cli(capsys, "--list-tokens", "--tokens", path)
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split() == ["IDENTITY", "PERSONA", "HASH", "NOTE"]
    assert [line.split()[:2] for line in lines[1:]] == [
        ["alice", "admin"],
        ["alice", "admin"],
        ["bob", "operator"],
    ]
    assert alice not in out and bob not in out  # hashes only, never a token
    listed = json.loads(tokens_cli(capsys, "--list-tokens", "--tokens", path, "--json")[1])
    assert listed["total"] == 3 and listed["items"][0]["note"] == "laptop"

    code, out, err = tokens_cli(capsys, "--revoke-token", hash_token(bob)[:15], "--tokens", path)
    assert code == 0 and out.startswith("revoked the token of bob") and "restart" in err
    store = TokenStore.from_file(path)
    assert store.authenticate(bob) is None and store.authenticate(alice) is not None

    code, out, _err = tokens_cli(capsys, "--revoke-token", "alice", "--tokens", path)
    assert code == 0 and out.count("revoked the token of alice") == 2
    assert list_tokens(path) == []


@pytest.mark.parametrize(
    ("which", "message"),
    [
        ("nobody", "no identity 'nobody', and it is not a hash"),
        ("abc", "not a hash (8+ hex digits)"),
        ("sha256:" + "0" * 64, "no token has the hash"),
    ],
)
def test_revoking_what_is_not_there_is_an_error(tmp_path: Path, which: str, message: str) -> None:
    path = str(tmp_path / "tokens.json")
    add_token(path, "alice", "admin")
    with pytest.raises(Exception, match=re.escape(message)):
        revoke_token(path, which)
    assert len(list_tokens(path)) == 1


def test_token_tools_need_the_token_file(capsys: pytest.CaptureFixture[str]) -> None:
    code, _out, err = tokens_cli(capsys, "--list-tokens")
    assert code == 2 and "--list-tokens works on a token file: give it with --tokens FILE" in err
    assert "usage: ongrid-skills serve" in err


def test_serve_prints_access_lines(tmp_path: Path) -> None:
    make_skill(tmp_path / "skills", "echo")
    env = {**os.environ, "ONGRID_STATE_DIR": str(tmp_path / "state"), "ONGRID_CACHE_DIR": "off"}
    command = [sys.executable, "-m", "ongrid_plugins", "--no-defaults", "--dirs", str(tmp_path / "skills")]
    process = subprocess.Popen([*command, "serve", "--port", "0"], stderr=subprocess.PIPE, text=True, env=env)
    try:
        assert process.stderr is not None
        lines = [process.stderr.readline() for _ in range(3)]
        url = next(line.split("listening on ")[1].strip() for line in lines if "listening on" in line)
        assert httpx.get(f"{url}/healthz", timeout=10).status_code == 200
        assert re.match(r'rest: 127\.0\.0\.1:\d+ - "GET /healthz" 200 ', process.stderr.readline())
    finally:
        process.terminate()
        process.communicate(timeout=30)
