"""Hostile input from outside (issue 10): redaction, identities, plugins, packs, servers.

Each test is one reproduced attack, kept as the regression test of its fix.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ongrid_plugins import InvalidArguments, SkillHost
from ongrid_plugins.testing import make_skill

# ------------------------------------------------------- 7. lone surrogates in arguments


@pytest.fixture
def echo_host(root: Path, make_host: Any) -> SkillHost:
    make_skill(root, "echo", schema={"type": "object", "properties": {"a": {"type": "string"}}})
    return make_host(root)


@pytest.mark.parametrize("args", [{"a": "\ud800"}, {"\udfff": "x"}, {"a": ["ok", {"b": "x\ud83d"}]}])
def test_a_lone_surrogate_is_refused_with_an_audit_row(echo_host: SkillHost, args: dict[str, Any]) -> None:
    with pytest.raises(InvalidArguments, match="lone surrogate") as refused:
        echo_host.call("echo", args)
    str(refused.value).encode("utf-8")  # the message itself is UTF-8 text
    row = echo_host.audit.tail(1)[0]
    assert row.outcome == "invalid_arguments" and row.tool == "echo"


def test_dispatch_answers_a_lone_surrogate_with_an_error_result(echo_host: SkillHost) -> None:
    call = {"type": "tool_use", "id": "toolu_1", "name": "echo", "input": {"a": "\ud800"}}
    message = echo_host.dispatch(call)
    body = json.loads(message["content"])
    assert body["code"] == "invalid_arguments" and "surrogate" in json.dumps(body)
    json.dumps(message, ensure_ascii=False).encode("utf-8")
    assert echo_host.audit.tail(1)[0].outcome == "invalid_arguments"


def test_openai_arguments_text_with_an_escaped_surrogate(echo_host: SkillHost) -> None:
    call = {"id": "c", "type": "function", "function": {"name": "echo", "arguments": '{"a": "\\ud800"}'}}
    body = json.loads(echo_host.dispatch(call)["content"])
    assert body["code"] == "invalid_arguments"


# ------------------------------------------------------------- 7. no server paths in errors


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("cannot run /home/ops/skills/x/run.sh: denied", "cannot run …/run.sh: denied"),
        ("entry '/tmp/p/q' escapes root /etc/ongrid/skills", "entry '…/q' escapes root …/skills"),
        ("see https://example.com/a/b", "see https://example.com/a/b"),
        ("relative a/b/c stays", "relative a/b/c stays"),
    ],
)
def test_error_bodies_cut_absolute_paths(text: str, shown: str) -> None:
    pytest.importorskip("starlette")
    from ongrid_plugins.server.responses import ApiError

    body = json.loads(ApiError(400, "bad_request", text, reasons=[text]).response().body)
    assert body["error"] == shown and body["reasons"] == [shown]


# ------------------------------------------------------------------- 3. secret redaction

SECRET = "hunter2-very-secret"
WO: dict[str, Any] = {"type": "string", "writeOnly": True}

HIDING_PLACES: list[tuple[dict[str, Any], dict[str, Any]]] = [
    ({"dependentSchemas": {"user": {"properties": {"pw": WO}}}}, {"user": "u", "pw": SECRET}),
    ({"unevaluatedProperties": WO}, {"pw": SECRET}),
    ({"properties": {"list": {"contains": WO}}}, {"list": [SECRET]}),
    ({"properties": {"pair": {"prefixItems": [{"type": "string"}, WO]}}}, {"pair": ["u", SECRET]}),
    ({"if": {"required": ["user"]}, "then": {"properties": {"pw": WO}}}, {"user": "u", "pw": SECRET}),
    ({"if": {"required": ["x"]}, "else": {"properties": {"pw": WO}}}, {"pw": SECRET}),
    ({"$defs": {"s": {"$anchor": "sec", **WO}}, "properties": {"pw": {"$ref": "#sec"}}}, {"pw": SECRET}),
    ({"$defs": {"s": WO}, "properties": {"pw": {"$ref": "#/$defs/s"}}}, {"pw": SECRET}),
    (
        {
            "$id": "urn:tool",
            "$defs": {"s": {"$id": "urn:secret", **WO}},
            "properties": {"pw": {"$ref": "urn:secret"}},
        },
        {"pw": SECRET},
    ),
    (
        {"$defs": {"s": {"$dynamicAnchor": "d", **WO}}, "properties": {"pw": {"$dynamicRef": "#d"}}},
        {"pw": SECRET},
    ),
    ({"properties": {"pw": {"not": {"not": WO}}}}, {"pw": SECRET}),
    ({"properties": {"o": {"properties": {"a": {}}, "additionalProperties": WO}}}, {"o": {"b": SECRET}}),
    ({"properties": {"pw": {"$ref": "#/$defs/gone"}}}, {"pw": SECRET}),  # unresolvable: hide it
]


@pytest.mark.parametrize(("schema", "args"), HIDING_PLACES)
def test_write_only_values_are_redacted_wherever_they_hide(
    schema: dict[str, Any], args: dict[str, Any]
) -> None:
    from ongrid_plugins.schema.redact import needs_redaction, redact

    assert needs_redaction(schema, args)
    redacted, paths = redact(schema, args)
    assert SECRET not in json.dumps(redacted) and paths


@pytest.mark.parametrize(
    "key",
    [
        "password",
        "Passwd",
        "SECRET",
        "token",
        "api_key",
        "API-KEY",
        "apikey",
        "Authorization",
        "private_key",
        "db_password",
        "client-secret",
        "X_Auth_Token",
    ],
)
def test_secret_names_are_redacted_whatever_the_schema(key: str) -> None:
    from ongrid_plugins.schema.redact import needs_redaction, redact

    args = {"nested": [{key: SECRET}], key: SECRET}
    assert needs_redaction({}, args)
    redacted, paths = redact({}, args)
    assert SECRET not in json.dumps(redacted) and len(paths) == 2


@pytest.mark.parametrize("key", ["max_tokens", "tokenizer", "passage", "secretary_name", "user"])
def test_ordinary_names_are_kept(key: str) -> None:
    from ongrid_plugins.schema.redact import redact

    assert redact({}, {key: "v"}) == ({key: "v"}, [])


@pytest.mark.parametrize(
    "line",
    [
        "calling with Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.payload.signature",
        "aws key AKIAIOSFODNN7EXAMPLE in env",
        "password=hunter2-very-secret",
        'api_key: "hunter2-very-secret"',
        "token ghp_abcdefghijklmnopqrstuvwxyz0123456789",
        'working on {"password": "hunter2-very-secret"}',  # a JSON object echoed
        '{"api_key":"hunter2-very-secret","n":1}',
        "{'db_password': 'hunter2-very-secret'}",  # a Python dict's repr
    ],
)
def test_secret_shapes_in_free_text_are_redacted(line: str) -> None:
    from ongrid_plugins.schema.redact import redact_text

    shown = redact_text(line)
    assert "[redacted]" in shown
    for secret in ("eyJhbGciOiJIUzI1NiJ9", "AKIAIOSFODNN7EXAMPLE", "hunter2", "ghp_abc"):
        assert secret not in shown


def test_a_private_key_in_stderr_never_reaches_the_audit_log(root: Path, make_host: Any) -> None:
    script = """#!/bin/sh
echo "-----BEGIN OPENSSH PRIVATE KEY-----" >&2
echo "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ" >&2
echo "-----END OPENSSH PRIVATE KEY-----" >&2
echo "Authorization: Bearer abcdefghijklmnop1234" >&2
echo "done" >&2
echo '{}'
"""
    make_skill(root, "leaky", script=script)
    host = make_host(root)
    host.call("leaky", {"password": SECRET})
    row = host.audit.tail(1)[0]
    text = json.dumps([row.stderr_tail, row.args])
    assert "b3BlbnNzaC1rZXk" not in text and "abcdefghijklmnop1234" not in text and SECRET not in text
    assert row.stderr_tail[-1] == "done" and row.redacted == ("$.password",)


@pytest.mark.parametrize("echo", ["working on $input", 'pw is $(echo "$input" | cut -d\\" -f4)'])
def test_a_skill_echoing_its_secret_argument_does_not_put_it_in_the_audit_log(
    root: Path, make_host: Any, echo: str
) -> None:
    """A writeOnly value comes back on stderr in any shape (here the raw JSON input, then
    the bare value): the row's stderr_tail loses the exact value the arguments lost."""
    script = f"""#!/bin/sh
input=$(cat)
echo "{echo}" >&2
echo '{{}}'
"""
    schema = {"type": "object", "properties": {"pw": WO, "user": {"type": "string"}}}
    make_skill(root, "echoer", script=script, schema=schema)
    host = make_host(root)
    result = host.call("echoer", {"pw": SECRET, "user": "ulla"})
    assert result.ok and any(SECRET in line for line in result.stderr_tail)  # the caller sees its own
    assert host.audit.flush()
    row = host.audit.tail(1)[0]
    assert row.redacted == ("$.pw",)
    assert SECRET not in json.dumps(row.stderr_tail) and "[redacted]" in row.stderr_tail[0]
    assert "ulla" in row.stderr_tail[0] or "ulla" not in echo  # what is not secret stays


def test_tickets_keep_no_secret(root: Path, make_host: Any) -> None:
    from ongrid_plugins import ApprovalRequired

    schema = {"type": "object", "dependentSchemas": {"user": {"properties": {"pw": WO}}}}
    make_skill(root, "wipe", class_="dangerous", schema=schema)
    host = make_host(root)
    with pytest.raises(ApprovalRequired) as asked:
        host.call("wipe", {"user": "u", "pw": SECRET, "token": SECRET}, persona="admin")
    ticket = asked.value.ticket
    assert ticket is not None and SECRET not in json.dumps(ticket.to_dict())


# ------------------------------------------------------------- 4. approver identities


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ("bob", "BOB"),
        ("alice", "alice\u200b"),
        ("alice", "ａlice"),
        ("carol", " carol\u00ad"),
        ("dan", "dan\ufeff"),
        ("alice", "ALİCE"),  # Turkish capital dotted I: casefolds to i + a combining dot
        ("alice", "alıce"),  # Turkish dotless i
        ("bob", "bob\u0301"),  # a combining acute accent after the b
        ("ALİCE", "alıce"),
    ],
)
def test_two_spellings_of_one_person_never_make_two_approvals(
    root: Path, make_host: Any, first: str, second: str
) -> None:
    from ongrid_plugins import ApprovalRequired
    from ongrid_plugins.errors import ApprovalError

    make_skill(root, "wipe", class_="dangerous")
    host = make_host(root)
    with pytest.raises(ApprovalRequired) as asked:
        host.call("wipe", {}, persona="admin", caller="requester")
    ticket = asked.value.ticket
    assert ticket is not None
    host.approve(ticket.id, approver=first)
    with pytest.raises(ApprovalError) as twice:
        host.approve(ticket.id, approver=second)
    assert twice.value.reason == "duplicate_approver"


@pytest.mark.parametrize("name", ["bоb", "аlice", "pаypal"])  # Cyrillic letters among Latin ones
def test_identities_mixing_scripts_are_refused(root: Path, make_host: Any, name: str) -> None:
    from ongrid_plugins import ApprovalRequired
    from ongrid_plugins.errors import ApprovalError

    make_skill(root, "wipe", class_="dangerous")
    host = make_host(root)
    with pytest.raises(ApprovalRequired) as asked:
        host.call("wipe", {}, persona="admin", caller="requester")
    assert asked.value.ticket is not None
    with pytest.raises(ApprovalError, match="mixes Cyrillic and Latin letters") as refused:
        host.approve(asked.value.ticket.id, approver=name)
    assert refused.value.reason == "no_identity"
    with pytest.raises(ApprovalError, match="mixes"):
        host.call("wipe", {"x": 1}, persona="admin", caller=name)


@pytest.mark.parametrize(
    "name", ["bob", "Jürgen", "Ζωή", "Борис", "山田太郎", "やまだ たろう", "김민준", "ops-bot_2@example.com"]
)
def test_names_in_one_script_are_usable(name: str) -> None:
    from ongrid_plugins.core.identity import identity_problem

    assert identity_problem(name) is None


def test_the_requester_cannot_approve_under_another_spelling(root: Path, make_host: Any) -> None:
    from ongrid_plugins import ApprovalRequired
    from ongrid_plugins.errors import ApprovalError

    make_skill(root, "wipe", class_="dangerous")
    host = make_host(root)
    with pytest.raises(ApprovalRequired) as asked:
        host.call("wipe", {}, persona="admin", caller="alice")
    assert asked.value.ticket is not None
    with pytest.raises(ApprovalError) as own:
        host.approve(asked.value.ticket.id, approver="ＡＬＩＣＥ\u200d")
    assert own.value.reason == "own_ticket"


def test_a_token_file_with_a_mixed_script_identity_is_refused(tmp_path: Path) -> None:
    pytest.importorskip("starlette")
    from ongrid_plugins import ConfigError
    from ongrid_plugins.server.tokens import TokenStore, hash_token

    path = tmp_path / "tokens.json"
    path.write_text(
        json.dumps({"tokens": [{"identity": "bоb", "persona": "admin", "hash": hash_token("t" * 43)}]})
    )
    with pytest.raises(ConfigError, match="mixes Cyrillic and Latin"):
        TokenStore.from_file(str(path))


# ------------------------------------------------------------ 8. persona alias bombs


def alias_bomb(depth: int = 9) -> str:
    lines = [
        "---",
        "name: bomb",
        "permission_mode: read-only",
        'a0: &a0 ["x", "x", "x", "x", "x", "x", "x", "x", "x"]',
    ]
    for level in range(1, depth + 1):
        refs = ", ".join([f"*a{level - 1}"] * 9)
        lines.append(f"a{level}: &a{level} [{refs}]")
    return "\n".join([*lines, "---", ""])


def test_a_persona_alias_bomb_is_refused_in_bounded_time(tmp_path: Path) -> None:
    from hostile import bounded

    path = tmp_path / "bomb.md"
    path.write_text(alias_bomb())
    assert len(path.read_bytes()) < 600
    found = bounded(
        f"""
        import json, time, tracemalloc
        from ongrid_plugins.gate.personas import read_persona
        tracemalloc.start()
        start = time.perf_counter()
        try:
            read_persona({str(path)!r})
            outcome = "read"
        except Exception as exc:
            outcome = str(exc)
        elapsed = time.perf_counter() - start
        peak = tracemalloc.get_traced_memory()[1] // 1024  # ru_maxrss would include the parent's, via exec
        print(json.dumps({{"elapsed": elapsed, "outcome": outcome, "peak_kib": peak}}))
        """
    )
    assert found["elapsed"] < 5.0  # a refusal, not the expansion; a loaded machine can take a second
    assert "alias bomb" in found["outcome"]
    assert found["peak_kib"] < 20_000  # the expansion would have taken ~150 MB


# ------------------------------------------------------- 8. an emptied or deleted audit log


@pytest.mark.parametrize("how", ["deleted", "emptied", "truncated"])
def test_verify_says_rows_are_missing_once_a_head_was_recorded(
    root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], how: str
) -> None:
    import sqlite3

    from clitools import cli, cmd

    state = tmp_path / ".ongrid-state"
    monkeypatch.setenv("ONGRID_STATE_DIR", str(state))
    make_skill(root, "echo")
    fresh = cmd(capsys, root, "audit", "verify")
    assert fresh.returncode == 0 and fresh.stdout.startswith("audit log is EMPTY: 0 rows")
    for _ in range(3):
        assert cli(root, "run", "echo", "{}").returncode == 0  # a real process: chained when it exits
    recorded = cmd(capsys, root, "audit", "head")
    assert recorded.returncode == 0 and "recorded head row 3" in recorded.stdout
    anchor = json.loads((state / "audit-head.json").read_text())["hash"]
    if how == "deleted":
        for path in state.glob("audit.db*"):
            path.unlink()
    else:
        with sqlite3.connect(state / "audit.db") as conn:
            if how == "emptied":
                conn.execute("DELETE FROM entries")
                conn.execute("DELETE FROM head")
            else:
                conn.execute("DELETE FROM entries WHERE seq = 3")
                conn.execute("UPDATE head SET seq = 2, hash = (SELECT hash FROM entries WHERE seq = 2)")
    report = cmd(capsys, root, "audit", "verify")
    assert report.returncode == 1, report.stdout
    assert "rows are missing" in report.stdout
    if how != "truncated":
        assert "the log is empty" in report.stdout
    (state / "audit-head.json").unlink()  # the head file gone too: an anchor kept elsewhere still tells
    anchored = cmd(capsys, root, "audit", "verify", "--anchor", anchor)
    assert anchored.returncode == 1 and (
        "rows are missing" in anchored.stdout or "not in the chain" in anchored.stdout
    )


# ------------------------------------------------------------------------------ 6. packs


def test_a_pack_naming_an_installed_pack_does_not_replace_it_without_replace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import tarfile

    from ongrid_plugins.cli import main

    user = tmp_path / "user"
    monkeypatch.setenv("ONGRID_USER_SKILLS_DIR", str(user))

    def pack(where: str, version: str) -> Path:
        folder = tmp_path / where / "tools"
        make_skill(folder, "hello")
        (folder / "pack.json").write_text(json.dumps({"name": "tools", "version": version}))
        archive = tmp_path / where / f"tools-{version}.tgz"
        with tarfile.open(archive, "w:gz") as tf:
            tf.add(folder, arcname="tools")
        return archive

    first, intruder = pack("vendor", "1.0"), pack("elsewhere", "2.0")
    assert main(["--no-defaults", "install", "--yes", str(first)]) == 0
    capsys.readouterr()
    assert main(["--no-defaults", "install", "--yes", str(intruder)]) != 0
    err = capsys.readouterr().err
    assert str(first) in err and str(intruder) in err and err.count("sha256 ") == 2 and "--replace" in err
    from ongrid_plugins.packs import read_marker

    assert read_marker(str(user / "tools")).version == "1.0"  # type: ignore[union-attr]
    assert main(["--no-defaults", "install", "--yes", "--replace", str(intruder)]) == 0
    assert "replacing 1.0" in capsys.readouterr().out
    assert read_marker(str(user / "tools")).version == "2.0"  # type: ignore[union-attr]


def test_a_hard_linked_entry_is_a_load_error(root: Path, tmp_path: Path, make_host: Any) -> None:
    import os

    outside = tmp_path / "outside.sh"
    outside.write_text("#!/bin/sh\necho '{}'\n")
    outside.chmod(0o755)
    folder = make_skill(root, "linked", script=None)
    os.link(outside, folder / "run.sh")
    host = make_host(root)
    report = host.load()
    assert "linked" not in {tool.name for tool in host.tools()}
    assert "has 2 hard links" in "\n".join(event.message for event in report.events)


@pytest.mark.parametrize(("bit", "name"), [(0o4000, "setuid"), (0o2000, "setgid")])
def test_a_setuid_or_setgid_entry_is_a_load_error(root: Path, make_host: Any, bit: int, name: str) -> None:
    folder = make_skill(root, "risky")
    (folder / "run.sh").chmod(0o755 | bit)
    if not (folder / "run.sh").stat().st_mode & bit:
        pytest.skip(f"this filesystem drops the {name} bit")
    host = make_host(root)
    report = host.load()
    assert "risky" not in {tool.name for tool in host.tools()}
    assert f"has the {name} bit set" in "\n".join(event.message for event in report.events)


# ------------------------------------------------------------- 8. a keyed audit chain


def _recompute_chain(db: Path, change: str) -> None:
    """What someone with write access but without the key does: edit, then rehash every row."""
    import sqlite3

    from ongrid_plugins.audit.chain import COLUMNS, GENESIS, row_hash

    with sqlite3.connect(db) as conn:
        conn.execute(change)
        prev = GENESIS
        rows = conn.execute(f"SELECT {', '.join(COLUMNS)} FROM entries ORDER BY seq").fetchall()
        for row in rows:
            values = [*row[:-1], prev]
            digest = row_hash(values)
            conn.execute("UPDATE entries SET prev_hash = ?, hash = ? WHERE seq = ?", (prev, digest, row[0]))
            prev = digest
        conn.execute("UPDATE head SET hash = ? WHERE id = 1", (prev,))


@pytest.mark.parametrize("drop_macs", [False, True])
def test_a_chain_recomputed_without_the_key_is_detected(root: Path, tmp_path: Path, drop_macs: bool) -> None:
    import sqlite3

    from ongrid_plugins.testing import isolated_settings

    key = tmp_path / "audit.key"
    key.write_text("k" * 32)
    state = tmp_path / "state"
    make_skill(root, "echo")
    host = SkillHost(isolated_settings(tmp_path, root, state_dir=str(state), audit_key_file=str(key)))
    for n in range(3):
        host.call("echo", {"n": n})
    assert host.audit.verify().ok
    host.audit.close()
    _recompute_chain(state / "audit.db", "UPDATE entries SET caller = 'someone-else' WHERE seq = 2")
    if drop_macs:
        with sqlite3.connect(state / "audit.db") as conn:
            conn.execute("DELETE FROM macs")
    unkeyed = SkillHost(isolated_settings(tmp_path, root, state_dir=str(state)))
    assert unkeyed.audit.verify().ok  # the plain hash chain cannot tell
    keyed = SkillHost(isolated_settings(tmp_path, root, state_dir=str(state), audit_key_file=str(key)))
    report = keyed.audit.verify()
    assert not report.ok
    assert ("no row carries an HMAC" if drop_macs else "row 2 has a wrong HMAC") in report.problem


@pytest.mark.parametrize(("content", "why"), [("abc", "at least 16"), (None, "cannot read the audit key")])
def test_an_unusable_audit_key_refuses_risky_calls_and_records_nothing(
    root: Path, tmp_path: Path, content: str | None, why: str
) -> None:
    """A key file that is missing or too short must not switch the audit log off: the
    host starts, mutating calls are refused as when the log cannot be written, a safe
    call runs unrecorded (an error says why), and verify() raises instead of passing."""
    from ongrid_plugins import AuditError, ConfigError
    from ongrid_plugins.testing import isolated_settings

    key = tmp_path / "audit.key"
    if content is not None:
        key.write_text(content)
    make_skill(root, "change", class_="mutating")
    make_skill(root, "look")
    state = tmp_path / "state"
    host = SkillHost(isolated_settings(tmp_path, root, state_dir=str(state), audit_key_file=str(key)))
    assert [p.name for p in host.plugins() if p.status == "failed"] == []
    assert host.audit.key_error is not None and why in str(host.audit.key_error)
    with pytest.raises(AuditError, match=f"ONGRID_AUDIT_KEY_FILE .*{why}.*mutating calls are refused"):
        host.call("change", confirm=True)
    assert host.call("look", {}).ok
    with pytest.raises(ConfigError, match=why):
        host.audit.verify()
    assert not (state / "audit.db").exists()  # nothing written without the key


def test_reading_a_ticket_keeps_accents_apart_though_approving_folds_them(root: Path, make_host: Any) -> None:
    """``jose`` may not read ``josé``'s ticket (access: a different person), while ``josé``
    approving a ticket ``jose`` opened is refused as the requester (safe to fold there)."""
    from ongrid_plugins import ApprovalRequired
    from ongrid_plugins.core.identity import identity_key, same_person
    from ongrid_plugins.errors import ApprovalError
    from ongrid_plugins.server.rules import may_read_ticket
    from ongrid_plugins.server.tokens import Principal

    assert identity_key("jose") == identity_key("josé") and not same_person("jose", "josé")
    make_skill(root, "wipe", class_="dangerous")
    host = make_host(root)
    with pytest.raises(ApprovalRequired) as asked:
        host.call("wipe", {}, persona="admin", caller="josé")
    ticket = asked.value.ticket
    assert not may_read_ticket(host, ticket, Principal("jose", "operator"))
    assert may_read_ticket(host, ticket, Principal("JOSÉ", "operator"))
    with pytest.raises(ApprovalError):
        host.approve(ticket.id, approver="jose")
