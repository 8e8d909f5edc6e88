"""The path checks every confined call makes: compiled and Python, the same answers.

``executors.confine.stamps`` tells whether paths still name the files (or the folder
times) they named when a cached grant or cover was made. A wrong "still the same"
would run a call with grants or covers made for other files, so each way a path can
change is tried on both implementations, with real files, renames and symlinks.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from ongrid_plugins.executors.confine import stamps

_speedups: Any = None
with contextlib.suppress(ImportError):  # not built: the first test fails and says so
    from ongrid_plugins import _speedups


def test_the_compiled_checks_are_built_and_in_use() -> None:
    assert _speedups is not None, "ongrid_plugins/_speedups.c did not build"
    assert stamps._FILES is _speedups.same_files
    assert stamps._MTIMES is _speedups.same_mtimes


def _compiled_files(items: Sequence[Any]) -> bool | None:
    return _speedups.same_files(items)  # type: ignore[no-any-return]


def _compiled_mtimes(items: Sequence[Any]) -> bool | None:
    return _speedups.same_mtimes(items)  # type: ignore[no-any-return]


Check = Callable[[Sequence[Any]], "bool | None"]
FILES: list[Check] = [stamps._same_files, stamps.same_files, _compiled_files]
MTIMES: list[Check] = [stamps._same_mtimes, stamps.same_mtimes, _compiled_mtimes]
IDS = ["python", "public", "compiled"]


def stamp(path: Path | str) -> tuple[str, int | None, int | None]:
    try:
        st = os.stat(path)
    except OSError:
        return (str(path), None, None)
    return (str(path), st.st_dev, st.st_ino)


@pytest.mark.parametrize("check", FILES, ids=IDS)
def test_files_unchanged_hold_and_an_empty_list_holds(tmp_path: Path, check: Any) -> None:
    (tmp_path / "a").write_text("a")
    (tmp_path / "d").mkdir()
    taken = [stamp(tmp_path / "a"), stamp(tmp_path / "d"), stamp(tmp_path / "absent")]
    assert check(taken) is True
    assert check([]) is True


@pytest.mark.parametrize("check", FILES, ids=IDS)
def test_a_file_replaced_by_rename_deleted_or_created_no_longer_holds(tmp_path: Path, check: Any) -> None:
    secret = tmp_path / "shadow"
    secret.write_text("old")
    taken = [stamp(secret)]
    new = tmp_path / "shadow.new"
    new.write_text("new")
    os.rename(new, secret)  # how passwd replaces /etc/shadow
    assert check(taken) is False
    taken = [stamp(secret)]
    secret.unlink()
    assert check(taken) is False
    absent = [stamp(secret)]
    assert absent == [(str(secret), None, None)]
    assert check(absent) is True
    secret.write_text("appeared")
    assert check(absent) is False


@pytest.mark.parametrize("check", FILES, ids=IDS)
def test_a_symlink_is_followed_and_retargeting_it_is_a_change(tmp_path: Path, check: Any) -> None:
    (tmp_path / "one").write_text("1")
    (tmp_path / "two").write_text("2")
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "one")
    taken = [stamp(link)]
    assert taken[0][2] == os.stat(tmp_path / "one").st_ino
    assert check(taken) is True
    link.unlink()
    link.symlink_to(tmp_path / "two")
    assert check(taken) is False
    link.unlink()
    link.symlink_to(tmp_path / "nowhere")  # dangling: nothing there, as stat sees it
    assert check([(str(link), None, None)]) is True


@pytest.mark.parametrize("check", FILES, ids=IDS)
def test_one_changed_stamp_among_many_is_found_wherever_it_is(tmp_path: Path, check: Any) -> None:
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
        assert check(wrong) is False
    assert check(taken) is True


@pytest.mark.parametrize("check", FILES, ids=IDS)
def test_hostile_stamps_never_hold(tmp_path: Path, check: Any) -> None:
    (tmp_path / "a").write_text("a")
    path, dev, ino = stamp(tmp_path / "a")
    assert dev is not None and ino is not None
    assert check([(path, -1, ino)]) is False  # no file has a negative device
    assert check([(path, dev, 2**70)]) is False  # nor an inode past 64 bits
    assert check([(path, None, None)]) is False  # recorded absent, but there
    # A path with a NUL or one that is not valid UTF-8 names no file: recorded present, it
    # changed (the compiled check says it cannot tell, and the public one asks Python).
    unreadable = None if check is _compiled_files else False
    assert check([(path + "\x00x", dev, ino)]) is unreadable
    assert check([(path[:-1] + "\udcff", dev, ino)]) is unreadable
    assert check([(str(tmp_path / ("x" * 5000)), dev, ino)]) is False  # ENAMETOOLONG


def test_the_compiled_check_hands_what_it_cannot_read_to_python(tmp_path: Path) -> None:
    assert _speedups.same_files([("/x\udcff", None, None)]) is None
    assert _speedups.same_files([("/x\x00y", None, None)]) is None
    assert _speedups.same_mtimes([("/x\udcff", 0)]) is None
    # ... where the public function answers (stat fails on both: recorded absent holds)
    assert stamps.same_files([("/x\udcff", None, None)]) is True
    assert stamps.same_files([("/x\x00y", None, None)]) is True


@pytest.mark.parametrize(
    "bad",
    [5, None, [5], [("a", 1)], [(b"/etc", 1, 2)], [["/etc", 1, 2]], [("/etc", "x", 1)]],
    ids=["int", "none", "int-item", "short", "bytes-path", "list-item", "str-device"],
)
def test_malformed_stamps_are_a_type_error_in_c(bad: Any) -> None:
    with pytest.raises(TypeError):
        _speedups.same_files(bad)


@pytest.mark.parametrize("check", MTIMES, ids=IDS)
def test_a_folder_time_changes_when_an_entry_is_added_or_removed(tmp_path: Path, check: Any) -> None:
    folder = tmp_path / "home"
    folder.mkdir()
    os.utime(folder, ns=(1_000_000_000, 1_000_000_000))
    taken = [(str(folder), os.stat(folder).st_mtime_ns)]
    assert check(taken) is True
    (folder / ".ssh").mkdir()  # a hidden folder appears
    assert check(taken) is False
    os.utime(folder, ns=(1_000_000_000, 1_000_000_000))
    assert check(taken) is True
    assert check([(str(folder), 1_000_000_001)]) is False  # one nanosecond off
    assert check([(str(tmp_path / "absent"), 0)]) is False
    assert check([(str(folder), 2**80)]) is False
    assert check([(str(folder), -(2**80))]) is False


@pytest.mark.parametrize("check", MTIMES, ids=IDS)
def test_folder_times_before_1970_compare_as_os_stat_gives_them(tmp_path: Path, check: Any) -> None:
    folder = tmp_path / "old"
    folder.mkdir()
    os.utime(folder, ns=(-1_500_000_000, -1_500_000_000))  # 1969, between two seconds
    mtime = os.stat(folder).st_mtime_ns
    assert mtime == -1_500_000_000
    assert check([(str(folder), mtime)]) is True
    assert check([(str(folder), mtime + 1)]) is False


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
