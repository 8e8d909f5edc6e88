"""Confinement, attacked for real: every outcome with real processes, files and sockets.

The probe skill is a Python script that performs the actions it is given (write a
file, read a file, connect to a port, run a shell command) and reports, for each,
``"ok"`` or the error it got. Each test then checks what the kernel allowed.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from procs import dead

from ongrid_plugins import SkillHost
from ongrid_plugins.errors import ApprovalError, ApprovalRequired
from ongrid_plugins.executors.confine import support
from ongrid_plugins.testing import assert_ok, isolated_settings, make_skill

SUPPORT = support()
pytestmark = pytest.mark.skipif(
    bool(SUPPORT.missing()),
    reason="this machine lacks " + "; ".join(SUPPORT.missing()),
)

PROBE = f"""#!{sys.executable}
import json, os, socket, subprocess, sys
args = json.load(sys.stdin)
out = []
for action, target in args.get("actions", []):
    try:
        if action == "write":
            with open(target, "w") as f:
                f.write("x")
            out.append("ok")
        elif action == "read":
            with open(target, "rb") as f:
                out.append("ok:" + f.read(200).decode("utf-8", "replace"))
        elif action == "list":
            out.append("ok:" + ",".join(sorted(os.listdir(target))))
        elif action == "connect":
            socket.create_connection(("127.0.0.1", int(target)), timeout=2).close()
            out.append("ok")
        elif action == "sh":
            p = subprocess.run(["/bin/sh", "-c", target], capture_output=True, text=True, timeout=20)
            out.append("rc=%d:%s%s" % (p.returncode, p.stdout, p.stderr))
        elif action == "sqlite":
            import sqlite3
            db = sqlite3.connect(target, timeout=1)
            db.execute("INSERT INTO approvals (ticket_id, approver_key, approver, note, sop, time)"
                       " SELECT id, 'bob', 'bob', '', NULL, 0 FROM tickets")
            db.execute("INSERT INTO approvals (ticket_id, approver_key, approver, note, sop, time)"
                       " SELECT id, 'carol', 'carol', '', NULL, 0 FROM tickets")
            db.execute("UPDATE tickets SET status = 'approved'")
            db.commit()
            out.append("ok")
    except Exception as exc:
        out.append("error:" + type(exc).__name__ + ":" + str(exc))
with open("/proc/self/environ", "rb") as f:
    env = sorted(item.split(b"=")[0].decode() for item in f.read().split(b"\\0") if item)
print(json.dumps({{"results": out, "env": env, "argv0": sys.argv[0], "real": os.path.realpath(sys.argv[0])}}))
"""


def probe(root: Path, name: str = "probe", **fields: Any) -> Path:
    fields.setdefault("env_allow", ["PATH"])
    return make_skill(root, name, script=PROBE, entry="probe.py", **fields)


def run(
    host: SkillHost, name: str, *actions: tuple[str, str], persona: str = "viewer", **kw: Any
) -> list[str]:
    value = assert_ok(host.call(name, {"actions": [list(a) for a in actions]}, persona=persona, **kw))
    return value["results"]


@pytest.fixture
def box(tmp_path: Path) -> dict[str, Path]:
    root = tmp_path / "skills"
    root.mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    return {"root": root, "outside": outside, "tmp": tmp_path}


def host_for(tmp_path: Path, root: Path, **overrides: Any) -> SkillHost:
    host = SkillHost(isolated_settings(tmp_path, root, **overrides))
    host.load()
    return host


# -- writes -----------------------------------------------------------------------


def test_a_safe_skill_cannot_write_to_home_the_skill_folder_or_an_outside_folder(
    box: dict[str, Path],
) -> None:
    folder = probe(box["root"])
    host = host_for(box["tmp"], box["root"])
    home = Path(os.path.expanduser("~"))
    targets = [home / "ongrid-sandbox-test", folder / "planted", box["outside"] / "planted"]
    results = run(host, "probe", *[("write", str(t)) for t in targets])
    # everything but its /tmp is a read-only mount to it: not writable, nor chmod-able
    assert all(r.startswith("error:OSError:[Errno 30] Read-only file system") for r in results), results
    assert not any(t.exists() for t in targets)


def test_a_safe_skill_writes_only_to_its_private_tmp_which_is_gone_after_the_call(
    box: dict[str, Path],
) -> None:
    probe(box["root"])
    host = host_for(box["tmp"], box["root"])
    marker = f"/tmp/ongrid-private-{os.getpid()}-{time.time_ns()}"
    first = run(host, "probe", ("write", marker), ("read", marker))
    assert first == ["ok", "ok:x"]
    assert not os.path.exists(marker)  # the host's /tmp never saw it
    second = run(host, "probe", ("read", marker))
    assert second[0].startswith("error:FileNotFoundError")  # the next call gets a fresh /tmp


def test_a_mutating_skill_writes_where_it_declares_and_nowhere_else(box: dict[str, Path]) -> None:
    allowed = box["tmp"] / "allowed"
    allowed.mkdir()
    probe(box["root"], class_="mutating", sandbox={"write": [str(allowed)]})
    host = host_for(box["tmp"], box["root"])
    results = run(
        host,
        "probe",
        ("write", str(allowed / "f")),
        ("write", str(box["outside"] / "f")),
        persona="admin",
        confirm=True,
    )
    assert results[0] == "ok"
    assert results[1].startswith("error:OSError:[Errno 30] Read-only file system")
    assert (allowed / "f").read_text() == "x"
    assert not (box["outside"] / "f").exists()


def test_an_undeclared_mutating_skill_keeps_its_reach_by_default_and_loses_it_under_strict(
    box: dict[str, Path],
) -> None:
    probe(box["root"], class_="mutating")
    target = box["outside"] / "f"
    default = host_for(box["tmp"], box["root"])
    assert run(default, "probe", ("write", str(target)), persona="admin", confirm=True) == ["ok"]
    target.unlink()
    strict = host_for(box["tmp"], box["root"], sandbox_policy="strict")
    result = run(strict, "probe", ("write", str(target)), persona="admin", confirm=True)
    assert result[0].startswith("error:OSError:[Errno 30] Read-only file system")  # it may write nowhere
    assert not target.exists()


# -- the host's own state -----------------------------------------------------------


def test_the_hosts_state_config_and_home_secrets_are_invisible(
    box: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    home = box["tmp"] / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_rsa").write_text("PRIVATE KEY")
    monkeypatch.setenv("HOME", str(home))
    probe(box["root"])
    host = host_for(box["tmp"], box["root"])
    settings = host.settings
    secrets = [
        Path(settings.state_dir) / "approvals.db",
        Path(settings.state_dir) / "audit.db",
        Path(settings.config_dir) / "tokens.json",
        home / ".ssh" / "id_rsa",
    ]
    for path in secrets:
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.exists():
            path.write_text("secret")
    results = run(host, "probe", *[("read", str(p)) for p in secrets], ("list", str(home / ".ssh")))
    assert not any(r.startswith("ok") for r in results), results


def test_a_safe_skill_cannot_forge_approvals_and_the_dangerous_call_stays_pending(
    box: dict[str, Path],
) -> None:
    probe(box["root"])
    make_skill(box["root"], "wipe", class_="dangerous")
    host = host_for(box["tmp"], box["root"])
    with pytest.raises(ApprovalRequired) as caught:
        host.call("wipe", {}, persona="admin", caller="alice")
    ticket = caught.value.ticket
    db = Path(host.settings.state_dir) / "approvals.db"
    assert db.exists()
    results = run(host, "probe", ("sqlite", str(db)))
    assert results[0].startswith("error:"), results
    assert host.ticket(ticket.id).status == "pending"
    assert host.ticket(ticket.id).approvals == ()
    with pytest.raises(ApprovalError) as refused:
        host.call("wipe", {}, persona="admin", caller="alice", ticket=ticket.id)
    assert "has 0 of its 2 approvals" in str(refused.value)


# -- network --------------------------------------------------------------------------


@pytest.fixture
def listener() -> Any:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    accepted: list[int] = []

    def serve() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            accepted.append(1)
            conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield server.getsockname()[1], accepted
    server.close()


def test_no_network_unless_declared(box: dict[str, Path], listener: Any) -> None:
    port, accepted = listener
    probe(box["root"], "offline")
    probe(box["root"], "online", sandbox={"network": True})
    host = host_for(box["tmp"], box["root"])
    assert run(host, "offline", ("connect", str(port)))[0].startswith("error:PermissionError")
    assert accepted == []
    assert run(host, "online", ("connect", str(port))) == ["ok"]
    assert accepted == [1]


def test_no_unix_socket_without_network(box: dict[str, Path]) -> None:
    probe(box["root"])
    host = host_for(box["tmp"], box["root"])
    code = f"{sys.executable} -c 'import socket; socket.socket(socket.AF_UNIX).connect(\"/run/x\")'"
    result = run(host, "probe", ("sh", code))[0]
    assert "PermissionError" in result


# -- processes ---------------------------------------------------------------------------


def test_a_setsid_daemon_dies_with_the_call(box: dict[str, Path]) -> None:
    drop = box["tmp"] / "drop"
    drop.mkdir()
    marker = drop / "marker"
    probe(box["root"], class_="mutating", sandbox={"write": [str(drop)]})
    host = host_for(box["tmp"], box["root"])
    script = f"setsid sh -c 'sleep 2; echo alive > {marker}' </dev/null >/dev/null 2>&1 & echo started"
    results = run(host, "probe", ("sh", script), persona="admin", confirm=True)
    assert results[0].startswith("rc=0:started")
    time.sleep(3)
    assert not marker.exists()
    # The same reach was real: without the daemon trick the write lands.
    assert run(host, "probe", ("sh", f"echo now > {marker}"), persona="admin", confirm=True)[0].startswith(
        "rc=0"
    )
    assert marker.read_text() == "now\n"


@pytest.mark.parametrize("how", ["call", "acall"])
@pytest.mark.parametrize("ending", ["exits", "times-out"])
def test_a_setsid_child_holding_the_output_is_killed_before_the_call_returns(
    box: dict[str, Path], caplog: pytest.LogCaptureFixture, ending: str, how: str
) -> None:
    import asyncio

    drop = box["tmp"] / "drop"
    drop.mkdir()
    pidfile = drop / "pid"
    # The daemon keeps the call's stdout and stderr: a runner that only killed the
    # process group would wait for their EOF (then say they stayed open) and return
    # with the daemon still running.
    after = "echo '{}'" if ending == "exits" else "sleep 30"
    make_skill(
        box["root"],
        "daemon",
        script=f"#!/bin/sh\nsetsid /bin/sh -c 'echo $$ > {pidfile}; exec sleep 30' &\n"
        f"while [ ! -s {pidfile} ]; do sleep 0.01; done\n{after}\n",
        class_="mutating",
        sandbox={"write": [str(drop)]},
        timeout_seconds=2,
    )
    host = host_for(box["tmp"], box["root"])
    if how == "call":
        result = host.call("daemon", {}, persona="admin", confirm=True)
    else:
        result = asyncio.run(host.acall("daemon", {}, persona="admin", confirm=True))
    daemon = int(pidfile.read_text())
    assert dead(daemon, wait=0), f"the setsid child {daemon} outlived the call"
    assert (result.ok, result.timed_out) == ((True, False) if ending == "exits" else (False, True))
    assert "stayed open" not in caplog.text


def test_concurrent_acalls_on_one_loop_run_confined_and_a_cancelled_one_is_killed(
    box: dict[str, Path],
) -> None:
    import asyncio

    drop = box["tmp"] / "drop"
    drop.mkdir()
    make_skill(
        box["root"],
        "sleeper",
        script=f"#!/bin/sh\necho $$ > {drop}/pid\nsleep 30\n",
        class_="mutating",
        sandbox={"write": [str(drop)]},
    )
    make_skill(box["root"], "quick", script="#!/bin/sh\necho '{\"n\": 1}'\n")
    host = host_for(box["tmp"], box["root"])

    async def scenario() -> tuple[list[Any], int]:
        # Several calls in flight on the loop: the later ones spawn aside (a thread).
        quick = [asyncio.ensure_future(host.acall("quick", {}, persona="viewer")) for _ in range(4)]
        slow = asyncio.ensure_future(host.acall("sleeper", {}, persona="admin", confirm=True))
        pidfile = drop / "pid"
        for _ in range(1000):
            if pidfile.exists() and pidfile.read_text().strip():
                break
            await asyncio.sleep(0.01)
        slow.cancel()
        with pytest.raises(asyncio.CancelledError):
            await slow
        return list(await asyncio.gather(*quick)), int(pidfile.read_text())

    results, pid = asyncio.run(scenario())
    assert [r.value for r in results] == [{"n": 1}] * 4
    assert dead(pid, wait=0), f"the cancelled call's child {pid} outlived the cancellation"


def sleepers(root: Path, name: str, count: int, limit: int, seconds: int) -> None:
    """A skill that starts ``count`` sleeping children under a limit of ``limit`` processes."""
    make_skill(
        root,
        name,
        script=f"#!/bin/sh\nfor i in $(/usr/bin/seq {count}); do /bin/sleep {seconds} & done\n"
        "wait\necho '{}'\n",
        sandbox={"limits": {"processes": limit}},
        timeout_seconds=20,
    )


def test_a_fork_bomb_ends_with_process_limit_reached(box: dict[str, Path]) -> None:
    sleepers(box["root"], "bomb", 20, 8, 3)
    host = host_for(box["tmp"], box["root"])
    result = host.call("bomb", {}, persona="viewer")
    assert not result.ok
    assert "process limit reached (8 processes)" in (result.error or "")


def test_a_memory_hog_fails_with_memory_limit(box: dict[str, Path]) -> None:
    make_skill(
        box["root"],
        "hog",
        script=f"#!{sys.executable}\nx = bytearray(400 * 1024 * 1024)\nprint('{{}}')\n",
        sandbox={"limits": {"memory_mb": 64}},
    )
    host = host_for(box["tmp"], box["root"])
    result = host.call("hog", {}, persona="viewer")
    assert not result.ok
    assert "memory limit reached (64 MiB)" in (result.error or "")


def test_no_capabilities_no_new_privileges_and_a_seccomp_filter(box: dict[str, Path]) -> None:
    probe(box["root"])
    host = host_for(box["tmp"], box["root"])
    status = run(host, "probe", ("read", "/proc/self/status"))[0]
    # read() returns only the first 200 bytes: ask the shell for the lines that matter.
    lines = run(
        host, "probe", ("sh", "grep -E '^(CapEff|CapPrm|CapBnd|NoNewPrivs|Seccomp):' /proc/self/status")
    )[0]
    assert status.startswith("ok:")
    fields = dict(line.split(":\t") for line in lines.split(":", 1)[1].strip().splitlines())
    assert fields["CapEff"] == fields["CapPrm"] == fields["CapBnd"] == "0000000000000000"
    assert fields["NoNewPrivs"] == "1"
    assert fields["Seccomp"] == "2"


# -- the file checked is the file run ----------------------------------------------------


def test_swapping_the_entry_for_a_symlink_never_runs_the_outside_binary(box: dict[str, Path]) -> None:
    outside = box["outside"] / "evil.sh"
    outside.write_text('#!/bin/sh\necho \'{"who": "outside"}\'\n')
    outside.chmod(0o755)
    folder = make_skill(box["root"], "swap", script='#!/bin/sh\necho \'{"who": "inside"}\'\n')
    host = host_for(box["tmp"], box["root"])
    entry = folder / "run.sh"
    real = folder / "run.real"
    os.link(entry, real)
    link = folder / "run.link"
    link.symlink_to(outside)
    stop = time.monotonic() + 3
    swaps = [0]

    def swapper() -> None:
        while time.monotonic() < stop:
            os.replace(link if swaps[0] % 2 == 0 else real, entry)
            # put the moved name back for the next round
            if swaps[0] % 2 == 0:
                link.symlink_to(outside)
            else:
                os.link(entry, real)
            swaps[0] += 1

    thread = threading.Thread(target=swapper)
    thread.start()
    seen: dict[str, int] = {}
    while time.monotonic() < stop:
        result = host.call("swap", {}, persona="viewer")
        key = result.value["who"] if result.ok else "refused"
        seen[key] = seen.get(key, 0) + 1
    thread.join()
    assert swaps[0] > 100
    assert seen.get("outside", 0) == 0, seen
    assert seen.get("inside", 0) > 0 and seen.get("refused", 0) > 0, seen


# -- policy, audit, tickets -------------------------------------------------------------


def test_the_audit_row_records_the_profile(box: dict[str, Path]) -> None:
    probe(box["root"])
    host = host_for(box["tmp"], box["root"])
    run(host, "probe")
    entry = host.audit.tail(1)[0]
    assert entry.sandbox["confined"] is True
    assert entry.sandbox["network"] is False
    assert entry.sandbox["class"] == "safe"
    off = host_for(box["tmp"] / "off", box["root"], sandbox="off")
    run(off, "probe")
    assert off.audit.tail(1)[0].sandbox == {"confined": False, "reason": "ONGRID_SANDBOX=off"}
    assert host.audit.verify().ok


def test_a_ticket_is_bound_to_the_profile(box: dict[str, Path]) -> None:
    make_skill(box["root"], "wipe", class_="dangerous")
    host = host_for(box["tmp"], box["root"])
    with pytest.raises(ApprovalRequired) as caught:
        host.call("wipe", {}, persona="admin", caller="alice")
    ticket = caught.value.ticket
    host.approve(ticket.id, approver="bob")
    host.approve(ticket.id, approver="carol")
    strict = host_for(box["tmp"], box["root"], sandbox_policy="strict")
    with pytest.raises(Exception, match="sandbox profile changed"):
        strict.call("wipe", {}, persona="admin", caller="alice", ticket=ticket.id)
    result = host.call("wipe", {}, persona="admin", caller="alice", ticket=ticket.id)
    assert result.ok


def test_off_runs_unconfined_and_says_so_once(
    box: dict[str, Path], caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    import ongrid_plugins.executors.confine.profile as profile

    monkeypatch.setattr(profile, "_warned_off", False)
    probe(box["root"])
    host = host_for(box["tmp"], box["root"], sandbox="off")
    target = box["outside"] / "f"
    with caplog.at_level("WARNING", logger="ongrid_plugins.sandbox"):
        assert run(host, "probe", ("write", str(target))) == ["ok"]
        run(host_for(box["tmp"] / "again", box["root"], sandbox="off"), "probe")
    assert target.exists()
    warnings = [r for r in caplog.records if "ONGRID_SANDBOX=off" in r.getMessage()]
    assert len(warnings) == 1 and warnings[0].levelname == "WARNING"


def test_require_refuses_a_call_that_cannot_be_fully_confined(
    box: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    import attrs

    import ongrid_plugins.executors.confine.plan as plan
    from ongrid_plugins.executors.confine.kernel import Support

    crippled = attrs.evolve(SUPPORT, cgroups=False)
    monkeypatch.setattr(plan, "support", lambda: crippled)
    probe(box["root"])
    host = host_for(box["tmp"], box["root"], sandbox="require")
    result = host.call("probe", {"actions": []}, persona="viewer")
    assert not result.ok
    assert "ONGRID_SANDBOX=require" in (result.error or "")
    assert "cgroups" in (result.error or "")
    auto = host_for(box["tmp"] / "auto", box["root"])
    assert auto.call("probe", {"actions": []}, persona="viewer").ok
    assert isinstance(crippled, Support)


def test_entry_scripts_see_their_real_path_through_realpath(box: dict[str, Path]) -> None:
    folder = probe(box["root"])
    host = host_for(box["tmp"], box["root"])
    value = assert_ok(host.call("probe", {"actions": []}, persona="viewer"))
    assert value["argv0"] == "/proc/self/fd/3"
    assert value["real"] == str(folder / "probe.py")


def test_an_empty_env_allow_still_means_no_environment(box: dict[str, Path]) -> None:
    probe(box["root"], env_allow=[])
    host = host_for(box["tmp"], box["root"])
    value = assert_ok(host.call("probe", {"actions": []}, persona="viewer"))
    assert value["env"] == []


def test_doctor_reports_the_machine_and_every_tool(
    box: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    from ongrid_plugins.cli import main

    probe(box["root"])
    probe(box["root"], "writer", class_="mutating")
    env = {
        "ONGRID_STATE_DIR": str(box["tmp"] / "state"),
        "ONGRID_CONFIG_DIR": str(box["tmp"] / "config"),
        "ONGRID_CACHE_DIR": str(box["tmp"] / "cache"),
    }
    for key, value in env.items():
        os.environ[key] = value
    try:
        code = main(["--dirs", str(box["root"]), "--no-defaults", "doctor"])
        text = capsys.readouterr().out
        assert code == 0
        assert "Landlock" in text and f"ABI {SUPPORT.landlock_abi}" in text
        assert "full confinement: yes" in text
        assert "writer" in text and "narrowed under strict" in text
        code = main(["--dirs", str(box["root"]), "--no-defaults", "doctor", "--json"])
        data = json.loads(capsys.readouterr().out)
        assert code == 0 and data["ok"] is True
        assert data["mode"] == "auto" and data["machine"]["landlock_abi"] == SUPPORT.landlock_abi
        names = {t["name"]: t for t in data["tools"]}
        assert names["probe"]["sandbox"]["confined"] is True
        assert names["writer"]["under_strict"].startswith("narrowed")
    finally:
        for key in env:
            del os.environ[key]


# -- an unprivileged host ------------------------------------------------------------

UNPRIVILEGED_HOST = """
import json, os, sys
from ongrid_plugins import SkillHost
from ongrid_plugins.executors.confine import support
from ongrid_plugins.settings import Settings
work = sys.argv[1]
host = SkillHost(Settings(skill_dirs=[work + "/skills"], include_defaults=False, state_dir=work + "/state",
                          config_dir=work + "/config", cache_dir=work + "/cache"))
host.load()
os.makedirs(work + "/state", exist_ok=True)
with open(work + "/state/approvals.db", "w") as f:
    f.write("secret")
result = host.call("probe", {})
print(json.dumps({"ok": result.ok, "value": result.value, "error": result.error,
                  "missing": support().missing(), "uid": os.getuid()}))
"""
UNPRIVILEGED_PROBE = """#!/bin/sh
read -r args
w() { if (echo x > "$1") 2>/dev/null; then printf true; else printf false; fi; }
r() { if cat "$1" >/dev/null 2>&1; then printf true; else printf false; fi; }
set_=$([ -n "$TMPDIR" ] && echo true || echo false)
printf '{"outside": %s, "state": %s, "tmpdir": %s, "tmpdir_set": %s}\\n' \\
  "$(w "$OUTSIDE_TARGET")" "$(r "$STATE_FILE")" "$(w "$TMPDIR/x")" "$set_"
"""


def test_an_unprivileged_host_still_confines_files_and_says_what_is_missing(tmp_path: Path) -> None:
    import shutil
    import subprocess
    import sysconfig
    import tempfile

    import ongrid_plugins

    python = "/usr/bin/python3.11"
    if os.geteuid() != 0 or not shutil.which("setpriv") or not os.path.exists(python):
        pytest.skip("needs root (to become nobody), setpriv and a system Python 3.11")
    work = Path(tempfile.mkdtemp(dir="/var/tmp", prefix="ongrid-unpriv-"))
    try:
        work.chmod(0o777)
        (work / "outside").mkdir(mode=0o777)
        (work / "outside").chmod(0o777)
        folder = make_skill(work / "skills", "probe", script=UNPRIVILEGED_PROBE, env_allow=["TMPDIR"])
        for path in (work / "skills", folder):
            path.chmod(0o755)
        repo = str(Path(ongrid_plugins.__file__).resolve().parent.parent)
        site = sysconfig.get_paths()["purelib"]
        env = {"PYTHONPATH": f"{repo}:{site}", "HOME": str(work), "PATH": "/usr/bin:/bin"}
        nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"]
        check = subprocess.run([*nobody, python, "-c", "import ongrid_plugins"], env=env, capture_output=True)
        if check.returncode != 0:
            pytest.skip(f"the package is not readable by nobody here: {check.stderr.decode()[-200:]}")
        # The probe learns where to poke from two variables it may not receive: bake them in.
        script = UNPRIVILEGED_PROBE.replace("$OUTSIDE_TARGET", str(work / "outside" / "planted"))
        script = script.replace("$STATE_FILE", str(work / "state" / "approvals.db"))
        (folder / "run.sh").write_text(script)
        proc = subprocess.run(
            [*nobody, python, "-c", UNPRIVILEGED_HOST, str(work)],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert proc.returncode == 0, proc.stderr
        report = json.loads(proc.stdout.strip().splitlines()[-1])
        assert report["uid"] == 65534
        assert report["ok"], report
        assert report["value"] == {"outside": False, "state": False, "tmpdir": True, "tmpdir_set": True}
        assert not (work / "outside" / "planted").exists()
        assert any("cgroups" in m for m in report["missing"])
        assert "sandbox: per-call cgroups are not writable" in proc.stderr  # said once, at WARNING
    finally:
        shutil.rmtree(work, ignore_errors=True)


def test_built_in_and_example_skills_run_under_require_and_strict(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from ongrid_plugins.cli import main

    repo = Path(__file__).resolve().parent.parent
    pack = repo / "plugins" / "ongrid-pack-disk" / "ongrid_pack_disk"
    monkeypatch.setenv("ONGRID_SANDBOX", "require")
    monkeypatch.setenv("ONGRID_SANDBOX_POLICY", "strict")
    monkeypatch.setenv("ONGRID_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("ONGRID_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.setenv("ONGRID_CACHE_DIR", str(tmp_path / "cache"))
    home = tmp_path / "home"
    (home / ".cache" / "app").mkdir(parents=True)
    (home / ".cache" / "app" / "old.bin").write_bytes(b"x" * 10)
    os.utime(home / ".cache" / "app" / "old.bin", (0, 0))
    monkeypatch.setenv("HOME", str(home))
    code = main(["--dirs", str(pack), "doctor"])
    text = capsys.readouterr().out
    assert code == 0, text
    assert "REFUSED" not in text and "narrowed" not in text
    for name in (
        "disk_usage",
        "system_info",
        "tail_file",
        "find_large_files",
        "cache_report",
        "disk_cleaner",
    ):
        assert f"  {name} " in text
    report = json.loads(
        _cli_json(
            main,
            capsys,
            "--dirs",
            str(pack),
            "run",
            "cache_report",
            json.dumps({"path": str(home / ".cache")}),
        )
    )
    assert report["files"] == 1
    cleaned = json.loads(
        _cli_json(
            main,
            capsys,
            "--dirs",
            str(pack),
            "run",
            "disk_cleaner",
            json.dumps({"path": str(home / ".cache" / "app"), "dry_run": False}),
            "--yes",
        )
    )
    assert cleaned["files_deleted"] == 1
    assert not (home / ".cache" / "app" / "old.bin").exists()


def _cli_json(main: Any, capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    code = main(list(argv))
    out = capsys.readouterr()
    assert code == 0, out.err
    return out.out


def test_a_cached_rule_base_is_never_closed_under_a_call_that_holds_it(tmp_path: Path) -> None:
    import fcntl

    from ongrid_plugins.executors.confine import plan

    held = plan._acquire_base((str(tmp_path / "hidden-0"),))
    fds = [fd for fd, _ in held.grants]
    assert fds
    others = [plan._acquire_base((str(tmp_path / f"hidden-{i}"),)) for i in range(1, plan._KEEP_BASES + 3)]
    for other in others:
        plan._release(other)
    assert held.retired  # evicted, but still held: its descriptors stay open
    assert all(fcntl.fcntl(fd, fcntl.F_GETFD) >= 0 for fd in fds)
    plan._release(held)
    assert held.grants == []
    for fd in fds:
        with pytest.raises(OSError):
            fcntl.fcntl(fd, fcntl.F_GETFD)


@pytest.mark.skipif(not os.path.exists("/etc/shadow"), reason="no /etc/shadow on this machine")
def test_system_secrets_are_hidden_unless_declared_and_etc_stays_listable(box: dict[str, Path]) -> None:
    probe(box["root"], "plain")
    probe(box["root"], "auditor", sandbox={"read": ["/etc/shadow"]})
    host = host_for(box["tmp"], box["root"])
    shadow, listing = run(host, "plain", ("read", "/etc/shadow"), ("list", "/etc"))
    assert shadow.startswith("error:"), shadow
    assert listing.startswith("ok:") and "passwd" in listing.split(",")
    assert run(host, "plain", ("read", "/etc/passwd"))[0].startswith("ok:root:")
    declared = run(host, "auditor", ("read", "/etc/shadow"))[0]
    with open("/etc/shadow", "rb") as f:
        assert declared == "ok:" + f.read(200).decode("utf-8", "replace")


# -- what is made ready ahead of a call is checked again when the call runs ---------------


@pytest.fixture
def secrets_dir() -> Any:
    """A folder for planted "system secrets" outside /tmp (a confined call has a private /tmp)."""
    import shutil
    import tempfile

    folder = Path(tempfile.mkdtemp(prefix="ongrid-secrets-", dir="/var/tmp"))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


READER = f"""#!{sys.executable}
import json, os, sys
args = json.load(sys.stdin)
out = {{}}
for path in args["paths"]:
    try:
        if os.path.isdir(path):
            out[path] = "dir:" + ",".join(sorted(os.listdir(path)))
        else:
            with open(path) as f:
                out[path] = "file:" + f.read()
    except OSError as exc:
        out[path] = "error:" + type(exc).__name__
print(json.dumps(out))
"""


def read_paths(host: SkillHost, *paths: Path) -> dict[str, str]:
    value = assert_ok(host.call("reader", {"paths": [str(p) for p in paths]}, persona="viewer"))
    return value


def planted_shadow(box: dict[str, Path], secrets_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A planted ``shadow``, the machine's only secret for the sandbox, and the reader skill."""
    from ongrid_plugins.executors.confine import warm

    secret = secrets_dir / "shadow"
    secret.write_text("OLD")
    monkeypatch.setattr(warm, "secret_paths", lambda: [str(secret)])
    make_skill(box["root"], "reader", script=READER, entry="reader.py")
    return secret


def test_a_secret_replaced_by_rename_after_threads_were_made_ready_is_covered_again(
    box: dict[str, Path], secrets_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = planted_shadow(box, secrets_dir, monkeypatch)
    host = host_for(box["tmp"], box["root"])
    assert read_paths(host, secret) == {str(secret): "error:PermissionError"}
    time.sleep(0.5)  # threads for the next calls are parked now, the secret covered in them
    # The way passwd writes /etc/shadow: a new file renamed over the old one. The kernel
    # detaches a mount on a replaced file in every namespace, the parked ones included.
    fresh = secrets_dir / "shadow.new"
    fresh.write_text("NEW")
    os.rename(fresh, secret)
    for _ in range(3):  # the two parked threads, then one made after the rename
        assert read_paths(host, secret) == {str(secret): "error:PermissionError"}
    secret.unlink()
    secret.write_text("AGAIN")  # deleted and written anew
    assert read_paths(host, secret) == {str(secret): "error:PermissionError"}
    assert secret.read_text() == "AGAIN"  # the host's own view is untouched


def test_the_refiller_checks_its_covers_only_after_a_call_found_them_stale(
    box: dict[str, Path], secrets_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ongrid_plugins.executors.confine import warm

    secret = planted_shadow(box, secrets_dir, monkeypatch)
    checks: list[tuple[str, bool]] = []  # (thread name, whether anything was stale)
    refresh = warm.Covers.refresh

    def recorded(self: Any) -> bool:
        changed = refresh(self)
        checks.append((threading.current_thread().name, changed))
        return changed

    monkeypatch.setattr(warm.Covers, "refresh", recorded)
    host = host_for(box["tmp"], box["root"])

    def settled_calls(count: int) -> list[tuple[str, bool]]:
        checks.clear()
        for _ in range(count):
            assert read_paths(host, secret) == {str(secret): "error:PermissionError"}
            time.sleep(0.2)  # the refiller makes the next thread meanwhile
        return list(checks)

    settled_calls(4)  # whatever earlier calls of this process left: the secret covered now
    quiet = settled_calls(4)
    # Nothing changed: every call checks its own covers, finds them current, and the
    # refiller checks nothing.
    assert quiet == [("ongrid-spawn", False)] * 4
    fresh = secrets_dir / "shadow.new"
    fresh.write_text("NEW")
    os.rename(fresh, secret)
    after = settled_calls(5)
    spawning = [changed for name, changed in after if name == "ongrid-spawn"]
    assert len(spawning) == 5 and spawning[0] is True  # the call re-covered it
    assert ("ongrid-warm", True) in after  # and the refiller then its own covers
    assert spawning[-2:] == [False, False]  # threads made since come covered


def test_a_secret_that_appears_after_the_host_started_is_covered(
    box: dict[str, Path], secrets_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ongrid_plugins.executors.confine import warm

    later, folder = secrets_dir / "ssh_host_new_key", secrets_dir / "sudoers.d"
    monkeypatch.setattr(warm, "secret_paths", lambda: [str(later), str(folder)])
    make_skill(box["root"], "reader", script=READER, entry="reader.py")
    host = host_for(box["tmp"], box["root"])
    assert read_paths(host, later) == {str(later): "error:FileNotFoundError"}
    time.sleep(0.5)
    later.write_text("KEY")
    folder.mkdir()
    (folder / "admins").write_text("ALL")
    seen = read_paths(host, later, folder, folder / "admins")
    # A file is covered by an unopenable device, a folder by an empty one.
    assert seen == {
        str(later): "error:PermissionError",
        str(folder): "dir:",
        str(folder / "admins"): "error:FileNotFoundError",
    }
    assert (folder / "admins").read_text() == "ALL"


def test_spawning_threads_are_born_without_a_bounding_set_and_the_host_keeps_its_own() -> None:
    from ongrid_plugins.executors.confine import warm

    if not SUPPORT.root:
        pytest.skip("only a root host has capabilities to drop")

    def status(_thread: Any) -> dict[str, str]:
        with open("/proc/thread-self/status") as f:
            return dict(line.split(":\t", 1) for line in f.read().splitlines() if ":\t" in line)

    seen = []
    for _ in range(3):  # made on the spot or parked by the refiller, alike
        thread = warm.take(SUPPORT.cgroups, SUPPORT.mount_namespace, True)
        seen.append(thread.run(status))
        thread.release()
        time.sleep(0.2)
    for fields in seen:
        assert fields["CapBnd"].strip() == "0000000000000000"
        assert fields["CapEff"].strip() != "0000000000000000"  # still mounts its /tmp
    assert status(None)["CapBnd"].strip() != "0000000000000000"


def test_calls_wake_one_refiller_instead_of_starting_one_each(box: dict[str, Path]) -> None:
    probe(box["root"])
    host = host_for(box["tmp"], box["root"])
    run(host, "probe")
    time.sleep(0.3)
    started = []
    original = threading.Thread.start

    def counting(self: threading.Thread) -> None:
        started.append(self.name)
        original(self)

    threading.Thread.start = counting  # type: ignore[method-assign]
    try:
        for _ in range(5):
            run(host, "probe")
            time.sleep(0.05)
    finally:
        threading.Thread.start = original  # type: ignore[method-assign]
    assert "ongrid-warm" not in started
    assert started.count("ongrid-spawn") == 5  # one spawning thread per call, made ahead


def test_a_spawning_thread_joins_its_calls_groups_by_writing_0_never_its_thread_id(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A thread id written to a v1 "tasks" file is moved under the kernel's global
    # threadgroup lock, an RCU grace period when no move came just before, during which
    # every fork and clone on the machine waits: "0" moves the writer without that lock.
    from ongrid_plugins.executors.confine import cgroups

    group = cgroups.acquire()
    assert group is not None
    written: list[tuple[str, str]] = []
    real_write = cgroups._write

    def recording(path: str, value: str) -> None:
        if threading.current_thread().name == "joining":  # not a refiller left by an earlier test
            written.append((os.path.basename(path), value))
        real_write(path, value)

    monkeypatch.setattr(cgroups, "_write", recording)
    seen: list[str] = []

    def spawning_thread() -> None:
        group.join_thread()
        seen.append(Path("/proc/thread-self/cgroup").read_text())

    try:
        thread = threading.Thread(target=spawning_thread, name="joining")
        thread.start()
        thread.join(10)
    finally:
        cgroups.release(group)
    assert written == [("tasks", "0"), ("tasks", "0")]
    memberships = dict(line.split(":", 2)[1:] for line in seen[0].splitlines())
    assert group.pids.endswith(memberships["pids"]) and memberships["pids"] != "/"
    assert group.memory.endswith(memberships["memory"]) and memberships["memory"] != "/"
    # The thread that wrote is the one that moved: this one stays where it was.
    here = dict(line.split(":", 2)[1:] for line in Path("/proc/thread-self/cgroup").read_text().splitlines())
    assert here["pids"] != memberships["pids"]


def test_a_pooled_group_keeps_its_limits_and_a_hit_is_not_reported_again(box: dict[str, Path]) -> None:
    sleepers(box["root"], "bomb", 20, 8, 1)
    sleepers(box["root"], "many", 12, 16, 1)
    host = host_for(box["tmp"], box["root"])
    for _ in range(3):  # the groups go round the pool: each call gets its own limits
        bombed = host.call("bomb", {}, persona="viewer")
        assert not bombed.ok and "process limit reached (8 processes)" in (bombed.error or "")
        assert_ok(host.call("many", {}, persona="viewer"))  # 12 sleepers fit in 16


def test_an_entry_outside_its_own_folder_runs_from_a_root_under_tmp(tmp_path: Path) -> None:
    """The private /tmp binds back the skill's own folder only; the entry (``../bin/tool``,
    which the loader accepts) is granted on its own, as the one file the host checked."""
    import shutil
    import tempfile

    root = Path(tempfile.mkdtemp(prefix="ongrid-root-", dir="/tmp"))
    try:
        (root / "bin").mkdir()
        tool = root / "bin" / "tool"
        tool.write_text('#!/bin/sh\necho \'{"ran": "outside"}\'\n')
        tool.chmod(0o755)
        (root / "s1").mkdir()
        (root / "s1" / "skill.json").write_text(
            json.dumps(
                {"name": "relup", "description": "An entry beside its folder.", "entry": "../bin/tool"}
            )
        )
        host = host_for(tmp_path, root)
        assert assert_ok(host.call("relup", {})) == {"ran": "outside"}
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_a_pip_packs_helpers_beside_its_skills_are_readable_from_a_venv_under_tmp(tmp_path: Path) -> None:
    """A checkout (and its venv) under /tmp: the pack's package is bound back whole, so a
    skill's ``from _walk import ...`` of the pack's shared helper still works."""
    import shutil
    import tempfile

    package = Path(tempfile.mkdtemp(prefix="ongrid-venv-", dir="/tmp")) / "ongrid_pack_x"
    try:
        (package / "tool").mkdir(parents=True)
        (package / "__init__.py").write_text("")
        (package / "_helper.py").write_text("VALUE = 'from the helper'\n")
        entry = package / "tool" / "run.py"
        entry.write_text(
            f"#!{sys.executable}\nimport json, os, sys\n"
            "sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.realpath(__file__))))\n"
            "from _helper import VALUE\nprint(json.dumps({'helper': VALUE}))\n"
        )
        entry.chmod(0o755)
        (package / "tool" / "skill.json").write_text(
            json.dumps({"name": "packed", "description": "Uses its pack's helper.", "entry": "run.py"})
        )
        host = host_for(tmp_path, package)
        assert assert_ok(host.call("packed", {})) == {"helper": "from the helper"}
    finally:
        shutil.rmtree(package.parent, ignore_errors=True)
