"""The audit log: one row per attempt, secrets redacted, the hash chain, writers, crashes, failing closed."""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from clitools import cli, cmd

from ongrid_plugins import (
    ApprovalRequired,
    ConfirmationRequired,
    InvalidArguments,
    PermissionDenied,
    SkillHost,
    hookimpl,
)
from ongrid_plugins.audit import AuditLog, row_hash
from ongrid_plugins.audit.chain import SCHEMA
from ongrid_plugins.audit.entries import UnreadableLog
from ongrid_plugins.errors import ApprovalError, AuditError, ConfigError, PluginFailed
from ongrid_plugins.schema.redact import REDACTED, redact
from ongrid_plugins.testing import isolated_settings, make_skill

PY = sys.executable
FAIL_SH = "#!/bin/sh\necho 'step 1' >&2\necho 'disk full' >&2\nexit 3\n"


def db_path(tmp_path: Path) -> Path:
    return tmp_path / ".ongrid-state" / "audit.db"


def sql(tmp_path: Path, statement: str, *params: Any) -> list[Any]:
    with sqlite3.connect(db_path(tmp_path)) as conn:
        return conn.execute(statement, params).fetchall()


# ---------------------------------------------------------------- one row per attempt


def test_every_attempt_gets_one_row_with_its_decision_and_outcome(make_host: Any, root: Path) -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}}
    make_skill(root, "echo", schema=schema)
    make_skill(root, "fail", script=FAIL_SH)
    make_skill(root, "change", class_="mutating")
    make_skill(root, "wipe", class_="dangerous")
    host = make_host(root)
    ok = host.call("echo", {"n": 1}, caller="ada")
    failed = host.call("fail")
    with pytest.raises(InvalidArguments):
        host.call("echo", {"n": "x"})
    with pytest.raises(ConfirmationRequired):
        host.call("change")
    with pytest.raises(PermissionDenied):
        host.call("change", persona="viewer")
    with pytest.raises(ApprovalRequired) as info:
        host.call("wipe", {"a": 1}, persona="admin", caller="alice")
    with pytest.raises(ApprovalError):
        host.call("wipe", {"a": 1}, persona="admin", caller="alice", ticket=info.value.ticket.id)
    rows = host.audit.entries()
    assert [(r.seq, r.tool, r.outcome, r.verdict) for r in rows] == [
        (1, "echo", "ok", "allow"),
        (2, "fail", "failed", "allow"),
        (3, "echo", "invalid_arguments", "allow"),
        (4, "change", "needs_confirmation", "confirm"),
        (5, "change", "denied", "deny"),
        (6, "wipe", "needs_approval", "dual_sign"),
        (7, "wipe", "ticket_refused", "dual_sign"),
    ]
    first = rows[0]
    assert (first.call_id, first.caller, first.persona, first.tool_class) == (
        ok.call_id,
        "ada",
        "operator",
        "safe",
    )
    assert first.args == {"n": 1} and len(first.args_digest) == 64 and first.redacted == ()
    assert first.result_size == len(b'{"n":1}')
    assert first.result_digest == hashlib.sha256(b'{"n":1}').hexdigest()
    assert first.duration > 0 and first.exit_code == 0 and first.plugin == "ongrid.gate"
    assert first.pid == os.getpid() and first.reason == "safe tools run for any persona"
    fail = rows[1]
    assert (fail.exit_code, fail.stderr_tail, fail.call_id) == (3, ("step 1", "disk full"), failed.call_id)
    assert "exited with status 3" in (fail.error or "")
    assert rows[2].args == {"n": "x"} and "invalid arguments" in (rows[2].error or "")
    assert "persona viewer is read-only" in rows[4].reason
    assert rows[5].ticket == rows[6].ticket == info.value.ticket.id
    assert "has 0 of its 2 approvals" in (rows[6].error or "")
    assert host.audit.verify().ok


def test_a_row_keeps_its_start_and_duration_to_the_microsecond(make_host: Any, root: Path) -> None:
    make_skill(root, "echo")
    host = make_host(root)
    before = time.time()
    result = host.call("echo", {})
    after = time.time()
    row = host.audit.entries()[0]
    assert before - 1e-6 <= row.time <= after and 0 < row.duration < 5
    assert round(row.time * 1e6) / 1e6 == row.time  # whole microseconds: a short, cheap text
    assert row.duration == result.duration == round(result.duration * 1e6) / 1e6
    assert host.audit.verify().ok


def test_an_executed_ticket_is_recorded_with_its_approvers(make_host: Any, root: Path) -> None:
    make_skill(root, "wipe", class_="dangerous")
    host = make_host(root)
    with pytest.raises(ApprovalRequired) as info:
        host.call("wipe", persona="admin", caller="alice")
    ticket = info.value.ticket.id
    host.approve(ticket, approver="bob")
    host.approve(ticket, approver="carol")
    result = host.call("wipe", persona="admin", caller="alice", ticket=ticket)
    last = host.audit.tail(1)[0]
    assert (last.outcome, last.ticket, last.approvers, last.call_id) == (
        "ok",
        ticket,
        ("bob", "carol"),
        result.call_id,
    )


def test_a_before_call_hook_that_aborts_still_leaves_a_row(
    make_host: Any, root: Path, tmp_path: Path
) -> None:
    class Veto:
        @hookimpl
        def ongrid_before_call(self, request: Any) -> None:
            raise RuntimeError("maintenance window")

    make_skill(root, "echo")
    host = make_host(root, plugins=(Veto(),))
    with pytest.raises(PluginFailed):
        host.call("echo")
    (row,) = host.audit.entries()
    assert row.outcome == "aborted"
    assert row.error.endswith("raised RuntimeError: maintenance window in ongrid_before_call")  # naming Veto
    assert host.audit.verify().inflight == ()


def test_threads_and_async_calls_all_get_their_rows(make_host: Any, root: Path) -> None:
    make_skill(root, "echo")
    host = make_host(root)
    threads = [
        threading.Thread(target=lambda: [host.call("echo", {"i": i}) for i in range(10)]) for _ in range(6)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    import asyncio

    async def many() -> None:
        await asyncio.gather(*(host.acall("echo", {"a": i}) for i in range(10)))

    asyncio.run(many())
    report = host.audit.verify()
    assert (report.ok, report.entries) == (True, 70)
    assert len({r.call_id for r in host.audit.entries()}) == 70


def test_rows_finished_while_a_write_waits_share_its_commit(tmp_path: Path) -> None:
    log = AuditLog(str(tmp_path / "audit.db"))
    log.recover()  # opens the connection
    store = log._store
    statements: list[str] = []
    assert store._conn is not None
    store._conn.set_trace_callback(statements.append)
    rows = [{"time": 1.0, "call_id": f"call-{i}", "tool": "echo", "outcome": "ok"} for i in range(2)]
    with store.lock:  # a write in progress: both calls finish meanwhile
        threads = _queued([threading.Thread(target=store.chain, args=(row,)) for row in rows], store.backlog)
    for t in threads:
        t.join()
    assert statements.count("COMMIT") == 1  # the second row rode on the first one's commit
    assert [entry.call_id for entry in log.entries()] == ["call-0", "call-1"]
    assert store.backlog == []
    assert log.verify().ok


def _queued(threads: list[threading.Thread], queue: list[Any]) -> list[threading.Thread]:
    """Start each thread in turn, each once the one before has put its entry in ``queue``."""
    for count, t in enumerate(threads, 1):
        t.start()
        deadline = time.monotonic() + 10
        while len(queue) < count and time.monotonic() < deadline:
            time.sleep(0.001)
        assert len(queue) == count
    return threads


def test_calls_starting_while_a_write_waits_share_its_commit(tmp_path: Path) -> None:
    log = AuditLog(str(tmp_path / "audit.db"))
    log.recover()  # opens the connection
    store = log._store
    statements: list[str] = []
    assert store._conn is not None
    store._conn.set_trace_callback(statements.append)
    columns = {"time": 1.0, "tool": "echo"}
    with store.lock:  # a write in progress: both calls start meanwhile
        starts = [threading.Thread(target=store.start, args=(f"call-{i}", columns)) for i in range(2)]
        threads = _queued(starts, store.starting)
    for t in threads:
        t.join()
    assert statements.count("COMMIT") == 1  # the second record rode on the first one's commit
    assert [call["call_id"] for call in log.verify().inflight] == ["call-0", "call-1"]
    assert store.starting == []


def test_a_start_that_cannot_be_written_is_withdrawn(tmp_path: Path) -> None:
    log = AuditLog(str(tmp_path / "audit.db"))
    log.recover()
    store = log._store
    assert store._conn is not None
    store._conn.execute(
        "CREATE TRIGGER refuse BEFORE INSERT ON inflight BEGIN SELECT RAISE(ABORT, 'no'); END"
    )
    with pytest.raises(UnreadableLog):  # what any write that SQLite refuses so raises
        store.start("call-0", {"time": 1.0, "tool": "echo"})
    assert store.starting == []  # not retried by the next write: its call was refused
    store._conn.execute("DROP TRIGGER refuse")
    store.start("call-1", {"time": 1.0, "tool": "echo"})
    assert [call["call_id"] for call in log.verify().inflight] == ["call-1"]


# ---------------------------------------------------------------- secrets


SECRET_SCHEMA = {
    "type": "object",
    "$defs": {"cred": {"type": "object", "properties": {"key": {"x-ongrid-secret": True}}}},
    "properties": {
        "user": {"type": "string"},
        "password": {"type": "string", "format": "password"},
        "token": {"type": "string", "writeOnly": True},
        "conn": {
            "type": "object",
            "properties": {"host": {"type": "string"}, "dsn": {"x-ongrid-secret": True}},
        },
        "keys": {"type": "array", "items": {"$ref": "#/$defs/cred"}},
        "pair": {"type": "array", "prefixItems": [{"type": "string"}, {"writeOnly": True}]},
        "env": {"type": "object", "additionalProperties": {"type": "string", "writeOnly": True}},
        "either": {"anyOf": [{"type": "integer"}, {"type": "string", "format": "password"}]},
        "vault": {"type": "object", "x-ongrid-secret": True},
    },
}
SECRET_ARGS = {
    "user": "ada",
    "password": "hunter2-pw",
    "token": "tok-XYZZY",
    "conn": {"host": "db1", "dsn": "postgres://ada:pw-in-dsn@db1"},
    "keys": [{"key": "key-one", "id": 1}, {"key": "key-two"}],
    "pair": ["visible", "pair-secret"],
    "env": {"API_KEY": "env-secret"},
    "either": "either-secret",
    "vault": {"anything": "vault-secret"},
}
SECRETS = [
    "hunter2-pw",
    "tok-XYZZY",
    "pw-in-dsn",
    "key-one",
    "key-two",
    "pair-secret",
    "env-secret",
    "either-secret",
    "vault-secret",
]


def test_redaction_follows_the_schema_into_nested_values() -> None:
    redacted, paths = redact(SECRET_SCHEMA, SECRET_ARGS)
    assert redacted == {
        "user": "ada",
        "password": REDACTED,
        "token": REDACTED,
        "conn": {"host": "db1", "dsn": REDACTED},
        "keys": [{"key": REDACTED, "id": 1}, {"key": REDACTED}],
        "pair": ["visible", REDACTED],
        "env": {"API_KEY": REDACTED},
        "either": REDACTED,
        "vault": REDACTED,
    }
    assert sorted(paths) == sorted(
        [
            "$.password",
            "$.token",
            "$.conn.dsn",
            "$.keys[0].key",
            "$.keys[1].key",
            "$.pair[1]",
            "$.env.API_KEY",
            "$.either",
            "$.vault",
        ]
    )
    assert SECRET_ARGS["password"] == "hunter2-pw"  # the caller's arguments are not touched


def test_no_secret_reaches_the_audit_log_or_the_ticket_database(
    make_host: Any, root: Path, tmp_path: Path
) -> None:
    make_skill(root, "login", schema=SECRET_SCHEMA, script="#!/bin/sh\necho '{\"done\": true}'\n")
    make_skill(root, "rotate", schema=SECRET_SCHEMA, class_="dangerous")
    host = make_host(root)
    host.call("login", SECRET_ARGS)
    with pytest.raises(ApprovalRequired) as info:
        host.call("rotate", SECRET_ARGS, persona="admin")
    assert info.value.ticket.args["password"] == REDACTED
    row = host.audit.entries()[0]
    assert row.args["conn"] == {"host": "db1", "dsn": REDACTED}
    assert row.args_digest == ""  # a digest of the full arguments could confirm a guessed secret
    assert "$.password" in row.redacted
    host.audit.close()
    state = tmp_path / ".ongrid-state"
    blob = b"".join(p.read_bytes() for p in state.rglob("*") if p.is_file())
    assert b"ada" in blob  # the files are readable as plain text: the check below means something
    leaked = [s for s in SECRETS if s.encode() in blob]
    assert not leaked


def test_secret_names_in_any_spelling_are_redacted_without_a_schema_that_marks_them(
    make_host: Any, root: Path
) -> None:
    # The audit log skips its walk over the arguments when their text cannot name a
    # secret: every spelling the walk knows must still get through that first look.
    make_skill(root, "plain", script="#!/bin/sh\necho '{}'\n")  # a schema with no secret in it
    host = make_host(root)
    keys = ["DB-Pass_Word", "\u017fecret", "api\u212aey", "X_AUTH_TOKEN", "Authorization", "private-key"]
    for key in keys:
        assert host.call("plain", {"nested": [{"deep": {key: "s3cr3t-value"}}]}).ok
    host.call("plain", {"passwords_in_a_value": "my password is not a key"})
    rows = host.audit.entries()
    assert [row.redacted for row in rows[:-1]] == [(f"$.nested[0].deep.{key}",) for key in keys]
    assert all("s3cr3t-value" not in json.dumps(row.args) for row in rows)
    assert rows[-1].redacted == () and rows[-1].args == {"passwords_in_a_value": "my password is not a key"}


# ---------------------------------------------------------------- the chain


@pytest.fixture
def chained(make_host: Any, root: Path) -> SkillHost:
    make_skill(root, "echo")
    host: SkillHost = make_host(root)
    for i in range(6):
        host.call("echo", {"i": i})
    assert host.audit.verify().ok
    host.audit.close()
    return host


def shift(tmp_path: Path, first: int) -> None:
    """Renumber rows ``first``.. one up (two steps: seq is unique at every moment)."""
    sql(tmp_path, "UPDATE entries SET seq = -(seq + 1) WHERE seq >= ?", first)
    sql(tmp_path, "UPDATE entries SET seq = -seq WHERE seq < 0")


def rehash(tmp_path: Path, seq: int, prev: str | None = None) -> str:
    """Recompute a row's hash after editing it, as a careful forger would."""
    with sqlite3.connect(db_path(tmp_path)) as conn:
        cols = [c[1] for c in conn.execute("PRAGMA table_info(entries)")][:-1]
        if prev is not None:
            conn.execute("UPDATE entries SET prev_hash = ? WHERE seq = ?", (prev, seq))
        row = conn.execute(f"SELECT {', '.join(cols)} FROM entries WHERE seq = ?", (seq,)).fetchone()
        digest = row_hash(row)
        conn.execute("UPDATE entries SET hash = ? WHERE seq = ?", (digest, seq))
        return digest


@pytest.mark.parametrize(
    ("tamper", "first_bad", "problem"),
    [
        ("UPDATE entries SET outcome = 'failed' WHERE seq = 3", 3, "row 3 was edited or moved"),
        ("UPDATE entries SET args = '{\"i\":99}' WHERE seq = 1", 1, "row 1 was edited or moved"),
        ("DELETE FROM entries WHERE seq = 4", 5, "row 5: row 4 is missing (deleted)"),
        ("DELETE FROM entries WHERE seq IN (2, 3)", 4, "row 4: row 2..3 is missing"),
        ("DELETE FROM entries WHERE seq = 1", 2, "row 2: row 1 is missing"),
        ("DELETE FROM entries WHERE seq = 6", 6, "rows 6..6 after the last row were deleted"),
        ("shift 4", 5, "row 5 was edited or moved"),
        ("UPDATE entries SET seq = -seq WHERE seq IN (2, 5)", 2, "row 2"),
    ],
    ids=["edit", "edit_args", "delete", "delete_two", "delete_first", "delete_last", "insert_gap", "reorder"],
)
def test_tampering_is_found_at_the_first_bad_row(
    chained: SkillHost, tmp_path: Path, tamper: str, first_bad: int, problem: str
) -> None:
    if tamper == "shift 4":  # leave a gap for an inserted row
        shift(tmp_path, 4)
    elif tamper.startswith("UPDATE entries SET seq = -seq"):  # swap rows 2 and 5
        sql(tmp_path, tamper)
        sql(tmp_path, "UPDATE entries SET seq = 5 WHERE seq = -2")
        sql(tmp_path, "UPDATE entries SET seq = 2 WHERE seq = -5")
    else:
        sql(tmp_path, tamper)
    report = chained.audit.verify()
    assert not report.ok
    assert report.first_bad == first_bad
    assert problem in report.problem


def test_an_inserted_row_is_found_even_with_a_correct_looking_hash(
    chained: SkillHost, tmp_path: Path
) -> None:
    shift(tmp_path, 4)
    # a plausible row 4 chained to row 3, as a forger who knows the format would build it
    row3 = sql(tmp_path, "SELECT * FROM entries WHERE seq = 3")[0]
    forged = list(row3)
    forged[0], forged[2] = 4, "forged-call"
    sql(tmp_path, f"INSERT INTO entries VALUES ({', '.join('?' * len(forged))})", *forged)
    rehash(tmp_path, 4, prev=row3[-1])
    report = chained.audit.verify()
    assert (report.ok, report.first_bad) == (False, 5)
    assert "row 5 was edited or moved" in report.problem  # the old row 4, renumbered, no longer matches


def test_an_edit_with_a_recomputed_hash_breaks_the_link_to_the_next_row(
    chained: SkillHost, tmp_path: Path
) -> None:
    sql(tmp_path, "UPDATE entries SET caller = 'someone-else' WHERE seq = 2")
    rehash(tmp_path, 2)
    report = chained.audit.verify()
    assert (report.ok, report.first_bad) == (False, 3)
    assert "row 3 does not follow row 2" in report.problem


def test_an_anchor_catches_a_history_rewritten_from_scratch(chained: SkillHost, tmp_path: Path) -> None:
    anchor = chained.audit.verify().head
    sql(tmp_path, "UPDATE entries SET caller = 'x' WHERE seq = 1")
    prev = rehash(tmp_path, 1)
    for seq in range(2, 7):
        prev = rehash(tmp_path, seq, prev=prev)
    sql(tmp_path, "UPDATE head SET hash = ?", prev)
    assert chained.audit.verify().ok  # consistent: only an outside anchor can tell
    report = chained.audit.verify(anchor=anchor)
    assert not report.ok and f"the anchor hash {anchor} is not in the chain" in report.problem


# ---------------------------------------------------------------- many processes


WRITER = r"""
import sys, threading
from ongrid_plugins import SkillHost
from ongrid_plugins.testing import isolated_settings
tmp, root, tag = sys.argv[1:4]
host = SkillHost(isolated_settings(tmp, root))
def work(t):
    for i in range(12):
        host.call("echo", {"p": tag, "t": t, "i": i})
threads = [threading.Thread(target=work, args=(t,)) for t in range(2)]
for t in threads: t.start()
for t in threads: t.join()
"""


def test_writers_in_many_processes_and_threads_lose_nothing(
    make_host: Any, root: Path, tmp_path: Path
) -> None:
    make_skill(root, "echo")
    procs = [subprocess.Popen([PY, "-c", WRITER, str(tmp_path), str(root), str(p)]) for p in range(4)]
    host = make_host(root)
    for i in range(12):
        host.call("echo", {"p": "main", "i": i})
    assert [p.wait(timeout=120) for p in procs] == [0, 0, 0, 0]
    report = host.audit.verify()
    assert (report.ok, report.entries, report.inflight) == (True, 4 * 2 * 12 + 12, ())
    rows = host.audit.entries()
    assert [r.seq for r in rows] == list(range(1, 109))
    assert len({r.call_id for r in rows}) == 108
    assert len({r.pid for r in rows}) == 5


# ---------------------------------------------------------------- a host killed mid-call

SLOW_SH = """#!/bin/sh
echo $$ > child.pid
sleep 30
echo '{}'
"""

KILLED_HOST = r"""
import sys
from ongrid_plugins import SkillHost
from ongrid_plugins.testing import isolated_settings
tmp, root = sys.argv[1:3]
SkillHost(isolated_settings(tmp, root)).call("slow", {"x": 1}, confirm=True)
"""


def test_a_host_killed_mid_call_leaves_a_consistent_log_and_the_call_is_chained_as_interrupted(
    make_host: Any, root: Path, tmp_path: Path
) -> None:
    make_skill(root, "slow", script=SLOW_SH, class_="mutating")
    make_skill(root, "echo")
    host = make_host(root)
    host.call("echo")
    victim = subprocess.Popen([PY, "-c", KILLED_HOST, str(tmp_path), str(root)])
    pid_file = root / "slow" / "child.pid"
    try:
        deadline = time.monotonic() + 30
        while not pid_file.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert pid_file.exists(), "the call never started"
        inflight = host.audit.verify().inflight
        assert [(r["tool"], r["pid"], r["alive"]) for r in inflight] == [("slow", victim.pid, True)]
        assert host.audit.recover() == 0  # a live call is left alone
        victim.send_signal(signal.SIGKILL)
        victim.wait(timeout=10)
    finally:
        victim.kill()
        time.sleep(0.05)
        if pid_file.exists():
            with contextlib.suppress(ProcessLookupError, ValueError):
                os.kill(int(pid_file.read_text()), signal.SIGKILL)
    assert sql(tmp_path, "PRAGMA integrity_check") == [("ok",)]
    assert [r["alive"] for r in host.audit.verify().inflight] == [False]
    assert host.audit.recover() == 1
    rows = host.audit.entries()
    assert [(r.tool, r.outcome) for r in rows] == [("echo", "ok"), ("slow", "interrupted")]
    assert rows[1].args == {"x": 1} and rows[1].pid == victim.pid
    assert f"host process {victim.pid} ended before the outcome" in (rows[1].error or "")
    report = host.audit.verify()
    assert (report.ok, report.entries, report.inflight) == (True, 2, ())
    host.call("echo")
    assert host.audit.verify().entries == 3


def _dead_pid() -> int:
    dead = subprocess.run([PY, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    return int(dead.stdout)


def _plant(db: Path, *calls: tuple[str, int, str, str]) -> None:
    """In-flight rows ``(call_id, pid, host, row text)`` in the log at ``db``, as a process leaves them."""
    conn = sqlite3.connect(db, isolation_level=None)
    conn.executescript(SCHEMA)
    for call_id, pid, host, text in calls:
        conn.execute("INSERT INTO inflight VALUES (?, ?, '1', ?, ?)", (call_id, pid, host, text))
    conn.close()


def test_a_new_process_recovers_interrupted_calls_when_it_opens_the_log(tmp_path: Path) -> None:
    dead, here = _dead_pid(), socket.gethostname()
    row = json.dumps({"time": 1.0, "tool": "slow", "persona": "viewer", "args": '{"a":1}'})
    _plant(
        tmp_path / "audit.db",
        ("c2", dead, here, row),
        ("c3", dead, here, "{}"),
        ("c9", dead, "elsewhere", row),
    )
    log = AuditLog(str(tmp_path / "audit.db"))
    assert [(e.call_id, e.outcome, e.tool) for e in log.entries()] == [
        ("c2", "interrupted", "slow"),
        ("c3", "interrupted", "?"),
    ]
    assert log.entries()[0].args == {"a": 1}
    assert log.recover() == 0
    report = log.verify()
    # another machine's calls are not ours to judge
    assert report.ok and [(r["call_id"], r["alive"]) for r in report.inflight] == [("c9", None)]


def test_an_in_flight_call_already_in_the_chain_is_not_chained_twice(tmp_path: Path) -> None:
    _plant(tmp_path / "audit.db", ("c1", _dead_pid(), socket.gethostname(), '{"tool": "slow", "time": 1.0}'))
    assert len(AuditLog(str(tmp_path / "audit.db")).entries()) == 1  # opening the log recovers
    # as if its row had been chained by a transaction that left the in-flight record behind
    _plant(tmp_path / "audit.db", ("c1", _dead_pid(), socket.gethostname(), '{"tool": "slow", "time": 1.0}'))
    log = AuditLog(str(tmp_path / "audit.db"))
    assert len(log.entries()) == 1 and log.verify().inflight == ()


HARD_EXIT = r"""
import os, sys
from ongrid_plugins import SkillHost
from ongrid_plugins.testing import isolated_settings
tmp, root = sys.argv[1:3]
host = SkillHost(isolated_settings(tmp, root))
result = host.call("echo", {"last": "words"})
print(result.call_id, flush=True)
os._exit(0)  # no atexit: nothing is left to run at exit
"""


def test_a_finished_call_whose_process_exits_at_once_is_chained_with_its_outcome(
    make_host: Any, root: Path, tmp_path: Path
) -> None:
    make_skill(root, "echo")
    out = subprocess.run([PY, "-c", HARD_EXIT, str(tmp_path), str(root)], capture_output=True, text=True)
    call_id = out.stdout.strip()
    log = make_host(root).audit
    rows = log.entries()  # chained before the call returned
    assert [(r.call_id, r.outcome, r.args) for r in rows] == [(call_id, "ok", {"last": "words"})]
    assert rows[0].result_size == len(b'{"last":"words"}')
    assert log.verify().inflight == ()


FORKS = r"""
import os, sys
from ongrid_plugins import SkillHost
from ongrid_plugins.testing import isolated_settings
tmp, root = sys.argv[1:3]
host = SkillHost(isolated_settings(tmp, root, sandbox="off"))  # the audit log's fork, not the runner's
host.call("echo", {"n": 1})
pid = os.fork()
if pid == 0:
    ok = host.call("echo", {"n": 2}).ok  # the child's own connection, its own pid in the row
    os._exit(0 if ok else 1)
_, status = os.waitpid(pid, 0)
print(os.waitstatus_to_exitcode(status), pid, flush=True)
print(host.call("echo", {"n": 3}).ok, flush=True)
"""


def test_a_forked_child_and_its_parent_both_keep_writing_one_chain(
    make_host: Any, root: Path, tmp_path: Path
) -> None:
    make_skill(root, "echo")
    out = subprocess.run(
        [PY, "-c", FORKS, str(tmp_path), str(root)], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    child, ok = out.stdout.splitlines()
    code, child_pid = child.split()
    assert code == "0" and ok == "True"
    log = make_host(root).audit
    rows = log.entries()
    assert [r.args["n"] for r in rows] == [1, 2, 3]
    assert rows[1].pid == int(child_pid) and rows[0].pid == rows[2].pid != rows[1].pid
    report = log.verify()
    assert (report.ok, report.inflight) == (True, ())


def test_reading_a_log_that_does_not_exist_creates_no_database(tmp_path: Path) -> None:
    log = AuditLog(str(tmp_path / "audit.db"))
    assert log.entries() == [] and log.verify().ok
    assert list(tmp_path.iterdir()) == []


def test_two_hosts_in_one_process_write_one_chain(make_host: Any, root: Path, tmp_path: Path) -> None:
    make_skill(root, "echo")
    one, two = make_host(root), make_host(root)
    for n in range(3):
        assert one.call("echo", {"n": n}).ok and two.call("echo", {"n": n}).ok
    report = one.audit.verify()
    assert (report.ok, report.entries, report.inflight) == (True, 6, ())


def test_a_log_that_breaks_refuses_risky_calls_then_catches_up_without_losing_rows(
    make_host: Any, root: Path, tmp_path: Path
) -> None:
    make_skill(root, "look")
    make_skill(root, "change", class_="mutating")
    host = make_host(root)
    host.call("look")
    assert host.audit.flush()
    db = db_path(tmp_path)
    moved = db.with_name("moved.db")
    db.rename(moved)
    db.mkdir()  # the database path is now unusable
    try:
        assert host.call("look", {"while": "broken"}).ok  # safe calls still run, their rows wait
        assert not host.audit.flush(timeout=5)
        with pytest.raises(AuditError, match="mutating calls are refused until it can"):
            host.call("change", confirm=True)
    finally:
        db.rmdir()
        moved.rename(db)
    deadline = time.monotonic() + 15
    while not host.audit.flush(timeout=0.5) and time.monotonic() < deadline:
        time.sleep(0.05)  # flush does not wait out a failing log; the writer retries on its own
    assert host.audit.flush()
    assert host.call("change", confirm=True).ok
    rows = host.audit.entries()
    assert [(r.tool, r.outcome) for r in rows] == [
        ("look", "ok"),
        ("look", "ok"),
        ("change", "aborted"),
        ("change", "ok"),
    ]
    assert host.audit.verify().ok


# ---------------------------------------------------------------- failing closed


def test_an_unwritable_log_blocks_risky_calls_loudly_but_not_safe_ones(
    make_host: Any, root: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    make_skill(root, "look")
    make_skill(root, "change", class_="mutating", script="#!/bin/sh\n: > ran\necho '{}'\n")
    (tmp_path / "not-a-dir").write_text("")
    host = make_host(root, state_dir=str(tmp_path / "not-a-dir" / "state"))
    with caplog.at_level(logging.ERROR, logger="ongrid_plugins.audit"):
        assert host.call("look").ok
        with pytest.raises(AuditError, match="mutating calls are refused until it can"):
            host.call("change", confirm=True)
    assert any("audit log: cannot record the call to change" in r.getMessage() for r in caplog.records)
    assert host.audit.write_failures >= 3
    assert not (root / "change" / "ran").exists()


def test_failing_open_is_a_setting(make_host: Any, root: Path, tmp_path: Path) -> None:
    make_skill(root, "change", class_="mutating")
    (tmp_path / "not-a-dir").write_text("")
    host = make_host(root, state_dir=str(tmp_path / "not-a-dir" / "state"), audit_fail_closed=False)
    assert host.call("change", confirm=True).ok
    from ongrid_plugins import Settings

    assert Settings.from_env({"ONGRID_AUDIT_FAIL_CLOSED": "0"}).audit_fail_closed is False


def test_the_audit_plugin_can_be_disabled_and_says_so(
    make_host: Any, root: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    make_skill(root, "echo")
    host = make_host(root, disable_plugins=("audit",))
    with caplog.at_level(logging.WARNING, logger="ongrid_plugins.audit"):
        assert host.call("echo").ok
    assert any(
        "disabled by ONGRID_DISABLE_PLUGINS; calls are not recorded" in r.getMessage() for r in caplog.records
    )
    assert {i.name: i.status for i in host.plugins()}["audit"] == "blocked"
    assert not db_path(tmp_path).exists()


def test_the_plugin_listing_shows_the_audit_log_with_its_hooks(make_host: Any, root: Path) -> None:
    infos = {i.name: i for i in make_host(root).plugins()}
    assert infos["audit"].status == "active" and infos["audit"].kind == "builtin"
    assert infos["audit"].hooks == ("ongrid_after_call", "ongrid_before_call")


# ---------------------------------------------------------------- CLI


def test_cli_audit_list_tail_export_and_verify(
    root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("ONGRID_STATE_DIR", str(tmp_path / ".ongrid-state"))
    make_skill(root, "echo")
    make_skill(root, "change", class_="mutating")
    assert cli(root, "run", "echo", '{"a": 1}').returncode == 0
    assert cli(root, "run", "change").returncode == 3
    assert cli(root, "run", "change", "--yes").returncode == 0
    table = cmd(capsys, root, "audit", "list").stdout.splitlines()
    assert table[0].split()[:6] == ["SEQ", "TIME", "TOOL", "PERSONA", "CALLER", "OUTCOME"]
    assert [line.split()[5] for line in table[1:]] == ["ok", "needs_confirmation", "ok"]
    listed = json.loads(cmd(capsys, root, "audit", "list", "--tool", "change", "--json").stdout)
    assert [i["outcome"] for i in listed["items"]] == ["needs_confirmation", "ok"]
    tail = json.loads(cmd(capsys, root, "audit", "tail", "-n", "1", "--json").stdout)
    assert [i["seq"] for i in tail["items"]] == [3]
    export = tmp_path / "audit.jsonl"
    assert cmd(capsys, root, "audit", "export", "-o", str(export)).returncode == 0
    lines = [json.loads(line) for line in export.read_text().splitlines()]
    assert [line["seq"] for line in lines] == [1, 2, 3] and lines[1]["prev_hash"] == lines[0]["hash"]
    document = json.loads(cmd(capsys, root, "audit", "export", "--json").stdout)
    assert document["verify"]["ok"] is True and len(document["entries"]) == 3
    good = cmd(capsys, root, "audit", "verify")
    assert good.returncode == 0 and good.stdout.startswith("audit log OK: 3 rows, head ")
    sql(tmp_path, "UPDATE entries SET persona = 'admin' WHERE seq = 2")
    bad = cmd(capsys, root, "audit", "verify")
    assert bad.returncode == 1
    assert "audit log BROKEN at row 2: row 2 was edited or moved" in bad.stdout
    assert json.loads(cmd(capsys, root, "audit", "verify", "--json").stdout)["first_bad"] == 2


def test_isolated_hosts_keep_their_audit_logs_apart(tmp_path: Path, root: Path) -> None:
    make_skill(root, "echo")
    one = SkillHost(isolated_settings(tmp_path / "one", root))
    two = SkillHost(isolated_settings(tmp_path / "two", root))
    one.call("echo")
    assert (len(one.audit.entries()), len(two.audit.entries())) == (1, 0)


# ---------------------------------------------------------------------- the CLI a new user meets


def test_verify_accepts_a_unique_prefix_of_a_head_and_asks_for_more_otherwise(
    root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("ONGRID_STATE_DIR", str(tmp_path / ".ongrid-state"))
    make_skill(root, "echo")
    assert cli(root, "run", "echo").returncode == 0
    head = json.loads(cmd(capsys, root, "audit", "verify", "--json").stdout)["head"]
    for anchor in (head, head[:8], head[:7].upper()):
        done = cmd(capsys, root, "audit", "verify", "--anchor", anchor)
        assert done.returncode == 0, done.stdout
    for malformed in (head[:6], "123", "zzzzzzzz", head + "0", ""):
        # a typo is a usage error (exit 2, on stderr), never reported as a broken log
        short = cmd(capsys, root, "audit", "verify", "--anchor", malformed)
        assert short.returncode == 2, (malformed, short.stdout, short.stderr)
        assert "BROKEN" not in short.stdout
        assert "give the full 64-hex-digit hash" in short.stderr and "at least 7" in short.stderr
    other = "0" * 8 if not head.startswith("0" * 8) else "f" * 8
    missing = cmd(capsys, root, "audit", "verify", "--anchor", other)
    assert missing.returncode == 1 and f"the anchor hash {other} is not in the chain" in missing.stdout


def test_an_ambiguous_anchor_prefix_is_refused(tmp_path: Path) -> None:
    from ongrid_plugins.audit.entries import _anchor_problem

    seen = frozenset({"abcdef01" + "0" * 56, "abcdef02" + "0" * 56})
    assert "matches 2 row hashes" in _anchor_problem("abcdef0", seen)
    assert _anchor_problem("abcdef01", seen) == ""


def test_list_refuses_an_unknown_outcome_naming_the_known_ones(
    root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("ONGRID_STATE_DIR", str(tmp_path / ".ongrid-state"))
    done = cmd(capsys, root, "audit", "list", "--outcome", "bogus")
    assert done.returncode == 2
    assert "invalid choice: 'bogus' (choose from 'ok', 'failed', 'timed_out'," in done.stderr
    assert "'needs_approval'" in done.stderr and "Outcome." not in done.stderr
    with pytest.raises(ConfigError, match="unknown outcome 'bogus'; use one of ok, failed"):
        AuditLog(str(tmp_path / "audit.db")).entries(outcome="bogus")


@pytest.mark.parametrize(
    "argv",
    [
        ("audit", "list"),
        ("audit", "tail"),
        ("audit", "verify"),
        ("audit", "export"),
        ("approvals", "list"),
        ("approvals", "show", "nope"),
        ("approvals", "reject", "nope"),
        ("list",),
    ],
)
def test_reading_commands_never_create_state_files(
    root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], argv: Any
) -> None:
    state = tmp_path / "fresh-state"
    monkeypatch.setenv("ONGRID_STATE_DIR", str(state))
    done = cmd(capsys, root, *argv)
    assert done.returncode in (0, 4), done.stderr  # 4: no such ticket
    assert not state.exists(), sorted(str(p) for p in state.rglob("*"))


def test_approvals_and_rejections_are_rows_of_the_chain(tmp_path: Path, root: Path) -> None:
    make_skill(root, "wipe", class_="dangerous")
    host = SkillHost(isolated_settings(tmp_path, root))
    tickets = []
    for _ in range(2):
        with pytest.raises(ApprovalRequired) as info:
            host.call("wipe", {"n": len(tickets)}, persona="admin", caller="alice")
        tickets.append(info.value.ticket)
    host.approve(tickets[0].id, approver="bob", note="looked at it")
    host.approve(tickets[0].id, approver="carol")
    host.reject(tickets[1].id, approver="dave", note="not today")
    rows = [e for e in host.audit.entries() if e.outcome in ("approval", "rejection")]
    assert [(e.outcome, e.caller, e.ticket, e.reason, e.tool) for e in rows] == [
        ("approval", "bob", tickets[0].id, "looked at it", "wipe"),
        ("approval", "carol", tickets[0].id, "", "wipe"),
        ("rejection", "dave", tickets[1].id, "not today", "wipe"),
    ]
    assert rows[1].approvers == ("bob", "carol")
    assert host.audit.verify().ok
    # Who rejected is now tamper-evident: editing it breaks the chain.
    sql(tmp_path, f"UPDATE entries SET caller = 'mallory' WHERE seq = {rows[2].seq}")
    report = host.audit.verify()
    assert not report.ok and report.first_bad == rows[2].seq


def test_refused_approval_attempts_are_rows_of_the_chain_and_do_not_count_as_approvals(
    tmp_path: Path, root: Path
) -> None:
    make_skill(root, "wipe", class_="dangerous", script="#!/bin/sh\necho '{}'\n")
    host = SkillHost(isolated_settings(tmp_path, root))
    with pytest.raises(ApprovalRequired) as info:
        host.call("wipe", {"n": 1}, persona="admin", caller="alice")
    ticket = info.value.ticket
    attempts = [
        ("alice", "own_ticket"),
        ("ALICE", "own_ticket"),
        ("bob", None),
        ("Bob", "duplicate_approver"),
    ]
    attempts += [("carol", None), ("dave", "already_approved")]
    for approver, reason in attempts:
        if reason is None:
            host.approve(ticket.id, approver=approver)
            continue
        with pytest.raises(ApprovalError) as refused:
            host.approve(ticket.id, approver=approver, note="let me")
        assert refused.value.reason == reason
    with pytest.raises(ApprovalError):
        host.approve("0000000000000000", approver="bob")  # no ticket: nothing to record
    rows = [e for e in host.audit.entries() if e.ticket == ticket.id and e.outcome != "needs_approval"]
    assert [(e.outcome, e.caller) for e in rows] == [
        ("approval_refused", "alice"),
        ("approval_refused", "ALICE"),
        ("approval", "bob"),
        ("approval_refused", "Bob"),
        ("approval", "carol"),
        ("approval_refused", "dave"),
    ]
    assert "requested ticket" in (rows[0].error or "") and rows[0].reason == "let me"
    assert "already has its 2 approvals" in (rows[5].error or "")
    assert host.audit.verify().ok
    assert host.call("wipe", {"n": 1}, persona="admin", caller="alice", ticket=ticket.id).ok


def test_a_forked_child_records_its_calls_under_its_own_pid_and_journal(make_host: Any, root: Path) -> None:
    # The audit log keeps this process's pid instead of asking the kernel on every call:
    # a fork must still make the child's rows and journal its own.
    make_skill(root, "echo", script="#!/bin/sh\necho '{}'\n")
    host = make_host(root)
    assert host.call("echo").ok
    assert host.audit.flush()
    pid = os.fork()
    if pid == 0:  # the child: one call, its row, then out without running pytest's exit
        code = 1
        try:
            ok = host.call("echo").ok and host.audit.flush()
            last = host.audit.entries()[-1]
            code = 0 if ok and last.pid == os.getpid() else 2
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    rows = host.audit.entries()
    assert [row.pid for row in rows] == [os.getpid(), pid]
    assert host.audit.verify().ok


def test_a_broken_log_names_its_row_once() -> None:
    from types import SimpleNamespace

    from ongrid_plugins.commands.audit import _broken

    missing = SimpleNamespace(first_bad=4, problem="row 4: row 3 is missing")
    assert _broken(missing) == "audit log BROKEN at row 4: row 3 is missing"
    edited = SimpleNamespace(first_bad=2, problem="row 2 was edited or moved")
    assert _broken(edited) == "audit log BROKEN at row 2: row 2 was edited or moved"
    headless = SimpleNamespace(first_bad=None, problem="the head is gone")
    assert _broken(headless) == "audit log BROKEN: the head is gone"


# ---------------------------------------------------------------------- counts and row numbers

HUGE = "9" * 23  # past SQLite's integers: a traceback (IntegrityError, OverflowError) before the check


def _one_row(root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """One audit row (an `echo` call) in the state dir the CLI then reads."""
    make_skill(root, "echo")
    host = SkillHost(isolated_settings(tmp_path, root))
    host.call("echo")
    host.audit.close()
    monkeypatch.setenv("ONGRID_STATE_DIR", host.settings.state_dir)


@pytest.mark.parametrize(
    ("argv", "flag", "what"),
    [
        (("list", "--limit", HUGE), "--limit", "a whole number from 1 to 9223372036854775807"),
        (("list", "--limit", "0"), "--limit", "a whole number from 1 to 9223372036854775807"),
        (("list", "--limit", "-1"), "--limit", "a whole number from 1 to 9223372036854775807"),
        (("tail", "-n", HUGE), "-n", "a whole number from 1 to 9223372036854775807"),
        (("tail", "-n", "-2"), "-n", "a whole number from 1 to 9223372036854775807"),
        (("tail", "-n", "0"), "-n", "a whole number from 1 to 9223372036854775807"),
        (("list", "--since", HUGE), "--since", "a row number from 0 to 9223372036854775807"),
        (("list", "--since", "-1"), "--since", "a row number from 0 to 9223372036854775807"),
    ],
)
def test_a_count_or_row_number_out_of_range_is_a_usage_error(
    root: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    argv: tuple[str, ...],
    flag: str,
    what: str,
) -> None:
    _one_row(root, tmp_path, monkeypatch)
    done = cmd(capsys, root, "audit", *argv)
    assert (done.returncode, done.stdout) == (2, "")
    assert f"error: argument {flag}: must be {what} (got '{argv[-1]}')" in done.stderr
    assert "Traceback" not in done.stderr and "no audit rows" not in done.stdout


def test_the_largest_count_and_row_number_are_accepted(
    root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _one_row(root, tmp_path, monkeypatch)
    top = str(2**63 - 1)
    listed = json.loads(cmd(capsys, root, "audit", "list", "--limit", top, "--json").stdout)
    assert [item["seq"] for item in listed["items"]] == [1]
    assert json.loads(cmd(capsys, root, "audit", "tail", "-n", top, "--json").stdout)["total"] == 1
    after = cmd(capsys, root, "audit", "list", "--since", top, "--json")
    assert (after.returncode, json.loads(after.stdout)["total"]) == (0, 0)


@pytest.mark.parametrize("key", ["99", HUGE, "nocallid"])
def test_show_of_a_missing_row_is_an_error_with_the_not_found_exit_code(
    root: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    key: str,
) -> None:
    _one_row(root, tmp_path, monkeypatch)
    done = cmd(capsys, root, "audit", "show", key)
    assert (done.returncode, done.stdout) == (4, "")
    expected = f"ERROR: no audit row '{key}': give a SEQ from `ongrid-skills audit list` or a call id\n"
    assert done.stderr == expected
    assert cmd(capsys, root, "audit", "show", "1").returncode == 0


def test_audit_export_refuses_an_empty_or_unwritable_output(
    root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("ONGRID_STATE_DIR", str(tmp_path / ".ongrid-state"))
    empty = cmd(capsys, root, "audit", "export", "-o", "")
    assert (empty.returncode, empty.stdout) == (2, "")
    refusal = "argument --output/-o: must not be empty: give a file name, or leave -o out for stdout"
    assert refusal in empty.stderr
    folder = cmd(capsys, root, "audit", "export", "-o", str(tmp_path))
    assert (folder.returncode, folder.stdout) == (2, "")
    assert folder.stderr == (
        f"ERROR: cannot write {tmp_path} (-o): Is a directory; "
        "give -o a file in a folder you can write to, on a disk with room\n"
    )


def test_a_json_column_edited_into_junk_is_listed_as_its_text_and_verify_names_the_row(
    chained: SkillHost, tmp_path: Path
) -> None:
    """Listing and showing a tampered log is how its reader investigates: it must not fail."""
    sql(tmp_path, "UPDATE entries SET args = '{bad', stderr_tail = 'oops', remote = '[' WHERE seq = 2")
    rows = {e.seq: e for e in chained.audit.entries()}
    assert (rows[2].args, rows[2].stderr_tail, rows[2].remote) == ("{bad", ("oops",), "[")
    report = chained.audit.verify()
    assert (report.ok, report.first_bad) == (False, 2)
    env = {**os.environ, "ONGRID_STATE_DIR": chained.settings.state_dir}
    for argv in (["audit", "list"], ["audit", "show", "2"]):
        shown = subprocess.run([PY, "-m", "ongrid_plugins", *argv], capture_output=True, text=True, env=env)
        assert shown.returncode == 0, shown.stderr
        assert "unreadable remote record '['" in shown.stdout


@pytest.mark.parametrize(
    "shift",
    [
        "remote = skill_digest, skill_digest = NULL",
        "remote = skill_digest, skill_digest = sandbox, sandbox = NULL",
    ],
)
def test_a_value_moved_into_another_later_column_is_found(
    chained: SkillHost, tmp_path: Path, shift: str
) -> None:
    """The hash leaves NULL later columns out, so a value moved into an empty one hashes the
    same; each later column must hold its own kind of value."""
    rows = sql(tmp_path, "SELECT seq, sandbox, skill_digest, remote FROM entries ORDER BY seq")
    seq = next(r[0] for r in rows if r[1] is not None and r[2] is not None and r[3] is None)
    sql(tmp_path, f"UPDATE entries SET {shift} WHERE seq = ?", seq)
    report = chained.audit.verify()
    assert (report.ok, report.first_bad) == (False, seq)
    assert f"row {seq} was edited: its" in report.problem


def test_a_ticket_passed_with_a_call_that_needs_none_is_not_written_into_its_row(
    tmp_path: Path, root: Path
) -> None:
    make_skill(root, "wipe", class_="dangerous", script="#!/bin/sh\necho '{}'\n")
    make_skill(root, "peek", script="#!/bin/sh\necho '{}'\n")
    make_skill(root, "restart", class_="mutating", script="#!/bin/sh\necho '{}'\n")
    host = SkillHost(isolated_settings(tmp_path, root))
    with pytest.raises(ApprovalRequired) as info:
        host.call("wipe", {}, persona="admin", caller="ann")
    ticket = info.value.ticket.id
    assert host.call("peek", {}, persona="viewer", caller="vic", ticket=ticket).ok
    assert host.call("restart", {}, persona="operator", caller="vic", confirm=True, ticket="made-up").ok
    with pytest.raises(PermissionDenied):
        host.call("wipe", {}, persona="viewer", caller="vic", ticket=ticket)
    rows = {e.tool: e for e in host.audit.entries() if e.caller == "vic"}
    assert [(tool, row.outcome, row.ticket) for tool, row in sorted(rows.items())] == [
        ("peek", "ok", None),
        ("restart", "ok", None),
        ("wipe", "denied", None),
    ]
    assert host.ticket(ticket).status == "pending"


# ---------------------------------------------------------------- the recorded head


def test_record_head_never_writes_through_a_link_planted_at_a_temporary_name(
    chained: SkillHost, tmp_path: Path
) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    head = Path(chained.audit.head_path)
    for name in (f"{head.name}.tmp-{os.getpid()}", f"{head.name}.tmp"):  # the old name was predictable
        (head.parent / name).symlink_to(victim)

    report = chained.audit.record_head()

    assert report.ok and victim.read_text() == "keep me"
    assert json.loads(head.read_text())["hash"] == report.head
    assert not head.is_symlink() and (head.stat().st_mode & 0o777) == 0o600
    leftovers = {p.name for p in head.parent.iterdir() if p.name.startswith(head.name)}
    assert leftovers == {head.name, f"{head.name}.tmp-{os.getpid()}", f"{head.name}.tmp"}


def test_a_recorded_head_that_is_a_fifo_is_reported_not_waited_for(chained: SkillHost) -> None:
    os.mkfifo(chained.audit.head_path)
    reports: list[Any] = []
    reader = threading.Thread(target=lambda: reports.append(chained.audit.verify()), daemon=True)
    reader.start()
    reader.join(10.0)

    assert reports, "verify waited on the FIFO"
    assert not reports[0].ok and "unreadable head file" in reports[0].problem


def test_record_head_on_a_folder_it_cannot_write_is_an_audit_error_naming_it(
    chained: SkillHost, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(*_args: Any, **_kwargs: Any) -> Any:
        raise OSError(30, "Read-only file system")

    monkeypatch.setattr("tempfile.mkstemp", refuse)
    with pytest.raises(AuditError) as caught:
        chained.audit.record_head()

    message = str(caught.value)
    assert chained.audit.head_path in message and "Read-only file system" in message
    assert not os.path.exists(chained.audit.head_path)


# ---------------------------------------------------------------- what the inflight table may hold


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ('{"tool": "x", "time": 1.0, "args": {"a": 1}}', "its args is a dict, not a str"),
        ('{"tool": "x", "time": 1.0, "frobs": 1}', "no row has a column 'frobs'"),
        ('{"tool": {"a": 1}, "time": 1.0}', "its tool is a dict"),
        ('{"tool": "x", "time": 1.0, "call_id": "c2"}', "its row is of another call"),
        ('{"tool": "wipe", "time": 1.0, "outcome": "approval"}', "no row has a column 'outcome'"),
        ("[1, 2]", "it is not a JSON object"),
    ],
)
def test_an_in_flight_row_no_process_writes_stops_recovery_naming_the_call_and_the_fix(
    tmp_path: Path, text: str, problem: str
) -> None:
    db = db_path(tmp_path)
    db.parent.mkdir()
    _plant(db, ("c0", _dead_pid(), socket.gethostname(), '{"tool": "ok", "time": 1.0}'))
    _plant(db, ("c1", _dead_pid(), socket.gethostname(), text))
    log = AuditLog(str(db))

    with pytest.raises(AuditError) as caught:
        log.verify()

    message = str(caught.value)
    assert "'c1'" in message and problem in message and "Delete it from the inflight table" in message
    assert sql(tmp_path, "SELECT count(*) FROM entries") == [(0,)]  # nothing recovered, nothing dropped
    assert sql(tmp_path, "SELECT count(*) FROM inflight") == [(2,)]
    sql(tmp_path, "DELETE FROM inflight WHERE call_id = 'c1'")
    assert log.verify().ok and [e.call_id for e in log.entries()] == ["c0"]


def test_a_damaged_in_flight_row_refuses_risky_calls_naming_it_and_cli_verify_prints_no_traceback(
    root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    state = tmp_path / ".ongrid-state"
    state.mkdir()
    monkeypatch.setenv("ONGRID_STATE_DIR", str(state))
    make_skill(root, "change", class_="mutating")
    _plant(state / "audit.db", ("abc", _dead_pid(), socket.gethostname(), '{"tool":"x","args":{"a":1}}'))

    verify = cli(root, "audit", "verify")
    run = cli(root, "run", "change", "{}", "--yes")

    assert verify.returncode == 3 and "Traceback" not in verify.stderr
    assert "ERROR: the in-flight call 'abc' of the audit log cannot be recovered" in verify.stderr
    assert run.returncode == 3 and "'abc'" in run.stderr and "Delete it" in run.stderr


# ---------------------------------------------------------------- a damaged audit.db


def _damage_page(db: Path, page: int) -> None:
    with sqlite3.connect(db) as conn:
        size = conn.execute("PRAGMA page_size").fetchone()[0]
    assert page > 1  # page 1 holds the file header
    data = bytearray(db.read_bytes())
    data[(page - 1) * size : page * size] = (bytes(range(7, 256, 3)) * size)[:size]
    db.write_bytes(bytes(data))


@pytest.fixture
def checkpointed(chained: SkillHost, tmp_path: Path) -> Path:
    """The log of ``chained``, every row in ``audit.db`` itself (no WAL)."""
    db = db_path(tmp_path)
    with sqlite3.connect(db) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return db


def test_verify_runs_sqlites_check_and_does_not_say_ok_about_a_damaged_index(
    chained: SkillHost, checkpointed: Path
) -> None:
    [(page,)] = sql(
        checkpointed.parent.parent, "SELECT rootpage FROM sqlite_master WHERE name = 'entries_call_id'"
    )
    _damage_page(checkpointed, page)

    report = AuditLog(str(checkpointed)).verify()

    assert not report.ok
    assert f"the audit log {checkpointed} is damaged" in report.problem
    assert "restore it from a copy" in report.problem


@pytest.mark.parametrize("how", ["table page", "folder", "dev-null"])
def test_a_damaged_or_unopenable_audit_db_is_an_error_naming_it_not_a_traceback(
    chained: SkillHost, checkpointed: Path, root: Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    if how == "table page":
        [(page,)] = sql(
            checkpointed.parent.parent, "SELECT rootpage FROM sqlite_master WHERE name = 'entries'"
        )
        _damage_page(checkpointed, page)
    else:
        for path in checkpointed.parent.glob("audit.db*"):
            path.unlink()
        if how == "folder":
            checkpointed.mkdir()
        else:
            checkpointed.symlink_to("/dev/null")
    monkeypatch.setenv("ONGRID_STATE_DIR", str(checkpointed.parent))

    verify, listing = cli(root, "audit", "verify"), cli(root, "audit", "list")

    assert verify.returncode == 1 and "Traceback" not in verify.stderr
    assert f"the audit log {checkpointed} is damaged" in verify.stdout
    assert listing.returncode == 3 and "Traceback" not in listing.stderr
    assert f"ERROR: the audit log {checkpointed} cannot be read" in listing.stderr


def test_a_cli_command_that_wrote_rows_leaves_them_in_audit_db_itself(
    root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import shutil

    state = tmp_path / ".ongrid-state"
    monkeypatch.setenv("ONGRID_STATE_DIR", str(state))
    make_skill(root, "echo")
    for i in range(3):
        assert cli(root, "run", "echo", json.dumps({"i": i})).returncode == 0
    copy = tmp_path / "backup"
    copy.mkdir()
    shutil.copy(state / "audit.db", copy / "audit.db")  # a backup that copies the file alone

    with sqlite3.connect(copy / "audit.db") as conn:
        assert conn.execute("SELECT count(*) FROM entries").fetchone() == (3,)
