"""Hot reload: real files, real watchers (watchfiles and the polling fallback), stale last-good."""

from __future__ import annotations

import asyncio
import builtins
import json
import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ongrid_plugins import SkillHost, hookimpl
from ongrid_plugins.catalog import CatalogChange
from ongrid_plugins.catalog import watch as watch_mod
from ongrid_plugins.cli import Context, build_parser
from ongrid_plugins.testing import assert_ok, isolated_settings, make_skill

SLOW_SH = """#!/bin/sh
read -r args
sleep 1
echo '{"version": 1}'
"""


def wait_for(predicate: Callable[[], Any], timeout: float = 15.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.02)
    raise AssertionError("timed out waiting")


class Recorder:
    """Collects every change a host announces."""

    def __init__(self, host: SkillHost) -> None:
        self.changes: list[CatalogChange] = []
        self._lock = threading.Lock()
        host.subscribe(self._add)

    def _add(self, changes: list[CatalogChange]) -> None:
        with self._lock:
            self.changes.extend(changes)

    def kinds(self, name: str) -> list[str]:
        with self._lock:
            return [c.kind for c in self.changes if c.name == name]


@pytest.fixture(params=["watchfiles", "polling"])
def polling(request: pytest.FixtureRequest) -> bool:
    return bool(request.param == "polling")


def test_live_add_change_break_and_delete(
    tmp_path: Path, polling: bool, caplog: pytest.LogCaptureFixture
) -> None:
    root = tmp_path / "skills"
    make_skill(root, "echo")
    host = SkillHost(isolated_settings(tmp_path, root))
    seen = Recorder(host)
    caplog.set_level(logging.INFO)
    with host.watch(debounce=0.05, poll_interval=0.05, force_polling=polling) as watch:
        folder = make_skill(root, "fresh")
        wait_for(lambda: seen.kinds("fresh") == ["added"])
        added = host.skill("fresh").digest

        manifest = json.loads((folder / "skill.json").read_text())
        (folder / "skill.json").write_text(json.dumps({**manifest, "description": "Changed."}))
        wait_for(lambda: seen.kinds("fresh") == ["added", "changed"])
        good = host.skill("fresh")
        assert good.description == "Changed." and good.digest != added

        (folder / "skill.json").write_text("{broken")
        wait_for(lambda: seen.kinds("fresh") == ["added", "changed", "stale"])
        stale = host.skill("fresh")
        assert stale.digest == good.digest and stale.description == "Changed."
        assert stale.stale.startswith("Expecting property name")
        assert_ok(host.call("fresh", {"x": 1}))  # the last good version still runs

        (folder / "skill.json").unlink()
        wait_for(lambda: seen.kinds("fresh")[-1:] == ["removed"])
        assert "fresh" not in [s.name for s in host.skills()]
        assert watch.polling is polling
    assert not watch.running
    lines = [r.getMessage() for r in caplog.records if '"fresh"' in r.getMessage()]
    assert lines[0] == f'catalog: added skill "fresh" ({added[:12]}) from {folder / "skill.json"}'
    assert [line.split(" ")[1] for line in lines] == ["added", "changed", "skill", "removed"]
    assert seen.kinds("echo") == []  # untouched skills are not announced
    # One line per change: reloads do not repeat the loader's "registered" lines, and
    # watchfiles' own "changes detected" lines are left out.
    messages = [r.getMessage() for r in caplog.records]
    assert sum('registered subprocess skill "echo"' in m for m in messages) == 1
    assert not [r for r in caplog.records if r.name.startswith("watchfiles")]


def test_a_stale_skill_shows_in_list_all_and_show(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "skills"
    folder = make_skill(root, "echo")
    host = SkillHost(isolated_settings(tmp_path, root))
    host.load()
    (folder / "skill.json").write_text("{broken")
    host.reload()

    def cli(*argv: str) -> str:
        ctx = Context(build_parser().parse_args(list(argv)))
        ctx._host = host
        assert ctx.args.handler(ctx) == 0
        return capsys.readouterr().out

    assert "STALE (last good version): Expecting property name" in cli("list", "--all")
    assert json.loads(cli("list", "--all", "--json"))["items"][0]["stale"].startswith("Expecting")
    assert "stale:            Expecting property name" in cli("show", "echo")
    assert json.loads(cli("show", "echo", "--json"))["skill_details"]["stale"].startswith("Expecting")


def test_async_for_yields_each_batch_of_changes(tmp_path: Path) -> None:
    root = tmp_path / "skills"
    root.mkdir()
    host = SkillHost(isolated_settings(tmp_path, root))
    host.load()

    async def main() -> list[CatalogChange]:
        watch = host.watch(debounce=0.05)
        async for changes in watch:
            return changes
        raise AssertionError("the watch ended")

    def write_later() -> None:
        time.sleep(0.5)
        make_skill(root, "late")

    threading.Thread(target=write_later, daemon=True).start()
    changes = asyncio.run(asyncio.wait_for(main(), 20))
    assert [(c.kind, c.name) for c in changes] == [("added", "late")]
    assert changes[0].digest == host.skill("late").digest


def test_without_watchfiles_the_watch_polls_and_says_so_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    real_import = builtins.__import__

    def no_watchfiles(name: str, *args: Any, **kwargs: Any) -> Any:
        if name == "watchfiles":
            raise ImportError("No module named 'watchfiles'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_watchfiles)
    monkeypatch.setattr(watch_mod, "_warned", set())
    root = tmp_path / "skills"
    root.mkdir()
    host = SkillHost(isolated_settings(tmp_path, root))
    seen = Recorder(host)
    caplog.set_level(logging.WARNING, logger="ongrid_plugins.catalog.watch")
    with host.watch(debounce=0.05, poll_interval=0.05) as watch:
        make_skill(root, "one")
        wait_for(lambda: seen.kinds("one") == ["added"])
        make_skill(root, "two")
        wait_for(lambda: seen.kinds("two") == ["added"])
        assert watch.polling
    watch_lines = [r.getMessage() for r in caplog.records if r.name == "ongrid_plugins.catalog.watch"]
    assert watch_lines == [
        "catalog: watchfiles is not installed (pip install 'ongrid-plugins[watch]'); "
        "watching by polling every 0.05 s"
    ]


def test_when_inotify_runs_out_the_watch_falls_back_to_polling(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    import watchfiles

    def exhausted(*paths: Any, **kwargs: Any) -> Any:
        raise OSError("OS file watch limit reached")
        yield  # a generator, like the real one

    monkeypatch.setattr(watchfiles, "watch", exhausted)
    monkeypatch.setattr(watch_mod, "_warned", set())
    root = tmp_path / "skills"
    root.mkdir()
    host = SkillHost(isolated_settings(tmp_path, root))
    seen = Recorder(host)
    caplog.set_level(logging.WARNING, logger="ongrid_plugins.catalog.watch")
    with host.watch(debounce=0.05, poll_interval=0.05) as watch:
        make_skill(root, "one")
        wait_for(lambda: seen.kinds("one") == ["added"])
        assert watch.polling
    assert [r.getMessage() for r in caplog.records] == [
        "catalog: cannot watch with inotify (OS file watch limit reached); watching by polling every 0.05 s"
    ]


def test_a_call_in_flight_keeps_the_snapshot_it_started_with(tmp_path: Path) -> None:
    root = tmp_path / "skills"
    make_skill(root, "slow", script=SLOW_SH)
    started = threading.Event()

    class Started:
        @hookimpl
        def ongrid_before_call(self, request: Any) -> None:
            started.set()

    host = SkillHost(isolated_settings(tmp_path, root), plugins=(Started(),))
    tool = host.get("slow")
    results: list[Any] = []
    thread = threading.Thread(target=lambda: results.append(host.call("slow", {})))
    thread.start()
    assert started.wait(10)  # past its lookup: the call holds its snapshot
    (root / "slow" / "skill.json").unlink()
    host.reload()
    assert "slow" not in [s.name for s in host.skills()]
    thread.join(10)
    assert results and assert_ok(results[0]) == {"version": 1} and results[0].tool == tool.name


@pytest.mark.usefixtures("polling")
def test_a_configured_root_created_after_the_watch_started_is_loaded_and_watched(
    tmp_path: Path, polling: bool
) -> None:
    late = tmp_path / "late-root"
    host = SkillHost(isolated_settings(tmp_path, tmp_path / "skills", late))
    (tmp_path / "skills").mkdir()
    seen = Recorder(host)
    with host.watch(debounce=0.05, poll_interval=0.05, force_polling=polling):
        make_skill(late, "second")  # the folder appears with a skill in it
        wait_for(lambda: seen.kinds("second") == ["added"])
        make_skill(late, "third")  # and from then on it is watched
        wait_for(lambda: seen.kinds("third") == ["added"])
