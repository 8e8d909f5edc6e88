"""SKILL.md skills through the command line: ``run`` in real ``python -m ongrid_plugins`` processes,
listings and ``show`` through ``main()`` in this process (same parser, same handlers)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ongrid_plugins.cli import main
from ongrid_plugins.testing import make_skill_md

PY = sys.executable

GREET = f"""#!{PY}
import json, sys
args = json.load(sys.stdin)
print("greeting " + args["who"], file=sys.stderr)
print(json.dumps({{"hello": args["who"]}}))
"""


def cli(*argv: str, defaults: bool = False, **ongrid: str) -> subprocess.CompletedProcess[str]:
    """A real ``python -m ongrid_plugins ARGV`` with no ``ONGRID_*`` variables but ``ongrid`` ones."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ONGRID_")}
    env["ONGRID_SYSTEM_SKILLS_DIR"] = os.environ["ONGRID_SYSTEM_SKILLS_DIR"]
    env.update(ongrid)
    flags = [] if defaults else ["--no-defaults"]
    return subprocess.run(
        [PY, "-m", "ongrid_plugins", *flags, *argv],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )


def run_main(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["--no-defaults", *argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def skills(root: Path) -> Path:
    make_skill_md(
        root,
        "greeter",
        description="Greets people.",
        body="# Greeter\n\nCall greet with a name.\n",
        tools=[
            {
                "name": "greet",
                "impl": "exec:scripts/greet.py",
                "description": "Say hello.",
                "schema": {"type": "object", "properties": {"who": {"type": "string"}}, "required": ["who"]},
                "x-tool-extra": {"kept": [1]},
            },
            {"name": "ghost", "impl": "builtin:nobody.provides", "description": "Never runs."},
        ],
        files={"scripts/greet.py": GREET, "references/guide.md": "# Guide\n"},
        metadata={"author": "me", "ongrid": {"scope": "manager", "x_ongrid_extra": 1}},
        x_top_level={"deep": {"er": True}},
    )
    make_skill_md(root, "notes", description="A prompt skill.", body="Just instructions.\n")
    return root


def test_an_exec_tool_runs_from_the_command_line(skills: Path) -> None:
    proc = cli("--dirs", str(skills), "run", "greet", '{"who": "ada"}')
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == {"hello": "ada"}
    assert "greeting ada" in proc.stderr


def test_a_builtin_native_tool_runs_from_the_command_line(tmp_path: Path) -> None:
    log = tmp_path / "app.log"
    log.write_text("one\ntwo\nthree\n")
    allowed = {"ONGRID_HOST_FILES_DIRS": str(tmp_path)}
    proc = cli("run", "tail_file", json.dumps({"path": str(log), "lines": 2}), defaults=True, **allowed)
    assert proc.returncode == 0, proc.stderr
    value = json.loads(proc.stdout)
    assert (value["lines"], value["line_count"], value["truncated"]) == (["two", "three"], 2, False)

    failed = cli("run", "tail_file", json.dumps({"path": str(tmp_path)}), "--json", defaults=True, **allowed)
    assert failed.returncode == 1
    assert json.loads(failed.stdout)["error"] == f"ValueError: {tmp_path} is not a regular file"
    assert f"ERROR: tail_file: ValueError: {tmp_path} is not a regular file" in failed.stderr


def test_list_hides_unavailable_tools_and_list_all_shows_why(
    skills: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _code, out, err = run_main(capsys, "--dirs", str(skills), "list")
    assert "greet" in out and "ghost" not in out
    hidden = "1 unavailable tool(s) and 0 unavailable prompt skill(s) not shown"
    assert hidden in err
    _code, out, _err = run_main(capsys, "--dirs", str(skills), "list", "--all", "--json")
    items = {i["name"]: i for i in json.loads(out)["items"]}
    assert items["ghost"]["available"] is False
    assert items["ghost"]["unavailable"] == ["no plugin provides builtin:nobody.provides"]
    _code, out, _err = run_main(capsys, "--dirs", str(skills), "list", "--all")
    assert "UNAVAILABLE: no plugin provides builtin:nobody.provides" in out


def test_list_skills_includes_prompt_skills(skills: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _code, out, _err = run_main(capsys, "--dirs", str(skills), "list", "--skills", "--json")
    items = {i["name"]: i for i in json.loads(out)["items"]}
    assert items["notes"]["tools"] == [] and items["greeter"]["tools"] == ["greet", "ghost"]
    _code, out, _err = run_main(capsys, "--dirs", str(skills), "list", "--skills")
    assert [line.split()[:2] for line in out.splitlines()[1:]] == [
        ["greeter", "greet,"],
        ["notes", "(prompt)"],
    ]


def test_show_json_keeps_unknown_keys_at_every_level(
    skills: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run_main(capsys, "--dirs", str(skills), "show", "greet", "--json")
    assert code == 0, err
    data = json.loads(out)
    assert data["extra"] == {"x-tool-extra": {"kept": [1]}}
    skill = data["skill_details"]
    assert skill["extra"]["x_top_level"] == {"deep": {"er": True}}
    assert skill["extra"]["metadata"] == {"author": "me", "ongrid": {"scope": "manager", "x_ongrid_extra": 1}}
    assert sorted(w["pointer"] for w in data["warnings"]) == [
        "/metadata/ongrid/x_ongrid_extra",
        "/tools",
        "/tools/0/x-tool-extra",
        "/x_top_level",
    ]


def test_show_works_for_prompt_skills_and_body_and_file_read_on_demand(
    skills: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run_main(capsys, "--dirs", str(skills), "show", "notes")
    assert code == 0, err
    assert "tools:            (none: a prompt skill)" in out
    _code, out, err = run_main(capsys, "--dirs", str(skills), "show", "greeter", "--body")
    assert out == "\n# Greeter\n\nCall greet with a name.\n"
    assert "references/guide.md  (8 bytes)" in err
    _code, out, _err = run_main(
        capsys, "--dirs", str(skills), "show", "greet", "--file", "references/guide.md"
    )
    assert out == "# Guide\n"
    code, _out, err = run_main(capsys, "--dirs", str(skills), "show", "greet", "--file", "../notes/SKILL.md")
    assert code == 2
    assert "file '../notes/SKILL.md' refused: it leaves the skill folder" in err


def test_verbose_load_prints_the_skill_md_registration_line(skills: Path) -> None:
    proc = cli("--dirs", str(skills), "-v", "list")
    real = os.path.realpath(skills)
    assert f'skill loader: registered SKILL.md skill "greeter" from {real}/greeter/SKILL.md' in proc.stderr


def test_validate_strict_passes_on_the_builtin_skills(capsys: pytest.CaptureFixture[str]) -> None:
    builtin = Path(__file__).resolve().parent.parent / "ongrid_plugins" / "skills"
    code, out, _err = run_main(capsys, "validate", "--strict", str(builtin))
    assert code == 0, out
    assert out.endswith("3 manifest(s) checked, 0 with problems\n")


def test_list_shows_prompt_skills_in_their_own_section_and_in_json(
    skills: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _code, out, err = run_main(capsys, "--dirs", str(skills), "list")
    tools, prompts = out.split("\n\n")
    assert tools.splitlines()[0].split() == ["NAME", "CLASS", "CATEGORY", "FROM", "DESCRIPTION"]
    assert [line.split()[0] for line in prompts.splitlines()] == ["PROMPT", "notes"]
    assert "A prompt skill." in prompts
    # the hints repeat this run's --dirs, so pasted as they are they show the same skills
    assert f"`ongrid-skills --dirs {skills} --no-defaults show NAME --body`" in err
    assert f"`ongrid-skills --dirs {skills} --no-defaults list --skills`" in err
    _code, out, _err = run_main(capsys, "--dirs", str(skills), "list", "--json")
    data = json.loads(out)
    assert [i["name"] for i in data["items"]] == ["greet"]
    assert [(s["name"], s["tools"]) for s in data["prompt_skills"]] == [("notes", [])]


def test_list_of_only_prompt_skills_never_says_nothing_is_registered(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    make_skill_md(root, "weather", description="How to read a forecast.")
    needs = {"requires": {"bins": ["no-such-bin-x"]}}
    make_skill_md(root, "gone", description="Needs a binary.", metadata=needs)
    code, out, err = run_main(capsys, "--dirs", str(root), "list")
    assert code == 0
    assert "no tools or skills registered" not in out
    first = "no tools registered; the skills loaded are prompt skills (instructions, no tools):"
    assert out.splitlines()[0] == first
    assert [line.split()[0] for line in out.splitlines()[1:]] == ["PROMPT", "weather"]
    assert "0 unavailable tool(s) and 1 unavailable prompt skill(s) not shown" in err
    _code, out, _err = run_main(capsys, "--dirs", str(root), "list", "--all")
    gone = next(line for line in out.splitlines() if line.startswith("gone"))
    assert "UNAVAILABLE: " in gone and "no-such-bin-x" in gone
    _code, out, _err = run_main(capsys, "--dirs", str(root), "list", "--all", "--json")
    listed = {s["name"]: s for s in json.loads(out)["prompt_skills"]}
    assert listed["gone"]["available"] is False and listed["gone"]["unavailable"]


def test_an_empty_registry_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _code, out, _err = run_main(capsys, "--dirs", str(tmp_path), "list")
    hint = f"`ongrid-skills --dirs {tmp_path} --no-defaults -v list`"
    assert out.startswith(f"no tools or skills registered (see {hint}")


def test_a_registry_of_only_unavailable_tools_does_not_say_nothing_is_registered(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    make_skill_md(
        root,
        "elsewhere",
        description="A tool no plugin runs.",
        tools=[{"name": "ghost", "impl": "builtin:nobody.provides", "description": "Never runs."}],
    )
    _code, out, _err = run_main(capsys, "--dirs", str(root), "list")
    assert "no tools or skills registered" not in out
    assert out.startswith("no tool or skill is available here: 1 registered but unavailable (see `")
    assert f"--dirs {root} --no-defaults list --all` for what they are missing" in out
    _code, out, _err = run_main(capsys, "--dirs", str(root), "list", "--all")
    assert out.splitlines()[1].startswith("ghost") and "UNAVAILABLE" in out


def test_run_on_a_prompt_skill_says_it_is_one_and_how_to_read_it(
    skills: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _out, err = run_main(capsys, "--dirs", str(skills), "run", "notes")
    assert code == 4
    assert "'notes' is a prompt skill: instructions for the model, with no tool to run" in err
    assert "`ongrid-skills show notes --body`" in err
    code, _out, err = run_main(capsys, "--dirs", str(skills), "run", "greeter")
    assert code == 4
    assert "'greeter' is a skill, not a tool: run one of its tools, 'greet' or 'ghost'" in err


@pytest.fixture
def hyphenated(root: Path) -> Path:
    make_skill_md(root, "mcp-builder", description="Builds MCP servers.", body="# MCP\n")
    make_skill_md(
        root,
        "log-tools",
        description="Log helpers.",
        tools=[{"name": "tail-log", "impl": "exec:scripts/t.py", "description": "Tail."}],
        files={"scripts/t.py": GREET},
    )
    return root


def test_an_agent_skills_name_keeps_its_hyphens_and_lookups_take_both_spellings(
    hyphenated: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _code, out, _err = run_main(capsys, "--dirs", str(hyphenated), "list", "--skills", "--json")
    assert sorted(i["name"] for i in json.loads(out)["items"]) == ["log-tools", "mcp-builder"]
    _code, out, _err = run_main(capsys, "--dirs", str(hyphenated), "list", "--json")
    assert [i["name"] for i in json.loads(out)["items"]] == ["tail_log"]  # tool names stay [a-z0-9_]+
    for spelling in ("mcp-builder", "mcp_builder"):
        code, out, err = run_main(capsys, "--dirs", str(hyphenated), "show", spelling)
        assert code == 0, err
        assert out.startswith("name:             mcp-builder\n")
        code, out, _err = run_main(capsys, "--dirs", str(hyphenated), "show", spelling, "--body")
        assert (code, out) == (0, "\n# MCP\n")
    code, out, _err = run_main(capsys, "--dirs", str(hyphenated), "show", "tail-log", "--json")
    assert (code, json.loads(out)["name"]) == (0, "tail_log")


def test_suggestions_include_prompt_skills(hyphenated: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _out, err = run_main(capsys, "--dirs", str(hyphenated), "show", "mcp-buildr")
    assert code == 4
    assert "no skill named 'mcp-buildr' is registered; did you mean 'mcp-builder'?" in err
    code, _out, err = run_main(capsys, "--dirs", str(hyphenated), "run", "mcp_buildr")
    assert code == 4 and "did you mean 'mcp-builder'?" in err


def test_a_skill_json_of_the_other_spelling_is_a_duplicate(root: Path) -> None:
    from ongrid_plugins import SkillHost
    from ongrid_plugins.testing import isolated_settings, make_skill

    make_skill_md(root, "mcp-builder", folder="a-first", description="Builds MCP servers.")
    make_skill(root, "mcp_builder", folder="z-second")
    host = SkillHost(isolated_settings(root.parent, root))
    report = host.load()
    [duplicate] = [e for e in report.events if e.outcome == "duplicate"]
    assert duplicate.message == 'skill "mcp_builder" already registered'
    assert host.skill("mcp_builder").format == "SKILL.md"


def test_show_keeps_a_multi_line_description_in_its_column(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    make_skill_md(root, "tall", description="First line.\nSECOND line: more.")
    _code, out, _err = run_main(capsys, "--dirs", str(root), "show", "tall")
    lines = out.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("description:"))
    assert lines[at].endswith("First line.")
    assert lines[at + 1] == " " * 18 + "SECOND line: more."


def test_a_name_in_other_letter_case_gets_a_suggestion(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    make_skill_md(root, "mcp-builder", description="Build MCP servers.")
    code, _out, err = run_main(capsys, "--dirs", str(root), "show", "MCP-Builder")
    assert code == 4 and "did you mean 'mcp-builder'?" in err


def test_a_skill_skipped_at_load_is_named_with_the_reason(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`show` of a skill for another OS says it was found and why it is not loaded, not just 'no skill'."""
    make_skill_md(
        root, "apple-notes", description="Notes on a Mac.", metadata={"openclaw": {"os": ["darwin"]}}
    )
    code, _out, err = run_main(capsys, "--dirs", str(root), "show", "apple-notes")
    assert code == 4
    assert "a skill of that name was found but not loaded: for darwin only" in err
    assert str(root / "apple-notes" / "SKILL.md") in err
