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
    assert "and 1 prompt skill(s) without tools: see `ongrid-skills list --skills`" in err
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
