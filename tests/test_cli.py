"""The ``ongrid-skills`` command: real processes for the wiring, ``main()`` for the details."""

from __future__ import annotations

import json
import os
import pty
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ongrid_plugins import __version__
from ongrid_plugins.cli import main
from ongrid_plugins.testing import make_skill

CONSOLE_SCRIPT = Path(sys.executable).with_name("ongrid-skills")


def cli(
    root: Path | None, *argv: str, env: dict[str, str] | None = None, stdin: str = "", module: bool = True
) -> subprocess.CompletedProcess[str]:
    """Run the command as a user would, in a fresh process."""
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("ONGRID_")}
    if root is not None:
        full_env["ONGRID_SKILLS_EXTERNAL_DIRS"] = str(root)
    full_env.update(env or {})
    command = [sys.executable, "-m", "ongrid_plugins"] if module else [str(CONSOLE_SCRIPT)]
    return subprocess.run(
        [*command, "--no-defaults", *argv],
        input=stdin,
        capture_output=True,
        text=True,
        env=full_env,
        timeout=60,
    )


def run_main(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def skills(root: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A root with a safe, a mutating, a dangerous and a failing skill, set in the environment."""
    make_skill(
        root,
        "echo",
        description="Echo the arguments back.\nSecond line.",
        schema={"type": "object", "properties": {"n": {"type": "integer"}}},
        category="test",
    )
    make_skill(root, "change", class_="mutating", category="ops")
    make_skill(root, "wipe", class_="dangerous", category="ops")
    make_skill(root, "fail", script="#!/bin/sh\necho 'progress 50%' >&2\necho 'it broke' >&2\nexit 2\n")
    monkeypatch.setenv("ONGRID_SKILLS_EXTERNAL_DIRS", str(root))
    return root


def test_console_script_and_python_m_are_the_same_command(skills: Path) -> None:
    by_module = cli(skills, "list", "--json")
    by_script = cli(skills, "list", "--json", module=False)
    assert by_module.returncode == by_script.returncode == 0
    assert json.loads(by_module.stdout) == json.loads(by_script.stdout)


def test_version_flag(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--version"]) == 0  # main() returns the exit code, even for argparse's own exits
    assert capsys.readouterr().out.strip() == f"ongrid-skills {__version__}"


def test_list_prints_a_table_sorted_by_name(skills: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _err = run_main(capsys, "--no-defaults", "list")
    lines = out.splitlines()
    assert code == 0
    assert lines[0].split() == ["NAME", "CLASS", "CATEGORY", "FROM", "DESCRIPTION"]
    assert [line.split()[0] for line in lines[1:]] == ["change", "echo", "fail", "wipe"]
    assert "Echo the arguments back." in out and "Second line." not in out


def test_list_json_filters_by_category_class_and_persona(
    skills: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _code, out, _err = run_main(capsys, "--no-defaults", "list", "--json", "--category", "ops")
    data = json.loads(out)
    assert (data["total"], [i["name"] for i in data["items"]]) == (2, ["change", "wipe"])
    _code, out, _err = run_main(capsys, "--no-defaults", "list", "--json", "--class", "safe")
    assert [i["name"] for i in json.loads(out)["items"]] == ["echo", "fail"]
    _code, out, _err = run_main(capsys, "--no-defaults", "list", "--json", "--persona", "viewer")
    assert [i["name"] for i in json.loads(out)["items"]] == ["echo", "fail"]
    item = json.loads(out)["items"][0]
    assert set(item) >= {"name", "description", "class", "category", "provenance", "source"}


def test_list_with_nothing_registered_says_how_to_find_out_why(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _err = run_main(capsys, "--no-defaults", "--dirs", str(tmp_path), "list")
    assert code == 0
    assert "no tools or skills registered" in out and "-v list" in out


def test_show_prints_everything_about_one_tool(skills: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _err = run_main(capsys, "--no-defaults", "show", "change")
    assert code == 0
    assert "class:            mutating" in out
    assert "needs:            a persona in mode mutating-with-confirm or dual-sign-required" in out
    code, out, _err = run_main(capsys, "--no-defaults", "show", "echo", "--json")
    data = json.loads(out)
    assert data["schema"]["properties"] == {"n": {"type": "integer"}}
    assert data["entry"].endswith("/echo/run.sh")


def test_unknown_skill_exits_4_with_a_suggestion(skills: Path) -> None:
    result = cli(skills, "run", "ecoh")
    assert result.returncode == 4
    assert result.stderr.strip() == "ERROR: no skill named 'ecoh' is registered; did you mean 'echo'?"


def test_run_prints_the_result_json(skills: Path) -> None:
    result = cli(skills, "run", "echo", '{"n": 5}')
    assert result.returncode == 0
    assert json.loads(result.stdout) == {"n": 5}


def test_run_reads_arguments_from_stdin_and_from_a_file(skills: Path, tmp_path: Path) -> None:
    assert json.loads(cli(skills, "run", "echo", "-", stdin='{"n": 7}').stdout) == {"n": 7}
    args_file = tmp_path / "args.json"
    args_file.write_text('{"n": 8}')
    assert json.loads(cli(skills, "run", "echo", "--args-file", str(args_file)).stdout) == {"n": 8}


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        (["run", "echo", "{not json"], "the arguments in ARGS_JSON are not valid JSON"),
        (
            ["run", "echo", '{"n": "five"}'],
            "invalid arguments for 'echo': $.n: 'five' is not of type 'integer'",
        ),
        (["run", "echo", "[1]"], "arguments must be a JSON object, got list"),
        (["run", "echo", "{}", "--args-file", "/x"], "either as ARGS_JSON or with --args-file"),
        (["run", "echo", "--args-file", "/nonexistent/args.json"], "cannot read --args-file"),
        (["run", "echo", "--persona", "root"], "unknown persona 'root'"),
        (["run", "echo", "--timeout", "-1"], "timeout must be a positive number"),
    ],
    ids=["bad_json", "schema", "not_object", "both_sources", "missing_file", "persona", "timeout"],
)
def test_usage_and_argument_errors_exit_2(
    skills: Path, capsys: pytest.CaptureFixture[str], argv: list[str], fragment: str
) -> None:
    code, out, err = run_main(capsys, "--no-defaults", *argv)
    assert code == 2
    assert out == ""
    assert err.startswith("ERROR: ") and fragment in err


def test_a_failing_skill_exits_1_and_its_stderr_streams_to_stderr(skills: Path) -> None:
    result = cli(skills, "run", "fail")
    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        "progress 50%",
        "it broke",
        "ERROR: fail: the skill exited with status 2: it broke",
    ]


def test_run_json_prints_the_whole_result(skills: Path) -> None:
    result = cli(skills, "run", "fail", "--json")
    data = json.loads(result.stdout)
    assert (result.returncode, data["ok"], data["exit_code"], data["status"]) == (1, False, 2, "failed")
    assert data["stderr_tail"] == ["progress 50%", "it broke"]


def test_mutating_without_yes_exits_3_and_says_how_to_confirm(skills: Path) -> None:
    result = cli(skills, "run", "change")
    assert result.returncode == 3
    assert "needs a confirmation" in result.stderr or "need a confirmation" in result.stderr
    assert "--yes" in result.stderr
    assert cli(skills, "run", "change", "--yes").returncode == 0


def test_mutating_is_denied_for_viewer_even_with_yes(skills: Path) -> None:
    result = cli(skills, "run", "change", "--yes", "--persona", "viewer")
    assert result.returncode == 3
    assert "persona viewer is read-only" in result.stderr


def test_dangerous_exits_3_naming_two_person_approval(skills: Path) -> None:
    result = cli(skills, "run", "wipe", "--yes", "--persona", "admin")
    assert result.returncode == 3
    assert "two-person approval" in result.stderr


def _run_on_tty(argv: list[str], answer: bytes, env: dict[str, str]) -> tuple[int, str]:
    pid, fd = pty.fork()
    if pid == 0:  # child: stdin, stdout and stderr are the pty
        os.execve(sys.executable, [sys.executable, "-m", "ongrid_plugins", "--no-defaults", *argv], env)
    output = b""
    deadline = time.monotonic() + 30
    answered = False
    while time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.1)
        if ready:
            try:
                chunk = os.read(fd, 4096)
            except OSError:
                break
            if not chunk:
                break
            output += chunk
        if not answered and b"[y/N]" in output:
            os.write(fd, answer)
            answered = True
    _pid, status = os.waitpid(pid, 0)
    os.close(fd)
    return os.waitstatus_to_exitcode(status), output.decode(errors="replace")


@pytest.mark.parametrize(("answer", "code"), [(b"y\n", 0), (b"n\n", 3), (b"\n", 3)])
def test_on_a_tty_mutating_asks_and_shows_tool_class_and_args(skills: Path, answer: bytes, code: int) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ONGRID_")}
    env["ONGRID_SKILLS_EXTERNAL_DIRS"] = str(skills)
    status, output = _run_on_tty(["run", "change", '{"path": "/srv"}'], answer, env)
    assert status == code
    assert "change is a mutating tool" in output
    assert '"path": "/srv"' in output


def test_validate_accepts_a_good_folder(skills: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _err = run_main(capsys, "--no-defaults", "validate", str(skills))
    assert code == 0
    assert out.splitlines()[-1] == "4 manifest(s) checked, 0 with errors"


def test_validate_reports_each_problem_with_pointer_and_hint(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = make_skill(root, "broken", timeout_seconds="30", env_allow=["BAD-NAME"], timout=3)
    (folder / "run.sh").chmod(0o644)
    code, out, _err = run_main(capsys, "--no-defaults", "validate", "--json", str(root))
    assert code == 1
    [file] = json.loads(out)["files"]
    problems = {(p["level"], p["pointer"], p["code"]) for p in file["problems"]}
    assert problems == {
        ("error", "/timeout_seconds", "wrong_type"),
        ("error", "/env_allow/0", "bad_env_name"),
        ("error", "/entry", "entry_not_executable"),
        ("warning", "/timout", "unknown_field"),
    }
    hint = next(p["hint"] for p in file["problems"] if p["code"] == "entry_not_executable")
    assert hint.startswith("chmod +x ")


def test_validate_warnings_fail_only_with_strict(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    make_skill(root, "typo", timout=3)
    assert run_main(capsys, "--no-defaults", "validate", str(root))[0] == 0
    assert run_main(capsys, "--no-defaults", "validate", "--strict", str(root))[0] == 1


def test_validate_a_single_manifest_file_and_bad_paths(
    root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = make_skill(root, "one")
    assert run_main(capsys, "--no-defaults", "validate", str(folder / "skill.json"))[0] == 0
    code, out, _err = run_main(
        capsys,
        "--no-defaults",
        "validate",
        str(folder / "run.sh"),
        str(tmp_path / "missing"),
        str(tmp_path / "skills" / "one" / "x"),
    )
    assert code == 1
    assert "is not a manifest (expected one of: SKILL.md, skill.json, skill.md)" in out
    assert "does not exist" in out


def test_validate_reports_duplicate_names_across_paths(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    make_skill(tmp_path / "a", "same")
    make_skill(tmp_path / "b", "same")
    code, out, _err = run_main(capsys, "--no-defaults", "validate", str(tmp_path / "a"), str(tmp_path / "b"))
    assert code == 0  # the loader skips the second one and goes on: a warning, as there
    assert 'skill "same" is also declared by' in out and "only the first one found is loaded" in out
    code, out, _err = run_main(
        capsys, "--no-defaults", "validate", "--strict", str(tmp_path / "a"), str(tmp_path / "b")
    )
    assert code == 1 and 'skill "same" is also declared by' in out


def test_validate_escapes_control_characters_from_paths_keys_and_messages(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A folder name and an unknown key could clear the screen or add a fake "ok" line.
    make_skill(root, "unk", folder="a\x1b[31m", manifest=None)
    manifest = root / "a\x1b[31m" / "skill.json"
    manifest.write_text(
        '{"name": "unk", "description": "x", "entry": "run.sh", "evil\\u001b[2J\\nx: ok\\u0085": 1}'
    )
    code, out, _err = run_main(capsys, "--no-defaults", "validate", str(root))
    assert code == 0
    assert all(char.isprintable() for line in out.splitlines() for char in line), out
    assert "a\\x1b[31m/skill.json (unk): ok" in out
    assert 'unknown field "evil\\x1b[2J\\nx: ok\\x85"' in out
    assert "at /evil\\x1b[2J\\nx: ok\\x85" in out
    code, out, _err = run_main(capsys, "--no-defaults", "validate", "--json", str(root))
    assert "\x85" not in out and "\x1b" not in out  # C0 is escaped by JSON; C1 as well
    assert json.loads(out)["files"][0]["problems"][0]["pointer"] == "/evil\x1b[2J\nx: ok\x85"


def test_validate_reports_every_duplicate_the_loader_skips_hyphen_spellings_and_tool_names(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from ongrid_plugins.testing import make_skill_md

    root = tmp_path / "r"
    make_skill(root, "foo_bar", folder="a1")
    make_skill_md(root, None, folder="a2", raw="---\nname: foo-bar\ndescription: d\n---\n")
    tool = {"name": "foo_bar", "description": "d", "impl": "builtin:ongrid.disk_usage"}
    make_skill_md(root, "other", folder="a3", description="d", tools=[tool])
    make_skill_md(root, "fine", folder="a4", description="d")
    code, out, _err = run_main(capsys, "--no-defaults", "validate", "--json", str(root))
    assert code == 0
    dups = {
        os.path.basename(os.path.dirname(f["path"])): p["message"]
        for f in json.loads(out)["files"]
        for p in f["problems"]
        if p["code"] == "duplicate_name"
    }
    first = f"{os.path.realpath(root)}/a1/skill.json"
    assert dups == {
        "a2": f'skill "foo-bar" is also declared by {first} (as "foo_bar": - and _ spell one name);'
        " only the first one found is loaded",
        "a3": f'tool "foo_bar" of skill "other" is also declared by {first} (as skill "foo_bar");'
        " skills and tools share one namespace: only the first one found is loaded, so this whole"
        " skill is skipped",
    }
    # the loader skips exactly these two
    from ongrid_plugins import SkillHost
    from ongrid_plugins.testing import isolated_settings

    host = SkillHost(settings=isolated_settings(tmp_path, root))
    assert {s.name for s in host.skills()} == {"foo_bar", "fine"}


def test_plugins_lists_the_builtins_with_their_hooks(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _err = run_main(capsys, "plugins", "--json")
    infos = {i["name"]: i for i in json.loads(out)}
    assert code == 0
    assert {"roots", "skill_json", "subprocess", "gate"} <= set(infos)
    assert infos["skill_json"]["hooks"] == ["ongrid_load_manifest", "ongrid_manifest_names"]
    assert infos["gate"]["status"] == "active"


def test_disabled_plugins_are_shown_blocked_and_do_nothing(skills: Path) -> None:
    result = cli(skills, "plugins", env={"ONGRID_DISABLE_PLUGINS": "skill_json,gate"})
    rows = {line.split()[0]: line.split()[1:3] for line in result.stdout.splitlines()[1:]}
    assert rows["skill_json"] == ["builtin", "blocked"]
    assert rows["gate"] == ["builtin", "active"]
    assert "cannot be disabled" in result.stderr
    listing = cli(skills, "list", "--json", env={"ONGRID_DISABLE_PLUGINS": "skill_json"})
    assert json.loads(listing.stdout)["total"] == 0


def test_verbose_shows_the_loader_info_lines_and_quiet_hides_warnings(skills: Path) -> None:
    make_skill(skills, "broken", raw="{")
    verbose = cli(skills, "-v", "list")
    assert 'skill loader: registered subprocess skill "echo" from' in verbose.stderr
    default = cli(skills, "list")
    assert "registered subprocess skill" not in default.stderr
    assert "WARNING: skill loader: parse" in default.stderr
    assert cli(skills, "-q", "list").stderr == ""


def test_trace_plugins_writes_hook_calls_to_stderr(skills: Path) -> None:
    result = cli(skills, "list", env={"ONGRID_TRACE_PLUGINS": "1"})
    assert result.returncode == 0
    assert "ongrid_load_manifest" in result.stderr


@pytest.mark.parametrize(
    ("var", "value", "fragment"),
    [
        ("ONGRID_STDOUT_CAP", "lots", "ONGRID_STDOUT_CAP must be a positive integer, got 'lots'"),
        ("ONGRID_STDOUT_CAP", "-5", "ONGRID_STDOUT_CAP must be a positive integer"),
        ("ONGRID_TRACE_PLUGINS", "maybe", "ONGRID_TRACE_PLUGINS must be 1 or 0"),
        ("ONGRID_KILL_GRACE", "nan", "ONGRID_KILL_GRACE must be a number of seconds"),
    ],
)
def test_bad_environment_values_exit_2_naming_the_variable(
    skills: Path, var: str, value: str, fragment: str
) -> None:
    result = cli(skills, "list", env={var: value})
    assert result.returncode == 2
    assert fragment in result.stderr


def test_dirs_flag_adds_roots_before_the_environment(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    make_skill(a, "same", description="from --dirs")
    make_skill(b, "same", description="from env")
    monkeypatch.setenv("ONGRID_SKILLS_EXTERNAL_DIRS", str(b))
    _code, out, _err = run_main(capsys, "--no-defaults", "--dirs", str(a), "show", "same", "--json")
    assert json.loads(out)["description"] == "from --dirs"


def test_default_roots_include_the_builtin_skills(capsys: pytest.CaptureFixture[str]) -> None:
    _code, out, _err = run_main(capsys, "list", "--json")
    names = {i["name"] for i in json.loads(out)["items"]}
    assert {"disk_usage", "system_info"} <= names


def test_missing_command_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 2
