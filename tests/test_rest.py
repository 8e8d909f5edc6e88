"""The REST API, against a real uvicorn server on 127.0.0.1 and a real HTTP client."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import socket
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import schemathesis
from httpserve import running
from hypothesis import HealthCheck, assume, given, settings
from schemathesis import GenerationMode
from venvs import REPO

from ongrid_plugins import ConfigError, SkillHost
from ongrid_plugins.server.openapi import document
from ongrid_plugins.server.rest import create_app
from ongrid_plugins.server.tokens import TokenStore, add_token, hash_token
from ongrid_plugins.testing import isolated_settings, make_skill

LOUD_SH = """#!/bin/sh
read -r args
echo "first line" >&2
echo "second line" >&2
printf '%s\\n' "$args"
"""
PID_SH = """#!/bin/sh
echo "started $$" >&2
sleep 30
"""
IDENTITIES = {"alice": "admin", "bob": "admin", "carol": "admin", "olga": "operator", "vic": "viewer"}


def build_host(base: Path) -> SkillHost:
    skills = base / "skills"
    make_skill(
        skills, "echo", schema={"type": "object", "properties": {"n": {"type": "integer", "default": 1}}}
    )
    make_skill(skills, "loud", script=LOUD_SH)
    make_skill(skills, "restart", class_="mutating", category="ops")
    make_skill(skills, "wipe", class_="dangerous", category="ops")
    make_skill(skills, "broken", script="#!/bin/sh\necho 'no disk' >&2\nexit 2\n")
    make_skill(skills, "nap", script="#!/bin/sh\nsleep 1\necho '{}'\n")
    make_skill(skills, "hang", script=PID_SH, timeout_seconds=60)
    return SkillHost(isolated_settings(base, skills))


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    base = tmp_path_factory.mktemp("rest")
    host = build_host(base)
    tokens_file = base / "tokens.json"
    tokens = {name: add_token(str(tokens_file), name, persona) for name, persona in IDENTITIES.items()}
    app = create_app(host, TokenStore.from_file(str(tokens_file)), max_body=64 * 1024)
    with running(app) as url:
        yield {"url": url, "host": host, "tokens": tokens, "base": base}


@pytest.fixture
def client(api: dict[str, Any]) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=api["url"], timeout=30) as c:
        yield c


def auth(api: dict[str, Any], who: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {api['tokens'][who]}"}


# ---------------------------------------------------------------------- auth


def test_open_routes(client: httpx.Client) -> None:
    assert client.get("/healthz").json() == {"status": "ok"}
    document = client.get("/openapi.json").json()
    assert document["openapi"].startswith("3.1") and "/v1/skills/{name}/execute" in document["paths"]


@pytest.mark.parametrize("header", [None, "Bearer", "Basic abc", "bearer nope", "Bearer " + "x" * 5000])
def test_no_valid_token_no_access(client: httpx.Client, header: str | None) -> None:
    headers = {"Authorization": header} if header is not None else {}
    for method, path in [("GET", "/v1/skills"), ("POST", "/v1/skills/echo/execute"), ("GET", "/v1/audit")]:
        response = client.request(method, path, headers=headers)
        assert response.status_code == 401
        assert response.json()["code"] == "unauthorized"
        assert response.headers["www-authenticate"].startswith("Bearer")


def test_the_token_file_stores_hashes_only(api: dict[str, Any]) -> None:
    path = api["base"] / "tokens.json"
    text = path.read_text()
    assert all(token not in text for token in api["tokens"].values())
    assert hash_token(api["tokens"]["alice"]) in text
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_token_store_finds_the_owner() -> None:
    store = TokenStore(
        [
            (hash_token("a" * 43), _principal("ann", "viewer")),
            (hash_token("b" * 43), _principal("ben", "admin")),
        ]
    )
    assert store.authenticate("b" * 43) == _principal("ben", "admin")
    assert store.authenticate("c" * 43) is None and store.authenticate("") is None


def _principal(identity: str, persona: str) -> Any:
    from ongrid_plugins.server.tokens import Principal

    return Principal(identity, persona)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{", "not valid JSON"),
        ('{"tokens": {}}', 'expected {"tokens"'),
        ('{"tokens": [{"identity": "a", "persona": "viewer"}]}', "'hash' must be a non-empty string"),
        ('{"tokens": [{"identity": "a", "persona": "viewer", "hash": "md5:00"}]}', "64 lower-case hex"),
        (
            '{"tokens": [{"identity": "a", "persona": "viewer", "hash": "sha256:' + "0" * 64 + '", "x": 1}]}',
            "unknown key",
        ),
    ],
)
def test_broken_token_files_are_refused(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "tokens.json"
    path.write_text(content)
    with pytest.raises(ConfigError, match=message):
        TokenStore.from_file(str(path))


def test_a_token_with_an_unknown_persona_is_a_startup_error(tmp_path: Path) -> None:
    host = build_host(tmp_path)
    with pytest.raises(ConfigError, match="unknown persona 'root'"):
        create_app(host, TokenStore.single("t" * 43, "ann", "root"))


# ---------------------------------------------------------------------- skills


def test_list_is_what_the_persona_may_call(api: dict[str, Any], client: httpx.Client) -> None:
    def names(who: str, **params: str) -> list[str]:
        body = client.get("/v1/skills", headers=auth(api, who), params=params).json()
        assert body["total"] == len(body["items"])
        return [item["name"] for item in body["items"]]

    assert names("vic") == ["broken", "echo", "hang", "loud", "nap"]
    assert names("olga", category="ops") == ["restart"]
    assert names("alice", category="ops") == ["restart", "wipe"]
    assert names("alice", **{"class": "dangerous"}) == ["wipe"]
    response = client.get("/v1/skills", headers=auth(api, "vic"), params={"class": "risky"})
    assert response.status_code == 400


def test_show_one_skill(api: dict[str, Any], client: httpx.Client) -> None:
    body = client.get("/v1/skills/restart", headers=auth(api, "olga")).json()
    assert body["class"] == "mutating" and body["decision"]["needs"] == "confirmation"
    assert body["schema"] == {"type": "object", "properties": {}} and body["timeout_seconds"] == 30
    assert "entry" not in body and "source" not in body  # no server paths
    missing = client.get("/v1/skills/rstart", headers=auth(api, "olga"))
    assert missing.status_code == 404 and missing.json()["suggestions"] == ["restart"]


def test_a_tool_the_persona_may_not_call_is_absent(api: dict[str, Any], client: httpx.Client) -> None:
    hidden = client.get("/v1/skills/restart", headers=auth(api, "vic"))
    absent = client.get("/v1/skills/no_such_tool", headers=auth(api, "vic"))
    assert hidden.status_code == absent.status_code == 404
    assert hidden.json() == {
        **absent.json(),
        "error": absent.json()["error"].replace("no_such_tool", "restart"),
    }
    typo = client.get("/v1/skills/rstart", headers=auth(api, "vic"))
    assert typo.status_code == 404 and typo.json()["suggestions"] == []  # no hint of hidden tools


def test_a_lone_surrogate_is_a_400_with_an_audit_row(api: dict[str, Any], client: httpx.Client) -> None:
    body = b'{"params": {"n": "\\ud800"}}'
    headers = {**auth(api, "vic"), "Content-Type": "application/json"}
    response = client.post("/v1/skills/echo/execute", headers=headers, content=body)
    assert response.status_code == 400, response.text
    assert response.json()["code"] == "invalid_arguments"
    row = api["host"].audit.tail(1)[0]
    assert (row.tool, row.outcome, row.caller) == ("echo", "invalid_arguments", "vic")


def test_error_bodies_name_no_server_path(api: dict[str, Any], client: httpx.Client) -> None:
    response = client.post("/v1/skills/broken/execute", headers=auth(api, "vic"), json={})
    text = response.text
    assert str(api["base"]) not in text and "/tmp/" not in text


def test_execute(api: dict[str, Any], client: httpx.Client) -> None:
    response = client.post("/v1/skills/echo/execute", headers=auth(api, "vic"), json={"params": {"n": 5}})
    assert response.status_code == 200
    body = response.json()
    assert body["result"] == {"n": 5} and body["status"] == "ok" and body["call_id"]
    assert client.post("/v1/skills/echo/execute", headers=auth(api, "vic")).json()["result"] == {"n": 1}


@pytest.mark.parametrize(
    ("who", "path", "body", "status", "code"),
    [
        ("vic", "/v1/skills/echo/execute", {"params": {"n": "five"}}, 422, "invalid_arguments"),
        ("vic", "/v1/skills/restart/execute", {"confirm": True}, 404, "unknown_skill"),
        ("olga", "/v1/skills/restart/execute", {}, 409, "needs_confirmation"),
        ("olga", "/v1/skills/wipe/execute", {}, 404, "unknown_skill"),
        ("vic", "/v1/skills/nope/execute", {}, 404, "unknown_skill"),
        ("vic", "/v1/skills/echo/execute", {"params": [1]}, 400, "bad_request"),
        ("vic", "/v1/skills/echo/execute", {"args": {}}, 400, "bad_request"),
        ("vic", "/v1/skills/echo/execute", {"confirm": 1}, 400, "bad_request"),
        ("vic", "/v1/skills/echo/execute", {"timeout": 0}, 400, "bad_request"),
        ("vic", "/v1/skills/echo/execute", {"timeout": True}, 400, "bad_request"),
        ("vic", "/v1/skills/echo/execute", [], 400, "bad_request"),
        ("vic", "/v1/skills/echo", {}, 405, "method_not_allowed"),
        ("vic", "/v1/nothing", {}, 404, "not_found"),
    ],
)
def test_refusals_have_their_status(
    api: dict[str, Any], client: httpx.Client, who: str, path: str, body: Any, status: int, code: str
) -> None:
    response = client.post(path, headers=auth(api, who), json=body)
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/json"
    assert response.json()["code"] == code and response.json()["error"]


@pytest.mark.parametrize("route", ["", "/execute", "/execute/stream"])
def test_a_tool_the_persona_may_not_call_is_absent_on_every_route(
    api: dict[str, Any], client: httpx.Client, route: str
) -> None:
    """Probing must not tell a denied tool from a missing one (nor its class or the mode it
    needs); the attempt to run it is still in the audit log, as denied."""
    method = client.get if not route else client.post
    kwargs: dict[str, Any] = {} if not route else {"json": {"params": {}}}
    denied = method(f"/v1/skills/restart{route}", headers=auth(api, "vic"), **kwargs)
    missing = method(f"/v1/skills/restarx{route}", headers=auth(api, "vic"), **kwargs)
    assert denied.status_code == missing.status_code == 404
    assert denied.json()["code"] == "unknown_skill"
    assert "mutating" not in denied.text and "read-only" not in denied.text and "mode" not in denied.text
    assert denied.json()["error"].replace("restart", "X") == missing.json()["error"].replace("restarx", "X")
    if route:
        log = api["host"].audit
        assert log.flush()
        last = log.entries(tool="restart")[-1]
        assert (last.outcome, last.caller) == ("denied", "vic")


def test_bad_json_and_big_bodies(api: dict[str, Any], client: httpx.Client) -> None:
    headers = {**auth(api, "vic"), "Content-Type": "application/json"}
    for raw in (b"{", b'{"params": NaN}', b"\xff"):
        response = client.post("/v1/skills/echo/execute", headers=headers, content=raw)
        assert response.status_code == 400 and "not valid JSON" in response.json()["error"]
    big = json.dumps({"params": {"n": 1, "pad": "x" * 70_000}}).encode()
    response = client.post("/v1/skills/echo/execute", headers=headers, content=big)
    assert response.status_code == 413 and response.json()["code"] == "too_large"

    def chunks() -> Iterator[bytes]:  # no Content-Length: the cap holds while reading
        yield b'{"params": {"pad": "'
        for _ in range(70):
            yield b"x" * 1000
        yield b'"}}'

    response = client.post("/v1/skills/echo/execute", headers=headers, content=chunks())
    assert response.status_code == 413


def test_confirmation_is_bound_to_the_digest(api: dict[str, Any], client: httpx.Client) -> None:
    path, headers = "/v1/skills/restart/execute", auth(api, "olga")
    refused = client.post(path, headers=headers, json={"params": {"unit": "nginx"}}).json()
    digest = refused["args_digest"]
    wrong = client.post(path, headers=headers, json={"params": {"unit": "sshd"}, "confirm": digest})
    assert wrong.status_code == 409
    ok = client.post(path, headers=headers, json={"params": {"unit": "nginx"}, "confirm": digest})
    assert ok.status_code == 200 and ok.json()["result"] == {"unit": "nginx"}


def test_a_failed_skill_is_a_result_not_an_http_error(api: dict[str, Any], client: httpx.Client) -> None:
    response = client.post("/v1/skills/broken/execute", headers=auth(api, "vic"))
    assert response.status_code == 200
    body = response.json()
    assert body["code"] == "failed" and body["exit_code"] == 2 and body["stderr_tail"] == ["no disk"]
    assert "result" not in body


def test_concurrent_clients(api: dict[str, Any]) -> None:
    async def main() -> list[httpx.Response]:
        async with httpx.AsyncClient(base_url=api["url"], timeout=30) as client:
            calls = [
                client.post("/v1/skills/echo/execute", headers=auth(api, who), json={"params": {"n": i}})
                for i, who in enumerate(["vic", "olga", "alice", "bob"] * 4)
            ]
            return list(await asyncio.gather(*calls))

    responses = asyncio.run(main())
    assert [r.json()["result"]["n"] for r in responses] == list(range(16))
    call_ids = {r.json()["call_id"] for r in responses}
    assert len(call_ids) == 16
    host: SkillHost = api["host"]
    host.audit.flush()
    rows = [e for e in host.audit.entries(tool="echo") if e.call_id in call_ids]
    assert sorted(e.caller for e in rows) == sorted(["vic", "olga", "alice", "bob"] * 4)
    assert {e.persona for e in rows} == {"viewer", "operator", "admin"}


def test_more_calls_than_the_cap_get_429(tmp_path: Path) -> None:
    host = build_host(tmp_path)
    app = create_app(host, TokenStore.single("t" * 43, "ann", "viewer"), max_concurrent=2)
    with running(app) as url:

        async def main() -> list[httpx.Response]:
            async with httpx.AsyncClient(base_url=url, timeout=30) as client:
                headers = {"Authorization": "Bearer " + "t" * 43}
                return list(
                    await asyncio.gather(
                        *(client.post("/v1/skills/nap/execute", headers=headers) for _ in range(5))
                    )
                )

        responses = asyncio.run(main())
    statuses = sorted(r.status_code for r in responses)
    assert statuses == [200, 200, 429, 429, 429]
    busy = next(r for r in responses if r.status_code == 429)
    assert busy.json()["code"] == "busy" and busy.headers["retry-after"] == "1"


def test_call_slots_are_per_token_within_the_global_cap(tmp_path: Path) -> None:
    host = build_host(tmp_path)
    tokens_file = tmp_path / "tokens.json"
    greedy = add_token(str(tokens_file), "greedy", "viewer")
    polite = add_token(str(tokens_file), "polite", "viewer")
    app = create_app(host, TokenStore.from_file(str(tokens_file)), max_concurrent=4, max_per_token=2)
    with running(app) as url:

        async def main() -> tuple[list[httpx.Response], httpx.Response]:
            async with httpx.AsyncClient(base_url=url, timeout=30) as client:

                def call(token: str) -> Any:
                    return client.post("/v1/skills/nap/execute", headers={"Authorization": "Bearer " + token})

                flood = asyncio.gather(*(call(greedy) for _ in range(4)))
                await asyncio.sleep(0.3)
                other = await call(polite)
                return list(await flood), other

        flood, other = asyncio.run(main())
    assert sorted(r.status_code for r in flood) == [200, 200, 429, 429]
    assert "this token has 2 calls running" in next(r for r in flood if r.status_code == 429).json()["error"]
    assert other.status_code == 200


# ---------------------------------------------------------------------- streaming


def read_events(response: httpx.Response) -> list[tuple[str, Any]]:
    events, kind = [], ""
    for line in response.iter_lines():
        if line.startswith("event: "):
            kind = line[len("event: ") :]
        elif line.startswith("data: "):
            events.append((kind, json.loads(line[len("data: ") :])))
    return events


def test_stream_log_lines_then_the_result(api: dict[str, Any], client: httpx.Client) -> None:
    with client.stream(
        "POST", "/v1/skills/loud/execute/stream", headers=auth(api, "vic"), json={"params": {"a": 1}}
    ) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        events = read_events(response)
    kinds = [kind for kind, _ in events]
    assert kinds == ["start", "log", "log", "exit", "result"]
    assert [data["line"] for kind, data in events if kind == "log"] == ["first line", "second line"]
    assert events[-1][1]["result"] == {"a": 1}
    assert "entry" not in events[0][1]  # no server paths in the stream


def test_stream_refusals_are_plain_errors(api: dict[str, Any], client: httpx.Client) -> None:
    response = client.post("/v1/skills/restart/execute/stream", headers=auth(api, "olga"))
    assert response.status_code == 409 and response.json()["code"] == "needs_confirmation"
    with client.stream("POST", "/v1/skills/broken/execute/stream", headers=auth(api, "vic")) as failed:
        events = read_events(failed)
    assert events[-1][0] == "result" and events[-1][1]["code"] == "failed"


def test_a_client_that_goes_away_kills_the_skill(api: dict[str, Any], client: httpx.Client) -> None:
    # A safe skill may not write a pid file: it says its pid on stderr instead.
    with client.stream("POST", "/v1/skills/hang/execute/stream", headers=auth(api, "vic")) as response:
        for line in response.iter_lines():
            found = re.search(r"started (\d+)", line)
            if found:
                break
    assert found is not None
    pid = int(found.group(1))
    deadline = time.monotonic() + 10
    while _alive(pid):
        assert time.monotonic() < deadline, "the skill still runs after its client went away"
        time.sleep(0.05)
    host: SkillHost = api["host"]
    while not host.audit.entries(tool="hang"):  # the row is written once the cancelled call unwinds
        assert time.monotonic() < deadline, "no audit row for the cancelled call"
        time.sleep(0.05)
    assert host.audit.entries(tool="hang")[-1].outcome == "cancelled"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with contextlib.suppress(OSError), open(f"/proc/{pid}/stat") as f:
        return f.read().split(")")[-1].split()[0] != "Z"
    return True


# ---------------------------------------------------------------------- approvals and audit


def test_two_person_approval_between_tokens(api: dict[str, Any], client: httpx.Client) -> None:
    run = {"params": {"path": "/srv/approval-test"}}
    first = client.post("/v1/skills/wipe/execute", headers=auth(api, "alice"), json=run)
    assert first.status_code == 409 and first.json()["code"] == "needs_approval"
    ticket = first.json()["ticket"]
    assert ticket["requester"] == "alice" and ticket["status"] == "pending"
    approve = f"/v1/approvals/{ticket['id']}/approve"

    own = client.post(approve, headers=auth(api, "alice"), json={})
    assert own.status_code == 403 and own.json()["reason"] == "own_ticket"
    viewer = client.post(approve, headers=auth(api, "vic"), json={})  # not vic's to read: as if absent
    assert viewer.status_code == 404 and viewer.json()["code"] == "ticket_refused"
    once = client.post(approve, headers=auth(api, "bob"), json={"note": "backup checked", "sop": "SOP-12"})
    assert once.status_code == 200 and once.json()["approvers"] == ["bob"]
    twice = client.post(approve, headers=auth(api, "bob"), json={})
    assert twice.status_code == 403 and twice.json()["reason"] == "duplicate_approver"
    done = client.post(approve, headers=auth(api, "carol"), json={})
    assert done.json()["status"] == "approved"

    ran = client.post(
        "/v1/skills/wipe/execute", headers=auth(api, "alice"), json={**run, "ticket": ticket["id"]}
    )
    assert ran.status_code == 200, ran.text
    replay = client.post(
        "/v1/skills/wipe/execute", headers=auth(api, "alice"), json={**run, "ticket": ticket["id"]}
    )
    assert replay.status_code == 409 and replay.json()["reason"] == "executed"
    shown = client.get(f"/v1/approvals/{ticket['id']}", headers=auth(api, "carol")).json()
    assert shown["status"] == "executed" and shown["executed_by"] == "alice"
    assert shown["approvals"][0]["sop"] == "SOP-12"
    listed = client.get("/v1/approvals", headers=auth(api, "carol"), params={"status": "executed"}).json()
    assert ticket["id"] in [t["id"] for t in listed["items"]]


def test_reject_and_unknown_tickets(api: dict[str, Any], client: httpx.Client) -> None:
    first = client.post(
        "/v1/skills/wipe/execute", headers=auth(api, "bob"), json={"params": {"path": "/tmp/r"}}
    )
    ticket_id = first.json()["ticket"]["id"]
    refused = client.post(f"/v1/approvals/{ticket_id}/reject", headers=auth(api, "olga"), json={})
    assert refused.status_code == 404  # a ticket olga may not read is answered as if absent
    withdrawn = client.post(
        f"/v1/approvals/{ticket_id}/reject", headers=auth(api, "bob"), json={"note": "wrong path"}
    )
    assert withdrawn.status_code == 200 and withdrawn.json()["status"] == "rejected"
    late = client.post(f"/v1/approvals/{ticket_id}/approve", headers=auth(api, "carol"), json={})
    assert late.status_code == 409 and late.json()["reason"] == "rejected"
    assert client.get("/v1/approvals/0000", headers=auth(api, "vic")).status_code == 404
    assert client.post("/v1/approvals/0000/approve", headers=auth(api, "bob"), json={}).status_code == 404
    assert client.get("/v1/approvals", headers=auth(api, "vic"), params={"status": "lost"}).status_code == 400
    assert (
        client.post(f"/v1/approvals/{ticket_id}/approve", headers=auth(api, "bob"), json={"x": 1}).status_code
        == 400
    )


def test_audit_needs_a_dual_sign_persona(api: dict[str, Any], client: httpx.Client) -> None:
    client.post("/v1/skills/echo/execute", headers=auth(api, "vic"), json={"params": {"n": 42}})
    assert client.get("/v1/audit", headers=auth(api, "olga")).status_code == 403
    rows = client.get("/v1/audit", headers=auth(api, "alice"), params={"tool": "echo", "limit": 1000}).json()[
        "items"
    ]
    assert any(r["caller"] == "vic" and r["args"] == {"n": 42} for r in rows)
    for bad in ({"limit": "0"}, {"limit": "x"}, {"since": "-1"}, {"limit": "²"}):
        assert client.get("/v1/audit", headers=auth(api, "alice"), params=bad).status_code == 400


def test_audit_pages_say_where_the_next_one_starts(api: dict[str, Any], client: httpx.Client) -> None:
    before = client.get("/v1/audit", headers=auth(api, "alice"), params={"limit": 1000}).json()["items"]
    for n in range(3):
        client.post("/v1/skills/echo/execute", headers=auth(api, "vic"), json={"params": {"n": n}})
    seen, since, pages = [], before[-1]["seq"] if before else 0, 0
    while since is not None:
        page = client.get(
            "/v1/audit", headers=auth(api, "alice"), params={"tool": "echo", "limit": 2, "since": since}
        ).json()
        assert page["total"] == len(page["items"]) <= 2
        seen += [row["args"]["n"] for row in page["items"]]
        since, pages = page["next_since"], pages + 1
    assert seen == [0, 1, 2] and pages == 2  # a full page, then the last one (next_since null)


# ---------------------------------------------------------------------- fuzzing from the OpenAPI document


def _operations() -> list[tuple[str, str, GenerationMode]]:
    """Every operation with valid requests, and those that take input with invalid ones too."""
    found = []
    for path, item in document()["paths"].items():
        for method, spec in item.items():
            if spec.get("x-endless-stream"):  # a response that never ends cannot be validated
                continue
            found.append((method.upper(), path, GenerationMode.POSITIVE))
            if spec.get("parameters") or spec.get("requestBody"):
                found.append((method.upper(), path, GenerationMode.NEGATIVE))
    return found


OPERATIONS = _operations()


@pytest.mark.parametrize(
    ("method", "path", "mode"), OPERATIONS, ids=[f"{m} {p} {mode.value}" for m, p, mode in OPERATIONS]
)
def test_the_api_keeps_its_openapi_document(
    api: dict[str, Any], method: str, path: str, mode: GenerationMode
) -> None:
    """Requests generated from /openapi.json (as admin alice), valid and invalid: no 5xx, valid ones
    accepted, invalid ones refused with a 4xx, and every status, header and body one the document
    declares (schemathesis's checks)."""
    schema = schemathesis.openapi.from_url(f"{api['url']}/openapi.json")
    operation = schema[path][method]

    @given(case=operation.as_strategy(generation_mode=mode))
    @settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    def check(case: Any) -> None:
        # An extra query parameter whose value is an empty list is not sent at all: no violation
        # reaches the server, so there is nothing for it to refuse.
        assume(all(value != [] for value in (case.query or {}).values()))
        # The real token replaces the generated one; where the violation *is* the missing
        # Authorization header, none is sent and the answer must be 401.
        headers = auth(api, "alice") if "Authorization" in (case.headers or {}) else None
        case.call_and_validate(headers=headers, timeout=30)

    check()


# ---------------------------------------------------------------------- the command


def serve(args: list[str], tmp_path: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "ONGRID_STATE_DIR": str(tmp_path / "state")}
    command = [
        sys.executable,
        "-m",
        "ongrid_plugins",
        "--no-defaults",
        "--dirs",
        str(tmp_path / "skills"),
        "serve",
        *args,
    ]
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def test_serve_refuses_to_listen_off_loopback_without_tokens(tmp_path: Path) -> None:
    make_skill(tmp_path / "skills", "echo")
    process = serve(["--host", "0.0.0.0", "--port", "0"], tmp_path)
    _, err = process.communicate(timeout=30)
    assert process.returncode == 2
    assert "refusing to listen on 0.0.0.0 without --tokens" in err


def test_serve_on_loopback_makes_a_token_for_its_run(tmp_path: Path) -> None:
    make_skill(tmp_path / "skills", "echo")
    process = serve(["--port", "0", "--persona", "viewer"], tmp_path)
    try:
        assert process.stderr is not None
        lines = [process.stderr.readline() for _ in range(3)]
        token = next(line.split("Bearer ")[1].strip() for line in lines if "Bearer " in line)
        url = next(line.split("listening on ")[1].strip() for line in lines if "listening on" in line)
        assert httpx.get(f"{url}/v1/skills", timeout=10).status_code == 401
        body = httpx.post(
            f"{url}/v1/skills/echo/execute",
            headers={"Authorization": f"Bearer {token}"},
            json={"params": {"x": 1}},
            timeout=10,
        ).json()
        assert body["result"] == {"x": 1}
    finally:
        process.terminate()
        process.communicate(timeout=30)


def test_serve_token_tools(tmp_path: Path) -> None:
    make_skill(tmp_path / "skills", "echo")
    tokens = tmp_path / "tokens.json"
    env = {**os.environ, "ONGRID_STATE_DIR": str(tmp_path / "state")}
    base = [sys.executable, "-m", "ongrid_plugins", "serve"]
    made = subprocess.run(
        [*base, "--new-token", "dana", "--persona", "operator", "--tokens", str(tokens)],
        capture_output=True,
        text=True,
        env=env,
    )
    assert made.returncode == 0, made.stderr
    token = made.stdout.strip()
    assert TokenStore.from_file(str(tokens)).authenticate(token) == _principal("dana", "operator")
    hashed = subprocess.run(
        [*base, "--hash-token"], input=token + "\n", capture_output=True, text=True, env=env
    )
    assert hashed.stdout.strip() == hash_token(token)
    bad = subprocess.run(
        [*base, "--new-token", "eve", "--persona", "root", "--tokens", str(tokens)],
        capture_output=True,
        text=True,
        env=env,
    )
    assert bad.returncode == 2 and "unknown persona 'root'" in bad.stderr
    assert len(json.loads(tokens.read_text())["tokens"]) == 1


def test_the_package_does_not_import_the_server_extras() -> None:
    code = (
        "import sys, ongrid_plugins; "
        "print(sorted(m for m in ('starlette', 'uvicorn', 'mcp', 'httpx') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


@pytest.mark.parametrize(
    ("blocked", "command", "extra"),
    [
        ("starlette", "serve", "server"),
        ("uvicorn", "serve", "server"),
        ("mcp", "mcp", "mcp"),
        ("anyio", "mcp", "mcp"),
    ],
)
def test_a_missing_extra_says_what_to_install(blocked: str, command: str, extra: str, tmp_path: Path) -> None:
    code = (
        f"import sys; sys.modules[{blocked!r}] = None; from ongrid_plugins.cli import main; "
        f"sys.exit(main(['--no-defaults', {command!r}]))"
    )
    env = {**os.environ, "ONGRID_STATE_DIR": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=env,
        stdin=subprocess.DEVNULL,
        timeout=60,
    )
    assert done.returncode == 2
    needs = f"ERROR: `ongrid-skills {command}` needs the [{extra}] extra of ongrid-plugins"
    assert done.stderr.startswith(needs)
    assert f"(no module {blocked!r})" in done.stderr
    # This checkout is installed from its folder: the hint names the folder, not an index name.
    assert f"pip install -e '{REPO}[{extra}]'" in done.stderr
    assert "Bearer" not in done.stderr  # checked before a token is made and printed
    assert done.stderr.count("\n") == 1


def test_tickets_are_read_as_the_audit_is(api: dict[str, Any], client: httpx.Client) -> None:
    asked = client.post("/v1/skills/wipe/execute", headers=auth(api, "alice"), json={"params": {"k": "v"}})
    ticket = asked.json()["ticket"]["id"]
    assert client.get(f"/v1/approvals/{ticket}", headers=auth(api, "bob")).status_code == 200
    assert client.get(f"/v1/approvals/{ticket}", headers=auth(api, "vic")).status_code == 404
    listed = client.get("/v1/approvals", headers=auth(api, "vic")).json()
    assert ticket not in [t["id"] for t in listed["items"]]


@contextlib.contextmanager
def guarded(app: Any, **limits: Any) -> Iterator[tuple[str, int]]:
    """Serve ``app`` the way ``ongrid-skills serve`` does (header timeout, connection cap)."""
    from ongrid_plugins.server.limits import server_config

    with running(app, config=server_config(app, **limits)) as url:
        host, _, port = url.removeprefix("http://").rpartition(":")
        yield host, int(port)


def _closed_by_peer(conn: socket.socket, wait: float) -> bool:
    conn.settimeout(wait)
    try:
        return conn.recv(1024) == b""
    except (ConnectionResetError, BrokenPipeError):
        return True
    except TimeoutError:
        return False


def test_slow_headers_are_cut_and_connections_are_capped(tmp_path: Path) -> None:
    app = create_app(build_host(tmp_path), TokenStore.single("t" * 43, "ann", "viewer"))
    with guarded(app, header_timeout=0.5, max_connections=20) as (host, port):
        slow = []
        for _ in range(60):
            conn = socket.create_connection((host, port))
            conn.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")  # and never the blank line
            slow.append(conn)
        started = time.monotonic()
        closed = [_closed_by_peer(conn, 3.0) for conn in slow]
        assert all(closed) and time.monotonic() - started < 3.0
        for conn in slow:
            conn.close()
        assert httpx.get(f"http://{host}:{port}/healthz", timeout=5).status_code == 200


def test_a_slow_body_gets_408(tmp_path: Path) -> None:
    token = "t" * 43
    app = create_app(build_host(tmp_path), TokenStore.single(token, "ann", "viewer"), body_timeout=0.5)
    with guarded(app, header_timeout=5) as (host, port):
        conn = socket.create_connection((host, port))
        head = (
            "POST /v1/skills/echo/execute HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            f"Authorization: Bearer {token}\r\nContent-Length: 100\r\n\r\n"
        )
        conn.sendall(head.encode() + b'{"params":')
        conn.settimeout(5)
        started = time.monotonic()
        answer = conn.recv(4096)
        conn.close()
    assert answer.startswith(b"HTTP/1.1 408") and time.monotonic() - started < 3


def test_connections_beyond_the_cap_are_closed_at_once(tmp_path: Path) -> None:
    app = create_app(build_host(tmp_path), TokenStore.single("t" * 43, "ann", "viewer"))
    with guarded(app, header_timeout=30, max_connections=10) as (host, port):
        held = [socket.create_connection((host, port)) for _ in range(25)]
        time.sleep(0.3)
        closed = sum(_closed_by_peer(conn, 0.2) for conn in held)
        for conn in held:
            conn.close()
    assert closed == 15


def test_a_body_naming_a_member_twice_is_refused(api: dict[str, Any], client: httpx.Client) -> None:
    body = '{"params": {"n": 1}, "params": {"n": 9}}'
    headers = {**auth(api, "vic"), "content-type": "application/json"}
    answer = client.post("/v1/skills/echo/execute", headers=headers, content=body)
    assert answer.status_code == 400
    assert "the member 'params' is given twice in one object" in answer.json()["error"]


def test_an_unknown_ticket_id_is_cut_in_the_answer(api: dict[str, Any], client: httpx.Client) -> None:
    answer = client.get("/v1/approvals/" + "x" * 5000, headers=auth(api, "alice"))
    assert answer.status_code == 404
    assert len(answer.text) < 600 and "(5000 characters)" in answer.json()["error"]


@pytest.mark.parametrize(
    ("method", "path"), [("GET", "/nowhere"), ("GET", "/approvals/zzz"), ("TRACE", "/"), ("GET", "/healthz")]
)
def test_every_answer_carries_the_hardening_headers(client: httpx.Client, method: str, path: str) -> None:
    """A router's 404 or 405 and a JSON answer too, not only the console's pages."""
    answer = client.request(method, path)
    assert answer.headers["x-content-type-options"] == "nosniff"
    assert answer.headers["x-frame-options"] == "DENY"
    assert "frame-ancestors 'none'" in answer.headers["content-security-policy"]
