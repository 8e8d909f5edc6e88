"""Runs against the installed plugin (``pip install . && pytest``), loaded from its entry point."""

from __future__ import annotations

import datetime
import json
from pathlib import Path

import pytest
from ongrid_policy_window import PLUGIN
from ongrid_policy_window.config import ConfigProblem, load_config, parse_window

from ongrid_plugins import PermissionDenied
from ongrid_plugins.testing import assert_ok, make_skill, pack_host

DIST = "ongrid-policy-window"
DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")


@pytest.fixture
def root(tmp_path: Path) -> Path:
    root = tmp_path / "skills"
    make_skill(root, "change", class_="mutating")
    make_skill(root, "look")
    return root


@pytest.fixture
def audit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in ("WINDOWS", "TIMEZONE", "CLASSES", "INCLUDE_ARGS", "CONFIG"):
        monkeypatch.delenv(f"ONGRID_POLICY_WINDOW_{name}", raising=False)
    monkeypatch.setenv("ONGRID_POLICY_WINDOW_CONFIG", str(tmp_path / "absent.toml"))
    path = tmp_path / "audit" / "calls.jsonl"
    monkeypatch.setenv("ONGRID_POLICY_WINDOW_AUDIT_LOG", str(path))
    return path


def host_for(tmp_path: Path, root: Path):
    return pack_host(tmp_path / "host", DIST, skill_dirs=(str(root),))


def far_day() -> str:
    """A day three days from now: a window on it is surely closed now (and in the next minutes)."""
    return DAYS[(datetime.datetime.now(datetime.UTC).weekday() + 3) % 7]


def lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_the_plugin_is_loaded_from_its_distribution(tmp_path: Path, root: Path, audit: Path) -> None:
    info = next(i for i in host_for(tmp_path, root).plugins() if i.name == PLUGIN)
    assert (info.kind, info.status, info.distribution) == ("entrypoint", "active", DIST)
    assert set(info.hooks) == {"ongrid_after_call", "ongrid_check_permission"}


def test_a_mutating_call_outside_every_window_is_denied(
    tmp_path: Path, root: Path, audit: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ONGRID_POLICY_WINDOW_WINDOWS", f"{far_day()} 02:00-04:00")
    host = host_for(tmp_path, root)
    with pytest.raises(PermissionDenied) as info:
        host.call("change", confirm=True)
    assert info.value.decision.plugin == PLUGIN
    assert "mutating calls run only in maintenance windows" in info.value.decision.reason
    assert assert_ok(host.call("look", {"n": 1})) == {"n": 1}  # safe tools are not guarded
    assert "change" in [t.name for t in host.tools(persona="operator")]  # listings do not follow the clock


def test_a_mutating_call_inside_a_window_runs(
    tmp_path: Path, root: Path, audit: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ONGRID_POLICY_WINDOW_WINDOWS", f"{far_day()} 02:00-04:00; 00:00-24:00")
    assert assert_ok(host_for(tmp_path, root).call("change", {"a": 1}, confirm=True)) == {"a": 1}


def test_the_built_in_rule_still_applies_inside_a_window(
    tmp_path: Path, root: Path, audit: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ONGRID_POLICY_WINDOW_WINDOWS", "00:00-24:00")
    with pytest.raises(PermissionDenied, match="read-only"):
        host_for(tmp_path, root).call("change", persona="viewer", confirm=True)


def test_no_window_or_a_broken_configuration_denies(
    tmp_path: Path, root: Path, audit: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    host = host_for(tmp_path, root)
    with pytest.raises(PermissionDenied, match="no maintenance window is configured"):
        host.call("change", confirm=True)
    monkeypatch.setenv("ONGRID_POLICY_WINDOW_WINDOWS", "whenever")
    with pytest.raises(PermissionDenied, match="configuration is broken: window 'whenever'"):
        host.call("change", confirm=True)


def test_every_call_attempt_gets_a_jsonl_line(
    tmp_path: Path, root: Path, audit: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ONGRID_POLICY_WINDOW_WINDOWS", f"{far_day()} 02:00-04:00")
    host = host_for(tmp_path, root)
    host.call("look", {"secret": "s3"}, caller="ada")
    with pytest.raises(PermissionDenied):
        host.call("change", confirm=True)
    first, second = lines(audit)
    assert (first["tool"], first["outcome"], first["caller"], first["class"]) == ("look", "ok", "ada", "safe")
    assert "args" not in first and first["args_digest"]
    assert (second["outcome"], second["decision"]["plugin"]) == ("denied", PLUGIN)
    assert oct(audit.stat().st_mode & 0o777) == "0o600"
    monkeypatch.setenv("ONGRID_POLICY_WINDOW_INCLUDE_ARGS", "1")
    host.call("look", {"secret": "s3"})
    assert lines(audit)[-1]["args"] == {"secret": "s3"}


def test_a_toml_file_configures_it_and_the_environment_wins(
    tmp_path: Path, root: Path, audit: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "policy.toml"
    config.write_text('windows = ["00:00-24:00"]\nclasses = ["dangerous"]\naudit_log = "off"\n')
    monkeypatch.setenv("ONGRID_POLICY_WINDOW_CONFIG", str(config))
    monkeypatch.delenv("ONGRID_POLICY_WINDOW_AUDIT_LOG")
    loaded = load_config()
    assert (loaded.classes, loaded.audit_log, len(loaded.windows)) == (frozenset({"dangerous"}), None, 1)
    monkeypatch.setenv("ONGRID_POLICY_WINDOW_CLASSES", "mutating")
    assert load_config().classes == frozenset({"mutating"})
    config.write_text("nonsense = 1\n")
    with pytest.raises(ConfigProblem, match="unknown keys"):
        load_config()


@pytest.mark.parametrize(
    ("text", "now", "inside"),
    [
        ("Mon-Fri 22:00-06:00", "2026-11-30 23:30", True),  # Monday night
        ("Mon-Fri 22:00-06:00", "2026-12-01 05:59", True),  # Tuesday early: Monday's window
        ("Mon-Fri 22:00-06:00", "2026-11-30 05:00", False),  # Monday early: Sunday had none
        ("Mon-Fri 22:00-06:00", "2026-12-05 01:00", True),  # Saturday early: Friday's window
        ("Sat,Sun 00:00-24:00", "2026-12-06 12:00", True),
        ("Fri-Mon 10:00-11:00", "2026-11-30 10:30", True),  # a range over the week's end
        ("Fri-Mon 10:00-11:00", "2026-12-02 10:30", False),
        ("02:00-04:00", "2026-12-03 04:00", False),  # the end is excluded
    ],
)
def test_windows(text: str, now: str, inside: bool) -> None:
    moment = datetime.datetime.fromisoformat(now).replace(tzinfo=datetime.UTC)
    assert parse_window(text).contains(moment) is inside


@pytest.mark.parametrize("text", ["Mon 25:00-26:00", "Someday 01:00-02:00", "01:00-01:00", "1:00-2:00"])
def test_bad_windows_are_refused(text: str) -> None:
    with pytest.raises(ConfigProblem):
        parse_window(text)
