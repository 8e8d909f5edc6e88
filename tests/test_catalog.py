"""The catalog: content digests, tickets bound to them, the call-time check, skills.lock and verify."""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
import sqlite3
import tarfile
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from clirun import run

import ongrid_plugins
from ongrid_plugins import SkillHost
from ongrid_plugins.catalog import MAX_FILES, skill_digest
from ongrid_plugins.catalog.lock import read_lock
from ongrid_plugins.errors import ApprovalError, ApprovalRequired
from ongrid_plugins.gate.approvals import ApprovalStore
from ongrid_plugins.packs.install import InstallError, install_pack, uninstall_pack
from ongrid_plugins.testing import assert_ok, isolated_settings, make_skill, make_skill_md, write_executable

LOCK_SCHEMA = Path(ongrid_plugins.__file__).parent / "schemas" / "skills-lock.schema.json"
MARK_SH = """#!/bin/sh
read -r args
echo first >> ran
printf '%s\\n' "$args"
"""
SWAPPED_SH = """#!/bin/sh
read -r args
echo swapped >> ran
printf '%s\\n' "$args"
"""


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# ---------------------------------------------------------------------- digests


def test_the_digest_is_sha256_over_the_documented_file_list(make_host: Any, tmp_path: Path) -> None:
    folder = make_skill(tmp_path / "skills", "echo")
    skill = make_host(tmp_path / "skills").skill("echo")
    manifest, entry = (folder / "skill.json").read_bytes(), (folder / "run.sh").read_bytes()
    text = f"ongrid-digest-v1\nrun.sh\0000111\0{sha(entry)}\nskill.json\0000000\0{sha(manifest)}\n"
    assert skill.digest == sha(text.encode())
    assert skill.tools[0].digest == skill.digest and skill.tools[0].entry_digest == sha(entry)


def test_the_digest_changes_with_the_manifest_the_entry_and_the_execute_bit_only(
    make_host: Any, tmp_path: Path
) -> None:
    folder = make_skill(tmp_path / "skills", "echo")
    host = make_host(tmp_path / "skills")
    first = host.skill("echo").digest
    (folder / "run.sh").chmod(0o775)  # group write: not a bit that changes what runs
    (folder / "notes.txt").write_text("not part of a skill.json skill")
    assert host.reload() and host.skill("echo").digest == first
    (folder / "run.sh").write_text((folder / "run.sh").read_text() + "# edited\n")
    host.reload()
    second = host.skill("echo").digest
    manifest = json.loads((folder / "skill.json").read_text())
    (folder / "skill.json").write_text(json.dumps({**manifest, "description": "Another description."}))
    host.reload()
    assert len({first, second, host.skill("echo").digest}) == 3


def test_a_skill_md_digest_covers_its_whole_folder(make_host: Any, tmp_path: Path) -> None:
    folder = make_skill_md(tmp_path / "skills", "runbook", files={"references/a.md": "# A\n"})
    host = make_host(tmp_path / "skills")
    before = host.skill("runbook").digest
    (folder / "references" / "a.md").write_text("# A, edited\n")
    host.reload()
    edited = host.skill("runbook").digest
    (folder / "references" / "b.md").write_text("# B\n")
    host.reload()
    assert len({before, edited, host.skill("runbook").digest}) == 3
    assert [f.path for f in skill_digest(host.skill("runbook")).files] == [
        "SKILL.md",
        "references/a.md",
        "references/b.md",
    ]


def test_a_skill_md_folder_over_the_limits_loads_with_a_warning_and_covers_manifest_and_scripts(
    make_host: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    tools = [{"name": "count", "description": "Count.", "class": "read", "impl": "exec:scripts/count.sh"}]
    files = {f"assets/{i}.txt": str(i) for i in range(MAX_FILES)}
    folder = make_skill_md(tmp_path / "skills", "big", tools=tools, files=files)
    write_executable(folder / "scripts" / "count.sh", "#!/bin/sh\necho '{}'\n")
    caplog.set_level(logging.WARNING)
    host = make_host(tmp_path / "skills")
    skill = host.skill("big")
    assert [w.code for w in skill.warnings] == ["digest_partial"]
    assert "more than 512 files or 16 MiB" in caplog.text
    assert [f.path for f in skill_digest(skill).files] == ["SKILL.md", "scripts/count.sh"]
    (folder / "assets" / "0.txt").write_text("not covered")
    host.reload()
    assert host.skill("big").digest == skill.digest


def test_digests_are_in_show_and_list_json_and_in_audit_rows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    make_skill(tmp_path / "skills", "echo")
    monkeypatch.setenv("ONGRID_STATE_DIR", str(tmp_path / "state"))
    base = ["--no-defaults", "--dirs", str(tmp_path / "skills")]
    digest = SkillHost(isolated_settings(tmp_path, tmp_path / "skills")).skill("echo").digest
    assert json.loads(run(capsys, *base, "list", "--json")[1])["items"][0]["digest"] == digest
    assert json.loads(run(capsys, *base, "list", "--skills", "--json")[1])["items"][0]["digest"] == digest
    assert json.loads(run(capsys, *base, "show", "echo", "--json")[1])["digest"] == digest
    assert f"digest:           {digest}" in run(capsys, *base, "show", "echo")[1]
    host = SkillHost(isolated_settings(tmp_path, tmp_path / "skills"))
    assert_ok(host.call("echo", {}))
    assert [row.skill_digest for row in host.audit.entries()] == [digest]


# ---------------------------------------------------------------------- approvals bound to content


def dangerous_host(make_host: Any, tmp_path: Path) -> tuple[SkillHost, Path, str]:
    folder = make_skill(tmp_path / "skills", "wipe", script=MARK_SH, class_="dangerous")
    host = make_host(tmp_path / "skills")
    with pytest.raises(ApprovalRequired) as asked:
        host.call("wipe", {}, persona="admin", caller="alice")
    ticket = asked.value.ticket.id
    host.approve(ticket, approver="bob")
    host.approve(ticket, approver="carol")
    return host, folder, ticket


def swap_entry(folder: Path) -> None:
    (folder / "run.sh").write_text(SWAPPED_SH)  # same mode, other bytes


def swap_manifest(folder: Path) -> None:
    manifest = json.loads((folder / "skill.json").read_text())
    (folder / "skill.json").write_text(json.dumps({**manifest, "env_allow": ["HOME"]}))


def swap_for_symlink(folder: Path) -> None:
    write_executable(folder / "other.sh", SWAPPED_SH)
    (folder / "run.sh").unlink()
    (folder / "run.sh").symlink_to("other.sh")  # inside the root, executable: only content differs


@pytest.mark.parametrize("swap", [swap_entry, swap_manifest, swap_for_symlink], ids=lambda f: f.__name__)
@pytest.mark.parametrize("reload", [False, True], ids=["not_reloaded", "reloaded"])
def test_approve_then_swap_is_refused_and_the_ticket_is_not_spent(
    make_host: Any, tmp_path: Path, reload: bool, swap: Any
) -> None:
    host, folder, ticket = dangerous_host(make_host, tmp_path)
    approved = host.ticket(ticket).skill_digest
    assert approved == host.skill("wipe").digest
    swap(folder)
    if reload:
        host.reload()
    with pytest.raises(ApprovalError) as refused:
        host.call("wipe", {}, persona="admin", caller="alice", ticket=ticket)
    now = skill_digest(host.skill("wipe")).digest
    assert refused.value.reason == "skill_changed"
    assert str(refused.value) == f"the skill changed since approval (digest {approved} -> {now})"
    assert not (folder / "ran").exists()
    assert host.ticket(ticket).status == "approved"
    if swap is swap_manifest:
        make_skill(tmp_path / "skills", "wipe", script=MARK_SH, class_="dangerous")
    else:
        (folder / "run.sh").unlink()
        write_executable(folder / "run.sh", MARK_SH)  # the approved content again: the ticket covers it
    host.reload()
    assert_ok(host.call("wipe", {}, persona="admin", caller="alice", ticket=ticket))
    assert (folder / "ran").read_text() == "first\n"


def test_a_changed_skill_gets_a_new_ticket_not_the_old_one(make_host: Any, tmp_path: Path) -> None:
    host, folder, ticket = dangerous_host(make_host, tmp_path)
    (folder / "run.sh").write_text(SWAPPED_SH)
    host.reload()
    with pytest.raises(ApprovalRequired) as asked:
        host.call("wipe", {}, persona="admin", caller="alice")
    assert asked.value.ticket.id != ticket
    assert asked.value.ticket.skill_digest == host.skill("wipe").digest


def test_a_ticket_database_from_before_digests_gets_the_column(tmp_path: Path) -> None:
    path = tmp_path / "approvals.db"
    conn = sqlite3.connect(path)
    conn.execute(
        "CREATE TABLE tickets (id TEXT PRIMARY KEY, tool TEXT NOT NULL, args_digest TEXT NOT NULL,"
        " persona TEXT NOT NULL, requester TEXT NOT NULL, required INTEGER NOT NULL, status TEXT NOT NULL,"
        " created REAL NOT NULL, expires REAL NOT NULL, rejected_by TEXT, note TEXT NOT NULL DEFAULT '',"
        " args TEXT NOT NULL DEFAULT '{}', tool_class TEXT NOT NULL DEFAULT '', reason TEXT NOT NULL"
        " DEFAULT '', executed REAL, executed_by TEXT, call_id TEXT)"
    )
    conn.execute(
        "INSERT INTO tickets (id, tool, args_digest, persona, requester, required, status, created, expires)"
        " VALUES ('old', 'wipe', 'd', 'admin', 'alice', 2, 'approved', 1, 9e18)"
    )
    conn.execute(  # its two approvals: a ticket marked approved without them is refused as forged
        "CREATE TABLE approvals (ticket_id TEXT NOT NULL, approver_key TEXT NOT NULL, approver TEXT NOT NULL,"
        " note TEXT NOT NULL DEFAULT '', sop TEXT, time REAL NOT NULL, PRIMARY KEY (ticket_id, approver_key))"
    )
    for who in ("bob", "carol"):
        conn.execute("INSERT INTO approvals VALUES ('old', ?, ?, '', NULL, 2)", (who, who))
    conn.commit()
    conn.close()
    store = ApprovalStore(str(path))
    assert store.ticket("old").skill_digest == ""  # unbound: it predates digests
    claimed = store.claim(
        "old", tool="wipe", args_digest="d", persona="admin", caller="x", call_id="c", skill_digest="e"
    )
    assert claimed.status == "executed"


# ---------------------------------------------------------------------- the call-time check


@pytest.fixture
def make_host(make_host: Any) -> Any:
    """These tests prove a skill did (not) run by the file it writes beside itself: unconfined
    hosts, so that a refusal comes from the catalog's check and not from the sandbox."""
    return functools.partial(make_host, sandbox="off")


def test_an_entry_swapped_for_a_symlink_to_other_content_inside_the_root_does_not_run(
    make_host: Any, tmp_path: Path
) -> None:
    folder = make_skill(tmp_path / "skills", "mark", script=MARK_SH)
    host = make_host(tmp_path / "skills")
    host.load()
    swap_for_symlink(folder)
    result = host.call("mark", {})
    assert not result.ok
    # Refused by the descriptor walk (a symlink on the way) before the digest is even read.
    assert "changed since the skill was loaded" in str(
        result.error
    ) or "is now reached through a symlink" in str(result.error)
    assert not (folder / "ran").exists()


def test_an_entry_edited_in_place_after_load_does_not_run(make_host: Any, tmp_path: Path) -> None:
    folder = make_skill(tmp_path / "skills", "mark", script=MARK_SH)
    host = make_host(tmp_path / "skills")
    loaded = host.get("mark").entry_digest
    (folder / "run.sh").write_text(SWAPPED_SH)
    result = host.call("mark", {})
    now = sha(SWAPPED_SH.encode())
    assert not result.ok and not (folder / "ran").exists()
    assert result.error == (
        f"entry {os.path.realpath(folder / 'run.sh')} changed since the skill was loaded "
        f"(sha256 {loaded[:12]} -> {now[:12]}); reload to run the new version"
    )
    host.reload()
    assert_ok(host.call("mark", {}))
    assert (folder / "ran").read_text() == "swapped\n"


def test_an_entry_rewritten_within_one_timestamp_tick_is_still_caught(make_host: Any, tmp_path: Path) -> None:
    """Same size, mtime set back: the memo is keyed by ctime too, and fresh files are never memoised."""
    folder = make_skill(tmp_path / "skills", "mark", script=MARK_SH)
    entry = folder / "run.sh"
    host = make_host(tmp_path / "skills")
    st = entry.stat()
    assert_ok(host.call("mark", {}))
    entry.write_text(MARK_SH.replace("first", "fir5t"))
    os.utime(entry, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert not host.call("mark", {}).ok


# ---------------------------------------------------------------------- skills.lock


def make_pack(base: Path, name: str, skills: tuple[str, ...]) -> Path:
    pack = base / name
    for skill in skills:
        make_skill(pack, skill)
    (pack / "pack.json").write_text(json.dumps({"name": name, "version": "1.0"}))
    return pack


def installed(tmp_path: Path) -> tuple[SkillHost, Path]:
    settings = isolated_settings(tmp_path, include_defaults=True)
    host = SkillHost(settings)
    install_pack(str(make_pack(tmp_path / "src", "tools", ("hello",))), host.pm, settings)
    archive = tmp_path / "other-1.0.tar.gz"
    with tarfile.open(archive, "w:gz") as tf:
        tf.add(make_pack(tmp_path / "src", "other", ("greet",)), arcname="other")
    install_pack(str(archive), host.pm, settings)
    return host, Path(settings.user_skills_dir)


def test_install_writes_skills_lock_to_its_schema_and_uninstall_updates_it(tmp_path: Path) -> None:
    host, packs = installed(tmp_path)
    data = json.loads((packs / "skills.lock").read_text())
    jsonschema.validate(data, json.loads(LOCK_SCHEMA.read_text()))
    tools = data["packs"]["tools"]
    assert tools["origin"] == {"kind": "folder", "path": str(tmp_path / "src" / "tools"), "sha256": None}
    assert tools["files"]["hello/run.sh"] == {
        "sha256": sha((packs / "tools" / "hello" / "run.sh").read_bytes()),
        "mode": "0111",
    }
    assert sorted(tools["files"]) == ["hello/run.sh", "hello/skill.json", "pack.json"]
    archive = tmp_path / "other-1.0.tar.gz"
    assert data["packs"]["other"]["origin"]["sha256"] == sha(archive.read_bytes())
    uninstall_pack("tools", host.settings)
    assert sorted(read_lock(str(packs)) or {}) == ["other"]


@pytest.mark.parametrize(
    ("tamper", "change", "path"),
    [
        (lambda p: (p / "hello" / "run.sh").write_text("#!/bin/sh\necho '{}'\n"), "changed", "hello/run.sh"),
        (lambda p: (p / "hello" / "extra.sh").write_text("#!/bin/sh\n"), "added", "hello/extra.sh"),
        (lambda p: (p / "pack.json").unlink(), "removed", "pack.json"),
        (lambda p: (p / "hello" / "run.sh").chmod(0o644), "changed", "hello/run.sh"),
    ],
    ids=["changed", "added", "removed", "mode"],
)
def test_a_pack_that_drifted_from_the_lock_does_not_load_and_verify_reports_it(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
    tamper: Any,
    change: str,
    path: str,
) -> None:
    host, packs = installed(tmp_path)
    tamper(packs / "tools")
    caplog.set_level(logging.WARNING, logger="ongrid_plugins.catalog.build")
    report = host.reload()
    names = [s.name for s in host.skills()]
    assert "greet" in names and "hello" not in names
    [line] = [r.getMessage() for r in caplog.records]
    assert line == (
        f"catalog: pack tools does not match skills.lock: {change} file {packs / 'tools' / path}; its skills "
        "are not loaded (`ongrid-skills verify tools` lists the drift, reinstalling the pack accepts it)"
    )
    assert [e.outcome for e in report.events if e.path == str(packs / "tools")] == ["drift"]
    monkeypatch.setenv("ONGRID_USER_SKILLS_DIR", str(packs))
    monkeypatch.setenv("ONGRID_STATE_DIR", host.settings.state_dir)  # where the consents were sealed
    assert run(capsys, "verify") == (
        1,
        f"other 1.0: ok, 3 files match skills.lock; unsigned; consent: sealed\ntools 1.0: {change} {path}\n",
        "",
    )
    assert run(capsys, "verify", "other")[0] == 0
    code, out, _ = run(capsys, "verify", "tools", "--json")
    assert code == 1 and json.loads(out)["packs"][0]["drift"] == [
        {"pack": "tools", "change": change, "path": path}
    ]


@pytest.mark.parametrize("path", ["hello/node_modules/dep/lib.sh", ".ongrid-x/y"])
def test_the_lock_covers_files_in_folders_the_loader_skips_and_verify_reports_their_change(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], path: str
) -> None:
    """node_modules and .ongrid-* folders were left out of the lock and of verify, though
    install copies them from an archive and a skill's code may run from them."""
    settings = isolated_settings(tmp_path, include_defaults=True)
    host = SkillHost(settings)
    pack = make_pack(tmp_path / "src", "tools", ("hello",))
    (pack / path).parent.mkdir(parents=True)
    (pack / path).write_text("echo original\n")
    archive = tmp_path / "tools.tar.gz"
    with tarfile.open(archive, "w:gz") as tf:
        tf.add(pack, arcname="tools")
    install_pack(str(archive), host.pm, settings)
    packs = Path(settings.user_skills_dir)
    assert path in (read_lock(str(packs)) or {})["tools"].files
    (packs / "tools" / path).write_text("echo TAMPERED\n")
    monkeypatch.setenv("ONGRID_USER_SKILLS_DIR", str(packs))
    assert run(capsys, "verify") == (1, f"tools 1.0: changed {path}\n", "")
    host.reload()
    assert "hello" not in [s.name for s in host.skills()]


def test_bytecode_python_writes_beside_a_packs_modules_is_no_drift(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A Python skill importing a helper of its pack makes a __pycache__ there on its first
    call (where it may write): locked, the pack would stop loading after one call."""
    host, packs = installed(tmp_path)
    cache = packs / "tools" / "hello" / "__pycache__"
    cache.mkdir()
    (cache / "helper.cpython-311.pyc").write_bytes(b"\x00bytecode")
    monkeypatch.setenv("ONGRID_USER_SKILLS_DIR", str(packs))
    monkeypatch.setenv("ONGRID_STATE_DIR", host.settings.state_dir)  # where the consents were sealed
    assert run(capsys, "verify")[0] == 0
    host.reload()
    assert "hello" in [s.name for s in host.skills()]


def test_a_corrupted_lock_refuses_every_installed_pack(tmp_path: Path) -> None:
    host, packs = installed(tmp_path)
    (packs / "skills.lock").write_text("{not json")
    report = host.reload()
    assert {"hello", "greet"}.isdisjoint(s.name for s in host.skills())
    drift = [e.message for e in report.events if e.outcome == "drift"]
    assert len(drift) == 2 and all("not a readable skills.lock" in m for m in drift)


@pytest.mark.parametrize("how", ["deleted", "emptied", "renamed"])
def test_a_tampered_pack_the_lock_does_not_list_is_not_loaded_and_fails_verify(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], how: str
) -> None:
    """Deleting or emptying the lock, or renaming the pack folder, used to turn tamper detection off."""
    host, packs = installed(tmp_path)
    (packs / "tools" / "hello" / "run.sh").write_text("#!/bin/sh\necho '{\"pwned\": true}'\n")
    name = "tools"
    if how == "deleted":
        (packs / "skills.lock").unlink()
    elif how == "emptied":
        (packs / "skills.lock").write_text('{"lock_version": 1, "packs": {}}')
    else:
        name = "renamed"
        (packs / "tools").rename(packs / name)
    report = host.reload()
    assert "hello" not in [s.name for s in host.skills()]
    [event] = [e for e in report.events if e.path == str(packs / name)]
    assert (
        event.outcome == "drift"
        and f"pack {name} was installed but has no entry in skills.lock" in event.message
    )
    monkeypatch.setenv("ONGRID_USER_SKILLS_DIR", str(packs))
    code, out, _ = run(capsys, "verify")
    assert code == 1
    assert f"pack {name} was installed but has no entry in skills.lock" in out
    assert f"--replace SOURCE`) or remove it (`ongrid-skills uninstall {name}`)" in out
    code, out, _ = run(capsys, "verify", "--json")
    assert code == 1 and json.loads(out)["ok"] is False and name in json.loads(out)["unlocked"]


def test_verify_without_installed_packs_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("ONGRID_USER_SKILLS_DIR", str(tmp_path / "none"))
    code, out, _ = run(capsys, "verify")
    assert code == 0 and "nothing to verify" in out
    code, _, err = run(capsys, "verify", "ghost")
    assert code == 2 and "pack 'ghost' is not in" in err


def test_install_require_digest_refuses_another_archive(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("ONGRID_USER_SKILLS_DIR", str(tmp_path / "packs"))
    pack = make_pack(tmp_path / "src", "tools", ("hello",))
    archive = tmp_path / "tools.tar.gz"
    with tarfile.open(archive, "w:gz") as tf:
        tf.add(pack, arcname="tools")
    good = sha(archive.read_bytes())
    code, _, err = run(capsys, "install", "--yes", str(archive), "--require-digest", "0" * 64)
    assert code == 1 and f"has sha256 {good}, not the required {'0' * 64}; nothing was installed" in err
    assert not (tmp_path / "packs" / "tools").exists()
    code, _, err = run(capsys, "install", "--yes", str(pack), "--require-digest", good)
    assert code == 1 and "--require-digest checks an archive" in err
    assert run(capsys, "install", "--yes", str(archive), "--require-digest", "sha256:" + good.upper())[0] == 0
    with pytest.raises(InstallError):
        install_pack(str(archive), SkillHost().pm, isolated_settings(tmp_path), require_digest="1" * 64)


def test_an_audit_log_from_before_digests_still_verifies_and_gains_the_column(tmp_path: Path) -> None:
    from ongrid_plugins.audit.chain import ADDED_COLUMNS, COLUMNS, GENESIS
    from ongrid_plugins.models import canonical_json

    later = {column for _table, column, _decl in ADDED_COLUMNS}
    old = [c for c in COLUMNS if c not in later]  # the columns of the first release
    state = tmp_path / ".ongrid-state"
    state.mkdir()
    conn = sqlite3.connect(state / "audit.db")
    conn.execute(f"CREATE TABLE entries (seq INTEGER PRIMARY KEY, {', '.join(old[1:])}, hash TEXT NOT NULL)")
    conn.execute("CREATE TABLE head (id INTEGER PRIMARY KEY CHECK (id = 1), seq INTEGER NOT NULL, hash TEXT)")
    row = dict.fromkeys(old) | {"seq": 1, "time": 1.0, "call_id": "old", "tool": "echo", "prev_hash": GENESIS}
    digest = sha(canonical_json([row[c] for c in old]).encode())  # how rows were hashed then
    conn.execute(
        f"INSERT INTO entries ({', '.join(old)}, hash) VALUES ({', '.join('?' * len(old))}, ?)",
        (*[row[c] for c in old], digest),
    )
    conn.execute("INSERT INTO head VALUES (1, 1, ?)", (digest,))
    conn.commit()
    conn.close()
    make_skill(tmp_path / "skills", "echo")
    host = SkillHost(isolated_settings(tmp_path, tmp_path / "skills"))
    assert_ok(host.call("echo", {}))
    assert [e.skill_digest for e in host.audit.entries()] == [None, host.skill("echo").digest]
    report = host.audit.verify()
    assert report.ok and report.entries == 2


def test_the_entry_check_can_hash_the_descriptor_the_executor_will_run(
    make_host: Any, tmp_path: Path
) -> None:
    from ongrid_plugins.catalog import entry_drift

    folder = make_skill(tmp_path / "skills", "mark", script=MARK_SH)
    tool = make_host(tmp_path / "skills").get("mark")
    fd = os.open(folder / "run.sh", os.O_RDONLY)
    try:
        os.read(fd, 3)  # its offset is left alone
        assert entry_drift(tool, fd) is None and os.lseek(fd, 0, os.SEEK_CUR) == 3
        (folder / "run.sh").unlink()  # the path now names another file; the descriptor does not
        write_executable(folder / "run.sh", SWAPPED_SH)
        assert entry_drift(tool, fd) is None
        assert "changed since the skill was loaded" in str(entry_drift(tool))
    finally:
        os.close(fd)
    fd = os.open(folder / "run.sh", os.O_RDONLY)
    try:
        assert "changed since the skill was loaded" in str(entry_drift(tool, fd))
    finally:
        os.close(fd)


@pytest.mark.parametrize("size", [0, 1, 99, 1024 * 1024 - 1, 1024 * 1024, 3 * 1024 * 1024 + 7])
def test_an_open_file_hashes_to_its_bytes_whatever_its_size(tmp_path: Path, size: int) -> None:
    from ongrid_plugins.catalog import digest

    data = os.urandom(size)
    path = tmp_path / "entry"
    path.write_bytes(data)
    fd = os.open(path, os.O_RDONLY)
    try:
        assert digest._hash_fd(fd, str(path))[0] == hashlib.sha256(data).hexdigest()
    finally:
        os.close(fd)


def test_a_file_that_grew_after_its_stat_is_hashed_whole(tmp_path: Path) -> None:
    from ongrid_plugins.catalog import digest

    path = tmp_path / "entry"
    path.write_bytes(b"#!/bin/sh\n")
    fd = os.open(path, os.O_RDONLY)
    try:
        st = os.fstat(fd)
        with path.open("ab") as f:
            f.write(b"echo more\n" * 1000)
        found, _ = digest._hash_fd(fd, str(path), st)
        assert found == hashlib.sha256(path.read_bytes()).hexdigest()
    finally:
        os.close(fd)
