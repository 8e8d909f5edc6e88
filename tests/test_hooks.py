"""The typed hook facade is the only caller of pluggy, and every hook it calls is traced.

``ongrid_plugins/core/hooks.py`` has one method per hook of ``hookspecs``; no other module of
the package reaches into the plugin manager's hook callers or pluggy's internals, so
``ONGRID_TRACE_PLUGINS`` sees every hook call a host makes.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pluggy
import pytest

from ongrid_plugins import ApprovalRequired, SkillHost, hookimpl, hookspecs
from ongrid_plugins.core.hooks import Hooks, hooks
from ongrid_plugins.models import Problem, Skill, SkillRoot
from ongrid_plugins.plugins import PluginManager
from ongrid_plugins.testing import isolated_settings, make_skill, make_skill_md

PACKAGE = Path(__file__).resolve().parent.parent / "ongrid_plugins"

#: What only the facade may write: the manager's hook callers and pluggy's internals.
PLUGGY_INTERNALS = re.compile(
    r"\.hook\.|\bget_hookimpls\b|\bget_hookcallers\b|\b_multicall\b|_hookexec\b|\bHookImpl\b"
    r"|\b(impl|impls\[\d\])\.function\b"
)

HOOKS = sorted(name for name in dir(hookspecs) if name.startswith("ongrid_"))


def _offenders(package: Path) -> list[str]:
    found = []
    for path in sorted(package.rglob("*.py")):
        relative = path.relative_to(package).as_posix()
        if relative == "core/hooks.py" or relative.startswith("skills/"):
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if PLUGGY_INTERNALS.search(line):
                found.append(f"{relative}:{number}: {line.strip()}")
    return found


def test_no_module_but_the_facade_touches_pluggys_hook_callers() -> None:
    assert _offenders(PACKAGE) == []


def test_the_check_finds_a_hook_called_by_hand(tmp_path: Path) -> None:
    (tmp_path / "core").mkdir(exist_ok=True)
    (tmp_path / "core" / "hooks.py").write_text("pm.hook.ongrid_executor(tool=t, settings=s)\n")
    (tmp_path / "sneaky.py").write_text("x = pm.hook.ongrid_manifest_names()\nf = impls[0].function\n")
    assert _offenders(tmp_path) == [
        "sneaky.py:1: x = pm.hook.ongrid_manifest_names()",
        "sneaky.py:2: f = impls[0].function",
    ]


def test_the_facade_has_one_typed_method_per_hook() -> None:
    methods = {name for name in vars(Hooks) if not name.startswith("_")}
    assert {f"ongrid_{name}" for name in methods} >= set(HOOKS)
    for hook in HOOKS:
        assert hook in (getattr(Hooks, hook.removeprefix("ongrid_")).__doc__ or ""), hook


def test_every_manager_gives_one_facade() -> None:
    pm = PluginManager()
    assert pm.hooks is hooks(pm) is hooks(pm)
    plain = pluggy.PluginManager(hookspecs.PROJECT_NAME)
    plain.add_hookspecs(hookspecs)
    assert hooks(plain) is hooks(plain) and hooks(plain) is not pm.hooks


class Names:
    @hookimpl
    def ongrid_manifest_names(self) -> list[str]:
        return ["skill.json", "tool.toml"]


def test_manifest_names_are_flattened_once_without_duplicates() -> None:
    pm = PluginManager()
    for name, module in (("skill_json", "ongrid_plugins.loaders.skill_json"), ("names", Names())):
        pm.register(__import__(module, fromlist=["x"]) if isinstance(module, str) else module, name=name)
    assert hooks(pm).manifest_names() == frozenset({"skill.json", "tool.toml"})


class Everything:
    """Implements the hooks the host skips when nobody does, and approves every approval."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    @hookimpl
    def ongrid_validate_skill(self, skill: Skill, root: SkillRoot) -> list[Problem]:
        self.seen.append("validate")
        return []

    @hookimpl
    def ongrid_skill_registered(self, skill: Skill) -> None:
        self.seen.append("registered")

    @hookimpl
    def ongrid_verify_approval(self) -> bool:
        return True

    @hookimpl
    def ongrid_native_tools(self) -> dict[str, Any]:
        return {"trace.echo": lambda args, ctx: {"args": args}}


def test_tracing_sees_every_hook_of_the_specification(
    tmp_path: Path, root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    make_skill(root, "echo")
    make_skill(root, "wipe", class_="dangerous")
    native = {"name": "native_echo", "impl": "builtin:trace.echo", "description": "d"}
    make_skill_md(root, "native", tools=[native])
    plugin = Everything()
    host = SkillHost(isolated_settings(tmp_path, root, trace_plugins=True), plugins=[plugin])
    assert host.call("echo", {"x": 1}).ok
    assert host.call("native_echo", {"x": 1}).ok
    with pytest.raises(ApprovalRequired) as refused:
        host.call("wipe", {}, persona="admin", caller="alice")
    assert refused.value.ticket is not None
    host.approve(refused.value.ticket.id, approver="bob")
    traced = capsys.readouterr().err
    assert [hook for hook in HOOKS if f"{hook} " not in traced and f"{hook}[" not in traced] == []
    assert "validate" in plugin.seen and "registered" in plugin.seen


def test_the_manager_counts_its_monitors_until_each_is_undone() -> None:
    pm = PluginManager()
    assert pm.hook_monitors == 0 and not pm.hooks.monitored
    undo = pm.add_hookcall_monitoring(lambda *a: None, lambda *a: None)
    undo_tracing = pm.enable_tracing()
    assert pm.hook_monitors == 2 and pm.hooks.monitored
    undo_tracing()
    undo_tracing()  # a second undo counts once
    assert pm.hook_monitors == 1 and pm.hooks.monitored
    undo()
    assert pm.hook_monitors == 0 and not pm.hooks.monitored
    plain = pluggy.PluginManager(hookspecs.PROJECT_NAME)
    assert hooks(plain).monitored  # it does not count: every hook goes through pluggy


class Unhashable:
    """A plugin object pluggy cannot put in a set (``__eq__`` without ``__hash__``)."""

    def __eq__(self, other: object) -> bool:
        return self is other

    __hash__ = None  # type: ignore[assignment]

    @hookimpl
    def ongrid_native_tools(self) -> dict[str, Any]:
        return {"odd.one": lambda args, ctx: args}


class Raising:
    @hookimpl
    def ongrid_native_tools(self) -> dict[str, Any]:
        raise LookupError("from the plugin")


class Listing:
    @hookimpl
    def ongrid_native_tools(self) -> dict[str, Any]:
        return {"listing.one": lambda args, ctx: args}


def _heard(pm: PluginManager, monitored: bool) -> tuple[list[tuple[str, str | None]], list[tuple[str, ...]]]:
    seen: list[tuple[str, ...]] = []
    if monitored:
        pm.add_hookcall_monitoring(
            lambda name, impls, kw: seen.append((name, *(i.plugin_name for i in impls))), lambda *a: None
        )
    answers = [(a.plugin, type(a.error).__name__ if a.error else None) for a in pm.hooks.native_tools()]
    return answers, seen


@pytest.mark.parametrize("monitored", [False, True])
def test_each_plugin_is_heard_on_its_own_and_a_monitor_sees_each_call(monitored: bool) -> None:
    pm = PluginManager()
    pm.register(Names(), name="names")  # implements another hook only
    pm.register(Listing(), name="listing")
    pm.register(Raising(), name="raising")
    answers, seen = _heard(pm, monitored)
    assert answers == [("listing", None), ("raising", "LookupError")]
    expected = [("ongrid_native_tools", "listing"), ("ongrid_native_tools", "raising")]
    assert seen == (expected if monitored else [])


def test_a_plugin_pluggy_cannot_hash_is_still_heard_on_its_own_while_monitored() -> None:
    pm = PluginManager()
    pm.register(Unhashable(), name="odd")
    pm.register(Raising(), name="raising")
    answers, seen = _heard(pm, True)
    assert answers == [("odd", None), ("raising", "LookupError")]
    assert seen == []  # pluggy cannot leave an unhashable plugin out: each is called directly
