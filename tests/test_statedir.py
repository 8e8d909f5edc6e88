"""``state init`` on a folder a group writes to: it never follows what a member planted there.

Runs as any user: the group is the user's own primary group, which its files may always
be given to. (``tests/test_state_shared.py`` runs the whole flow as real users.)
"""

from __future__ import annotations

import grp
import os
import stat
from pathlib import Path

import pytest

from ongrid_plugins.commands.statedir import init_shared
from ongrid_plugins.errors import StateAccessError

GROUP = grp.getgrgid(os.getgid()).gr_name


def _mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def test_state_init_refuses_a_planted_symlink_and_leaves_its_target_alone(tmp_path: Path) -> None:
    shared, victim = tmp_path / "shared", tmp_path / "victim"
    victim.mkdir(mode=0o755)
    victim.chmod(0o755)
    (tmp_path / "file").write_text("x")
    (tmp_path / "file").chmod(0o644)
    init_shared(str(shared), GROUP)
    (shared / "planted").symlink_to(victim)
    (shared / "planted-file").symlink_to(tmp_path / "file")

    with pytest.raises(StateAccessError) as caught:
        init_shared(str(shared), GROUP)

    assert _mode(victim) == 0o755 and _mode(tmp_path / "file") == 0o644
    message = str(caught.value)
    assert str(shared / "planted") in message and "symbolic link" in message
    assert "remove it" in message


def test_state_init_refuses_a_symlinked_journal_folder(tmp_path: Path) -> None:
    shared, victim = tmp_path / "shared", tmp_path / "victim"
    victim.mkdir(mode=0o755)
    victim.chmod(0o755)
    shared.mkdir()
    (shared / "audit-inflight").symlink_to(victim)

    with pytest.raises(StateAccessError, match="audit-inflight: it is a symbolic link"):
        init_shared(str(shared), GROUP)

    assert _mode(victim) == 0o755


def test_state_init_refuses_a_dangling_symlink_in_place_of_a_database(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    (shared / "audit.db").symlink_to(tmp_path / "elsewhere.db")

    with pytest.raises(StateAccessError, match=r"audit\.db: it is a symbolic link"):
        init_shared(str(shared), GROUP)

    assert not (tmp_path / "elsewhere.db").exists()


@pytest.mark.parametrize("name", ["approvals.db-journal", "audit.db-wal", "audit.db-shm"])
def test_state_init_refuses_a_symlink_in_place_of_a_databases_side_file(tmp_path: Path, name: str) -> None:
    """Found in review: a planted approvals.db-journal link ended `state init` in a raw
    sqlite3 traceback, and an audit.db-wal link was silently deleted."""
    shared = tmp_path / "shared"
    shared.mkdir()
    target = tmp_path / "elsewhere"
    target.write_text("keep")
    (shared / name).symlink_to(target)

    with pytest.raises(StateAccessError, match=rf"{name.replace('.', '[.]')}: it is a symbolic link"):
        init_shared(str(shared), GROUP)

    assert (shared / name).is_symlink() and target.read_text() == "keep"


def test_state_init_leaves_a_fifo_alone_and_still_shares_the_rest(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    os.mkfifo(shared / "pipe", 0o600)
    (shared / "old.txt").write_text("x")
    (shared / "old.txt").chmod(0o600)

    done = init_shared(str(shared), GROUP)

    assert _mode(shared / "old.txt") == 0o660 and str(shared / "old.txt") in done.paths
    assert _mode(shared / "pipe") == 0o600 and str(shared / "pipe") not in done.paths
    assert _mode(shared) == 0o2770
    assert _mode(shared / "audit.db") == 0o660 and _mode(shared / "approvals.db") == 0o660


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a link to another user needs root")
def test_a_database_link_another_user_planted_is_refused_not_followed(tmp_path: Path) -> None:
    from ongrid_plugins.audit import AuditLog

    state = tmp_path / "state"
    state.mkdir()
    (state / "audit.db").symlink_to(tmp_path / "target.db")
    os.lchown(state / "audit.db", 65534, 65534)

    with pytest.raises(StateAccessError, match=r"audit\.db: it is a symbolic link made by"):
        AuditLog(str(state / "audit.db")).recover()

    assert not (tmp_path / "target.db").exists()


def test_a_journal_folder_this_user_cannot_use_names_the_state_folder_to_share() -> None:
    """The fix named `state init .../state/audit-inflight`, which makes a state folder inside it."""
    from ongrid_plugins.core._sqlite import access_error

    error = access_error(
        "/srv/state/audit-inflight/1-2-1@h.journal", PermissionError(13, "denied"), "/srv/state"
    )
    assert "`ongrid-skills state init /srv/state --group GROUP`" in str(error)
    assert "state init /srv/state/audit-inflight" not in str(error)


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a read-only file system needs root")
def test_a_state_folder_on_a_read_only_mount_says_so_not_to_run_state_init(tmp_path: Path) -> None:
    import threading

    from ongrid_plugins.core._sqlite import access_error
    from ongrid_plugins.executors.confine import mounts

    state = tmp_path / "ro" / "state"
    state.mkdir(parents=True)
    seen: dict[str, object] = {}

    def in_a_namespace() -> None:  # the host's own mounts stay as they are
        try:
            mounts.enter_own_namespace()
            target = os.fsencode(tmp_path / "ro")
            mounts._mount(target, target, None, mounts._MS_BIND, None)
            mounts._mount(None, target, None, mounts._MS_REMOUNT | mounts._MS_BIND | mounts._MS_RDONLY, None)
            seen["error"] = str(access_error(str(state / "approvals.db"), OSError(30, "read-only")))
        except BaseException as exc:
            seen["raised"] = exc

    thread = threading.Thread(target=in_a_namespace)
    thread.start()
    thread.join(30)
    assert "raised" not in seen, seen
    message = str(seen["error"])
    assert "it is on a read-only file system, which `state init` cannot change" in message, message
    assert "remount it read-write, or point ONGRID_STATE_DIR at a writable folder" in message
