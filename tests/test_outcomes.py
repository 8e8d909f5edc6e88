"""Statuses are enums whose members are the strings the audit log and ticket store always held."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

from ongrid_plugins.audit import OUTCOMES
from ongrid_plugins.audit.chain import COLUMNS, SCHEMA, append, row_hash
from ongrid_plugins.gate.tickets import STATUSES, TicketStatus
from ongrid_plugins.models import CallResult, Outcome, canonical_json

PACKAGE = Path(__file__).resolve().parent.parent / "ongrid_plugins"

#: The outcome strings stored before the enum, in order: a stored row must never change.
STORED_OUTCOMES = [
    "ok",
    "failed",
    "timed_out",
    "invalid_arguments",
    "denied",
    "needs_confirmation",
    "needs_approval",
    "ticket_refused",
    "unavailable",
    "aborted",
    "cancelled",
    "interrupted",
    "approval",
    "rejection",
    "claim",
    "approval_refused",
]


def test_the_outcome_members_are_the_stored_strings() -> None:
    assert [member.value for member in Outcome] == STORED_OUTCOMES
    assert list(OUTCOMES) == STORED_OUTCOMES
    assert STATUSES == ("pending", "approved", "rejected", "executed", "expired")


def test_a_member_hashes_and_encodes_exactly_as_its_string() -> None:
    row = [None] * len(COLUMNS)
    for member in Outcome:
        row[COLUMNS.index("outcome")] = member
        as_member = row_hash(row)
        row[COLUMNS.index("outcome")] = member.value
        assert as_member == row_hash(row)
        assert canonical_json({"outcome": member}) == f'{{"outcome":"{member.value}"}}'
        assert f"{member}" == str(member) == member.value


def test_a_member_is_stored_as_plain_text_and_found_by_its_string(tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / "audit.db")
    conn.executescript(SCHEMA)
    with conn:
        append(conn, {"time": 1.0, "call_id": "c1", "tool": "t", "outcome": Outcome.INTERRUPTED})
    stored = conn.execute("SELECT typeof(outcome), outcome FROM entries").fetchall()
    assert stored == [("text", "interrupted")]
    assert conn.execute("SELECT count(*) FROM entries WHERE outcome = ?", ("interrupted",)).fetchone() == (1,)
    ticket = sqlite3.connect(":memory:")
    assert ticket.execute("SELECT ?", (TicketStatus.EXECUTED,)).fetchone() == ("executed",)


def test_a_result_derives_its_outcome_as_a_member() -> None:
    assert CallResult("t", True).outcome is Outcome.OK
    assert CallResult("t", False, timed_out=True).outcome is Outcome.TIMED_OUT
    assert CallResult("t", False).outcome is Outcome.FAILED
    assert CallResult("t", False, status="denied").outcome == Outcome.DENIED


def test_no_status_string_literal_is_left_in_the_audit_and_gate_code() -> None:
    words = "|".join([*STORED_OUTCOMES, *STATUSES])
    compared = r"(==|!=|\bin\b|outcome=|status=|SET status = |status IN \()"
    literal = re.compile(rf"""{compared}\s*['"]({words})['"]""")
    sql_literal = re.compile(rf"""['"][^'"]*\b(outcome|status)\s*(=|IN)\s*\(?'({words})'""")
    found = [
        f"{path.relative_to(PACKAGE)}:{number}: {line.strip()}"
        for folder in ("audit", "gate")
        for path in sorted((PACKAGE / folder).rglob("*.py"))
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if literal.search(line) or sql_literal.search(line)
    ]
    assert found == []
