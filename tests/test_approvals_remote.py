"""``ongrid-skills approvals ... --server URL``: the server's tickets, as the token's identity.

A real server on 127.0.0.1 (the console test kit); the CLI runs in-process.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from clirun import run
from consolekit import Console, serve

from ongrid_plugins.errors import ApprovalRequired


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


def test_list_and_show_read_the_servers_store(console, as_, capsys, tmp_path):
    ticket = open_ticket(console, "/srv/listed")
    token_file = tmp_path / "token"
    token_file.write_text(console.tokens["vic"] + "\n")
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
    code, _, err = run(
        capsys, "approvals", "approve", ticket, "--server", console.url, "--token-file", str(token_file)
    )
    assert code == 3 and "persona viewer may not approve" in err


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
