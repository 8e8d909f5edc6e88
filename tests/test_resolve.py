"""Resolve: the skills to mount for a user message, narrowed to what the persona may call."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ongrid_plugins.testing import ECHO_SH, make_skill, make_skill_md


def tool(name: str, cls: str = "read") -> dict[str, Any]:
    return {"name": name, "impl": f"exec:{name}.sh", "class": cls, "description": f"{name}."}


@pytest.fixture
def skills(root: Path) -> Path:
    make_skill_md(root, "always_on", description="Always there.")
    make_skill_md(
        root,
        "disk",
        description="Disk things.",
        activation={"mode": "keyword", "keywords": ["disk", "Free Space"]},
        tools=[tool("du"), tool("wipe", "destructive")],
        files={"du.sh": ECHO_SH, "wipe.sh": ECHO_SH},
    )
    make_skill_md(
        root,
        "deploy",
        description="Deploys.",
        when_to_use="When shipping.",
        tools=[tool("ship", "write")],
        files={"ship.sh": ECHO_SH},
    )
    make_skill_md(root, "odd_mode", description="Unknown mode.", activation={"mode": "sometimes"})
    make_skill_md(root, "user_only", description="Slash command only.", **{"disable-model-invocation": True})
    make_skill(root, "legacy_json")
    return root


def names(resolved: list[Any]) -> list[str]:
    return [r.name for r in resolved]


def test_always_and_unknown_modes_are_kept_keyword_skills_need_a_keyword(
    make_host: Any, skills: Path
) -> None:
    host = make_host(skills)
    assert names(host.resolve("hello")) == ["always_on", "deploy", "legacy_json", "odd_mode"]
    found = host.resolve("how much FREE SPACE is left?")
    assert names(found) == ["always_on", "deploy", "disk", "legacy_json", "odd_mode"]
    assert {r.name: r.reason for r in found}["disk"] == 'keyword "Free Space"'


def test_tools_are_narrowed_to_the_persona_and_emptied_skills_dropped(make_host: Any, skills: Path) -> None:
    host = make_host(skills)
    everyone = {r.name: [t.name for t in r.tools] for r in host.resolve("disk")}
    assert everyone["disk"] == ["du", "wipe"] and everyone["deploy"] == ["ship"]
    viewer = {r.name: [t.name for t in r.tools] for r in host.resolve("disk", persona="viewer")}
    assert viewer == {"always_on": [], "disk": ["du"], "legacy_json": ["legacy_json"], "odd_mode": []}
    admin = {r.name: [t.name for t in r.tools] for r in host.resolve("disk", persona="admin")}
    assert admin["disk"] == ["du", "wipe"]  # dual_sign is not deny: the tool is offered


def test_resolved_skills_carry_no_body_and_no_paths(make_host: Any, skills: Path) -> None:
    [deploy] = [r for r in make_host(skills).resolve("x") if r.name == "deploy"]
    data = deploy.to_dict()
    assert set(data) == {
        "name",
        "display_name",
        "description",
        "when_to_use",
        "reason",
        "prompt_only",
        "tools",
    }
    assert data["when_to_use"] == "When shipping."
    assert data["tools"][0]["class"] == "mutating"


def test_resolve_on_the_command_line(skills: Path) -> None:
    argv = ["--no-defaults", "--dirs", str(skills), "-q", "resolve", "my disk is full", "--persona", "viewer"]
    proc = subprocess.run(
        [sys.executable, "-m", "ongrid_plugins", *argv, "--json"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert (data["query"], data["persona"]) == ("my disk is full", "viewer")
    by_name = {s["name"]: s for s in data["skills"]}
    assert list(by_name) == ["always_on", "disk", "legacy_json", "odd_mode"]
    assert by_name["disk"]["reason"] == 'keyword "disk"'
    assert [t["name"] for t in by_name["disk"]["tools"]] == ["du"]
    assert by_name["always_on"]["prompt_only"] is True
