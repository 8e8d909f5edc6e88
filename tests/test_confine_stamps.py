"""The path checks every confined call makes before it reuses a cached grant or cover.

``executors.confine.stamps`` tells whether paths still name the files (or the folder
times) they named when a cached grant or cover was made. A wrong "still the same"
would run a call with grants or covers made for other files, so each way a path can
change is tried, with real files, renames and symlinks.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ongrid_plugins.executors.confine import stamps


def stamp(path: Path | str) -> tuple[str, int | None, int | None]:
    try:
        st = os.stat(path)
    except OSError:
        return (str(path), None, None)
    return (str(path), st.st_dev, st.st_ino)


def test_files_unchanged_hold_and_an_empty_list_holds(tmp_path: Path) -> None:
    (tmp_path / "a").write_text("a")
    (tmp_path / "d").mkdir()
    taken = [stamp(tmp_path / "a"), stamp(tmp_path / "d"), stamp(tmp_path / "absent")]
    assert stamps.same_files(taken) is True
    assert stamps.same_files([]) is True


def test_a_file_replaced_by_rename_deleted_or_created_no_longer_holds(tmp_path: Path) -> None:
    secret = tmp_path / "shadow"
    secret.write_text("old")
    taken = [stamp(secret)]
    new = tmp_path / "shadow.new"
    new.write_text("new")
    os.rename(new, secret)  # how passwd replaces /etc/shadow
    assert stamps.same_files(taken) is False
    taken = [stamp(secret)]
    secret.unlink()
    assert stamps.same_files(taken) is False
    absent = [stamp(secret)]
    assert absent == [(str(secret), None, None)]
    assert stamps.same_files(absent) is True
    secret.write_text("appeared")
    assert stamps.same_files(absent) is False


def test_a_symlink_is_followed_and_retargeting_it_is_a_change(tmp_path: Path) -> None:
    (tmp_path / "one").write_text("1")
    (tmp_path / "two").write_text("2")
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "one")
    taken = [stamp(link)]
    assert taken[0][2] == os.stat(tmp_path / "one").st_ino
    assert stamps.same_files(taken) is True
    link.unlink()
    link.symlink_to(tmp_path / "two")
    assert stamps.same_files(taken) is False
    link.unlink()
    link.symlink_to(tmp_path / "nowhere")  # dangling: nothing there, as stat sees it
    assert stamps.same_files([(str(link), None, None)]) is True


def test_one_changed_stamp_among_many_is_found_wherever_it_is(tmp_path: Path) -> None:
    paths = []
    for i in range(40):
        (tmp_path / f"f{i}").write_text(str(i))
        paths.append(tmp_path / f"f{i}")
    taken = [stamp(p) for p in paths]
    for changed in (0, 17, 39):
        wrong = list(taken)
        path, dev, ino = wrong[changed]
        assert ino is not None
        wrong[changed] = (path, dev, ino + 1)
        assert stamps.same_files(wrong) is False
    assert stamps.same_files(taken) is True


def test_hostile_stamps_never_hold(tmp_path: Path) -> None:
    (tmp_path / "a").write_text("a")
    path, dev, ino = stamp(tmp_path / "a")
    assert dev is not None and ino is not None
    assert stamps.same_files([(path, -1, ino)]) is False  # no file has a negative device
    assert stamps.same_files([(path, dev, 2**70)]) is False  # nor an inode past 64 bits
    assert stamps.same_files([(path, None, None)]) is False  # recorded absent, but there
    # A path with a NUL or one that is not valid UTF-8 names no file: recorded present, it changed.
    assert stamps.same_files([(path + "\x00x", dev, ino)]) is False
    assert stamps.same_files([(path[:-1] + "\udcff", dev, ino)]) is False
    assert stamps.same_files([(str(tmp_path / ("x" * 5000)), dev, ino)]) is False  # ENAMETOOLONG


def test_a_path_that_cannot_be_read_holds_only_when_recorded_absent() -> None:
    assert stamps.same_files([("/x\udcff", None, None)]) is True
    assert stamps.same_files([("/x\x00y", None, None)]) is True
    assert stamps.same_mtimes([("/x\udcff", 0)]) is False


def test_a_folder_time_changes_when_an_entry_is_added_or_removed(tmp_path: Path) -> None:
    folder = tmp_path / "home"
    folder.mkdir()
    os.utime(folder, ns=(1_000_000_000, 1_000_000_000))
    taken = [(str(folder), os.stat(folder).st_mtime_ns)]
    assert stamps.same_mtimes(taken) is True
    (folder / ".ssh").mkdir()  # a hidden folder appears
    assert stamps.same_mtimes(taken) is False
    os.utime(folder, ns=(1_000_000_000, 1_000_000_000))
    assert stamps.same_mtimes(taken) is True
    assert stamps.same_mtimes([(str(folder), 1_000_000_001)]) is False  # one nanosecond off
    assert stamps.same_mtimes([(str(tmp_path / "absent"), 0)]) is False
    assert stamps.same_mtimes([(str(folder), 2**80)]) is False
    assert stamps.same_mtimes([(str(folder), -(2**80))]) is False


def test_folder_times_before_1970_compare_as_os_stat_gives_them(tmp_path: Path) -> None:
    folder = tmp_path / "old"
    folder.mkdir()
    os.utime(folder, ns=(-1_500_000_000, -1_500_000_000))  # 1969, between two seconds
    mtime = os.stat(folder).st_mtime_ns
    assert mtime == -1_500_000_000
    assert stamps.same_mtimes([(str(folder), mtime)]) is True
    assert stamps.same_mtimes([(str(folder), mtime + 1)]) is False


def test_secret_paths_list_the_ssh_host_keys_as_glob_would_and_nothing_else(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import glob

    from ongrid_plugins.executors.confine import profile

    ssh = tmp_path / "ssh"
    ssh.mkdir()
    for name in ("ssh_host_rsa_key", "ssh_host_rsa_key.pub", "ssh_host_ed25519_key", "ssh_host_key",
                 "ssh_config", "moduli", "ssh_host_rsa_key-cert", "xssh_host_rsa_key"):  # fmt: skip
        (ssh / name).write_text("")
    monkeypatch.setattr(profile, "_SSH", str(ssh))
    keys = sorted(glob.glob(str(ssh / "ssh_host_*key")))
    assert profile.secret_paths() == [*profile.SYSTEM_SECRETS, *keys]
    assert keys == [str(ssh / n) for n in ("ssh_host_ed25519_key", "ssh_host_key", "ssh_host_rsa_key")]
    monkeypatch.setattr(profile, "_SSH", str(tmp_path / "absent"))
    assert profile.secret_paths() == list(profile.SYSTEM_SECRETS)
