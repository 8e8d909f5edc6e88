"""The audit row serialised once: the texts the call path makes are the bytes the chain hashes.

The call path serialises a row's values once, for the journal's lines, and the writer
thread hashes the joined texts instead of serialising the row again; these tests pin
that both give the same rows and hashes, that a journal (an older version's too) still
recovers whole, and that the batches go in by chunks exactly as row by row.
"""

from __future__ import annotations

import json
import math
import os
import socket
import sqlite3
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest

from ongrid_plugins import CallResult, SkillHost
from ongrid_plugins.audit import AuditLog, chain
from ongrid_plugins.audit.chain import (
    COLUMNS,
    SCHEMA,
    Prepared,
    append,
    append_many,
    append_prepared,
    canonical,
    walk,
)
from ongrid_plugins.audit.journal import END_COLUMNS, START_COLUMNS, _write_all, _write_all_python
from ongrid_plugins.audit.rows import finish_row, start_row
from ongrid_plugins.models import CallRequest, Decision, Outcome, RemoteRun, Verdict, canonical_json
from ongrid_plugins.testing import isolated_settings, make_skill

SECRET_SCHEMA = {
    "type": "object",
    "properties": {"q": {"type": "string"}, "api_key": {"type": "string", "writeOnly": True}},
}


class Profile:
    """A confinement profile as the audit log sees one: something with ``to_dict``."""

    def __init__(self, data: dict[str, Any]) -> None:
        self.data = data

    def to_dict(self) -> dict[str, Any]:
        return self.data


def _requests(tmp_path: Path) -> Iterator[tuple[CallRequest, CallResult]]:
    root = tmp_path / "skills"
    make_skill(root, "plain")
    make_skill(root, "keyed", manifest={"name": "keyed", "description": "d", "entry": "run.sh"})
    host = SkillHost(isolated_settings(tmp_path, root))
    plain = host.get("plain")
    keyed = attrs.evolve(host.get("keyed"), schema=SECRET_SCHEMA, digest="")
    persona = host.persona("operator")
    profile = Profile({"confined": True, "hidden": ['/tmp/"quoted"/dossier-é', "/root/.ssh"], "limits": {}})
    ok = Decision(Verdict.ALLOW, "safe tools run for any persona")

    def request(tool: Any, args: dict[str, Any], **more: Any) -> CallRequest:
        text = canonical_json(args)
        return CallRequest(tool, args, persona, uuid.uuid4().hex, f"{len(text):064x}", text, **more)

    yield request(plain, {"n": 1}), CallResult("plain", True, {"ok": True}, duration=0.001, decision=ok)
    yield (
        request(
            plain, {"text": 'é "quoted"\n\u2028 ☃', "list": [1, 2.5, None]}, sandbox=profile, caller="ana"
        ),
        CallResult(
            "plain",
            False,
            error='exit 3: "disk" full\nagain é',
            exit_code=3,
            stderr_tail=("step 1", 'disk "full" é'),
            status=Outcome.FAILED,
            decision=ok,
        ),
    )
    yield (
        request(keyed, {"q": "x", "api_key": "hunter2"}, sandbox=profile),
        CallResult("keyed", True, [1, "two", {"b": 1, "a": 2}], duration=2.5, decision=ok),
    )
    yield (
        request(plain, {}, ticket="t-1", approvers=("bob", "carol"), sandbox=profile),
        CallResult(
            "plain",
            True,
            None,
            signal=9,
            remote=RemoteRun("q", "task-1", "worker é", "w" * 64),
            decision=Decision(Verdict.DUAL_SIGN, "two people", "ongrid.gate"),
        ),
    )
    yield request(plain, {"n": 2}), CallResult("plain", False, error="refused", status=Outcome.DENIED)


def _chained(path: Path, rows: list[Prepared]) -> list[Any]:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.executescript(SCHEMA)
    conn.execute("BEGIN")
    append_prepared(conn, rows, b"k" * 32)
    conn.commit()
    tables = [conn.execute(f"SELECT * FROM {t} ORDER BY 1").fetchall() for t in ("entries", "head", "macs")]
    assert walk(iter(conn.execute(f"SELECT {', '.join(COLUMNS)}, hash FROM entries ORDER BY seq"))).ok
    conn.close()
    return tables


def test_rows_hashed_from_their_call_path_texts_are_the_rows_hashed_from_their_values(tmp_path: Path) -> None:
    prepared: list[Prepared] = []
    for request, result in _requests(tmp_path):
        start = start_row(request, 1796152471.9257107)
        (values, middle), end = finish_row(start, request, result, result.duration or 0.25)
        assert middle is not None  # every value has canonical JSON: the writer serialises nothing
        prepared.append((values, middle))
        # the journal's two lines hold the same values, by column
        journaled = {**dict(zip(START_COLUMNS, json.loads(start.line), strict=True))}
        journaled.update(zip(END_COLUMNS, json.loads(end), strict=True))
        assert journaled == dict(zip(COLUMNS[1:-1], values, strict=True))
    texts = _chained(tmp_path / "texts.db", prepared)
    values_only = _chained(tmp_path / "values.db", [(values, None) for values, _middle in prepared])
    assert texts == values_only
    entries = texts[0]
    assert [row[COLUMNS.index("remote")] is None for row in entries] == [True, True, True, False, True]
    assert entries[0][COLUMNS.index("sandbox")] is None and "hunter2" not in repr(entries)


def test_a_value_without_canonical_json_leaves_the_hashing_to_the_writer(tmp_path: Path) -> None:
    request, result = next(_requests(tmp_path))
    start = start_row(request, 1.0)
    (_values, middle), end = finish_row(start, request, result, float("nan"))
    assert middle is None  # the writer serialises (and refuses) it as it always did
    assert math.isnan(json.loads(end)[END_COLUMNS.index("duration")])  # the journal line still reads back


@pytest.mark.parametrize("bound", ["nan", "none"])
def test_a_none_is_stored_as_null_whichever_way_it_is_bound(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, bound: str
) -> None:
    # A None is bound as a NaN where SQLite stores that as NULL (cheaper to bind), else as None.
    monkeypatch.setattr(chain, "_NULL", float("nan") if bound == "nan" else None)
    prepared = []
    for request, result in _requests(tmp_path):
        (values, middle), _end = finish_row(start_row(request, 1.5), request, result, 0.25)
        prepared.append((values, middle))
    entries = _chained(tmp_path / "nulls.db", prepared)[0]  # the chain verifies
    expected = [[v is None for v in values] for values, _middle in prepared]
    assert [[v is None for v in row[1:-2]] for row in entries] == expected  # seq, values, prev_hash, hash
    assert sum(map(sum, expected)) >= 15  # error, signal, ticket, remote...: many columns had None
    assert not any(isinstance(v, float) and math.isnan(v) for row in entries for v in row)
    conn = sqlite3.connect(tmp_path / "nulls.db")
    kinds = conn.execute("SELECT typeof(error), typeof(signal), typeof(ticket) FROM entries WHERE seq = 1")
    assert kinds.fetchone() == ("null", "null", "null")
    conn.close()


def test_the_writer_asks_sqlite_once_whether_a_bound_nan_is_stored_as_null(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    class Answers:
        def __init__(self, answer: int) -> None:
            self.answer = answer

        def execute(self, sql: str, params: tuple[Any, ...]) -> Any:
            assert sql == "SELECT ? IS NULL" and math.isnan(params[0])
            return self

        def fetchone(self) -> tuple[int]:
            return (self.answer,)

    monkeypatch.setattr(chain, "_NULL", chain._NULL)  # put back whatever the questions leave
    assert chain._null(Answers(0)) is None and chain._NULL is None  # kept: None is bound as None
    null = chain._null(sqlite3.connect(":memory:"))  # this machine's SQLite
    assert isinstance(null, float) and math.isnan(null) and chain._NULL is null


@pytest.mark.parametrize("count", [1, 31, 32, 33, 70])
def test_a_batch_goes_in_by_chunks_exactly_as_row_by_row(tmp_path: Path, count: int) -> None:
    rows = [
        {"time": float(i), "call_id": f"c{i}", "tool": "t", "args": "{}", "remote": None}
        for i in range(count)
    ]
    chained = []
    for name in ("one", "batch"):
        conn = sqlite3.connect(tmp_path / f"{name}.db", isolation_level=None)
        conn.executescript(SCHEMA)
        conn.execute("BEGIN")
        if name == "one":
            for row in rows:
                append(conn, row, b"k" * 32)
        else:
            assert append_many(conn, rows, b"k" * 32) == count
        conn.commit()
        chained.append(
            [conn.execute(f"SELECT * FROM {t} ORDER BY 1").fetchall() for t in ("entries", "head", "macs")]
        )
        conn.close()
    assert chained[0] == chained[1] and len(chained[0][0]) == len(chained[0][2]) == count


def test_the_fast_encoder_writes_what_canonical_json_writes() -> None:
    values: list[Any] = [
        {"z": [1, {"y": None, "x": True}], "a": 'é\u2028"\\\n', "m": -0.0},
        [1.1, 1e300, 2**80, -(2**63), "", Outcome.OK, Verdict.ALLOW],
        "only a string ☃",
        12,
        None,
    ]
    for value in values:
        assert canonical(value) == canonical_json(value)
    for bad, error in ((float("nan"), ValueError), (object(), TypeError), ({1j: 1}, TypeError)):
        with pytest.raises(error):
            canonical([bad])


@pytest.mark.parametrize("write_all", [_write_all, _write_all_python], ids=["in-use", "python"])
def test_a_journal_line_that_cannot_be_written_raises_the_os_error(tmp_path: Path, write_all: Any) -> None:
    path = tmp_path / "j"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        write_all(fd, b"S c1 [1]\n" * 1000)
    finally:
        os.close(fd)
    assert path.read_bytes() == b"S c1 [1]\n" * 1000
    with pytest.raises(OSError) as caught:
        write_all(fd, b"closed\n")
    assert caught.value.errno == 9  # EBADF: the file is closed


@pytest.mark.parametrize("write_all", [_write_all, _write_all_python], ids=["in-use", "python"])
def test_a_write_cut_short_goes_on_until_every_byte_is_written(tmp_path: Path, write_all: Any) -> None:
    # A pipe takes 64 KiB at a time: 1 MiB needs many writes, each cut short until cat,
    # another process (it needs no GIL), drains the pipe into a file.
    read_end, write_end = os.pipe()
    with open(tmp_path / "out", "wb") as out:
        reader = subprocess.Popen(["cat"], stdin=read_end, stdout=out)
    os.close(read_end)
    data = bytes(range(256)) * 4096
    try:
        write_all(write_end, data)
    finally:
        os.close(write_end)
    assert reader.wait(timeout=30) == 0
    assert (tmp_path / "out").read_bytes() == data


def _dead_journal(tmp_path: Path) -> Path:
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    journal = tmp_path / "audit-inflight" / f"{int(dead.stdout)}-1-1@{socket.gethostname()}.journal"
    journal.parent.mkdir()
    return journal


def test_a_journal_an_older_version_left_is_recovered_whole(tmp_path: Path) -> None:
    journal = _dead_journal(tmp_path)
    start = {"time": 1.0, "tool": "slow", "tool_class": "safe", "persona": "viewer", "args": '{"a":1}'}
    start.update(pid=7, hostname="vm", sandbox=None, ticket=None, approvers="[]")
    end = {
        "ticket": None,
        "approvers": "[]",
        "verdict": "allow",
        "outcome": "ok",
        "exit_code": 0,
        "duration": 0.5,
    }
    whole = {**start, **end, "tool": "whole", "outcome": "failed", "exit_code": 2}
    journal.write_text(
        f"S c1 {json.dumps(start)}\nF c1 {json.dumps(end)}\n"  # a short end line over its start
        f"F c2 {json.dumps(whole)}\n"  # a complete row alone (no ongrid_before_call)
        f"S c3 {json.dumps(start)}\n",  # never finished
        encoding="utf-8",
    )
    log = AuditLog(str(tmp_path / "audit.db"))
    rows = log.entries()
    assert [(r.call_id, r.tool, r.outcome, r.exit_code) for r in rows] == [
        ("c1", "slow", "ok", 0),
        ("c2", "whole", "failed", 2),
        ("c3", "slow", "interrupted", None),
    ]
    assert rows[0].args == {"a": 1} and rows[0].duration == 0.5 and rows[0].pid == 7
    assert log.verify().ok and not journal.exists()


def test_an_end_line_over_a_start_line_cut_short_is_chained_as_interrupted(tmp_path: Path) -> None:
    journal = _dead_journal(tmp_path)
    end = ["allow", "", "ongrid.gate", "ok", None, 0, None, 0.5, "[]", 2, "d" * 64, None, "[]", None]
    assert len(end) == len(END_COLUMNS)
    journal.write_text(f'S c1 [1.0,"c1","sl\nF c1 {json.dumps(end)}\nS c2 [1.0,"c2"]\n', encoding="utf-8")
    log = AuditLog(str(tmp_path / "audit.db"))  # opening the log recovers the journal: it must not fail
    rows = log.entries()
    assert [(r.call_id, r.tool, r.outcome) for r in rows] == [
        ("c1", "?", "interrupted"),
        ("c2", "?", "interrupted"),
    ]
    assert log.verify().ok and not journal.exists()
