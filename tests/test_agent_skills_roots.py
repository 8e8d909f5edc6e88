"""The Agent Skills folders: ``<project>/.agents/skills`` (trusted projects only) and
``~/.agents/skills``, through the real CLI on real folders (``python -m ongrid_plugins``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ongrid_plugins import Settings, SkillHost
from ongrid_plugins.testing import make_skill_md


@pytest.fixture
def world(tmp_path: Path) -> dict[str, Path]:
    home, project = tmp_path / "home", tmp_path / "project"
    make_skill_md(home / ".agents" / "skills", "home-notes", description="Notes kept at home.")
    make_skill_md(home / ".agents" / "skills", "deploy", description="The user's deploy steps.")
    make_skill_md(project / ".agents" / "skills", "deploy", description="This project's deploy steps.")
    make_skill_md(project / ".agents" / "skills", "lint", description="How this project lints.")
    (tmp_path / "elsewhere").mkdir()
    return {"home": home, "project": project, "tmp": tmp_path}


def cli(
    world: dict[str, Path], *argv: str, cwd: Path | None = None, **env: str
) -> subprocess.CompletedProcess[str]:
    tmp = world["tmp"]
    environ = {
        **os.environ,
        "HOME": str(world["home"]),
        "ONGRID_CONFIG_DIR": str(tmp / "config"),
        "ONGRID_STATE_DIR": str(tmp / "state"),
        "ONGRID_USER_SKILLS_DIR": str(tmp / "no-user-skills"),
        "ONGRID_SYSTEM_SKILLS_DIR": str(tmp / "no-system-skills"),
        "ONGRID_CACHE_DIR": "off",
        **env,
    }
    argv_ = [sys.executable, "-m", "ongrid_plugins", *argv]
    return subprocess.run(
        argv_, cwd=cwd or world["project"], env=environ, capture_output=True, text=True, timeout=60
    )


def listed(world: dict[str, Path], *argv: str, **kw: object) -> dict[str, object]:
    done = cli(world, *argv, "list", "--skills", "--json", **kw)  # type: ignore[arg-type]
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    return {"skills": {s["name"]: s["provenance"] for s in data["items"]}, "not_loaded": data["not_loaded"]}


def test_an_untrusted_project_is_listed_as_not_loaded_with_the_command_to_trust_it(
    world: dict[str, Path],
) -> None:
    home_skills = str(world["home"] / ".agents" / "skills")
    got = listed(world)
    assert got["skills"]["home-notes"] == home_skills
    assert got["skills"]["deploy"] == home_skills  # the project's is not loaded
    assert "lint" not in got["skills"]
    hint = f"ongrid-skills trust-folder {world['project']}"
    assert sorted(item["path"] for item in got["not_loaded"]) == [  # type: ignore[union-attr]
        str(world["project"] / ".agents" / "skills" / name / "SKILL.md") for name in ("deploy", "lint")
    ]
    assert {(i["reason"], i["hint"]) for i in got["not_loaded"]} == {("folder not trusted", hint)}  # type: ignore[union-attr]
    text = cli(world, "list", "--skills")
    assert "lint/SKILL.md: not loaded: folder not trusted" in text.stdout and hint in text.stdout
    assert "not loaded: folder not trusted" in cli(world, "list").stderr


def test_trust_folder_loads_the_project_first_and_reports_the_shadowed_user_skill(
    world: dict[str, Path],
) -> None:
    done = cli(world, "trust-folder", ".")
    assert done.returncode == 0 and str(world["project"]) in done.stdout
    assert (world["tmp"] / "config" / "trusted-folders").read_text().splitlines()[-1] == str(world["project"])
    got = listed(world)
    project_skills = str(world["project"] / ".agents" / "skills")
    assert got["skills"]["deploy"] == project_skills and got["skills"]["lint"] == project_skills
    assert got["not_loaded"] == []
    shadowed = cli(world, "list", "--skills")
    message = f'skill "deploy" already registered, skipping {world["home"]}/.agents/skills/deploy/SKILL.md'
    assert message in shadowed.stderr  # never silently shadowed
    assert cli(world, "trust-folder", "--list").stdout.split() == [str(world["project"])]
    assert cli(world, "trust-folder", "--forget", str(world["project"])).returncode == 0
    assert "lint" not in listed(world)["skills"]


def test_project_flag_and_trusted_folders_setting(world: dict[str, Path]) -> None:
    elsewhere = world["tmp"] / "elsewhere"
    got = listed(world, "--project", str(world["project"]), cwd=elsewhere)
    assert "lint" not in got["skills"] and len(got["not_loaded"]) == 2  # type: ignore[arg-type]
    got = listed(
        world, "--project", str(world["project"]), cwd=elsewhere, ONGRID_TRUSTED_FOLDERS=str(world["project"])
    )
    assert "lint" in got["skills"] and got["not_loaded"] == []
    assert "lint" not in listed(world, cwd=elsewhere)["skills"]  # the working directory is the project


def test_the_user_folder_is_on_by_default_and_can_be_turned_off(world: dict[str, Path]) -> None:
    assert "home-notes" in listed(world)["skills"]
    assert "home-notes" not in listed(world, ONGRID_AGENT_SKILLS_USER="0")["skills"]
    assert "home-notes" not in listed(world, "--no-defaults")["skills"]


def test_trust_folder_refuses_a_missing_folder_and_a_bare_call(world: dict[str, Path]) -> None:
    missing = cli(world, "trust-folder", str(world["tmp"] / "nope"))
    assert missing.returncode == 2 and "is not a folder" in missing.stderr
    assert cli(world, "trust-folder").returncode == 2
    assert not (world["tmp"] / "config" / "trusted-folders").exists()


def test_a_symlinked_path_is_trusted_as_the_folder_it_names(
    world: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    link = world["tmp"] / "link"
    link.symlink_to(world["project"])
    assert cli(world, "trust-folder", str(link / ".agents" / "skills")).returncode == 0
    monkeypatch.setenv("HOME", str(world["home"]))
    settings = Settings(
        include_defaults=False,
        load_entry_points=False,
        project_dir=str(world["project"]),
        config_dir=str(world["tmp"] / "config"),
        state_dir=str(world["tmp"] / "state"),
        cache_dir=None,
    )
    names = {s.name: s.root.source for s in SkillHost(settings).skills()}
    assert names == {"deploy": "project", "lint": "project"}


# ---------------------------------------------------------------------- <available_skills>


def test_skills_prompt_is_the_block_skills_ref_to_prompt_writes(world: dict[str, Path]) -> None:
    agentskills = Path(sys.executable).parent / "agentskills"  # skills-ref, the reference tool
    if not agentskills.exists():
        pytest.skip("skills-ref is not installed (pip install skills-ref)")
    root = world["tmp"] / "skills"
    make_skill_md(root, "pdf-processing", description='Fill <form> fields & "merge" PDFs.')
    make_skill_md(root, "runbook", description="How to handle a full disk.")
    ours = cli(world, "--no-defaults", "--dirs", str(root), "export", "--format", "skills-prompt")
    assert ours.returncode == 0, ours.stderr
    folders = [str(root / "pdf-processing"), str(root / "runbook")]
    reference = subprocess.run(
        [str(agentskills), "to-prompt", *folders], capture_output=True, text=True, check=True
    )
    assert ours.stdout == reference.stdout
    assert "Fill &lt;form&gt; fields &amp; &quot;merge&quot; PDFs." in ours.stdout


def test_skills_prompt_holds_the_prompt_and_tool_skills_the_persona_may_use(world: dict[str, Path]) -> None:
    from ongrid_plugins.testing import make_skill

    root = world["tmp"] / "skills"
    make_skill_md(root, "runbook", description="How to handle a full disk.")
    make_skill(root, "echo", description="Echo the arguments back.")
    make_skill(root, "restart", description="Restart a unit.", class_="mutating")
    make_skill_md(root, "people-only", description="Not for models.", **{"disable-model-invocation": True})
    settings = Settings(
        skill_dirs=(str(root),),
        include_defaults=False,
        load_entry_points=False,
        state_dir=str(world["tmp"] / "state"),
        cache_dir=None,
    )
    host = SkillHost(settings)
    operator = host.export("skills-prompt", persona="operator")
    viewer = host.export("skills-prompt", persona="viewer")
    assert isinstance(operator, str) and operator.startswith("<available_skills>\n")

    def names(text: str) -> list[str]:
        lines = text.splitlines()
        return [lines[i + 1] for i, line in enumerate(lines) if line == "<name>"]

    assert names(operator) == ["echo", "restart", "runbook"]
    assert names(viewer) == ["echo", "runbook"]  # a viewer may not call restart at all
    assert f"<location>\n{root / 'echo' / 'skill.json'}\n</location>" in operator
    strict = cli(
        world, "--no-defaults", "--dirs", str(root), "export", "--format", "skills-prompt", "--strict"
    )
    assert strict.returncode == 2 and "no strict mode" in strict.stderr


# ---------------------------------------------------------------------- leniency, against skills-ref

LONG = "a" * 70
#: folder -> (SKILL.md text, loads, passes validate --strict); skills-ref refuses every one.
MALFORMED = {
    "folder-mismatch": ("---\nname: other-name\ndescription: d\n---\n# x\n", True, False),
    LONG: (f"---\nname: {LONG}\ndescription: d\n---\n# x\n", True, False),
    "no-description": ("---\nname: no-description\n---\n# T\n\nFirst paragraph.\n", True, False),
    "empty-description": ('---\nname: empty-description\ndescription: ""\n---\n\n', False, False),
    "bad-yaml": ("---\nname: bad-yaml\ndescription: [unclosed\n---\n# x\n", False, False),
    "colon-in-value": ("---\nname: colon-in-value\ndescription: Use it when: PDFs\n---\n# x\n", True, False),
    "Upper-Case": ("---\nname: Upper-Case\ndescription: d\n---\n# x\n", True, False),
    "double--hyphen": ("---\nname: double--hyphen\ndescription: d\n---\n# x\n", True, False),
    "unknown-field": ("---\nname: unknown-field\ndescription: d\nflavour: vanilla\n---\n# x\n", True, False),
    "long-compat": (
        f"---\nname: long-compat\ndescription: d\ncompatibility: {'x' * 501}\n---\n",
        True,
        False,
    ),
    "long-description": (f"---\nname: long-description\ndescription: {'d' * 1025}\n---\n", True, False),
    "no-front-matter": ("# Just markdown\n\nNo front matter.\n", True, False),
    "no-name": ("---\ndescription: No name.\n---\n# x\n", True, False),
    "not-a-mapping": ("---\n- a\n- b\n---\n# x\n", False, False),
    "unclosed-fence": ("---\nname: unclosed-fence\ndescription: d\n# x\n", False, False),
    "under_score": (
        "---\nname: under_score\ndescription: d\n---\n# x\n",
        True,
        True,
    ),  # listed in skill-md.md
}


@pytest.mark.parametrize("folder", sorted(MALFORMED))
def test_lenient_loading_and_strict_validation_against_skills_ref(tmp_path: Path, folder: str) -> None:
    validator = pytest.importorskip("skills_ref.validator")
    from ongrid_plugins.catalog.validate import validate_paths
    from ongrid_plugins.plugins import get_plugin_manager

    text, loads, strict_ok = MALFORMED[folder]
    make_skill_md(tmp_path, None, folder=folder, raw=text)
    assert validator.validate(tmp_path / folder) != []  # the reference refuses it
    settings = Settings(include_defaults=False, load_entry_points=False, cache_dir=None)
    [report] = validate_paths([str(tmp_path / folder / "SKILL.md")], get_plugin_manager(settings), settings)
    assert report.ok is loads, report.problems
    assert (report.ok and not [p for p in report.problems if p.level == "warning"]) is strict_ok, (
        report.problems
    )
    settings = Settings(
        skill_dirs=(str(tmp_path),), include_defaults=False, load_entry_points=False, cache_dir=None
    )
    assert (len(SkillHost(settings).skills()) == 1) is loads  # the loader agrees with validate
    done = cli(
        {"home": tmp_path, "tmp": tmp_path, "project": tmp_path},
        "validate",
        "--strict",
        str(tmp_path / folder),
    )
    assert (done.returncode == 0) is strict_ok, done.stdout + done.stderr


def test_a_project_at_home_is_the_user_folder_and_not_reported_untrusted(world: dict[str, Path]) -> None:
    got = listed(world, cwd=world["home"])
    assert got["skills"]["home-notes"] == str(world["home"] / ".agents" / "skills")
    assert got["not_loaded"] == []
