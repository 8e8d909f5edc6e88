"""The persistent load cache: a warm load builds exactly what a cold one does, edits invalidate it."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import attrs
import pytest

from ongrid_plugins import loadcache
from ongrid_plugins.loadcache import store
from ongrid_plugins.loader import load
from ongrid_plugins.plugins import get_plugin_manager
from ongrid_plugins.settings import Settings
from ongrid_plugins.testing import isolated_settings, make_skill


@pytest.fixture(autouse=True)
def _no_racy_window(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(store, "RACY_NS", 0)  # files written by the test are seconds old at most


def _tree(root: Path) -> None:
    make_skill(root, "alpha")
    make_skill(root, "beta", timeout_seconds=5, sandbox={"limits": {"processes": 50}}, extra_field=1)
    make_skill(root, "broken", raw="{not json")
    make_skill(root, "nested", entry="bin/tool")


def _load(settings: Settings) -> tuple[dict[str, object], list[tuple[str, str, str]]]:
    snapshot, report = load(get_plugin_manager(settings), settings)
    skills = {name: _shape(skill) for name, skill in snapshot.skills.items()}
    return skills, [(e.path, e.outcome, e.message) for e in report.events]


def _shape(skill: object) -> object:
    values = attrs.asdict(skill, recurse=False)  # type: ignore[arg-type]
    values["tools"] = [
        attrs.asdict(t, recurse=False, filter=lambda a, _v: a.name != "cache") for t in values["tools"]
    ]
    return values


def _cache_file(settings: Settings) -> Path:
    assert settings.cache_dir
    return Path(settings.cache_dir) / loadcache.CACHE_NAME


@pytest.mark.parametrize("state", ["cold", "warm", "corrupted", "truncated", "foreign"])
def test_every_cache_state_loads_what_a_cold_load_does(
    tmp_path: Path, state: str, caplog: pytest.LogCaptureFixture
) -> None:
    root = tmp_path / "skills"
    _tree(root)
    settings = isolated_settings(tmp_path, root)
    nocache = attrs.evolve(settings, cache_dir=None)
    expected = _load(nocache)
    first = _load(settings)  # cold: writes the cache
    assert first == expected
    path = _cache_file(settings)
    assert path.exists() and path.stat().st_mode & 0o777 == 0o600
    if state == "corrupted":
        data = bytearray(path.read_bytes())
        data[len(data) // 2] ^= 0xFF
        path.write_bytes(bytes(data))
    elif state == "truncated":
        path.write_bytes(path.read_bytes()[:100])
    elif state == "foreign":
        path.write_bytes(b"\x80\x05something else entirely")
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="ongrid_plugins.loadcache.store"):
        again = _load(settings)
    assert again == expected
    lines = [r for r in caplog.records if r.name == "ongrid_plugins.loadcache.store"]
    assert len(lines) == (0 if state in ("cold", "warm") else 1)
    if lines:
        assert "ignoring" in lines[0].getMessage() and "loading without it" in lines[0].getMessage()
    assert _load(settings) == expected  # the cache was rewritten and is good again


def test_a_warm_load_answers_from_the_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "skills"
    _tree(root)
    settings = isolated_settings(tmp_path, root)
    _load(settings)
    from ongrid_plugins.loaders import skill_json

    def refuse(*_a: object, **_k: object) -> None:
        raise AssertionError("a cached manifest was parsed again")

    monkeypatch.setattr(skill_json, "build_skill", refuse)
    skills, _events = _load(settings)
    assert set(skills) == {"alpha", "beta", "nested"}


def _warm_then(tmp_path: Path, edit: object, **settings_change: object) -> None:
    root = tmp_path / "skills"
    _tree(root)
    settings = isolated_settings(tmp_path, root)
    _load(settings)
    edit(root)  # type: ignore[operator]
    changed = attrs.evolve(settings, **settings_change) if settings_change else settings
    assert _load(changed) == _load(attrs.evolve(changed, cache_dir=None))


def test_same_size_same_mtime_edit_invalidates(tmp_path: Path) -> None:
    def edit(root: Path) -> None:
        manifest = root / "alpha" / "skill.json"
        st = manifest.stat()
        data = json.loads(manifest.read_text())
        data["description"] = data["description"][::-1]
        manifest.write_text(json.dumps(data, indent=2))
        assert manifest.stat().st_size == st.st_size
        os.utime(manifest, ns=(st.st_atime_ns, st.st_mtime_ns))

    _warm_then(tmp_path, edit)


def test_rename_of_a_skill_folder_invalidates(tmp_path: Path) -> None:
    _warm_then(tmp_path, lambda root: (root / "alpha").rename(root / "gamma"))


def test_inode_swap_of_the_manifest_invalidates(tmp_path: Path) -> None:
    def edit(root: Path) -> None:
        manifest = root / "beta" / "skill.json"
        data = json.loads(manifest.read_text())
        data["timeout_seconds"] = 7
        other = root / "beta" / "new.json"
        other.write_text(json.dumps(data))
        st = manifest.stat()
        os.utime(other, ns=(st.st_atime_ns, st.st_mtime_ns))
        os.replace(other, manifest)

    _warm_then(tmp_path, edit)


def test_chmod_of_the_entry_invalidates(tmp_path: Path) -> None:
    def edit(root: Path) -> None:
        (root / "alpha" / "run.sh").chmod(0o644)

    _warm_then(tmp_path, edit)
    root = tmp_path / "skills"
    skills, events = _load(isolated_settings(tmp_path, root))
    assert "alpha" not in skills
    assert any("not executable" in message for _p, _o, message in events)


def test_entry_replaced_by_a_symlink_invalidates(tmp_path: Path) -> None:
    def edit(root: Path) -> None:
        entry = root / "alpha" / "run.sh"
        entry.unlink()
        entry.symlink_to("/bin/sh")

    _warm_then(tmp_path, edit)


def test_lowered_sandbox_cap_invalidates(tmp_path: Path) -> None:
    caps = Settings.from_env({"ONGRID_SANDBOX_LIMITS": "processes=10"}).sandbox_caps
    _warm_then(tmp_path, lambda _root: None, sandbox_caps=caps)
    root = tmp_path / "skills"
    skills, _events = _load(isolated_settings(tmp_path, root, sandbox_caps=caps))
    assert "beta" not in skills


def test_default_timeout_change_invalidates(tmp_path: Path) -> None:
    _warm_then(tmp_path, lambda _root: None, default_timeout=3.0)


def test_fixed_broken_manifest_loads(tmp_path: Path) -> None:
    def edit(root: Path) -> None:
        (root / "broken").rename(root / "old")
        make_skill(root, "broken")

    _warm_then(tmp_path, edit)


def test_cache_file_of_another_user_mode_is_ignored(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    root = tmp_path / "skills"
    _tree(root)
    settings = isolated_settings(tmp_path, root)
    expected = _load(settings)
    _cache_file(settings).chmod(0o666)
    with caplog.at_level(logging.WARNING, logger="ongrid_plugins.loadcache.store"):
        assert _load(settings) == expected
    assert any("others may write it" in r.getMessage() for r in caplog.records)


def test_a_planted_pickle_cannot_run_code(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    import hashlib
    import pickle

    root = tmp_path / "skills"
    _tree(root)
    settings = isolated_settings(tmp_path, root)
    expected = _load(settings)
    marker = tmp_path / "pwned"

    class Evil:
        def __reduce__(self) -> tuple[object, ...]:
            return (os.system, (f"touch {marker}",))

    body = pickle.dumps(("k", {"x": Evil()}, {}))
    data = store._MAGIC + hashlib.blake2b(body, digest_size=32).digest() + body
    path = _cache_file(settings)
    path.write_bytes(data)
    path.chmod(0o600)
    with caplog.at_level(logging.WARNING, logger="ongrid_plugins.loadcache.store"):
        assert _load(settings) == expected
    assert not marker.exists()
    assert any("cannot be read back" in r.getMessage() for r in caplog.records)


def test_no_cache_dir_writes_nothing(tmp_path: Path) -> None:
    root = tmp_path / "skills"
    _tree(root)
    settings = isolated_settings(tmp_path, root, cache_dir=None)
    _load(settings)
    assert not list(tmp_path.rglob(loadcache.CACHE_NAME))
