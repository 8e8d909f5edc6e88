"""Approvals shared between people through one state folder, with real OS users made by the test.

Three members of a fresh group (ann requests, bob and cid approve) and one outsider
(eve) each run ``ongrid-skills`` as themselves against one ``ONGRID_STATE_DIR`` set up
by ``ongrid-skills state init DIR --group NAME``. Needs root and useradd; skipped (and
says why) elsewhere.
"""

from __future__ import annotations

import grp
import json
import os
import pwd
import secrets
import shutil
import stat
import subprocess
import sys
import sysconfig
import tempfile
from collections.abc import Iterator
from pathlib import Path

import attrs
import pytest

import ongrid_plugins

REPO = Path(ongrid_plugins.__file__).resolve().parent.parent
CAN_MAKE_USERS = hasattr(os, "geteuid") and os.geteuid() == 0 and bool(shutil.which("useradd"))
pytestmark = pytest.mark.skipif(
    not CAN_MAKE_USERS,
    reason="creating OS users needs root and useradd/groupadd; this test cannot create them here",
)


@attrs.frozen
class People:
    group: str
    names: dict[str, str]  # role -> OS user name
    base: Path
    python: str

    def run(self, role: str, *args: str, state: Path | None = None) -> subprocess.CompletedProcess[str]:
        name = self.names[role]
        entry = pwd.getpwnam(name)
        env = {
            "PATH": "/usr/bin:/bin",
            "HOME": str(self.base / "home" / role),
            "PYTHONPATH": os.pathsep.join([str(REPO), sysconfig.get_paths()["purelib"]]),
            "ONGRID_STATE_DIR": str(state or self.base / "shared"),
        }
        command = [
            self.python,
            "-m",
            "ongrid_plugins",
            "--no-defaults",
            "--dirs",
            str(self.base / "skills"),
            *args,
        ]
        return subprocess.run(
            command,
            env=env,
            user=entry.pw_uid,
            group=entry.pw_gid,
            extra_groups=os.getgrouplist(name, entry.pw_gid),
            capture_output=True,
            text=True,
            timeout=60,
            cwd="/",
        )


def _python_for_others() -> str:
    """An interpreter other users may run: this one, or the system's of the same version."""
    here = os.path.realpath(sys.executable)
    candidates = [here, f"/usr/bin/python{sys.version_info.major}.{sys.version_info.minor}"]
    for candidate in candidates:
        parts = Path(candidate).parents
        if os.path.exists(candidate) and all(os.stat(p).st_mode & stat.S_IXOTH for p in parts):
            return candidate
    pytest.skip(f"no Python {sys.version_info.major}.{sys.version_info.minor} that other users may run")


@pytest.fixture(scope="module")
def people() -> Iterator[People]:
    tag = "og" + secrets.token_hex(3)
    group = f"{tag}ops"
    names = {role: f"{tag}{role}" for role in ("ann", "bob", "cid", "eve")}
    base = Path(tempfile.mkdtemp(prefix="ongrid-shared-", dir="/tmp"))
    base.chmod(0o755)
    made: list[str] = []
    try:
        subprocess.run(["groupadd", group], check=True, capture_output=True)
        for role, name in names.items():
            extra = [] if role == "eve" else ["-G", group]
            subprocess.run(
                ["useradd", "-M", "-N", "-s", "/usr/sbin/nologin", *extra, name],
                check=True,
                capture_output=True,
            )
            made.append(name)
            (base / "home" / role).mkdir(parents=True)
            shutil.chown(base / "home" / role, name)
        folder = base / "skills" / "wipe"
        folder.mkdir(parents=True)
        manifest = {"name": "wipe", "description": "wipes a path", "entry": "run.sh", "class": "dangerous"}
        (folder / "skill.json").write_text(json.dumps(manifest))
        (folder / "run.sh").write_text(
            '#!/bin/sh\nread -r args\necho "wiping $args" >&2\necho \'{"wiped": true}\'\n'
        )
        (folder / "run.sh").chmod(0o755)
        yield People(group, names, base, _python_for_others())
    finally:
        for name in made:
            subprocess.run(["userdel", name], capture_output=True)
        subprocess.run(["groupdel", group], capture_output=True)
        shutil.rmtree(base, ignore_errors=True)


def _ticket_of(output: str) -> str:
    for word in output.replace("'", " ").replace('"', " ").split():
        if len(word) == 16 and all(c in "0123456789abcdef" for c in word):
            return word
    raise AssertionError(f"no ticket id in: {output}")


def test_a_private_state_folder_is_a_clear_error_for_another_user_never_a_traceback(people):
    private = people.base / "home" / "ann" / "state"
    # Reading commands create nothing: a call that opens a ticket makes the state folder.
    made = people.run("ann", "run", "wipe", '{"path": "/srv/old"}', "--persona", "admin", state=private)
    assert made.returncode == 3, made.stderr
    assert stat.S_IMODE(private.stat().st_mode) == 0o700
    other = people.run("bob", "approvals", "list", state=private)
    assert other.returncode == 2
    assert "Traceback" not in other.stderr
    assert f"{people.names['bob']} cannot use the state folder {private}" in other.stderr
    assert f"owner {people.names['ann']}" in other.stderr
    assert f"ongrid-skills state init {private} --group GROUP" in other.stderr


def test_members_of_the_group_share_tickets_and_the_two_person_rule_holds_between_them(people):
    shared = people.base / "shared"
    init = subprocess.run(
        [sys.executable, "-m", "ongrid_plugins", "state", "init", str(shared), "--group", people.group],
        capture_output=True,
        text=True,
        check=True,
    )
    assert f"export ONGRID_STATE_DIR={shared}" in init.stdout
    asked = people.run("ann", "run", "wipe", '{"path": "/srv/old"}', "--persona", "admin")
    assert asked.returncode == 3, asked.stderr
    ticket = _ticket_of(asked.stderr + asked.stdout)

    own = people.run("ann", "approvals", "approve", ticket)
    assert own.returncode == 3 and "cannot approve it" in own.stderr
    first = people.run("bob", "approvals", "approve", ticket, "--note", "backup checked")
    assert first.returncode == 0, first.stderr
    assert "1 of 2" in first.stdout
    again = people.run("bob", "approvals", "approve", ticket)
    assert again.returncode == 3 and "already approved" in again.stderr
    outsider = people.run("eve", "approvals", "approve", ticket)
    assert outsider.returncode == 2 and "Traceback" not in outsider.stderr
    assert f"{people.names['eve']} cannot use the state folder {shared}" in outsider.stderr
    second = people.run("cid", "approvals", "approve", ticket)
    assert second.returncode == 0 and "is approved by" in second.stdout, second.stderr

    ran = people.run("ann", "run", "wipe", '{"path": "/srv/old"}', "--persona", "admin", "--ticket", ticket)
    assert ran.returncode == 0, ran.stderr
    assert json.loads(ran.stdout) == {"wiped": True}
    replay = people.run(
        "ann", "run", "wipe", '{"path": "/srv/old"}', "--persona", "admin", "--ticket", ticket
    )
    assert replay.returncode == 3 and "already ran" in replay.stderr

    shown = json.loads(people.run("cid", "approvals", "show", ticket, "--json").stdout)
    names = people.names
    assert (shown["requester"], shown["approvers"]) == (names["ann"], [names["bob"], names["cid"]])
    rows = json.loads(people.run("bob", "audit", "list", "--json").stdout)
    outcomes = [(r["caller"], r["outcome"]) for r in rows["items"] if r["tool"] == "wipe"]
    assert outcomes == [
        (names["ann"], "needs_approval"),
        (names["ann"], "approval_refused"),  # refused attempts are rows too: her own ticket
        (names["bob"], "approval"),  # approvals are rows of the chained log too
        (names["bob"], "approval_refused"),  # already approved by him
        (names["cid"], "approval"),
        (names["ann"], "ok"),
        (names["ann"], "ticket_refused"),
    ]

    gid = grp.getgrnam(people.group).gr_gid
    for path in [shared, *shared.rglob("*")]:
        st = path.lstat()
        assert st.st_gid == gid, f"{path} is not in group {people.group}"
        wanted = stat.S_IRGRP | stat.S_IWGRP | (stat.S_ISGID | stat.S_IXGRP if path.is_dir() else 0)
        assert st.st_mode & wanted == wanted, f"{path} has mode {stat.filemode(st.st_mode)}"
        assert st.st_mode & stat.S_IRWXO == 0, f"{path} is open to everyone: {stat.filemode(st.st_mode)}"
