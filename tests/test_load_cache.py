"""The persistent load cache: a warm load builds exactly what a cold one does, every key invalidates.

The loader's whole test matrix runs again with the cache cold, warm and corrupted in
``tests/test_load_cache_matrix_*.py`` (see ``tests/cachemodes.py``); these tests pin
the keys, the file's defences and the writers.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import attrs
import pytest

import ongrid_plugins._version
from ongrid_plugins import hookimpl, loadcache
from ongrid_plugins.loadcache import store
from ongrid_plugins.loader import load
from ongrid_plugins.plugins import get_plugin_manager
from ongrid_plugins.settings import Settings
from ongrid_plugins.testing import isolated_settings, make_skill

_LOGGER = "ongrid_plugins.loadcache.store"


@pytest.fixture(autouse=True)
def _no_racy_window(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(store, "RACY_NS", 0)  # files written by the test are seconds old at most


def _tree(root: Path) -> None:
    make_skill(root, "alpha")
    make_skill(root, "beta", timeout_seconds=5, sandbox={"limits": {"processes": 50}}, extra_field=1)
    make_skill(root, "broken", raw="{not json")
    make_skill(root, "bad_name", manifest={"name": "Bad Name", "description": "Bad.", "entry": "run.sh"})
    make_skill(root, "nested", folder="deep/er/nested", entry="bin/tool")
    make_skill(
        root, "gamma", schema={"type": "object", "properties": {"n": {"type": "integer", "default": 1}}}
    )


def _load(
    settings: Settings, plugins: tuple[object, ...] = ()
) -> tuple[dict[str, object], list[tuple[str, ...]]]:
    """What a load registers (every field of every skill and tool) and its events; cache as configured."""
    result = _load_with(settings, plugins)
    return result[0], result[1]


def _load_with(
    settings: Settings, plugins: tuple[object, ...] = ()
) -> tuple[dict[str, object], list[tuple[str, ...]], loadcache.LoadCache | None]:
    pm = get_plugin_manager(settings)
    for plugin in plugins:
        pm.register(plugin)
    cache = loadcache.open_cache(pm, settings)
    snapshot, report = load(pm, settings, cache=cache if cache is not None else False)
    if cache is not None:
        cache.flush()
    loadcache.wait_for_writes()
    skills = {name: _shape(skill) for name, skill in snapshot.skills.items()}
    return skills, [(e.path, e.outcome, e.message, e.skill) for e in report.events], cache


def _shape(skill: object) -> object:
    values = attrs.asdict(skill, recurse=False)  # type: ignore[arg-type]
    values["tools"] = [
        attrs.asdict(t, recurse=False, filter=lambda a, _v: a.name != "cache") for t in values["tools"]
    ]
    return values


def _cold(settings: Settings) -> tuple[dict[str, object], list[tuple[str, ...]]]:
    return _load(attrs.evolve(settings, load_cache=False))


def _cache_file(settings: Settings) -> Path:
    assert settings.cache_dir
    return Path(settings.cache_dir) / loadcache.CACHE_NAME


def _forget_memory() -> None:
    store._written.clear()  # as a new process: read the file back


@pytest.fixture
def tree(tmp_path: Path) -> tuple[Path, Settings]:
    root = tmp_path / "skills"
    _tree(root)
    return root, isolated_settings(tmp_path, root)


# ---------------------------------------------------------------- the file's states
@pytest.mark.parametrize(
    ("state", "why"),
    [
        ("cold", ""),
        ("warm", ""),
        ("corrupted", "checksum does not match"),
        ("truncated", "truncated"),
        ("cut_to_the_magic", "cut short"),
        ("foreign", "not a load cache"),
        ("garbage_with_a_good_checksum", "cannot be read back"),
        ("empty", "not a load cache"),
    ],
)
def test_every_cache_state_loads_what_a_cold_load_does_with_at_most_one_line(
    tree: tuple[Path, Settings], state: str, why: str, caplog: pytest.LogCaptureFixture
) -> None:
    _root, settings = tree
    expected = _cold(settings)
    assert _load(settings) == expected  # cold: writes the cache
    path = _cache_file(settings)
    assert path.exists() and path.stat().st_mode & 0o777 == 0o600
    data = path.read_bytes()
    if state == "cold":
        path.unlink()
    elif state == "corrupted":
        damaged = bytearray(data)
        damaged[len(damaged) // 2] ^= 0xFF
        path.write_bytes(bytes(damaged))
    elif state == "truncated":
        path.write_bytes(data[: len(data) - 100])
    elif state == "cut_to_the_magic":
        path.write_bytes(data[:10])
    elif state == "foreign":
        path.write_bytes(b"\x80\x05something else entirely")
    elif state == "garbage_with_a_good_checksum":
        import zlib

        from ongrid_plugins.loadcache import cachefile

        body = cachefile.LEN.pack(5) + b"\xff\xff\xff\xff\xff"
        path.write_bytes(cachefile.MAGIC + cachefile.HEAD.pack(zlib.crc32(body), len(body)) + body)
    elif state == "empty":
        path.write_bytes(b"")
    _forget_memory()
    caplog.clear()
    with caplog.at_level(logging.DEBUG, logger=_LOGGER):
        assert _load(settings) == expected
    lines = [r.getMessage() for r in caplog.records if r.name == _LOGGER and r.levelno >= logging.WARNING]
    if why:
        assert len(lines) == 1, lines
        assert why in lines[0] and lines[0].startswith(f"load cache: ignoring {path}: ")
        assert lines[0].endswith("; loading without it")
    else:
        assert lines == []
    _forget_memory()
    assert _load(settings) == expected  # the cache was rewritten and is good again
    assert not [p for p in path.parent.iterdir() if p.name.startswith(".load-cache-")]


def test_a_warm_new_process_reads_no_manifest_and_no_unchanged_folder(
    tree: tuple[Path, Settings], monkeypatch: pytest.MonkeyPatch
) -> None:
    _root, settings = tree
    expected = _load(settings)
    _forget_memory()
    from ongrid_plugins import loader
    from ongrid_plugins.loaders import skill_json

    read = skill_json._read_bounded

    def only_beta(path: str, limit: int) -> bytes:  # beta declares a sandbox: never recorded
        assert path.endswith("/beta/skill.json"), f"{path} was read again"
        return read(path, limit)

    def refuse(*_a: object, **_k: object) -> None:
        raise AssertionError("an unchanged folder was read again")

    with monkeypatch.context() as patched:  # os.scandir is everyone's: undone before teardown
        patched.setattr(skill_json, "_read_bounded", only_beta)
        patched.setattr(loader.os, "scandir", refuse)
        skills, events, cache = _load_with(settings)
    assert (skills, events) == expected
    assert cache is not None and cache.stale == 0
    # alpha, gamma, nested, broken (parse error), bad_name (build error); beta declares a sandbox
    assert cache.hits == 5


def test_schema_is_decoded_on_first_read_as_a_fresh_dict(tree: tuple[Path, Settings]) -> None:
    _root, settings = tree
    _load(settings)
    pm = get_plugin_manager(settings)
    first, _ = load(pm, settings)
    second, _ = load(pm, settings)
    a, b = first.tools["gamma"], second.tools["gamma"]
    assert a.schema == b.schema == {"type": "object", "properties": {"n": {"type": "integer", "default": 1}}}
    assert a.schema is not b.schema and a.schema is a.schema
    assert attrs.evolve(a, timeout=1.0).schema == a.schema


# ---------------------------------------------------------------- every key invalidates
def _stale_after(settings: Settings, edit: Any, **change: Any) -> loadcache.LoadCache | None:
    """Warm the cache, edit, then load: the result must equal a cold load; return that load's cache."""
    _load(settings)
    _forget_memory()
    edit()
    changed = attrs.evolve(settings, **change) if change else settings
    skills, events, cache = _load_with(changed)
    assert (skills, events) == _cold(changed)
    return cache


def test_a_size_change_invalidates(tree: tuple[Path, Settings]) -> None:
    root, settings = tree
    manifest = root / "alpha" / "skill.json"

    def edit() -> None:
        st = manifest.stat()
        data = json.loads(manifest.read_text())
        data["description"] = "A longer description than before."
        manifest.write_text(json.dumps(data))
        os.utime(manifest, ns=(st.st_atime_ns, st.st_mtime_ns))

    cache = _stale_after(settings, edit)
    assert cache is not None and cache.stale == 1


def test_an_mtime_change_alone_invalidates(tree: tuple[Path, Settings]) -> None:
    root, settings = tree
    manifest = root / "alpha" / "skill.json"

    def edit() -> None:
        st = manifest.stat()
        os.utime(manifest, ns=(st.st_atime_ns, st.st_mtime_ns + 1))

    cache = _stale_after(settings, edit)
    assert cache is not None and cache.stale == 1


def test_a_same_size_same_mtime_edit_invalidates(tree: tuple[Path, Settings]) -> None:
    root, settings = tree
    manifest = root / "alpha" / "skill.json"

    def edit() -> None:
        st = manifest.stat()
        data = json.loads(manifest.read_text())
        data["description"] = data["description"][::-1]
        manifest.write_text(json.dumps(data, indent=2))
        assert manifest.stat().st_size == st.st_size
        os.utime(manifest, ns=(st.st_atime_ns, st.st_mtime_ns))

    cache = _stale_after(settings, edit)
    assert cache is not None and cache.stale == 1


def test_an_inode_swap_with_the_same_size_and_mtime_invalidates(tree: tuple[Path, Settings]) -> None:
    root, settings = tree
    manifest = root / "alpha" / "skill.json"

    def edit() -> None:
        data = json.loads(manifest.read_text())
        data["class"] = "safe"
        other = root / "new.json"
        text = json.dumps(data)
        other.write_text(text)
        st = manifest.stat()
        os.utime(other, ns=(st.st_atime_ns, st.st_mtime_ns))
        os.replace(other, manifest)

    cache = _stale_after(settings, edit)
    assert cache is not None and cache.stale == 1


@pytest.mark.parametrize("change", ["chmod", "symlink", "deleted", "replaced"])
def test_a_change_of_the_entry_invalidates(tree: tuple[Path, Settings], change: str) -> None:
    root, settings = tree
    entry = root / "alpha" / "run.sh"

    def edit() -> None:
        if change == "chmod":
            entry.chmod(0o644)
        elif change == "symlink":
            entry.unlink()
            entry.symlink_to("/bin/sh")
        elif change == "deleted":
            entry.unlink()
        else:
            text = entry.read_bytes()
            entry.unlink()
            entry.write_bytes(text)
            entry.chmod(0o755)

    cache = _stale_after(settings, edit)
    assert cache is not None and cache.stale == 1
    if change in ("chmod", "deleted"):
        skills, _events = _load(settings)
        assert "alpha" not in skills


def test_a_new_manifest_in_a_cached_folder_is_found(tree: tuple[Path, Settings]) -> None:
    root, settings = tree
    _stale_after(settings, lambda: make_skill(root / "deep" / "er", "newcomer"))
    skills, _events = _load(settings)
    assert "newcomer" in skills


def test_a_removed_or_renamed_folder_is_noticed(tree: tuple[Path, Settings]) -> None:
    root, settings = tree
    _stale_after(settings, lambda: (root / "alpha").rename(root / "omega"))
    _stale_after(settings, lambda: (root / "gamma" / "skill.json").unlink())
    skills, _events = _load(settings)
    assert "gamma" not in skills and "alpha" in skills


def test_a_fixed_broken_manifest_loads(tree: tuple[Path, Settings]) -> None:
    root, settings = tree

    def edit() -> None:
        (root / "broken" / "skill.json").unlink()
        make_skill(root, "broken")

    _stale_after(settings, edit)
    assert "broken" in _load(settings)[0]


def test_the_project_version_invalidates_everything_without_a_warning(
    tree: tuple[Path, Settings], monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    _root, settings = tree
    with caplog.at_level(logging.WARNING, logger=_LOGGER):
        cache = _stale_after(
            settings, lambda: monkeypatch.setattr(ongrid_plugins._version, "__version__", "0.0.0-other")
        )
    assert cache is not None and cache.hits == 0
    assert not [r for r in caplog.records if r.name == _LOGGER]


def test_a_cold_load_leaves_the_process_half_of_the_key_to_the_writer_thread(
    tree: tuple[Path, Settings], monkeypatch: pytest.MonkeyPatch
) -> None:
    import threading

    from ongrid_plugins.loadcache import key

    _root, settings = tree
    real = key._code_stamp
    asked_in: list[str] = []

    def stamp() -> str:
        asked_in.append(threading.current_thread().name)
        return real()

    monkeypatch.setattr(key, "_code_stamp", stamp)
    cold = _load_with(settings)[2]
    assert asked_in == ["ongrid-load-cache"]  # not the loading thread: there was no file to compare
    assert cold is not None and cold.hits == 0
    _forget_memory()
    warm = _load_with(settings)[2]
    assert warm is not None and warm.hits == 5  # all but beta (it declares a sandbox): the key matched
    assert asked_in[1:] == [threading.current_thread().name]  # with a file, it is read before the load
    assert warm.key == loadcache.fingerprint(get_plugin_manager(settings), settings)


def test_the_deferred_key_is_the_settings_of_the_load_that_asked(tree: tuple[Path, Settings]) -> None:
    from ongrid_plugins.loadcache.key import deferred_fingerprint

    _root, settings = tree
    pm = get_plugin_manager(settings)
    later = deferred_fingerprint(pm, settings)
    other = attrs.evolve(settings, default_timeout=settings.default_timeout + 1)
    assert later is not None
    assert later() == loadcache.fingerprint(pm, settings) != loadcache.fingerprint(pm, other)


@pytest.mark.parametrize(
    "change",
    [
        {"default_timeout": 3.0},
        {"sandbox_caps": Settings.from_env({"ONGRID_SANDBOX_LIMITS": "processes=10"}).sandbox_caps},
        {"state_dir": "/var/tmp/elsewhere-state"},
        {"disable_plugins": ("skill_md",)},
    ],
    ids=["default_timeout", "sandbox_caps", "state_dir", "disabled_loader"],
)
def test_settings_that_shape_a_build_invalidate_everything(
    tree: tuple[Path, Settings], change: dict[str, Any]
) -> None:
    _root, settings = tree
    cache = _stale_after(settings, lambda: None, **change)
    assert cache is not None and cache.hits == 0


def test_another_root_spelling_is_another_record(tree: tuple[Path, Settings], tmp_path: Path) -> None:
    root, settings = tree
    link = tmp_path / "link"
    link.symlink_to(root)
    cache = _stale_after(settings, lambda: None, skill_dirs=(str(link),))
    assert cache is not None and cache.hits == 0


def test_a_third_party_loader_turns_the_cache_off(tree: tuple[Path, Settings]) -> None:
    _root, settings = tree

    class Loader:
        @hookimpl
        def ongrid_load_manifest(self, path: str) -> None:
            return None

    _load(settings)
    pm = get_plugin_manager(settings)
    pm.register(Loader())
    assert loadcache.open_cache(pm, settings) is None


def test_a_file_changed_within_the_racy_window_is_not_recorded(
    tree: tuple[Path, Settings], monkeypatch: pytest.MonkeyPatch
) -> None:
    _root, settings = tree
    monkeypatch.setattr(store, "RACY_NS", 3600 * 10**9)  # everything was written within the hour
    _load(settings)
    _forget_memory()
    _skills, _events, cache = _load_with(settings)
    assert cache is not None and cache.hits == 0


def test_a_symlinked_manifest_is_never_answered_from_the_cache(tree: tuple[Path, Settings]) -> None:
    root, settings = tree
    (root / "linked").mkdir()
    (root / "linked" / "skill.json").symlink_to(root / "alpha" / "skill.json")
    _load(settings)
    _forget_memory()
    skills, events, cache = _load_with(settings)
    assert (skills, events) == _cold(settings)
    assert cache is not None and cache.hits == 5


# ---------------------------------------------------------------- the file's defences and writers
def test_a_cache_file_others_may_write_is_ignored(
    tree: tuple[Path, Settings], caplog: pytest.LogCaptureFixture
) -> None:
    _root, settings = tree
    expected = _load(settings)
    _cache_file(settings).chmod(0o666)
    _forget_memory()
    with caplog.at_level(logging.WARNING, logger=_LOGGER):
        assert _load(settings) == expected
    lines = [r.getMessage() for r in caplog.records if r.name == _LOGGER]
    assert len(lines) == 1 and "others may write it (mode 0666)" in lines[0]


def test_a_symlink_in_place_of_the_cache_file_is_ignored(
    tree: tuple[Path, Settings], caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    _root, settings = tree
    expected = _load(settings)
    path = _cache_file(settings)
    planted = tmp_path / "planted.bin"
    path.rename(planted)
    path.symlink_to(planted)
    _forget_memory()
    with caplog.at_level(logging.WARNING, logger=_LOGGER):
        assert _load(settings) == expected
    assert len([r for r in caplog.records if r.name == _LOGGER]) == 1


def test_the_off_switches_write_nothing(tree: tuple[Path, Settings]) -> None:
    _root, settings = tree
    assert Settings.from_env({"ONGRID_LOAD_CACHE": "0"}).load_cache is False
    assert Settings.from_env({}).load_cache is True
    _load(attrs.evolve(settings, load_cache=False))
    _load(attrs.evolve(settings, cache_dir=None))
    assert not _cache_file(settings).exists()


_WRITER = r"""
import logging, sys
logging.basicConfig(level=logging.WARNING)
from ongrid_plugins.loader import load_dirs
for _ in range(int(sys.argv[2])):
    load_dirs([sys.argv[1]])
"""


def test_concurrent_writers_never_leave_a_cache_that_loads_wrong(tmp_path: Path) -> None:
    roots = []
    for index in range(2):  # two trees, so the writers' caches differ (each overwrites the other's)
        root = tmp_path / f"tree{index}"
        for n in range(30):
            make_skill(root, f"s{index}_{n}")
        roots.append(root)
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "xdg")}
    env.pop("ONGRID_CACHE_DIR", None)
    writers = [
        subprocess.Popen(
            [sys.executable, "-c", _WRITER, str(roots[i % 2]), "6"],
            env=env,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(4)
    ]
    for writer in writers:
        _out, err = writer.communicate(timeout=120)
        assert writer.returncode == 0, err
        assert "load cache: ignoring" not in err  # every reader saw a whole file
    cache_dir = tmp_path / "xdg" / "ongrid"
    assert [p.name for p in cache_dir.iterdir() if p.name.startswith(".load-cache-")] == []
    for root in roots:
        settings = Settings(skill_dirs=(str(root),), include_defaults=False, load_entry_points=False,
                            cache_dir=str(cache_dir))  # fmt: skip
        _forget_memory()
        assert _load(settings) == _cold(settings)


def test_a_bad_file_is_replaced_even_when_nothing_is_cached(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    root = tmp_path / "skills"
    root.mkdir()
    settings = isolated_settings(tmp_path, root)
    path = _cache_file(settings)
    path.parent.mkdir(parents=True)
    path.write_bytes(b"not a cache")
    path.chmod(0o600)
    with caplog.at_level(logging.WARNING, logger=_LOGGER):
        _load(settings)
        _forget_memory()
        _load(settings)
    assert len([r for r in caplog.records if r.name == _LOGGER]) == 1  # once, not once per load


def test_monitored_hook_calls_see_every_manifest_loaded(tree: tuple[Path, Settings]) -> None:
    """A skill.json goes straight to its loader only when nobody watches the hook calls."""
    from ongrid_plugins.testing import HookRecorder

    _root, settings = tree
    pm = get_plugin_manager(settings)
    with HookRecorder(pm) as recorder:
        load(pm, settings, cache=False)
    loaded = [c.kwargs["path"] for c in recorder.calls_of("ongrid_load_manifest")]
    assert len(loaded) == 6 and all(p.endswith("/skill.json") for p in loaded)
