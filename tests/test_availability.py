"""Availability gating: another OS is skipped; missing needs make a skill unavailable until a reload."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

import pytest

from ongrid_plugins import Requirements, SkillUnavailable
from ongrid_plugins.catalog.availability import Availability, config_env_var, current_os
from ongrid_plugins.testing import ECHO_SH, isolated_settings, make_skill_md, write_executable

LOADER = "ongrid_plugins.loader"


def exec_tool(name: str = "run") -> dict[str, Any]:
    return {"name": name, "impl": "exec:run.sh", "description": "Runs."}


def needy(root: Path, name: str, **requires: Any) -> Path:
    return make_skill_md(
        root, name, tools=[exec_tool(name)], files={"run.sh": ECHO_SH}, metadata={"requires": requires}
    )


@pytest.mark.parametrize(
    ("platform", "expected"),
    [
        ("linux", "linux"),
        ("darwin", "darwin"),
        ("win32", "windows"),
        ("cygwin", "windows"),
        ("freebsd14", "freebsd"),
    ],
)
def test_the_current_os_uses_the_names_skills_use(platform: str, expected: str) -> None:
    assert current_os(platform) == expected


def test_a_skill_for_another_os_is_not_registered_and_the_log_says_why(
    make_host: Any, root: Path, caplog: pytest.LogCaptureFixture
) -> None:
    other = "darwin" if current_os() != "darwin" else "linux"
    folder = make_skill_md(root, "elsewhere", metadata={"os": [other]})
    make_skill_md(root, "here", metadata={"openclaw": {"os": [current_os(), "win32"]}})
    caplog.set_level(logging.INFO, logger=LOADER)
    host = make_host(root)
    assert [s.name for s in host.skills()] == ["here"]
    reason = f"for {other} only, this is {current_os()}"
    [event] = host.report.by_outcome("skipped")
    assert (event.skill, event.message) == ("elsewhere", reason)
    line = f'skill loader: skill "elsewhere" is {reason}, skipping {os.path.realpath(folder)}/SKILL.md'
    assert line in [r.getMessage() for r in caplog.records]


def test_a_skipped_skill_does_not_claim_its_name(make_host: Any, root: Path) -> None:
    other = "darwin" if current_os() != "darwin" else "linux"
    make_skill_md(root, "tool", folder="a-other-os", metadata={"os": [other]}, description="not here")
    make_skill_md(root, "tool", folder="b-this-os", metadata={"os": [current_os()]}, description="here")
    assert make_host(root).skill("tool").description == "here"


def test_missing_binaries_variables_and_config_make_a_skill_unavailable_with_exact_reasons(
    make_host: Any, root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    monkeypatch.setenv("PATH", str(bin_dir))
    monkeypatch.delenv("ONGRID_TEST_TOKEN", raising=False)
    needy(
        root,
        "needs",
        bins=["ongrid-test-tool"],
        anyBins=["ongrid-a", "ongrid-b"],
        env=["ONGRID_TEST_TOKEN"],
        config=["channels.test"],
    )
    host = make_host(root)
    config_file = tmp_path / ".ongrid-config" / "config.toml"
    expected = (
        'binary "ongrid-test-tool" is not on PATH',
        'none of the binaries "ongrid-a", "ongrid-b" is on PATH',
        "environment variable ONGRID_TEST_TOKEN is not set",
        f'config key "channels.test" is not set (in {config_file} or ONGRID_CONFIG_CHANNELS_TEST)',
    )
    skill = host.skill("needs")
    assert skill.unavailable == expected and host.get("needs").unavailable == expected
    assert host.tools() == [] and host.resolve("anything") == []
    with pytest.raises(SkillUnavailable) as info:
        host.call("needs", {})
    assert str(info.value) == "skill 'needs' is unavailable: " + "; ".join(expected)

    write_executable(bin_dir / "ongrid-test-tool", "#!/bin/sh\n")
    write_executable(bin_dir / "ongrid-b", "#!/bin/sh\n")
    monkeypatch.setenv("ONGRID_TEST_TOKEN", "t0k3n")
    config_file.parent.mkdir(parents=True)
    config_file.write_text("[channels.test]\nenabled = true\n")
    assert host.skill("needs").unavailable == expected  # nothing changes until a reload
    host.reload()
    assert host.skill("needs").available
    assert host.call("needs", {"x": 1}).value == {"x": 1}


@pytest.mark.parametrize(
    ("toml", "env", "available"),
    [
        ("[plugins.entries.voice-call]\nenabled = true\n", None, True),
        ("[plugins.entries.voice-call]\nenabled = false\n", None, False),
        ("[plugins.entries]\nother = 1\n", None, False),
        ("not [valid toml", None, False),
        (None, "1", True),
        (None, "off", False),
        ("[plugins.entries.voice-call]\nenabled = true\n", "0", False),  # the environment wins
    ],
)
def test_config_keys_come_from_the_environment_or_the_config_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, toml: str | None, env: str | None, available: bool
) -> None:
    settings = isolated_settings(tmp_path)
    key = "plugins.entries.voice-call.enabled"
    assert config_env_var(key) == "ONGRID_CONFIG_PLUGINS_ENTRIES_VOICE_CALL_ENABLED"
    if toml is not None:
        Path(settings.config_dir).mkdir(parents=True)
        (Path(settings.config_dir) / "config.toml").write_text(toml)
    environ = {} if env is None else {config_env_var(key): env}
    assert Availability(None, settings, environ=environ).has_config(key) is available


def test_a_minimum_version_newer_than_ours_is_a_reason(tmp_path: Path) -> None:
    checker = Availability(None, isolated_settings(tmp_path), environ={})
    assert checker.missing(Requirements(min_version="0.1")) == []
    assert checker.missing(Requirements(min_version="v99.0")) == [
        "needs ongrid-plugins >= v99.0 (this is 0.1.0)"
    ]


def test_install_hints_are_part_of_the_reason(
    make_host: Any, root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    install = [
        {"id": "brew", "kind": "brew", "formula": "gh", "bins": ["gh"], "label": "Install GitHub CLI (brew)"}
    ]
    make_skill_md(root, "gh", metadata={"moltbot": {"requires": {"bins": ["gh"]}, "install": install}})
    skill = make_host(root).skill("gh")
    assert skill.unavailable == ('binary "gh" is not on PATH (install: Install GitHub CLI (brew))',)


def test_unavailable_prompt_skills_are_listed_with_reasons_but_never_resolved(
    make_host: Any, root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ONGRID_TEST_PROMPT_ENV", raising=False)
    make_skill_md(root, "prompt", metadata={"requires": {"env": ["ONGRID_TEST_PROMPT_ENV"]}})
    host = make_host(root)
    assert host.skill("prompt").unavailable == ("environment variable ONGRID_TEST_PROMPT_ENV is not set",)
    assert host.resolve("hello") == []
    monkeypatch.setenv("ONGRID_TEST_PROMPT_ENV", "1")
    host.reload()
    assert [r.name for r in host.resolve("hello")] == ["prompt"]
