"""The audit row: the columns a call attempt gets, and the exact hashes old logs were chained with.

A row's hash covers the canonical JSON of its columns; ``verify`` of a log written by
an earlier version must still pass, so a row's hash is pinned to the value the
implementation before the audit log's rewrite gave it.
"""

from __future__ import annotations

import hashlib
import sqlite3
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs

from ongrid_plugins import CallResult, SkillHost
from ongrid_plugins.audit.chain import COLUMNS, GENESIS, SCHEMA, append, row_hash, walk
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


def test_every_kind_of_row_is_chained_and_verifies(tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / "rows.db", isolation_level=None)
    conn.executescript(SCHEMA)
    conn.execute("BEGIN")
    for request, result in _requests(tmp_path):
        row = finish_row(start_row(request, 1796152471.9257107), request, result, result.duration or 0.25)
        assert set(row) == set(COLUMNS[1:-1])
        append(conn, row, b"k" * 32)
    conn.commit()
    entries = conn.execute(f"SELECT {', '.join(COLUMNS)}, hash FROM entries ORDER BY seq").fetchall()
    conn.close()
    assert walk(iter(entries)).ok
    assert [row[COLUMNS.index("remote")] is None for row in entries] == [True, True, True, False, True]
    assert entries[0][COLUMNS.index("sandbox")] is None and "hunter2" not in repr(entries)


def test_row_hashes_are_the_ones_logs_were_chained_with_before() -> None:
    row = [
        1, 1700000000.123456, "c-1", "disk_usage", "safe", "default", "alice", '{"path":"/tmp"}', "ab" * 32,
        "[]", "allow", "safe tool", "ongrid.gate", "ok", None, 0, None, 0.001234, '["\u00e9 line"]', 12,
        "cd" * 32, None, "[]", 4242, "host-a", None, None, None, GENESIS,
    ]  # fmt: skip
    assert row_hash(row) == "f60dfc14b9a375dc16c5ef1d99760a7062bd77ae045a154c8b4fc041f13455af"
    row[COLUMNS.index("sandbox")] = '{"confined":false,"reason":"off"}'
    row[COLUMNS.index("skill_digest")] = "sha256:" + "ef" * 32
    assert row_hash(row) == "5c3b420c45e43a40dfdded6a4ce28f1e0c5cef1b0eb9b79b19ed1bb144e48aba"


def test_a_value_holding_a_lone_surrogate_still_gets_its_row(tmp_path: Path) -> None:
    """An executor that does not refuse one (a native tool, a plugin's) must not lose the row."""
    request, result = next(_requests(tmp_path))
    odd = attrs.evolve(result, value={"x": "\udcff"})
    row = finish_row(start_row(request, 1.0), request, odd, 0.1)
    text = '{"x":"\udcff"}'.encode("utf-8", "surrogatepass")
    assert (row["result_size"], row["result_digest"]) == (len(text), hashlib.sha256(text).hexdigest())


def test_a_call_with_a_secret_argument_is_redacted_in_its_row(tmp_path: Path) -> None:
    """Whether the schema marks it (``writeOnly``) or only its name says so."""
    pin = {"type": "object", "properties": {"pin": {"type": "string", "writeOnly": True}}}
    make_skill(tmp_path / "skills", "unlock", class_="safe", schema=pin)
    make_skill(tmp_path / "skills", "login", class_="safe")
    host = SkillHost(isolated_settings(tmp_path, tmp_path / "skills"))
    assert host.call("unlock", {"pin": "4711-secret-pin"}).ok
    assert host.call("login", {"user": "ada", "api_key": "hunter2-very-secret"}).ok
    args = {entry.tool: entry.args for entry in host.audit.entries()}
    assert args["unlock"] == {"pin": "[redacted]"}
    assert args["login"] == {"api_key": "[redacted]", "user": "ada"}
    assert all(entry.args_digest == "" for entry in host.audit.entries())
