"""Two-person approval: every rule, the hook, real processes racing, and the CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from clitools import cli, cmd

from ongrid_plugins import ApprovalRequired, PermissionMode, Persona, Settings, SkillHost, hookimpl
from ongrid_plugins.errors import ApprovalError
from ongrid_plugins.gate.approvals import ApprovalStore
from ongrid_plugins.gate.tickets import Approval, Ticket, os_identity
from ongrid_plugins.testing import isolated_settings, make_skill

PY = sys.executable
ARGS = {"path": "/srv/data", "force": True}

#: A dangerous skill that appends one line per run, so double executions show.
WIPE_SH = """#!/bin/sh
input=""
while IFS= read -r line || [ -n "$line" ]; do input="$input$line"; done
printf '%s\\n' "$input" >> ran.log
printf '{"wiped": true}\\n'
"""


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def host(make_host: Any, root: Path) -> SkillHost:
    make_skill(root, "wipe", class_="dangerous", script=WIPE_SH)
    make_skill(root, "shred", class_="dangerous", script=WIPE_SH)
    h: SkillHost = make_host(root)
    return h


def runs(root: Path) -> list[str]:
    log = root / "wipe" / "ran.log"
    return log.read_text().splitlines() if log.exists() else []


def request(host: SkillHost, args: Any = ARGS, **kwargs: Any) -> Ticket:
    kwargs.setdefault("persona", "admin")
    kwargs.setdefault("caller", "alice")
    with pytest.raises(ApprovalRequired) as info:
        host.call("wipe", args, **kwargs)
    ticket = info.value.ticket
    assert isinstance(ticket, Ticket)
    return ticket


def approved(host: SkillHost, **kwargs: Any) -> Ticket:
    ticket = request(host, **kwargs)
    host.approve(ticket.id, approver="bob")
    return host.approve(ticket.id, approver="carol")


def refused(reason: str, action: Any, *args: Any, **kwargs: Any) -> ApprovalError:
    with pytest.raises(ApprovalError) as info:
        action(*args, **kwargs)
    assert info.value.reason == reason, str(info.value)
    assert info.value.exit_code == 3
    return info.value


# ---------------------------------------------------------------- the ticket


def test_a_dangerous_call_opens_a_ticket_bound_to_the_exact_call(host: SkillHost, root: Path) -> None:
    ticket = request(host)
    assert (ticket.tool, ticket.persona, ticket.requester, ticket.required) == ("wipe", "admin", "alice", 2)
    assert ticket.status == "pending" and ticket.approvals == ()
    assert ticket.expires - ticket.created == pytest.approx(15 * 60)
    assert ticket.args == ARGS
    assert len(ticket.args_digest) == 64 and ticket.tool_class == "dangerous"
    assert host.ticket(ticket.id) == ticket
    assert runs(root) == []


def test_the_same_request_again_returns_the_open_ticket_others_get_their_own(host: SkillHost) -> None:
    first = request(host)
    assert request(host).id == first.id
    assert request(host, caller="dave").id != first.id
    assert request(host, args={"path": "/other"}).id != first.id
    host.reject(first.id, approver="bob")
    assert request(host).id != first.id


def test_two_distinct_approvers_then_it_runs_once_with_the_approvers_recorded(
    host: SkillHost, root: Path
) -> None:
    ticket = request(host)
    one = host.approve(ticket.id, approver="bob", note="checked the backup", sop="SOP-7")
    assert (one.status, one.approvers) == ("pending", ("bob",))
    assert one.approvals[0].sop == "SOP-7" and one.approvals[0].note == "checked the backup"
    refused("not_approved", host.call, "wipe", ARGS, persona="admin", caller="alice", ticket=ticket.id)
    two = host.approve(ticket.id, approver="carol")
    assert (two.status, two.approvers) == ("approved", ("bob", "carol"))
    result = host.call("wipe", ARGS, persona="admin", caller="alice", ticket=ticket.id)
    assert result.ok and result.value == {"wiped": True}
    done = host.ticket(ticket.id)
    assert (done.status, done.executed_by, done.call_id) == ("executed", "alice", result.call_id)
    assert len(runs(root)) == 1


def test_the_same_approver_cannot_sign_twice_under_another_spelling(host: SkillHost) -> None:
    ticket = request(host)
    host.approve(ticket.id, approver="bob")
    for spelling in ("bob", "Bob", "  BOB "):
        refused("duplicate_approver", host.approve, ticket.id, approver=spelling)
    assert host.ticket(ticket.id).approvers == ("bob",)


def test_the_requester_can_never_approve(host: SkillHost) -> None:
    ticket = request(host)
    for spelling in ("alice", "ALICE", " alice"):
        error = refused("own_ticket", host.approve, ticket.id, approver=spelling)
        assert "two people other than the requester" in str(error)
    host.approve(ticket.id, approver="bob")
    refused("own_ticket", host.approve, ticket.id, approver="alice")
    assert host.ticket(ticket.id).status == "pending"


def test_a_third_approval_and_an_empty_identity_are_refused(host: SkillHost) -> None:
    ticket = approved(host)
    refused("already_approved", host.approve, ticket.id, approver="dave")
    refused("no_identity", host.approve, request(host, caller="eve").id, approver="  ")


@pytest.mark.parametrize(
    ("change", "detail"),
    [
        ({"name": "shred"}, "it is for tool 'wipe', not 'shred'"),
        ({"args": {"path": "/srv/data", "force": False}}, "the arguments differ"),
        ({"persona": Persona("admin2", PermissionMode.DUAL_SIGN_REQUIRED)}, "persona 'admin', not 'admin2'"),
    ],
    ids=["tool", "args", "persona"],
)
def test_an_approval_counts_only_for_its_tool_args_and_persona(
    host: SkillHost, root: Path, change: dict[str, Any], detail: str
) -> None:
    ticket = approved(host)
    call: dict[str, Any] = {"name": "wipe", "args": ARGS, "persona": "admin", "caller": "alice"}
    call.update(change)
    error = refused("mismatch", host.call, call.pop("name"), call.pop("args"), ticket=ticket.id, **call)
    assert detail in str(error)
    assert host.ticket(ticket.id).status == "approved"  # a mismatch does not spend the ticket
    assert runs(root) == []
    assert host.call("wipe", ARGS, persona="admin", caller="alice", ticket=ticket.id).ok


def test_changed_arguments_need_a_new_ticket(host: SkillHost) -> None:
    ticket = approved(host)
    changed = {"path": "/srv", "force": True}
    refused("mismatch", host.call, "wipe", changed, persona="admin", caller="alice", ticket=ticket.id)
    fresh = request(host, args=changed)
    assert fresh.id != ticket.id and fresh.status == "pending"


def test_defaults_are_part_of_what_was_approved(make_host: Any, root: Path) -> None:
    schema = {"type": "object", "properties": {"dry_run": {"type": "boolean", "default": True}}}
    make_skill(root, "purge", class_="dangerous", schema=schema)
    host = make_host(root)
    with pytest.raises(ApprovalRequired) as info:
        host.call("purge", {}, persona="admin", caller="alice")
    ticket = info.value.ticket
    assert ticket.args == {"dry_run": True}
    host.approve(ticket.id, approver="bob")
    host.approve(ticket.id, approver="carol")
    assert host.call("purge", {"dry_run": True}, persona="admin", caller="alice", ticket=ticket.id).ok


def test_a_ticket_executes_once(host: SkillHost, root: Path) -> None:
    ticket = approved(host)
    assert host.call("wipe", ARGS, persona="admin", caller="alice", ticket=ticket.id).ok
    error = refused("executed", host.call, "wipe", ARGS, persona="admin", caller="alice", ticket=ticket.id)
    assert "a ticket executes once" in str(error)
    refused("executed", host.approve, ticket.id, approver="dave")
    refused("executed", host.reject, ticket.id, approver="dave")
    assert len(runs(root)) == 1


def test_a_rejected_ticket_is_dead(host: SkillHost, root: Path) -> None:
    ticket = request(host)
    host.approve(ticket.id, approver="bob")
    dead = host.reject(ticket.id, approver="carol", note="not during business hours")
    assert (dead.status, dead.rejected_by, dead.note) == ("rejected", "carol", "not during business hours")
    refused("rejected", host.approve, ticket.id, approver="dave")
    error = refused("rejected", host.call, "wipe", ARGS, persona="admin", caller="alice", ticket=ticket.id)
    assert "not during business hours" in str(error)
    refused("rejected", host.reject, ticket.id, approver="dave")
    assert runs(root) == []


def test_an_approved_ticket_can_still_be_rejected_and_the_requester_may_withdraw(host: SkillHost) -> None:
    ticket = approved(host)
    assert host.reject(ticket.id, approver="alice", note="withdrawn").status == "rejected"
    refused("rejected", host.call, "wipe", ARGS, persona="admin", caller="alice", ticket=ticket.id)


def test_tickets_expire_approved_or_not(host: SkillHost, tmp_path: Path) -> None:
    clock = Clock()
    host.approvals = ApprovalStore(str(tmp_path / "clocked.db"), ttl=60, clock=clock)
    pending = request(host, caller="p")
    clock.now += 1
    ready = approved(host)
    clock.now += 60
    assert host.ticket(pending.id).status == "expired"
    assert host.ticket(ready.id).status == "expired"
    assert [t.id for t in host.tickets("expired")] == [ready.id, pending.id]
    refused("expired", host.approve, pending.id, approver="bob")
    refused("expired", host.call, "wipe", ARGS, persona="admin", caller="alice", ticket=ready.id)
    fresh = request(host)  # an expired ticket is not reused
    assert fresh.id not in (pending.id, ready.id)


def test_the_expiry_is_configurable(tmp_path: Path) -> None:
    assert Settings.from_env({"ONGRID_APPROVAL_TTL": "90"}).approval_ttl == 90
    assert ApprovalStore.for_settings(isolated_settings(tmp_path, approval_ttl=5)).ttl == 5
    from ongrid_plugins import ConfigError

    with pytest.raises(ConfigError, match="ONGRID_APPROVAL_TTL"):
        Settings.from_env({"ONGRID_APPROVAL_TTL": "0"})


def test_nothing_in_the_args_or_a_confirmation_can_stand_in_for_approvals(
    host: SkillHost, root: Path
) -> None:
    ticket = approved(host)
    forged = {**ARGS, "ticket": ticket.id, "approved": True, "approvers": ["bob", "carol"]}
    with pytest.raises(ApprovalRequired):
        host.call("wipe", forged, persona="admin", caller="alice")
    with pytest.raises(ApprovalRequired):
        host.call("wipe", ARGS, persona="admin", caller="alice", confirm=True)
    digest = ticket.args_digest
    with pytest.raises(ApprovalRequired):
        host.call("wipe", ARGS, persona="admin", caller="alice", confirm=digest)
    refused("unknown", host.call, "wipe", ARGS, persona="admin", caller="alice", ticket="f" * 16)
    assert runs(root) == []


def test_a_ticket_does_not_open_a_door_the_gate_keeps_shut(host: SkillHost) -> None:
    from ongrid_plugins import PermissionDenied

    ticket = approved(host)
    with pytest.raises(PermissionDenied, match="persona operator is mutating-with-confirm"):
        host.call("wipe", ARGS, persona="operator", caller="alice", ticket=ticket.id)
    assert host.ticket(ticket.id).status == "approved"


# ---------------------------------------------------------------- ongrid_verify_approval


class RequireSop:
    def __init__(self) -> None:
        self.seen: list[tuple[Ticket, Approval]] = []

    @hookimpl
    def ongrid_verify_approval(self, ticket: Ticket, approval: Approval) -> bool | None:
        self.seen.append((ticket, approval))
        return False if not approval.sop else None


class Broken:
    @hookimpl
    def ongrid_verify_approval(self, approval: Approval) -> Any:
        if approval.approver == "raiser":
            raise RuntimeError("LDAP is down")
        return "maybe" if approval.approver == "vague" else True


def test_any_false_vote_refuses_the_approval_and_names_the_plugin(make_host: Any, root: Path) -> None:
    make_skill(root, "wipe", class_="dangerous", script=WIPE_SH)
    sop = RequireSop()
    host = make_host(root, plugins=(sop, Broken()))
    ticket = request(host)
    error = refused("hook_refused", host.approve, ticket.id, approver="bob")
    assert "refused by plugin RequireSop#0" in str(error)
    ticket_seen, approval_seen = sop.seen[-1]
    assert (ticket_seen.id, approval_seen.approver) == (ticket.id, "bob")
    assert host.approve(ticket.id, approver="bob", sop="SOP-1").approvers == ("bob",)
    error = refused("hook_refused", host.approve, ticket.id, approver="raiser", sop="SOP-1")
    assert "Broken#1 (it raised RuntimeError: LDAP is down)" in str(error)
    refused("hook_refused", host.approve, ticket.id, approver="vague", sop="SOP-1")
    assert host.approve(ticket.id, approver="carol", sop="SOP-2").status == "approved"


# ---------------------------------------------------------------- real processes racing

RACER = r"""
import json, os, sys, time
from ongrid_plugins import SkillHost
from ongrid_plugins.errors import ApprovalError
from ongrid_plugins.testing import isolated_settings

tmp, root, action, ticket, who, go = sys.argv[1:7]
host = SkillHost(isolated_settings(tmp, root))
host.load()
host.approvals.ticket(ticket)  # connect before the start line
while not os.path.exists(go):
    time.sleep(0.001)
try:
    if action == "approve":
        host.approve(ticket, approver=who)
    else:
        args = json.loads(os.environ["RACE_ARGS"])
        host.call("wipe", args, persona="admin", caller="alice", ticket=ticket)
    print("ok")
except ApprovalError as exc:
    print(exc.reason)
"""


def race(tmp_path: Path, root: Path, action: str, ticket: str, people: list[str]) -> list[str]:
    go = tmp_path / f"go-{action}"
    env = {**os.environ, "RACE_ARGS": json.dumps(ARGS)}
    procs = [
        subprocess.Popen(
            [PY, "-c", RACER, str(tmp_path), str(root), action, ticket, who, str(go)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for who in people
    ]
    time.sleep(0.5)  # let every racer import and connect
    go.touch()
    outs = [p.communicate(timeout=60) for p in procs]
    assert all(p.returncode == 0 for p in procs), [err for _out, err in outs]
    return sorted(out.strip() for out, _err in outs)


def test_processes_racing_to_approve_and_execute_lose_nothing_and_run_once(
    host: SkillHost, root: Path, tmp_path: Path
) -> None:
    ticket = request(host)
    assert race(tmp_path, root, "approve", ticket.id, ["bob", "carol"]) == ["ok", "ok"]
    assert host.ticket(ticket.id).status == "approved"
    assert set(host.ticket(ticket.id).approvers) == {"bob", "carol"}
    outcomes = race(tmp_path, root, "execute", ticket.id, ["x"] * 6)
    assert outcomes == ["executed"] * 5 + ["ok"]
    assert len(runs(root)) == 1
    rows = host.audit.entries(tool="wipe")
    assert sorted(r.outcome for r in rows) == [
        "approval",
        "approval",
        "needs_approval",
        "ok",
        *["ticket_refused"] * 5,
    ]
    assert sorted(r.caller for r in rows if r.outcome == "approval") == ["bob", "carol"]
    assert host.audit.verify().ok


def test_the_same_approver_racing_from_two_processes_counts_once(
    host: SkillHost, root: Path, tmp_path: Path
) -> None:
    ticket = request(host)
    assert race(tmp_path, root, "approve", ticket.id, ["bob", "bob", "bob"]) == ["duplicate_approver"] * 2 + [
        "ok"
    ]
    assert host.ticket(ticket.id).approvers == ("bob",)


# ---------------------------------------------------------------- CLI


def test_cli_run_prints_the_ticket_and_the_commands_and_the_requester_cannot_approve(
    root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    make_skill(root, "wipe", class_="dangerous", script=WIPE_SH)
    args = json.dumps(ARGS)
    first = cli(root, "run", "wipe", args, "--persona", "admin", "--json")
    assert first.returncode == 3
    printed = json.loads(first.stdout)
    assert (printed["status"], printed["ticket"]["status"]) == ("needs_approval", "pending")
    host = SkillHost(Settings.from_env(skill_dirs=[str(root)], include_defaults=False))
    (ticket,) = host.tickets()
    assert printed["ticket"]["id"] == ticket.id
    me = os_identity()
    assert ticket.requester == me
    assert f"ongrid-skills approvals approve {ticket.id}" in first.stderr
    assert f"run wipe '{args}' --persona admin --ticket {ticket.id}" in first.stderr
    assert f"two people other than {me} approve it" in first.stderr
    assert "ERROR: call to 'wipe' needs two-person approval, says ongrid.gate" in first.stderr
    own = cmd(capsys, root, "approvals", "approve", ticket.id)
    assert own.returncode == 3 and f"{me} requested ticket {ticket.id} and cannot approve it" in own.stderr
    host.approve(ticket.id, approver="bob")
    host.approve(ticket.id, approver="carol")
    shown = json.loads(cmd(capsys, root, "approvals", "show", ticket.id, "--json").stdout)
    assert (shown["status"], shown["approvers"]) == ("approved", ["bob", "carol"])
    listed = json.loads(cmd(capsys, root, "approvals", "list", "--status", "approved", "--json").stdout)
    assert [t["id"] for t in listed["items"]] == [ticket.id]
    ran = cli(root, "run", "wipe", args, "--persona", "admin", "--ticket", ticket.id)
    assert ran.returncode == 0 and json.loads(ran.stdout) == {"wiped": True}
    replay = cli(root, "run", "wipe", args, "--persona", "admin", "--ticket", ticket.id)
    assert replay.returncode == 3 and "a ticket executes once" in replay.stderr
    assert len(runs(root)) == 1


def test_cli_approve_reject_and_list(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    make_skill(root, "wipe", class_="dangerous", script=WIPE_SH)
    host = SkillHost(Settings.from_env(skill_dirs=[str(root)], include_defaults=False))
    ticket = request(host, caller="somebody-else")
    ok = cmd(capsys, root, "approvals", "approve", ticket.id, "--note", "looks right", "--sop", "SOP-9")
    assert ok.returncode == 0 and f"approved ticket {ticket.id} (1 of 2 approvals)" in ok.stdout
    again = cmd(capsys, root, "approvals", "approve", ticket.id)
    assert again.returncode == 3 and "already approved" in again.stderr
    table = cmd(capsys, root, "approvals", "list").stdout.splitlines()
    assert table[0].split() == ["ID", "STATUS", "TOOL", "PERSONA", "REQUESTER", "APPROVALS", "EXPIRES"]
    assert table[1].split()[:6] == [ticket.id, "pending", "wipe", "admin", "somebody-else", "1/2"]
    shown = cmd(capsys, root, "approvals", "show", ticket.id).stdout
    assert f"{os_identity()} note='looks right' sop='SOP-9'" in shown
    rejected = cmd(capsys, root, "approvals", "reject", ticket.id, "--note", "no", "--json")
    assert json.loads(rejected.stdout)["status"] == "rejected"
    unknown = cmd(capsys, root, "approvals", "show", "nope")
    assert unknown.returncode == 4 and "no approval ticket 'nope'" in unknown.stderr


def test_the_cli_knows_every_ticket_status() -> None:
    from ongrid_plugins.commands.approvals import TICKET_STATUSES
    from ongrid_plugins.gate.tickets import STATUSES

    assert TICKET_STATUSES == STATUSES


def _store_with_ticket(tmp_path: Path) -> tuple[Any, Any]:
    from ongrid_plugins.gate.approvals import ApprovalStore

    store = ApprovalStore(str(tmp_path / "values.db"))
    ticket = store.open_ticket(
        tool="wipe", args_digest="d" * 64, persona="admin", requester="alice", args={"path": "/x"},
        tool_class="dangerous", reason="dangerous", profile="p1", skill_digest="s" * 64,
    )  # fmt: skip
    return store, ticket


def test_statuses_are_an_enum_equal_to_the_stored_strings(tmp_path: Path) -> None:
    from ongrid_plugins.gate.tickets import STATUSES, TicketStatus

    store, ticket = _store_with_ticket(tmp_path)
    assert ticket.status is TicketStatus.PENDING and ticket.status == "pending"
    store.approve(ticket.id, approver="bob")
    approved = store.approve(ticket.id, approver="carol")
    assert approved.status is TicketStatus.APPROVED
    assert [t.id for t in store.tickets("approved")] == [ticket.id]
    assert STATUSES == ("pending", "approved", "rejected", "executed", "expired")
    with pytest.raises(ValueError):
        TicketStatus("done")


def test_a_ticket_survives_its_json_form_every_field_included(tmp_path: Path) -> None:
    """The REST client rebuilds tickets from JSON: the profile and skill digest are not lost on the way."""
    from ongrid_plugins.gate.tickets import Ticket

    store, ticket = _store_with_ticket(tmp_path)
    ticket = store.approve(ticket.id, approver="bob", note="ok", sop="SOP-7")
    again = Ticket.from_dict(json.loads(json.dumps(ticket.to_dict())))
    assert again.to_dict() == ticket.to_dict()  # the JSON form keeps whole seconds
    assert (again.profile, again.skill_digest, again.approvals[0].sop) == ("p1", "s" * 64, "SOP-7")


def test_a_stored_ticket_past_its_expiry_reads_as_expired(tmp_path: Path) -> None:
    from ongrid_plugins.gate.approvals import ApprovalStore
    from ongrid_plugins.gate.tickets import TicketStatus

    now = [1_000_000.0]
    store = ApprovalStore(str(tmp_path / "t.db"), ttl=60, clock=lambda: now[0])
    ticket = store.open_ticket(tool="wipe", args_digest="d" * 64, persona="admin", requester="alice", args={})
    now[0] += 61
    assert store.ticket(ticket.id).status is TicketStatus.EXPIRED


def test_refusing_an_unknown_ticket_creates_no_state_and_exits_not_found(
    capsys: pytest.CaptureFixture[str], root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`reject x` created state/approvals.db and exited 3 (denied); `show ''` printed `''`."""
    state = tmp_path / "state"
    monkeypatch.setenv("ONGRID_STATE_DIR", str(state))
    for verb in ("reject", "approve", "show"):
        result = cmd(capsys, root, "approvals", verb, "x")
        assert result.returncode == 4, (verb, result.stderr)
        assert "ERROR: no approval ticket 'x' (see `ongrid-skills approvals list`)" in result.stderr
    assert not (state / "approvals.db").exists()
    empty = cmd(capsys, root, "approvals", "show", "")
    assert empty.returncode == 4
    assert "ERROR: no approval ticket with an empty id (see" in empty.stderr
    assert ApprovalError("unknown", "x", "", not_found=True).exit_code == 4
    assert ApprovalError("unknown", "x", "").exit_code == 3  # a call presenting it is denied
