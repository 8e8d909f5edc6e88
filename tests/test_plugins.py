"""The plugin manager: built-ins like third parties, guarded entry points, disable, trace."""

from __future__ import annotations

import importlib
import logging
import re
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ongrid_plugins import PluginLoadError, Settings, SkillHost, get_plugin_manager
from ongrid_plugins.plugins import BUILTIN_PLUGINS, PER_HOST_PLUGINS
from ongrid_plugins.testing import isolated_settings, make_skill


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A directory on sys.path where tests install distributions (dist-info + modules)."""
    path = tmp_path / "site"
    path.mkdir()
    monkeypatch.syspath_prepend(str(path))
    importlib.invalidate_caches()
    yield path
    for name in list(sys.modules):
        if name.startswith("ongrid_test_plugin"):
            del sys.modules[name]


def install_dist(
    site: Path, dist: str, version: str, entry_points: dict[str, str], modules: dict[str, str]
) -> None:
    """Install a minimal distribution: the same files pip writes for a wheel."""
    info = site / f"{dist.replace('-', '_')}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n")
    lines = ["[ongrid_plugins]", *(f"{k} = {v}" for k, v in entry_points.items())]
    (info / "entry_points.txt").write_text("\n".join(lines) + "\n")
    for name, source in modules.items():
        (site / f"{name}.py").write_text(textwrap.dedent(source))
    importlib.invalidate_caches()


GOOD_PLUGIN = """
    from ongrid_plugins import hookimpl

    @hookimpl
    def ongrid_skill_registered(skill):
        SEEN.append(skill.name)

    SEEN = []
"""


def settings_for(tmp_path: Path, *roots: Path, **overrides: Any) -> Settings:
    return isolated_settings(tmp_path, *roots, load_entry_points=True, **overrides)


def test_builtins_are_registered_as_modules_under_short_names(tmp_path: Path) -> None:
    pm = get_plugin_manager(isolated_settings(tmp_path))
    for name, module in BUILTIN_PLUGINS:
        if name not in PER_HOST_PLUGINS:
            assert pm.get_plugin(name) is importlib.import_module(module)
    registered = len(BUILTIN_PLUGINS) - len(PER_HOST_PLUGINS) + 1
    assert [i.kind for i in pm.plugin_infos] == ["builtin"] * registered
    assert pm.plugin_infos[-1].name == "packs"  # the roots of ongrid_skills entry points, one object per host


def test_a_manager_without_a_host_has_no_per_host_plugin(tmp_path: Path) -> None:
    pm = get_plugin_manager(isolated_settings(tmp_path))
    assert [name for name in PER_HOST_PLUGINS if pm.get_plugin(name) is not None] == []


def test_a_per_host_plugin_is_the_object_the_host_handed_over_at_its_place(tmp_path: Path) -> None:
    host = SkillHost(isolated_settings(tmp_path))
    assert host.pm.get_plugin("audit") is host.audit  # registered as it is: no placeholder module swapped out
    names = [i.name for i in host.plugins()]
    assert names[: len(BUILTIN_PLUGINS)] == [n for n, _m in BUILTIN_PLUGINS]
    assert {i.name: i.module for i in host.plugins()}["audit"] == "ongrid_plugins.audit"


def test_a_blocked_per_host_plugin_is_never_made(tmp_path: Path) -> None:
    made: list[object] = []
    settings = isolated_settings(tmp_path, disable_plugins=("audit",))
    pm = get_plugin_manager(settings, per_host={"audit": lambda: made.append(1) or object()})
    assert made == [] and pm.get_plugin("audit") is None
    assert {i.name: i.status for i in pm.plugin_infos}["audit"] == "blocked"


def test_only_per_host_plugins_can_be_handed_over_by_name(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="not per-host built-in plugins: gate"):
        get_plugin_manager(isolated_settings(tmp_path), per_host={"gate": object})


def test_each_call_builds_a_fresh_manager(tmp_path: Path) -> None:
    settings = isolated_settings(tmp_path)
    assert get_plugin_manager(settings) is not get_plugin_manager(settings)


def _odd_module() -> Any:
    """A module holding every kind of attribute pluggy's own lookup tells apart."""
    import types

    import pluggy

    from ongrid_plugins.hookspecs import hookimpl

    module = types.ModuleType("odd_plugin")

    @hookimpl
    def ongrid_manifest_names() -> list[str]:
        return []

    def wrapped() -> None: ...

    wrapped.__func__ = ongrid_manifest_names  # type: ignore[attr-defined]
    not_a_dict = lambda: None  # noqa: E731
    not_a_dict.ongrid_impl = "yes"  # type: ignore[attr-defined]

    class Holder:
        @staticmethod
        @hookimpl
        def ongrid_manifest_names() -> list[str]:
            return []

    module.__dict__.update(
        ongrid_manifest_names=ongrid_manifest_names,
        wrapped=wrapped,
        not_a_dict=not_a_dict,
        static=Holder.__dict__["ongrid_manifest_names"],
        Holder=Holder,
        number=3,
        __getattr__=ongrid_manifest_names,
        pluggy=pluggy,
    )
    return module


def test_hook_implementations_are_found_in_a_module_as_pluggy_finds_them() -> None:
    import pluggy

    from ongrid_plugins import hookspecs
    from ongrid_plugins.plugins import PluginManager

    pm = PluginManager()
    modules = [importlib.import_module(module) for _name, module in BUILTIN_PLUGINS]
    found = 0
    for module in [*modules, _odd_module()]:
        for name in [*dir(module), "absent"]:
            ours = pm.parse_hookimpl_opts(module, name)
            assert ours == pluggy.PluginManager.parse_hookimpl_opts(pm, module, name), (module, name)
            found += ours is not None
    assert found >= len(modules)
    specs = 0
    for name in [*dir(hookspecs), "absent"]:
        ours = pm.parse_hookspec_opts(hookspecs, name)
        assert ours == pluggy.PluginManager.parse_hookspec_opts(pm, hookspecs, name), name
        specs += ours is not None
    assert specs == len([n for n in dir(hookspecs) if n.startswith("ongrid_")])


def test_importing_the_package_creates_no_plugin_manager() -> None:
    import subprocess

    code = (
        "import gc, pluggy, ongrid_plugins\n"
        "print(sum(isinstance(o, pluggy.PluginManager) for o in gc.get_objects()))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "0"


def test_an_entry_point_plugin_is_loaded_after_the_builtins(site: Path, tmp_path: Path, root: Path) -> None:
    install_dist(
        site,
        "ongrid-good",
        "1.2.3",
        {"good": "ongrid_test_plugin_good"},
        {"ongrid_test_plugin_good": GOOD_PLUGIN},
    )
    make_skill(root, "echo")
    host = SkillHost(settings_for(tmp_path, root))
    host.load()
    infos = {i.name: i for i in host.plugins()}
    assert (infos["good"].kind, infos["good"].distribution, infos["good"].version) == (
        "entrypoint",
        "ongrid-good",
        "1.2.3",
    )
    assert infos["good"].hooks == ("ongrid_skill_registered",)
    assert [i.name for i in host.plugins()][: len(BUILTIN_PLUGINS)] == [n for n, _m in BUILTIN_PLUGINS]
    assert sys.modules["ongrid_test_plugin_good"].SEEN == ["echo"]


@pytest.mark.parametrize(
    ("module_source", "cause"),
    [
        ("raise ImportError('missing dependency foo')", "ImportError: missing dependency foo"),
        ("import ongrid_plugins\n1/0", "ZeroDivisionError: division by zero"),
        (
            "from ongrid_plugins import hookimpl\n"
            "@hookimpl\ndef ongrid_load_manifest(path, nonsense):\n    pass\n",
            "PluginValidationError",
        ),
        (
            "from ongrid_plugins import hookimpl\n@hookimpl\ndef ongrid_not_a_hook():\n    pass\n",
            "unknown hook 'ongrid_not_a_hook'",
        ),
    ],
    ids=["import_error", "raises_at_import", "wrong_signature", "unknown_hook"],
)
def test_a_broken_entry_point_is_logged_with_its_distribution_and_skipped(
    site: Path, tmp_path: Path, root: Path, caplog: pytest.LogCaptureFixture, module_source: str, cause: str
) -> None:
    install_dist(
        site,
        "ongrid-broken",
        "0.1",
        {"broken": "ongrid_test_plugin_broken"},
        {"ongrid_test_plugin_broken": module_source},
    )
    make_skill(root, "echo")
    caplog.set_level(logging.WARNING)
    host = SkillHost(settings_for(tmp_path, root))
    assert host.call("echo", {"still": "works"}).value == {"still": "works"}
    info = next(i for i in host.plugins() if i.name == "broken")
    assert info.status == "failed" and cause in info.error
    line = next(r.getMessage() for r in caplog.records if "broken" in r.getMessage())
    assert line.startswith("plugins: cannot load plugin broken (distribution ongrid-broken 0.1): ")
    assert cause in line


def test_a_missing_entry_point_module_is_contained(site: Path, tmp_path: Path) -> None:
    install_dist(site, "ongrid-ghost", "1.0", {"ghost": "ongrid_test_plugin_does_not_exist"}, {})
    host = SkillHost(settings_for(tmp_path))
    info = next(i for i in host.plugins() if i.name == "ghost")
    assert info.status == "failed" and "ModuleNotFoundError" in info.error


def test_strict_mode_turns_a_broken_plugin_into_an_error(site: Path, tmp_path: Path) -> None:
    install_dist(
        site,
        "ongrid-broken",
        "0.1",
        {"broken": "ongrid_test_plugin_broken2"},
        {"ongrid_test_plugin_broken2": "raise RuntimeError('nope')"},
    )
    with pytest.raises(PluginLoadError, match="plugin 'broken' could not be loaded: RuntimeError: nope"):
        get_plugin_manager(settings_for(tmp_path, strict=True))


def test_disable_plugins_blocks_entry_points_and_builtins_by_name(
    site: Path, tmp_path: Path, root: Path
) -> None:
    install_dist(
        site,
        "ongrid-good",
        "1.0",
        {"good": "ongrid_test_plugin_good2"},
        {"ongrid_test_plugin_good2": GOOD_PLUGIN},
    )
    make_skill(root, "echo")
    host = SkillHost(settings_for(tmp_path, root, disable_plugins=("good", "subprocess")))
    status = {i.name: i.status for i in host.plugins()}
    assert (status["good"], status["subprocess"]) == ("blocked", "blocked")
    assert "ongrid_test_plugin_good2" not in sys.modules  # blocked plugins are not even imported
    from ongrid_plugins import SkillUnavailable

    with pytest.raises(SkillUnavailable, match="no executor can run tools of kind 'subprocess'"):
        host.call("echo")


def test_the_gate_cannot_be_disabled_and_still_votes(
    tmp_path: Path, root: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from ongrid_plugins import PermissionDenied

    make_skill(root, "change", class_="mutating")
    host = SkillHost(isolated_settings(tmp_path, root, disable_plugins=("gate",)))
    with pytest.raises(PermissionDenied):
        host.call("change", persona="viewer")
    assert any("cannot be disabled" in r.getMessage() for r in caplog.records)


def test_the_builtin_rule_holds_even_if_the_gate_plugin_is_unregistered(tmp_path: Path, root: Path) -> None:
    from ongrid_plugins import PermissionDenied

    make_skill(root, "change", class_="mutating")
    host = SkillHost(isolated_settings(tmp_path, root))
    host.pm.unregister(name="gate")
    with pytest.raises(PermissionDenied, match="persona viewer is read-only"):
        host.call("change", persona="viewer", confirm=True)


def test_trace_writes_every_hook_call_to_stderr(
    tmp_path: Path, root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    make_skill(root, "echo")
    SkillHost(isolated_settings(tmp_path, root, trace_plugins=True)).call("echo")
    err = capsys.readouterr().err
    for hook in ("ongrid_skill_roots", "ongrid_manifest_names", "ongrid_load_manifest", "ongrid_executor"):
        assert f"ongrid trace: {hook}" in err or hook in err


def test_trace_sees_hooks_called_one_implementation_at_a_time(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``ongrid_native_tools`` and ``ongrid_verify_approval`` isolate each plugin, and are traced too."""
    from ongrid_plugins import hookimpl
    from ongrid_plugins.gate.approvals import verify_with_plugins

    class Voter:
        @hookimpl
        def ongrid_verify_approval(self, ticket: Any, approval: Any) -> bool:
            return False

    from ongrid_plugins.plugins import collect_native_tools

    host = SkillHost(isolated_settings(tmp_path, trace_plugins=True), plugins=[Voter()])
    capsys.readouterr()
    assert any(key.startswith("ongrid.") for key in collect_native_tools(host.pm))
    assert verify_with_plugins(host.pm)(None, None) == "plugin Voter#0"  # type: ignore[arg-type]
    traced = re.findall(r"ongrid trace:\s+(ongrid_\w+) \[hook\]", capsys.readouterr().err)
    assert "ongrid_native_tools" in traced and "ongrid_verify_approval" in traced


def test_one_failing_implementation_is_isolated_and_named() -> None:
    from ongrid_plugins import hookimpl
    from ongrid_plugins.core.hooks import call_each
    from ongrid_plugins.plugins import PluginManager

    class Broken:
        @hookimpl
        def ongrid_native_tools(self) -> dict[str, Any]:
            raise RuntimeError("boom")

    class Fine:
        @hookimpl
        def ongrid_native_tools(self) -> dict[str, Any]:
            return {"k": print}

    pm = PluginManager()
    pm.register(Broken(), name="broken")
    pm.register(Fine(), name="fine")
    outcomes = [
        (impl.plugin_name, result, type(exc).__name__)
        for impl, result, exc in call_each(pm, "ongrid_native_tools", {}, newest_first=False)
    ]
    assert outcomes == [("broken", None, "RuntimeError"), ("fine", {"k": print}, "NoneType")]


def test_host_plugins_are_registered_after_builtins_and_listed_as_manual(tmp_path: Path) -> None:
    class Mine:
        pass

    host = SkillHost(isolated_settings(tmp_path), plugins=[Mine()])
    last = host.plugins()[-1]
    assert (last.name, last.kind, last.status) == ("Mine#0", "manual", "active")


def test_a_host_plugin_with_a_misspelt_hook_is_refused_at_once(tmp_path: Path) -> None:
    import pluggy

    from ongrid_plugins import hookimpl

    class Typo:
        @hookimpl
        def ongrid_befor_call(self, request: Any) -> None:
            pass

    host = SkillHost(isolated_settings(tmp_path), plugins=[Typo()])
    with pytest.raises(pluggy.PluginValidationError, match="did you mean 'ongrid_before_call'"):
        host.load()


# ------------------------------------------------- a failed permission plugin fails closed

DENY_WITH_A_TYPO = """
    from ongrid_plugins import hookimpl, Decision, Verdict

    @hookimpl
    def ongrid_check_permission(tool, persona):
        if tool.name == "restart":
            return Decision(Verdict.DENY, "restarts are frozen", "freeze")

    @hookimpl
    def ongrid_skil_registered(skill):  # the typo that used to skip the whole plugin
        pass
"""
BROKEN_IMPORT = """
    import ongrid_test_plugin_missing_dependency
    from ongrid_plugins import hookimpl

    @hookimpl
    def ongrid_verify_approval(ticket, approval):
        return False
"""


@pytest.mark.parametrize(
    ("module", "source"),
    [("ongrid_test_plugin_freeze", DENY_WITH_A_TYPO), ("ongrid_test_plugin_vetoes", BROKEN_IMPORT)],
)
def test_a_failed_permission_plugin_refuses_mutating_and_dangerous_calls(
    site: Path, tmp_path: Path, root: Path, module: str, source: str
) -> None:
    from ongrid_plugins import PermissionDenied

    install_dist(site, "ongrid-freeze", "1.0", {"freeze": module}, {module: source})
    make_skill(root, "echo")
    make_skill(root, "restart", class_="mutating")
    make_skill(root, "wipe", class_="dangerous")
    host = SkillHost(settings_for(tmp_path, root))
    info = next(i for i in host.plugins() if i.name == "freeze")
    assert info.status == "failed" and info.fails_closed
    assert host.call("echo", {"safe": "calls go on"}).ok
    for tool, persona in (("restart", "operator"), ("wipe", "admin")):
        with pytest.raises(PermissionDenied, match=r"plugin freeze .* failed to load") as refused:
            host.call(tool, {}, persona=persona, confirm=True)
        assert refused.value.decision.plugin == "freeze"
        assert "ONGRID_DISABLE_PLUGINS=freeze" in refused.value.decision.reason


def test_the_plugins_command_shows_a_plugin_that_fails_closed(
    site: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from ongrid_plugins.commands.plugins import cmd_plugins

    install_dist(
        site,
        "ongrid-freeze",
        "1.0",
        {"freeze": "ongrid_test_plugin_f2"},
        {"ongrid_test_plugin_f2": DENY_WITH_A_TYPO},
    )
    host = SkillHost(settings_for(tmp_path))

    class Ctx:
        args = type("Args", (), {"json": False})()

    Ctx.host = host  # type: ignore[attr-defined]
    cmd_plugins(Ctx())  # type: ignore[arg-type]
    out = capsys.readouterr().out
    assert "freeze" in out and "FAILS CLOSED" in out and "ONGRID_DISABLE_PLUGINS=freeze" in out


def test_disabling_the_failed_plugin_by_name_lets_calls_run(site: Path, tmp_path: Path, root: Path) -> None:
    install_dist(
        site,
        "ongrid-freeze",
        "1.0",
        {"freeze": "ongrid_test_plugin_f3"},
        {"ongrid_test_plugin_f3": DENY_WITH_A_TYPO},
    )
    make_skill(root, "restart", class_="mutating")
    host = SkillHost(settings_for(tmp_path, root, disable_plugins=("freeze",)))
    assert next(i for i in host.plugins() if i.name == "freeze").status == "blocked"
    assert host.call("restart", {}, persona="operator", confirm=True).ok


def test_a_failed_plugin_without_power_only_skips_itself(site: Path, tmp_path: Path, root: Path) -> None:
    install_dist(
        site,
        "ongrid-noisy",
        "1.0",
        {"noisy": "ongrid_test_plugin_noisy"},
        {"ongrid_test_plugin_noisy": "raise ImportError('x')"},
    )
    make_skill(root, "restart", class_="mutating")
    host = SkillHost(settings_for(tmp_path, root))
    info = next(i for i in host.plugins() if i.name == "noisy")
    assert info.status == "failed" and not info.fails_closed
    assert host.call("restart", {}, persona="operator", confirm=True).ok
