"""``ongrid-skills approvals ... --server URL``: the server's tickets, as the token's identity.

A real server on 127.0.0.1 (the console test kit); the CLI runs in-process.
"""

from __future__ import annotations

import contextlib
import http.server
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from clirun import run
from consolekit import Console, serve

from ongrid_plugins import Settings, SkillHost
from ongrid_plugins.errors import ApprovalError, ApprovalRequired
from ongrid_plugins.models import args_digest


@pytest.fixture(scope="module")
def console(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Console]:
    with serve(tmp_path_factory.mktemp("remote")) as running:
        yield running


@pytest.fixture
def as_(console, monkeypatch):
    def use(who: str) -> None:
        monkeypatch.setenv("ONGRID_TOKEN", console.tokens[who])

    return use


def open_ticket(console: Console, path: str) -> str:
    with pytest.raises(ApprovalRequired) as caught:
        console.host.call("wipe", {"path": path}, persona="admin", caller="ann")
    assert caught.value.ticket is not None
    return caught.value.ticket.id


def test_approvals_through_the_server_are_signed_by_the_tokens_identity(console, as_, capsys):
    ticket = open_ticket(console, "/srv/remote")
    as_("bob")
    code, out, _ = run(
        capsys, "approvals", "approve", ticket, "--note", "looks fine", "--server", console.url
    )
    assert code == 0 and "1 of 2 approvals" in out
    as_("cid")
    code, out, _ = run(capsys, "approvals", "approve", ticket, "--server", console.url)
    assert code == 0 and "is approved by bob, cid" in out
    stored = console.host.ticket(ticket)  # the OS user running the tests signed nothing
    assert [(a.approver, a.note) for a in stored.approvals] == [("bob", "looks fine"), ("cid", "")]


def test_the_requester_cannot_approve_through_the_server_either(console, as_, capsys):
    ticket = open_ticket(console, "/srv/own")
    as_("ann")
    code, _, err = run(capsys, "approvals", "approve", ticket, "--server", console.url)
    assert code == 3 and "ann requested ticket" in err and "cannot approve it" in err
    code, out, _ = run(capsys, "approvals", "reject", ticket, "--note", "not needed", "--server", console.url)
    assert code == 0 and "rejected ticket" in out  # withdrawing one's own is allowed
    assert console.host.ticket(ticket).rejected_by == "ann"


def test_an_unknown_ticket_on_the_server_is_not_found_as_locally(console, as_, capsys):
    as_("bob")
    for action in ("show", "approve", "reject"):
        code, _out, err = run(capsys, "approvals", action, "0123456789abcdef", "--server", console.url)
        assert code == 4, (action, err)  # not found, as for a local store (3 would read as "denied")
        assert "no approval ticket '0123456789abcdef'" in err


def test_list_and_show_read_the_servers_store(console, as_, capsys, tmp_path):
    ticket = open_ticket(console, "/srv/listed")
    token_file = tmp_path / "token"
    # An approver reads the server's tickets (a viewer may not: tickets are read as the audit is).
    token_file.write_text(console.tokens["bob"] + "\n")
    code, out, _ = run(
        capsys,
        "approvals",
        "list",
        "--status",
        "pending",
        "--json",
        "--server",
        console.url,
        "--token-file",
        str(token_file),
    )
    assert code == 0
    assert ticket in [item["id"] for item in json.loads(out)["items"]]
    code, out, _ = run(
        capsys, "approvals", "show", ticket, "--server", console.url, "--token-file", str(token_file)
    )
    assert code == 0 and '"path": "/srv/listed"' in out and "0 of 2" in out
    viewer = tmp_path / "viewer-token"
    viewer.write_text(console.tokens["vic"] + "\n")
    code, _, err = run(
        capsys, "approvals", "approve", ticket, "--server", console.url, "--token-file", str(viewer)
    )
    assert code == 4 and f"no approval ticket {ticket!r}" in err  # not vic's to read: as if absent


def test_a_bad_token_a_missing_token_and_no_server_are_clear_errors(console, monkeypatch, capsys, tmp_path):
    monkeypatch.setenv("ONGRID_TOKEN", "not-a-token")
    code, _, err = run(capsys, "approvals", "list", "--server", console.url)
    assert code == 2 and "refused the token" in err
    monkeypatch.delenv("ONGRID_TOKEN")
    code, _, err = run(capsys, "approvals", "list", "--server", console.url)
    assert code == 2 and "set ONGRID_TOKEN, or give --token-file" in err
    monkeypatch.setenv("ONGRID_TOKEN", "x")
    code, _, err = run(capsys, "approvals", "list", "--server", "http://127.0.0.1:9")
    assert code == 2 and "cannot reach http://127.0.0.1:9" in err
    code, _, err = run(capsys, "approvals", "list", "--server", "ftp://example")
    assert code == 2 and "not an http:// or https:// URL" in err


# ---------------------------------------------------------------------- Settings.approvals_url


def remote_host(console: Console, who: str, tmp_path, skills: Path | None = None) -> SkillHost:
    """A host on "another machine": its own state folder, its tickets on the server, as ``who``
    (the server's skills, or the folder ``skills``)."""
    token_file = tmp_path / f"{who}.token"
    token_file.write_text(console.tokens[who])
    settings = Settings(
        skill_dirs=[str(skills or console.base / "skills")],
        include_defaults=False,
        state_dir=str(tmp_path / f"state-{who}"),
        approvals_url=console.url,
        approvals_token_file=str(token_file),
    )
    return SkillHost(settings)


def test_a_host_pointed_at_the_server_shares_its_tickets_with_the_approvers_there(console, tmp_path):
    ann = remote_host(console, "ann", tmp_path)
    with pytest.raises(ApprovalRequired) as caught:
        ann.call("wipe", {"path": "/srv/far"}, persona="admin", caller="whoever")
    ticket = caught.value.ticket
    assert ticket is not None
    on_server = console.host.ticket(ticket.id)  # the server's store holds it, requested by the token
    assert (on_server.requester, dict(on_server.args)) == ("ann", {"path": "/srv/far"})
    console.host.approve(ticket.id, approver="bob")
    console.host.approve(ticket.id, approver="cid")
    result = ann.call("wipe", {"path": "/srv/far"}, persona="admin", ticket=ticket.id)
    assert result.ok and result.value == {"path": "/srv/far"}
    spent = console.host.ticket(ticket.id)
    assert (spent.status, spent.executed_by) == ("executed", "ann")
    with pytest.raises(ApprovalError) as again:
        ann.call("wipe", {"path": "/srv/far"}, persona="admin", ticket=ticket.id)
    assert again.value.reason == "executed"
    assert [e.ticket for e in ann.audit.entries(tool="wipe") if e.outcome == "ok"] == [ticket.id]


def test_the_server_binds_a_ticket_to_the_arguments_it_shows_approvers(console):
    """A requester cannot show approvers one call and run another: the server digests what it shows."""
    ann = {"Authorization": f"Bearer {console.tokens['ann']}"}
    client = console.client()
    opened = client.post(
        "/v1/approvals", json={"tool": "wipe", "params": {"path": "/tmp/x"}, "persona": "admin"}, headers=ann
    )
    assert opened.status_code == 200
    ticket = opened.json()
    assert ticket["requester"] == "ann" and ticket["args"] == {"path": "/tmp/x"}
    console.host.approve(ticket["id"], approver="bob")
    console.host.approve(ticket["id"], approver="cid")
    other = args_digest("wipe", {"path": "/"})
    claim = {"tool": "wipe", "args_digest": other, "persona": "admin", "call_id": "c1"}
    refused = client.post(f"/v1/approvals/{ticket['id']}/claim", json=claim, headers=ann)
    assert (refused.status_code, refused.json()["reason"]) == (409, "mismatch")
    bob = {"Authorization": f"Bearer {console.tokens['bob']}"}
    claim["args_digest"] = ticket["args_digest"]
    assert client.post(f"/v1/approvals/{ticket['id']}/claim", json=claim, headers=bob).status_code == 403
    assert (
        client.post(f"/v1/approvals/{ticket['id']}/claim", json=claim, headers=ann).json()["status"]
        == "executed"
    )


def test_opening_a_ticket_needs_a_known_tool_and_persona(console):
    ann = {"Authorization": f"Bearer {console.tokens['ann']}"}
    client = console.client()
    body = {"tool": "nope", "params": {}, "persona": "admin"}
    assert client.post("/v1/approvals", json=body, headers=ann).status_code == 404
    body = {"tool": "wipe", "params": {}, "persona": "/etc/passwd"}
    answer = client.post("/v1/approvals", json=body, headers=ann)
    assert answer.status_code == 400 and "does not exist on this server" in answer.json()["error"]
    assert client.post("/v1/approvals", json={"tool": "wipe"}, headers=ann).status_code == 400


@pytest.mark.parametrize(
    ("tool", "params", "persona", "status", "code"),
    [
        ("echo", {"count": 1}, "admin", 409, "no_approval_needed"),  # a safe tool: nothing to sign
        ("wipe", {"path": 5}, "admin", 422, "invalid_arguments"),  # a call that could never run
        ("wipe", {"path": "/x"}, "viewer", 403, "denied"),  # that persona may not call it at all
    ],
)
def test_the_server_opens_no_ticket_approvers_could_sign_in_vain(
    console, tool, params, persona, status, code
):
    ann = {"Authorization": f"Bearer {console.tokens['ann']}"}
    before = {t.id for t in console.host.tickets()}
    answer = console.client().post(
        "/v1/approvals", json={"tool": tool, "params": params, "persona": persona}, headers=ann
    )
    assert (answer.status_code, answer.json()["code"]) == (status, code), answer.text
    assert {t.id for t in console.host.tickets()} == before


def test_an_unreachable_approvals_server_refuses_the_call_clearly(tmp_path, console):
    token = tmp_path / "t"
    token.write_text("x")
    host = SkillHost(
        Settings(
            skill_dirs=[str(console.base / "skills")],
            include_defaults=False,
            state_dir=str(tmp_path / "state"),
            approvals_url="http://127.0.0.1:9",
            approvals_token_file=str(token),
        )
    )
    with pytest.raises(ApprovalError) as caught:
        host.call("wipe", {"path": "/srv"}, persona="admin")
    assert caught.value.reason == "store" and "cannot reach http://127.0.0.1:9" in str(caught.value)


def test_a_ticket_opened_over_rest_for_a_tool_with_defaults_runs_with_its_ticket(console):
    """POST /v1/approvals digests the arguments the call will run with: schema defaults filled in."""
    from consolekit import write_skill

    schema = {
        "type": "object",
        "properties": {"path": {"type": "string"}, "depth": {"type": "integer", "default": 3}},
        "required": ["path"],
    }
    write_skill(console.base, "purge", "dangerous", schema=schema, script="#!/bin/sh\ncat\n")
    console.host.reload()
    ann = {"Authorization": f"Bearer {console.tokens['ann']}"}
    client = console.client()
    body = {"tool": "purge", "params": {"path": "/srv/defaults"}, "persona": "admin"}
    opened = client.post("/v1/approvals", json=body, headers=ann)
    assert opened.status_code == 200, opened.text
    ticket = opened.json()
    assert ticket["args"] == {"path": "/srv/defaults", "depth": 3}  # what will run, as approvers read it
    assert ticket["args_digest"] == args_digest("purge", {"path": "/srv/defaults", "depth": 3})
    for approver in ("bob", "cid"):
        signer = {"Authorization": f"Bearer {console.tokens[approver]}"}
        assert (
            client.post(f"/v1/approvals/{ticket['id']}/approve", json={}, headers=signer).status_code == 200
        )
    run = {"params": {"path": "/srv/defaults"}, "ticket": ticket["id"]}
    done = client.post("/v1/skills/purge/execute", json=run, headers=ann)
    assert done.status_code == 200, done.text
    assert done.json()["result"] == {"path": "/srv/defaults", "depth": 3}
    assert console.host.ticket(ticket["id"]).status == "executed"


def test_text_people_write_on_tickets_is_capped_with_a_422_naming_field_and_limit(console):
    ann = {"Authorization": f"Bearer {console.tokens['ann']}"}
    bob = {"Authorization": f"Bearer {console.tokens['bob']}"}
    client = console.client()
    body = {"tool": "wipe", "params": {"path": "/srv/long"}, "persona": "admin", "reason": "x" * 2001}
    before = {t.id for t in console.host.tickets()}
    refused = client.post("/v1/approvals", json=body, headers=ann)
    assert (refused.status_code, refused.json()["code"]) == (422, "too_long")
    assert "'reason'" in refused.json()["error"] and "2000 characters" in refused.json()["error"]
    assert (refused.json()["field"], refused.json()["limit"]) == ("reason", 2000)
    assert {t.id for t in console.host.tickets()} == before
    body["reason"] = "x" * 2000  # the limit itself is fine
    ticket = client.post("/v1/approvals", json=body, headers=ann).json()["id"]
    for route, field in (("approve", "note"), ("approve", "sop"), ("reject", "note")):
        answer = client.post(f"/v1/approvals/{ticket}/{route}", json={field: "y" * 2001}, headers=bob)
        assert (answer.status_code, answer.json()["code"], answer.json()["field"]) == (422, "too_long", field)
        assert f"'{field}'" in answer.json()["error"] and "2000" in answer.json()["error"]
    after = console.host.ticket(ticket)
    assert (after.status, after.approvals) == ("pending", ())


def own_copy_host(console: Console, who: str, tmp_path) -> SkillHost:
    """A host with its own copy of the server's skills, its tickets on the server, as ``who``."""
    import shutil

    shutil.copytree(console.base / "skills", tmp_path / "skills", ignore=shutil.ignore_patterns("purge"))
    return remote_host(console, who, tmp_path, tmp_path / "skills")


def test_a_server_ticket_binds_the_skill_files_the_host_runs_and_refuses_them_swapped(console, tmp_path):
    from ongrid_plugins.host.pipeline import digest_now

    ann = own_copy_host(console, "ann", tmp_path)
    with pytest.raises(ApprovalRequired) as caught:
        ann.call("wipe", {"path": "/srv/swap"}, persona="admin")
    assert caught.value.ticket is not None
    ticket = caught.value.ticket.id
    on_server = console.host.ticket(ticket)  # bound to the host's files and profile, not the server's
    assert on_server.skill_digest == digest_now(ann, ann.get("wipe"))
    assert on_server.profile == ann.sandbox_profile(ann.get("wipe")).digest
    console.host.approve(ticket, approver="bob")
    console.host.approve(ticket, approver="cid")
    (tmp_path / "skills" / "wipe" / "run.sh").write_text("#!/bin/sh\necho '{\"evil\": true}'\n")
    ann.reload()
    with pytest.raises(ApprovalError) as refused:
        ann.call("wipe", {"path": "/srv/swap"}, persona="admin", ticket=ticket)
    assert refused.value.reason == "skill_changed"
    assert "the skill changed since approval" in str(refused.value)
    assert console.host.ticket(ticket).status == "approved"  # refused, not spent
    assert not [e for e in ann.audit.entries(tool="wipe") if e.outcome == "ok"]


def test_a_claim_naming_other_skill_files_or_profile_is_refused_and_spends_nothing(console):
    ann = {"Authorization": f"Bearer {console.tokens['ann']}"}
    client = console.client()
    body = {
        "tool": "wipe",
        "params": {"path": "/srv/bound"},
        "persona": "admin",
        "skill_digest": "a" * 64,
        "profile": "b" * 64,
    }
    opened = client.post("/v1/approvals", json=body, headers=ann)
    assert opened.status_code == 200, opened.text
    ticket = opened.json()
    assert (ticket["skill_digest"], ticket["profile"]) == ("a" * 64, "b" * 64)
    console.host.approve(ticket["id"], approver="bob")
    console.host.approve(ticket["id"], approver="cid")
    claim = {"tool": "wipe", "args_digest": ticket["args_digest"], "persona": "admin", "call_id": "c9"}
    for changed, reason in (
        ({"skill_digest": "c" * 64, "profile": "b" * 64}, "skill_changed"),
        ({"skill_digest": "a" * 64, "profile": "d" * 64}, "mismatch"),
    ):
        refused = client.post(f"/v1/approvals/{ticket['id']}/claim", json=claim | changed, headers=ann)
        assert (refused.status_code, refused.json()["reason"]) == (409, reason), refused.text
    assert console.host.ticket(ticket["id"]).status == "approved"
    bad = client.post("/v1/approvals", json=body | {"skill_digest": "not hex"}, headers=ann)
    assert bad.status_code == 400 and "skill_digest" in bad.json()["error"]
    same = {"skill_digest": "a" * 64, "profile": "b" * 64}
    spent = client.post(f"/v1/approvals/{ticket['id']}/claim", json=claim | same, headers=ann)
    assert spent.json()["status"] == "executed", spent.text


def test_opening_and_claiming_a_ticket_over_rest_are_rows_of_the_servers_audit_log(console):
    ann = {"Authorization": f"Bearer {console.tokens['ann']}"}
    client = console.client()
    body = {"tool": "wipe", "params": {"path": "/srv/audited"}, "persona": "admin", "reason": "cleanup"}
    ticket = client.post("/v1/approvals", json=body, headers=ann).json()
    for approver in ("bob", "cid"):
        signer = {"Authorization": f"Bearer {console.tokens[approver]}"}
        assert (
            client.post(f"/v1/approvals/{ticket['id']}/approve", json={}, headers=signer).status_code == 200
        )
    claim = {
        "tool": "wipe",
        "args_digest": args_digest("wipe", {"path": "/"}),
        "persona": "admin",
        "call_id": "c7",
    }
    assert client.post(f"/v1/approvals/{ticket['id']}/claim", json=claim, headers=ann).status_code == 409
    claim["args_digest"] = ticket["args_digest"]
    assert client.post(f"/v1/approvals/{ticket['id']}/claim", json=claim, headers=ann).status_code == 200
    rows = [e for e in console.host.audit.entries(limit=10_000) if e.ticket == ticket["id"]]
    assert [(e.outcome, e.caller) for e in rows] == [
        ("needs_approval", "ann"),
        ("approval", "bob"),
        ("approval", "cid"),
        ("ticket_refused", "ann"),
        ("claim", "ann"),
    ]
    opened, refused, spent = rows[0], rows[3], rows[4]
    assert (opened.verdict, opened.args_digest, opened.args) == (
        "dual_sign",
        ticket["args_digest"],
        {"path": "/srv/audited"},
    )
    assert "does not cover this call" in (refused.error or "") and refused.approvers == ()
    assert spent.approvers == ("bob", "cid") and "call c7 on the requester's host" in spent.reason
    assert console.host.audit.verify().ok


def test_approvals_refused_over_rest_are_rows_of_the_servers_audit_log(console):
    ticket = open_ticket(console, "/srv/refused")
    with pytest.raises(ApprovalRequired) as caught:  # vic's own: vic may read it, not sign it
        console.host.call("wipe", {"path": "/srv/vics"}, persona="admin", caller="vic")
    vics = caught.value.ticket.id
    client = console.client()
    for who, on, status in (("ann", ticket, 403), ("vic", ticket, 404), ("vic", vics, 403)):
        headers = {"Authorization": f"Bearer {console.tokens[who]}"}
        answer = client.post(f"/v1/approvals/{on}/approve", json={"note": "me"}, headers=headers)
        assert answer.status_code == status, answer.text
    entries = [e for e in console.host.audit.entries(limit=10_000) if e.ticket in (ticket, vics)]
    refused = [(e.ticket, e.caller, e.reason) for e in entries if e.outcome == "approval_refused"]
    # found in review: a token that may not even read ann's ticket added rows about it
    assert refused == [(ticket, "ann", "me"), (vics, "vic", "me")]
    assert "may not approve" in ([e for e in entries if e.ticket == vics][-1].error or "")


def test_a_requester_withdraws_their_ticket_over_rest_whatever_the_case_of_their_name(console):
    """Identities compare as everywhere else (NFKC, case folded): VIC's ticket is vic's to withdraw."""
    with pytest.raises(ApprovalRequired) as caught:
        console.host.call("wipe", {"path": "/srv/case"}, persona="admin", caller="VIC")
    ticket = caught.value.ticket.id
    vic = {"Authorization": f"Bearer {console.tokens['vic']}"}  # a viewer: may not sign, may withdraw
    client = console.client()
    assert client.get(f"/v1/approvals/{ticket}", headers=vic).status_code == 200
    answer = client.post(f"/v1/approvals/{ticket}/reject", json={"note": "not needed"}, headers=vic)
    assert answer.status_code == 200, answer.text
    assert (answer.json()["status"], answer.json()["rejected_by"]) == ("rejected", "vic")


def test_claim_and_reject_answer_a_ticket_the_token_may_not_read_as_if_absent(console):
    ticket = open_ticket(console, "/srv/hidden")
    vic = {"Authorization": f"Bearer {console.tokens['vic']}"}
    client = console.client()
    claim = {"tool": "wipe", "args_digest": "0" * 64, "persona": "admin", "call_id": "c1"}
    for route, body in (("claim", claim), ("reject", {})):
        hidden = client.post(f"/v1/approvals/{ticket}/{route}", json=body, headers=vic)
        absent = client.post(f"/v1/approvals/0000000000000000/{route}", json=body, headers=vic)
        assert (hidden.status_code, absent.status_code) == (404, 404), (route, hidden.text)
        assert hidden.json()["code"] == absent.json()["code"] and "ann" not in hidden.text
    assert console.host.ticket(ticket).status == "pending"


# ------------------------------------------------------------------- the token and redirects


class _Recorder(http.server.BaseHTTPRequestHandler):
    """Answers every request with ``self.server.answer`` (status, headers) and keeps each
    request's method, path and Authorization header in ``self.server.seen``."""

    def _any(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        self.server.seen.append((self.command, self.path, self.headers.get("Authorization")))  # type: ignore[attr-defined]
        status, headers = self.server.answer  # type: ignore[attr-defined]
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value.replace("{path}", self.path))
        body = b'{"tickets": []}' if status == 200 else b""
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = _any

    def log_message(self, *_args: object) -> None:
        pass


@contextlib.contextmanager
def _http(status: int, headers: dict[str, str]) -> Iterator[Any]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    server.seen, server.answer = [], (status, headers)  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
def test_the_token_never_follows_a_redirect_to_another_origin(monkeypatch, capsys, status):
    """The attack: ``approvals list --server URL`` against a server answering 302 to another
    port sent ``Authorization: Bearer <token>`` there (urllib copies added headers)."""
    monkeypatch.setenv("ONGRID_TOKEN", "secret-token-42")
    with (
        _http(200, {}) as elsewhere,
        _http(status, {"Location": f"http://127.0.0.1:{elsewhere.server_port}{{path}}"}) as redirector,
    ):
        url = f"http://127.0.0.1:{redirector.server_port}"
        code, _, err = run(capsys, "approvals", "list", "--server", url)
        code2, _, err2 = run(capsys, "approvals", "approve", "T-1", "--server", url)
    assert elsewhere.seen == []  # nothing reached the other port, token or not
    assert [auth for _m, _p, auth in redirector.seen] == ["Bearer secret-token-42"] * 2
    assert code == 2 and f"answered {status}" in err and "not followed" in err, err
    assert f"127.0.0.1:{elsewhere.server_port}" in err and "--server" in err, err
    assert code2 == 2 and "not followed" in err2, err2


def test_one_requester_holds_at_most_max_open_tickets_and_the_next_is_refused_with_429(console, monkeypatch):
    """The attack: one requester opened 300 tickets in 2.4 s; approvers' lists drowned."""
    client = console.client()
    ann = {"Authorization": f"Bearer {console.tokens['ann']}"}
    held = sum(1 for t in console.host.tickets() if t.is_open and t.requester == "ann")
    monkeypatch.setattr(console.host.approvals, "max_open", held + 3)

    def ask(path: str, who: dict[str, str] = ann) -> object:
        return client.post(
            "/v1/approvals", json={"tool": "wipe", "params": {"path": path}, "persona": "admin"}, headers=who
        )

    opened = [ask(f"/cap/{n}") for n in range(3)]
    assert [a.status_code for a in opened] == [200] * 3, [a.text for a in opened]
    again = ask("/cap/0")  # the same call again: its open ticket, not a new one
    assert again.status_code == 200 and again.json()["id"] == opened[0].json()["id"], again.text
    refused = ask("/cap/3")
    assert refused.status_code == 429 and refused.json()["reason"] == "too_many_open", refused.text
    assert "ONGRID_MAX_OPEN_TICKETS" in refused.json()["error"]
    bob = {"Authorization": f"Bearer {console.tokens['bob']}"}
    assert ask("/cap/3", bob).status_code == 200  # a cap per requester, not for everyone


def test_the_approvals_page_says_when_a_ticket_binds_skill_files_other_than_the_servers(console):
    """The attack: a ticket opened over REST naming any skill digest looked like any other
    ticket to approvers; the host that runs it has other files than the server shows."""
    ann = {"Authorization": f"Bearer {console.tokens['ann']}"}
    client = console.client()
    body = {
        "tool": "wipe",
        "params": {"path": "/srv/elsewhere"},
        "persona": "admin",
        "skill_digest": "a" * 64,
    }
    other = client.post("/v1/approvals", json=body, headers=ann).json()["id"]
    body = {"tool": "wipe", "params": {"path": "/srv/same-files"}, "persona": "admin"}
    same = client.post("/v1/approvals", json=body, headers=ann).json()["id"]
    html = console.client("bob").get("/approvals?part=list").text

    def card(ticket: str) -> str:
        return html[html.index(f'id="t-{ticket}"') :].split("</article>")[0]

    assert "Bound to other skill files than this server" in card(other), card(other)
    assert "a" * 12 in card(other)
    assert "other skill files" not in card(same), card(same)
