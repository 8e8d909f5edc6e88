"""Packs: Claude Code and openclaw plugin folders found from the shared walk."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

import pytest

from ongrid_plugins.testing import make_skill_md

LOADER = "ongrid_plugins.loader"


def write_json(path: Path, data: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def warning_events(host: Any) -> list[tuple[str, str]]:
    return [(Path(e.path).name, e.message) for e in host.report.by_outcome("warning")]


def test_a_claude_plugin_gives_its_skills_folder_the_pack_provenance(make_host: Any, root: Path) -> None:
    pack = root / "my-pack"
    write_json(pack / ".claude-plugin" / "plugin.json", {"name": "my-pack", "version": "1.2.0"})
    make_skill_md(pack / "skills", "alpha")
    make_skill_md(pack, "beta")  # beside skills/, not in it
    host = make_host(root)
    alpha, beta = host.skill("alpha"), host.skill("beta")
    assert (alpha.provenance, alpha.root.source) == ("my-pack 1.2.0", "pack")
    assert beta.provenance == os.path.realpath(root)
    [warning] = beta.warnings
    assert warning.code == "outside_pack"
    assert warning_events(host) == []  # nothing unsupported in this pack


def test_an_openclaw_skills_list_names_skill_folders_and_folders_of_skills(
    make_host: Any, root: Path
) -> None:
    pack = root / "claw"
    write_json(pack / "openclaw.plugin.json", {"id": "claw", "configSchema": {}, "skills": ["./lib", "one"]})
    make_skill_md(pack / "lib", "from_lib")
    make_skill_md(pack, "one")
    make_skill_md(pack / "skills", "default_folder")  # a list replaces skills/*/ for openclaw
    host = make_host(root)
    assert host.skill("from_lib").provenance == "claw"
    assert host.skill("one").provenance == "claw"
    assert host.skill("default_folder").provenance == os.path.realpath(root)


@pytest.mark.parametrize("manifest", ["clawdbot.plugin.json", "openclaw.plugin.json"])
def test_the_legacy_openclaw_manifest_name_is_recognised(make_host: Any, root: Path, manifest: str) -> None:
    pack = root / "legacy"
    write_json(pack / manifest, {"id": "legacy-pack", "version": "0.3.0", "configSchema": {}})
    make_skill_md(pack, "at_root", folder=".")
    make_skill_md(pack / "skills", "nested")
    host = make_host(root)
    assert host.skill("at_root").provenance == "legacy-pack 0.3.0"
    assert host.skill("nested").provenance == "legacy-pack 0.3.0"


def test_absolute_and_dotdot_skills_entries_are_refused_with_a_log_line_and_event(
    make_host: Any, root: Path, caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    pack = root / "p"
    (tmp_path / "away").mkdir()
    (pack / "skills").mkdir(parents=True)
    (pack / "linked").symlink_to(tmp_path / "away")
    entries = ["/etc", "../other", "skills/../../other", "linked", "missing", 7]
    manifest = write_json(pack / ".claude-plugin" / "plugin.json", {"name": "p", "skills": entries})
    make_skill_md(root / "other", "outside")
    make_skill_md(pack / "skills", "inside")
    caplog.set_level(logging.WARNING, logger=LOADER)
    host = make_host(root)
    assert host.skill("inside").provenance == "p"
    assert host.skill("outside").provenance == os.path.realpath(root)
    messages = [m for _name, m in warning_events(host)]
    stay = "entries must stay inside the pack, refused"
    assert messages == [
        f'pack "p": skills entry "/etc" is absolute; {stay}',
        f'pack "p": skills entry "../other" contains ".."; {stay}',
        f'pack "p": skills entry "skills/../../other" contains ".."; {stay}',
        f'pack "p": skills entry "linked" resolves to {tmp_path / "away"}, outside the pack; refused',
        'pack "p": skills entry "missing" does not exist; ignored',
        'pack "p": skills[5] is not a path',
    ]
    real_manifest = os.path.realpath(manifest)
    assert [f"skill loader: {real_manifest}: {m}" for m in messages] == [
        line for line in (r.getMessage() for r in caplog.records if r.name == LOADER) if "pack" in line
    ]


def test_hooks_mcp_commands_and_agents_are_reported_once_per_load(
    make_host: Any, root: Path, caplog: pytest.LogCaptureFixture
) -> None:
    pack = root / "full"
    write_json(pack / ".claude-plugin" / "plugin.json", {"name": "full", "mcpServers": {"x": {}}})
    write_json(pack / "hooks" / "hooks.json", {"hooks": {}})
    (pack / "commands").mkdir()
    (pack / "agents").mkdir()
    make_skill_md(pack / "skills", "one")
    make_skill_md(pack / "skills", "two")
    caplog.set_level(logging.WARNING, logger=LOADER)
    host = make_host(root)
    expected = [
        ("plugin.json", 'pack "full" has hooks (hooks/hooks.json): not supported, not loaded'),
        (
            "plugin.json",
            'pack "full" has MCP servers ("mcpServers" in the manifest): not supported, not loaded',
        ),
        ("plugin.json", 'pack "full" has commands (commands): not supported, not loaded'),
        ("plugin.json", 'pack "full" has agents (agents): not supported, not loaded'),
    ]
    assert warning_events(host) == expected
    assert len([r for r in caplog.records if "not supported" in r.getMessage()]) == 4
    assert [s.name for s in host.skills()] == ["one", "two"]
    host.reload()
    assert warning_events(host) == expected  # reported again, once, by every load


def test_a_broken_pack_manifest_is_reported_and_its_skills_still_load(make_host: Any, root: Path) -> None:
    pack = root / "broken"
    (pack / ".claude-plugin").mkdir(parents=True)
    (pack / ".claude-plugin" / "plugin.json").write_text("{not json")
    make_skill_md(pack / "skills", "survivor")
    host = make_host(root)
    assert host.skill("survivor").provenance == os.path.realpath(root)
    [(_name, message)] = warning_events(host)
    assert message.startswith("pack manifest ") and "cannot be read" in message


def test_a_nameless_claude_pack_is_named_after_its_folder(make_host: Any, root: Path) -> None:
    write_json(root / "folder-name" / ".claude-plugin" / "plugin.json", {"description": "no name"})
    make_skill_md(root / "folder-name" / "skills", "s")
    host = make_host(root)
    assert host.skill("s").provenance == "folder-name"
    assert [m for _n, m in warning_events(host)] == [
        f'pack manifest {os.path.realpath(root)}/folder-name/.claude-plugin/plugin.json has no "name"; '
        'the folder name "folder-name" is used'
    ]


def test_the_nearest_pack_wins(make_host: Any, root: Path) -> None:
    write_json(root / "outer" / ".claude-plugin" / "plugin.json", {"name": "outer"})
    write_json(root / "outer" / "skills" / "inner" / "openclaw.plugin.json", {"id": "inner"})
    make_skill_md(root / "outer" / "skills" / "inner", "deep", folder=".")
    make_skill_md(root / "outer" / "skills", "shallow")
    host = make_host(root)
    assert host.skill("deep").provenance == "inner"
    assert host.skill("shallow").provenance == "outer"


def test_a_pack_above_the_root_is_not_looked_for(make_host: Any, tmp_path: Path) -> None:
    write_json(tmp_path / "pack" / ".claude-plugin" / "plugin.json", {"name": "above"})
    skills = tmp_path / "pack" / "skills"
    make_skill_md(skills, "s")
    host = make_host(skills)
    assert host.skill("s").provenance == os.path.realpath(skills)
