"""Runs against the installed pack (``pip install . && pytest``), through ongrid's own host."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from ongrid_plugins import ConfirmationRequired, InvalidArguments
from ongrid_plugins.testing import assert_failed, assert_ok, pack_host, run_skill

DIST = "ongrid-pack-disk"
DAY = 86400


def write(path: Path, size: int, age_days: float) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"x" * size)
    then = time.time() - age_days * DAY
    os.utime(path, (then, then))
    return path


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """disk_cleaner may write only where it declares (~/.cache, /var/cache): a test home."""
    path = tmp_path / "home"
    path.mkdir()
    monkeypatch.setenv("HOME", str(path))
    return path


@pytest.fixture
def host(tmp_path: Path, home: Path):
    return pack_host(tmp_path / "host", DIST)


@pytest.fixture
def cache(home: Path) -> Path:
    root = home / ".cache" / "app"
    write(root / "old.bin", 1000, 30)
    write(root / "deep" / "er" / "old.o", 500, 10)
    write(root / "fresh.bin", 300, 1)
    write(root / "deep" / "keep.log", 200, 30)
    return root


def test_both_skills_come_from_the_installed_distribution(host) -> None:
    for name in ("disk_cleaner", "cache_report"):
        tool = host.get(name)
        assert tool.provenance.startswith(f"{DIST} ")
    assert host.get("disk_cleaner").tool_class == "mutating"
    assert host.get("cache_report").tool_class == "safe"


def test_disk_cleaner_is_mutating_and_needs_a_confirmation(host, cache: Path) -> None:
    with pytest.raises(ConfirmationRequired):
        host.call("disk_cleaner", {"path": str(cache)})
    with pytest.raises(InvalidArguments):
        host.call("disk_cleaner", {"path": str(cache), "older_than_days": -1}, confirm=True)


def test_a_dry_run_is_the_default_and_removes_nothing(host, cache: Path) -> None:
    result, events = run_skill(host, "disk_cleaner", {"path": str(cache)}, confirm=True)
    value = assert_ok(result)
    assert value["dry_run"] is True
    assert (value["files_matched"], value["bytes_matched"]) == (3, 1700)
    assert (value["files_deleted"], value["freed_bytes"]) == (0, 0)
    assert (cache / "old.bin").exists()
    assert any("would remove 3 file(s)" in line for line in events.stderr())


def test_a_real_run_removes_stale_files_matching_the_patterns(host, cache: Path) -> None:
    args = {"path": str(cache), "dry_run": False, "older_than_days": 7, "patterns": ["*.bin", "*.o"]}
    value = assert_ok(host.call("disk_cleaner", args, confirm=True))
    assert (value["files_deleted"], value["freed_bytes"], value["fresh_files"]) == (2, 1500, 1)
    assert sorted(value["sample"]) == ["deep/er/old.o", "old.bin"]
    assert not (cache / "old.bin").exists() and not (cache / "deep" / "er" / "old.o").exists()
    assert (cache / "fresh.bin").exists() and (cache / "deep" / "keep.log").exists()


def test_a_file_it_could_not_remove_is_not_reported_as_removed(host, tmp_path: Path) -> None:
    """Outside its declared folders the sandbox refuses the unlink: the summary says so."""
    elsewhere = tmp_path / "elsewhere"
    write(elsewhere / "old.bin", 100, 30)
    args = {"path": str(elsewhere), "dry_run": False}
    result, events = run_skill(host, "disk_cleaner", args, confirm=True)
    value = assert_ok(result)
    assert (value["files_matched"], value["files_deleted"], len(value["errors"])) == (1, 0, 1)
    assert (elsewhere / "old.bin").exists()
    assert any(
        "removed 0 of 1 file(s) (1 could not be removed: see errors)" in line for line in events.stderr()
    )


def test_it_never_follows_a_symlink_out_of_the_path(host, cache: Path, tmp_path: Path) -> None:
    outside = tmp_path / "precious"
    write(outside / "data.db", 4000, 365)
    (cache / "escape_dir").symlink_to(outside)
    (cache / "escape_file").symlink_to(outside / "data.db")
    value = assert_ok(host.call("disk_cleaner", {"path": str(cache), "dry_run": False}, confirm=True))
    assert value["skipped"]["symlinks"] == 2
    assert (outside / "data.db").exists()
    assert (cache / "escape_file").is_symlink()  # not even the link is touched


def test_it_refuses_a_symlinked_path_and_system_folders(host, cache: Path, tmp_path: Path) -> None:
    (tmp_path / "link").symlink_to(cache)
    result = host.call("disk_cleaner", {"path": str(tmp_path / "link"), "dry_run": False}, confirm=True)
    assert_failed(result, "is a symbolic link")
    assert (cache / "old.bin").exists()
    assert_failed(host.call("disk_cleaner", {"path": "/usr"}, confirm=True), "system folder")
    assert_failed(host.call("cache_report", {"path": "relative/path"}), "must be an absolute folder")


def test_hard_linked_files_free_nothing(host, cache: Path, tmp_path: Path) -> None:
    os.link(cache / "old.bin", tmp_path / "elsewhere.bin")
    value = assert_ok(
        host.call(
            "disk_cleaner", {"path": str(cache), "dry_run": False, "patterns": ["old.bin"]}, confirm=True
        )
    )
    assert (value["files_deleted"], value["freed_bytes"]) == (1, 0)


def test_cache_report_is_read_only(host, cache: Path) -> None:
    value = assert_ok(host.call("cache_report", {"path": str(cache)}, persona="viewer"))
    assert (value["files"], value["bytes"], value["stale_files"], value["stale_bytes"]) == (4, 2000, 3, 1700)
    assert value["largest"][0] == {"name": "old.bin", "bytes": 1000}
    assert (cache / "old.bin").exists()
