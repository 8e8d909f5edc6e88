"""Attacks on the approvals database: rows added, changed or reset by hand must not run a call.

The approvals database is a plain SQLite file in the state folder. Whoever can write it
could add approvals or reset a spent ticket; each attack here does exactly that with
``sqlite3`` and checks that the call is refused (``forged``), that the refusal is in the
audit log, and that the skill never ran.
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest

from ongrid_plugins import ApprovalRequired, SkillHost
from ongrid_plugins.errors import ApprovalError
from ongrid_plugins.gate.tickets import Ticket
from ongrid_plugins.testing import make_skill

ARGS = {"path": "/srv/data"}
RAN_SH = """#!/bin/sh
echo ran >> ran.log
printf '{"wiped": true}\\n'
"""


@pytest.fixture
def host(make_host: Any, root: Path) -> SkillHost:
    make_skill(root, "wipe", class_="dangerous", script=RAN_SH)
    h: SkillHost = make_host(root)
    return h


def runs(root: Path, skill: str = "wipe") -> int:
    log = root / skill / "ran.log"
    return len(log.read_text().splitlines()) if log.exists() else 0


def opened(host: SkillHost) -> Ticket:
    with pytest.raises(ApprovalRequired) as info:
        host.call("wipe", ARGS, persona="admin", caller="alice")
    ticket: Ticket = info.value.ticket
    return ticket


def edit(host: SkillHost, *statements: tuple[str, tuple[Any, ...]]) -> None:
    with sqlite3.connect(host.approvals.path) as conn:
        for sql, params in statements:
            conn.execute(sql, params)


def approval_row(ticket_id: str, who: str) -> tuple[str, tuple[Any, ...]]:
    sql = "INSERT INTO approvals (ticket_id, approver_key, approver, note, sop, time)"
    sql += " VALUES (?, ?, ?, '', NULL, ?)"
    return sql, (ticket_id, who, who, time.time())  # a forger picks the key too


def approve_by_hand(ticket_id: str) -> tuple[str, tuple[Any, ...]]:
    return "UPDATE tickets SET status = 'approved' WHERE id = ?", (ticket_id,)


def spend(host: SkillHost, ticket_id: str) -> ApprovalError:
    with pytest.raises(ApprovalError) as info:
        host.call("wipe", ARGS, persona="admin", caller="alice", ticket=ticket_id)
    return info.value


@pytest.mark.parametrize(
    ("approvers", "why"),
    [
        (["alice", "bob"], "its requester alice is listed among its approvers"),
        (["bob", "BOB"], "one approver is listed twice"),
        (["bob"], "marked approved with 1 approval(s), 2 are needed"),
        (["bob", "b\u200bob"], "one approver is listed twice"),
    ],
    ids=["self-approval", "one-person-twice", "one-approval", "invisible-character"],
)
def test_approvals_added_by_hand_that_break_a_rule_do_not_run_the_call(
    host: SkillHost, root: Path, approvers: list[str], why: str
) -> None:
    ticket = opened(host)
    edit(host, *(approval_row(ticket.id, who) for who in approvers), approve_by_hand(ticket.id))
    error = spend(host, ticket.id)
    assert error.reason == "forged" and error.http_status == 403
    assert why in str(error) and "Open a new ticket" in str(error)
    assert runs(root) == 0
    assert host.audit.flush()
    assert host.audit.entries(tool="wipe")[-1].outcome == "ticket_refused"


def test_approvals_by_people_the_audit_log_never_saw_do_not_run_the_call(host: SkillHost, root: Path) -> None:
    """Two well-formed approvals written straight into the database: the rules hold, but
    the hash-chained audit log has no approval row from either person."""
    ticket = opened(host)
    host.approve(ticket.id, approver="bob")  # one real approval, in both records
    edit(host, approval_row(ticket.id, "mallory"), approve_by_hand(ticket.id))
    error = spend(host, ticket.id)
    assert error.reason == "forged"
    assert "has no approval of it by mallory" in str(error) and "bob" not in str(error).split("by ")[1]
    assert runs(root) == 0


def test_a_spent_ticket_reset_by_hand_is_not_run_again(host: SkillHost, root: Path) -> None:
    ticket = opened(host)
    host.approve(ticket.id, approver="bob")
    host.approve(ticket.id, approver="carol")
    assert host.call("wipe", ARGS, persona="admin", caller="alice", ticket=ticket.id).ok
    reset = "UPDATE tickets SET status = 'approved', executed = NULL, executed_by = NULL, call_id = NULL"
    reset += " WHERE id = ?"
    edit(host, (reset, (ticket.id,)))
    error = spend(host, ticket.id)
    assert error.reason == "forged" and "shows it already ran" in str(error)
    assert runs(root) == 1


def test_a_properly_approved_ticket_still_runs_once(host: SkillHost, root: Path) -> None:
    ticket = opened(host)
    host.approve(ticket.id, approver="bob")
    host.approve(ticket.id, approver="carol")
    result = host.call("wipe", ARGS, persona="admin", caller="alice", ticket=ticket.id)
    assert result.ok and result.value == {"wiped": True}
    assert spend(host, ticket.id).reason == "executed"
    assert runs(root) == 1


def test_without_the_audit_plugin_the_rules_are_still_checked(make_host: Any, root: Path) -> None:
    make_skill(root, "wipe", class_="dangerous", script=RAN_SH)
    host: SkillHost = make_host(root, disable_plugins=("audit",))
    ticket = opened(host)
    edit(host, approval_row(ticket.id, "alice"), approval_row(ticket.id, "bob"), approve_by_hand(ticket.id))
    assert "its requester alice" in str(spend(host, ticket.id))
    assert runs(root) == 0


def test_a_pending_ticket_with_enough_rows_says_it_is_not_approved(host: SkillHost) -> None:
    ticket = opened(host)
    edit(host, approval_row(ticket.id, "bob"), approval_row(ticket.id, "carol"))
    error = spend(host, ticket.id)
    assert "has its approvals but is pending, not approved" in str(error)


def test_a_ticket_changed_between_the_audit_check_and_the_claim_does_not_run(tmp_path: Path) -> None:
    """The audit log is read before the ticket database's write lock is taken (it is another
    database); approvers that differ by the time of the claim are not the ones it vouched for."""
    from ongrid_plugins.gate.approvals import ApprovalStore

    store = ApprovalStore(str(tmp_path / "approvals.db"))
    ticket = store.open_ticket(tool="wipe", args_digest="d", persona="admin", requester="alice", args={})
    store.approve(ticket.id, approver="bob")
    store.approve(ticket.id, approver="carol")

    def witness(seen: Ticket) -> None:  # vouches, and meanwhile the approvals change
        edit_path = store.path
        with sqlite3.connect(edit_path) as conn:
            conn.execute(
                "UPDATE approvals SET approver = 'dave', approver_key = 'dave' WHERE approver = 'carol'"
            )

    store.witness = witness
    with pytest.raises(ApprovalError) as info:
        store.claim(ticket.id, tool="wipe", args_digest="d", persona="admin", caller="alice", call_id="c")
    assert info.value.reason == "not_approved" and "changed while it was being checked" in str(info.value)
    assert store.ticket(ticket.id).status == "approved"  # not spent


def test_a_ticket_pointed_at_other_arguments_by_hand_does_not_run(host: SkillHost, root: Path) -> None:
    """Approved for a harmless path, then its digest rewritten to the one of ``/``."""
    wanted = opened(host)  # a ticket for ARGS: its digest is what the forger copies
    with pytest.raises(ApprovalRequired) as other:
        host.call("wipe", {"path": "/"}, persona="admin", caller="alice")
    target = other.value.ticket
    host.approve(wanted.id, approver="bob")
    host.approve(wanted.id, approver="carol")
    edit(host, ("UPDATE tickets SET args_digest = ? WHERE id = ?", (target.args_digest, wanted.id)))
    with pytest.raises(ApprovalError) as info:
        host.call("wipe", {"path": "/"}, persona="admin", caller="alice", ticket=wanted.id)
    assert info.value.reason == "forged"
    assert "opened or approved for other arguments" in str(info.value)
    assert runs(root) == 0


def test_approval_rows_record_the_arguments_they_covered(host: SkillHost) -> None:
    ticket = opened(host)
    host.approve(ticket.id, approver="bob")
    host.audit.flush()
    [row] = [r for r in host.audit.entries() if r.outcome == "approval"]
    assert row.args_digest == ticket.args_digest


SECRET_SCHEMA = {
    "type": "object",
    "properties": {
        "path": {"type": "string"},
        "meta": {"type": "object", "properties": {"password": {"type": "string"}}},
    },
}
SECRET_ARGS = {"path": "/db", "meta": {"password": "1234"}}


def secret_ticket(host: SkillHost, root: Path, args: dict[str, Any]) -> Ticket:
    make_skill(root, "vault", class_="dangerous", script=RAN_SH, schema=SECRET_SCHEMA)
    host.reload()
    with pytest.raises(ApprovalRequired) as info:
        host.call("vault", args, persona="admin", caller="alice")
    ticket: Ticket = info.value.ticket
    return ticket


def test_ticket_decision_rows_of_a_call_with_a_secret_keep_no_digest_a_guess_could_confirm(
    host: SkillHost, root: Path
) -> None:
    from ongrid_plugins.models import args_digest

    ticket = secret_ticket(host, root, SECRET_ARGS)
    host.approve(ticket.id, approver="bob")
    host.approve(ticket.id, approver="carol")
    assert host.call("vault", SECRET_ARGS, persona="admin", caller="alice", ticket=ticket.id).ok
    rows = [r for r in host.audit.entries(tool="vault") if r.outcome == "approval"]
    assert len(rows) == 2
    guesses = {
        args_digest("vault", {"path": "/db", "meta": {"password": f"{pin:04d}"}}) for pin in range(10000)
    }
    assert ticket.args_digest in guesses  # the guess does work against the unkeyed digest
    for row in rows:
        assert row.redacted == ("$.meta.password",)  # as call rows list what they hid
        assert row.args_digest not in guesses and row.args_digest != ticket.args_digest
        assert row.args == {"path": "/db", "meta": {"password": "[redacted]"}}
    assert host.audit.verify().ok


def test_a_ticket_with_a_secret_pointed_at_other_arguments_by_hand_does_not_run(
    host: SkillHost, root: Path
) -> None:
    """The keyed digest of its approval rows still catches a ticket whose digest was rewritten."""
    wanted = secret_ticket(host, root, SECRET_ARGS)
    other_args = {"path": "/", "meta": {"password": "1234"}}
    with pytest.raises(ApprovalRequired) as other:
        host.call("vault", other_args, persona="admin", caller="alice")
    host.approve(wanted.id, approver="bob")
    host.approve(wanted.id, approver="carol")
    edit(
        host, ("UPDATE tickets SET args_digest = ? WHERE id = ?", (other.value.ticket.args_digest, wanted.id))
    )
    with pytest.raises(ApprovalError) as info:
        host.call("vault", other_args, persona="admin", caller="alice", ticket=wanted.id)
    assert info.value.reason == "forged"
    assert "opened or approved for other arguments" in str(info.value)
    assert runs(root, "vault") == 0


def test_approval_rows_written_before_keyed_digests_still_back_their_ticket(
    host: SkillHost, root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rows of the previous version kept the plain digest even for a secret: still compared as such."""
    from ongrid_plugins.audit import decisions

    ticket = secret_ticket(host, root, SECRET_ARGS)
    monkeypatch.setattr(decisions, "redacted_paths", lambda value: [])  # as the previous version wrote
    host.approve(ticket.id, approver="bob")
    host.approve(ticket.id, approver="carol")
    monkeypatch.undo()
    assert [r.args_digest for r in host.audit.entries() if r.outcome == "approval"] == [
        ticket.args_digest
    ] * 2
    assert host.call("vault", SECRET_ARGS, persona="admin", caller="alice", ticket=ticket.id).ok
    assert host.audit.verify().ok
