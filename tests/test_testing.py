"""The helpers ``ongrid_plugins.testing`` gives plugin and skill authors (and that this suite uses)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from distributions import install_dist, skill_files

from ongrid_plugins import Decision, PermissionDenied, SkillHost, Verdict, hookimpl
from ongrid_plugins.errors import PluginFailed
from ongrid_plugins.testing import (
    HookRecorder,
    assert_failed,
    assert_ok,
    isolated_settings,
    make_skill,
    pack_host,
    plugin_registered,
    run_skill,
    write_executable,
)


class DenyAll:
    @hookimpl
    def ongrid_check_permission(self, tool: Any, persona: Any, request: Any) -> Decision:
        return Decision(Verdict.DENY, "tests say no", "deny_all")


def test_make_host_gives_an_isolated_fresh_host(make_host: Any, root: Path) -> None:
    make_skill(root, "echo")
    host = make_host(root)
    assert [t.name for t in host.tools()] == ["echo"]
    assert make_host(root) is not host
    assert host.settings.load_entry_points is False and host.settings.include_defaults is False


def test_run_skill_returns_the_result_and_the_events(make_host: Any, root: Path) -> None:
    write_executable(root / "talk" / "run.sh", '#!/bin/sh\necho "working" >&2\necho \'{"done": true}\'\n')
    make_skill(root, "talk", script=None)
    result, events = run_skill(make_host(root), "talk")
    assert assert_ok(result) == {"done": True}
    assert events.kinds() == ["start", "stderr", "exit"] and events.stderr() == ["working"]


def test_assert_failed_checks_the_error_and_the_status(make_host: Any, root: Path) -> None:
    make_skill(root, "fail", script="#!/bin/sh\necho 'disk on fire' >&2\nexit 3\n")
    result = make_host(root).call("fail")
    assert "disk on fire" in assert_failed(result, "status 3", status="failed")
    with pytest.raises(AssertionError, match="not with 'something else'"):
        assert_failed(result, "something else")
    with pytest.raises(AssertionError, match="unexpectedly succeeded"):
        make_skill(root, "fine")
        assert_failed(make_host(root).call("fine"))


def test_a_plugin_registered_for_a_block_only(make_host: Any, root: Path) -> None:
    make_skill(root, "echo")
    host = make_host(root)
    with plugin_registered(host, DenyAll()):
        with pytest.raises(PermissionDenied, match="tests say no"):
            host.call("echo")
        assert any(i.name.startswith("DenyAll") for i in host.plugins())
    assert host.call("echo").ok
    assert not any(i.name.startswith("DenyAll") for i in host.plugins())


def test_the_register_plugin_fixture(make_host: Any, root: Path, register_plugin: Any) -> None:
    make_skill(root, "echo")
    host = make_host(root)
    register_plugin(host, DenyAll(), "deny")
    with pytest.raises(PermissionDenied):
        host.call("echo")


def test_the_hook_recorder_sees_calls_in_order_with_their_results(make_host: Any, root: Path) -> None:
    make_skill(root, "echo")
    host = make_host(root, plugins=(DenyAll(),))
    with HookRecorder(host.pm) as recorder:
        host.load()
        with pytest.raises(PermissionDenied):
            host.call("echo")
    names = recorder.names()
    assert names[:2] == ["ongrid_skill_roots", "ongrid_manifest_names"]
    [vote] = recorder.calls_of("ongrid_check_permission")
    assert vote.kwargs["tool"].name == "echo" and "tests say no" in [d.reason for d in vote.result]
    assert "DenyAll#0" in vote.plugins and "gate" in vote.plugins
    host.reload()
    assert recorder.names() == names  # stopped


def test_the_hook_recorder_fixture_records_a_raising_hook(
    make_host: Any, root: Path, hook_recorder: Any
) -> None:
    class Boom:
        @hookimpl
        def ongrid_before_call(self, request: Any) -> None:
            raise RuntimeError("audit is down")

    make_skill(root, "echo")
    host = make_host(root, plugins=(Boom(),))
    recorder = hook_recorder(host)
    with pytest.raises(PluginFailed) as caught:  # naming the plugin, the RuntimeError its cause
        host.call("echo")
    assert isinstance(caught.value.__cause__, RuntimeError)
    [call] = recorder.calls_of("ongrid_before_call")
    assert isinstance(call.error, RuntimeError)


def test_pack_host_checks_the_distribution_loaded(site: Path, tmp_path: Path) -> None:
    install_dist(
        site,
        "ongrid-pack-fine",
        "1.0",
        {"ongrid_skills": {"fine": "ongrid_test_fine"}},
        skill_files("ongrid_test_fine", "fine_echo"),
    )
    install_dist(site, "ongrid-pack-bad", "1.0", {"ongrid_skills": {"bad": "ongrid_test_nothing"}})
    host = pack_host(tmp_path / "a", "ongrid_pack_fine")
    assert host.get("fine_echo").provenance == "ongrid-pack-fine 1.0"
    with pytest.raises(AssertionError, match="ongrid-pack-bad: pack bad: failed module ongrid_test_nothing"):
        pack_host(tmp_path / "b", "ongrid-pack-bad")
    with pytest.raises(AssertionError, match="no plugin or pack of distribution 'ongrid-pack-none'"):
        pack_host(tmp_path / "c", "ongrid-pack-none")


def test_isolated_settings_read_nothing_from_the_machine(tmp_path: Path) -> None:
    settings = isolated_settings(tmp_path)
    assert settings.user_skills_dir.startswith(str(tmp_path)) and settings.cache_dir.startswith(str(tmp_path))
    assert SkillHost(settings).load().registered == 0
