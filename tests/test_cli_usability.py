"""What a new user trips on at the command line: paths, output, usage errors, hints.

Through ``main()`` in this process (same parser, same handlers) unless a real
terminal or process is the point.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ongrid_plugins.cli import main
from ongrid_plugins.testing import make_skill


def run_main(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["--no-defaults", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def listed(capsys: pytest.CaptureFixture[str], *argv: str) -> list[str]:
    code, out, err = run_main(capsys, *argv, "list", "--json")
    assert code == 0, err
    return [item["name"] for item in json.loads(out)["items"]]


# ---------------------------------------------------------------------- --dirs


def test_a_relative_dirs_resolves_against_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    make_skill(tmp_path / "my-skills", "greet")
    monkeypatch.chdir(tmp_path)
    assert listed(capsys, "--dirs", "my-skills") == ["greet"]
    assert listed(capsys, "--dirs", "./my-skills/../my-skills") == ["greet"]


def test_a_tilde_dirs_expands_to_the_home_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    make_skill(tmp_path / "home" / "my-skills", "greet")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert listed(capsys, "--dirs=~/my-skills") == ["greet"]
    assert listed(capsys, "--dirs", "/nonexistent:~/my-skills") == ["greet"]


def test_the_environment_keeps_the_absolute_rule_with_a_hint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    make_skill(tmp_path / "my-skills", "greet")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ONGRID_SKILLS_EXTERNAL_DIRS", "my-skills")
    code, out, err = run_main(capsys, "list", "--json")
    assert code == 0 and json.loads(out)["items"] == []
    expected = os.path.join(os.path.realpath(tmp_path), "my-skills")
    assert "root my-skills is not an absolute path (roots must be absolute: did you mean " in err
    assert (expected in err) or (str(tmp_path / "my-skills") in err)


# ---------------------------------------------------------------------- usage errors


@pytest.mark.parametrize(
    ("argv", "usage"),
    [
        (["run", "disk_usage", "{}", "--args-file", "/x"], "usage: ongrid-skills run "),
        (["list", "--skills", "--class", "safe"], "usage: ongrid-skills list "),
        (["serve", "--new-token", "bob"], "usage: ongrid-skills serve "),
    ],
)
def test_a_usage_error_of_a_handler_shows_the_subcommands_usage(
    capsys: pytest.CaptureFixture[str], argv: list[str], usage: str
) -> None:
    code, out, err = run_main(capsys, *argv)
    assert (code, out) == (2, "")
    first, *rest = err.splitlines()
    assert first.startswith("ERROR: ")
    assert rest[0].startswith(usage)


def test_an_argparse_usage_error_of_a_nested_command_shows_its_usage(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, _out, err = run_main(capsys, "audit", "list", "--outcome", "bogus")
    assert code == 2
    assert err.startswith("usage: ongrid-skills audit list ")
    assert "invalid choice: 'bogus'" in err


def test_a_library_error_is_not_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    code, _out, err = run_main(capsys, "run", "no_such_tool")
    assert code == 4
    assert "usage:" not in err


# ---------------------------------------------------------------------- empty, huge and out-of-range values


@pytest.mark.parametrize("value", ["-1", "99999", "65536"])
def test_serve_refuses_a_port_outside_0_to_65535_when_parsing(
    capsys: pytest.CaptureFixture[str], value: str
) -> None:
    code, out, err = run_main(capsys, "serve", "--port", value)
    assert (code, out) == (2, "")  # before: a token printed, then OverflowError from bind()
    assert err.startswith("usage: ongrid-skills serve ")
    assert err.endswith(f"error: argument --port: must be a port number from 0 to 65535 (got '{value}')\n")
    assert "Bearer" not in err


@pytest.mark.parametrize(
    ("flag", "value", "rule"),
    [
        ("--max-concurrent", "-1", "a whole number from 1 to 2147483647"),
        ("--max-concurrent", "0", "a whole number from 1 to 2147483647"),
        ("--max-per-token", "-5", "a whole number from 1 to 2147483647"),
        ("--max-connections", "99999999999", "a whole number from 1 to 2147483647"),
        ("--max-body", "-1", "a whole number from 1 to 2147483647"),
        ("--header-timeout", "-1", "a number of seconds above 0, at most 86400"),
        ("--body-timeout", "nan", "a number of seconds above 0, at most 86400"),
        ("--body-timeout", "inf", "a number of seconds above 0, at most 86400"),
    ],
)
def test_serve_refuses_a_limit_or_timeout_out_of_range_when_parsing(
    capsys: pytest.CaptureFixture[str], flag: str, value: str, rule: str
) -> None:
    """A negative limit let every call through or none; it is refused before anything is bound."""
    code, out, err = run_main(capsys, "serve", flag, value)
    assert (code, out) == (2, "")
    assert err.endswith(f"error: argument {flag}: must be {rule} (got '{value}')\n")


@pytest.mark.parametrize(
    ("flag", "what"),
    [
        ("--new-token", "give the identity the new token is for"),
        ("--revoke-token", "give the identity, or the hash (8+ hex digits), of the token to revoke"),
    ],
)
def test_serve_refuses_an_empty_token_identity_before_serving(tmp_path: Path, flag: str, what: str) -> None:
    # A real process: before the fix it went on to serve (and never returned).
    argv = [sys.executable, "-m", "ongrid_plugins", "--no-defaults", "serve", "--port", "0", flag, ""]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=30, cwd=tmp_path)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr.endswith(f"error: argument {flag}: must not be empty: {what}\n")
    assert "listening" not in done.stderr and "Bearer" not in done.stderr


def test_install_refuses_an_empty_or_unusable_name_before_installing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    make_skill(tmp_path / "pack", "greet")
    code, out, err = run_main(capsys, "install", "--yes", str(tmp_path / "pack"), "--name", "")
    assert (code, out) == (2, "")  # before: installed under the default name
    expected = (
        "error: argument --name: must not be empty: give a name, or leave --name out for the pack's own\n"
    )
    assert err.endswith(expected)
    code, out, err = run_main(capsys, "install", "--yes", str(tmp_path / "pack"), "--name", "n" * 100_000)
    assert (code, out) == (2, "")
    cut = "'" + "n" * 80 + "'…(100000 characters)"
    rule = "(letters, digits, '.', '_' and '-'; 100 at most)"
    assert err.endswith(f"error: argument --name: {cut} is not usable as a folder name {rule}\n")
    assert run_main(capsys, "installed", "--json")[1].count('"name"') == 0


def test_validate_refuses_an_empty_path(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_main(capsys, "validate", "")
    assert (code, out) == (2, "")  # before: ValueError: A distribution name is required.
    what = "give a folder, a manifest, an archive or a distribution name"
    assert err.endswith(f"error: argument PATH: must not be empty: {what}\n")


def test_show_cuts_a_huge_name_in_its_error(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_main(capsys, "show", "a" * 100_000)
    assert (code, out) == (4, "")
    cut = "'" + "a" * 80 + "'…(100000 characters)"
    assert err == f"ERROR: no skill named {cut} is registered (see `ongrid-skills list`)\n"


# ---------------------------------------------------------------------- output


def on_a_terminal(argv: list[str], env: dict[str, str]) -> str:
    """Run ``ongrid-skills ARGV`` with stdout and stderr on a real pseudo-terminal; return what it wrote."""
    import pty
    import select

    pid, fd = pty.fork()
    if pid == 0:  # the child: its standard streams are the terminal
        os.execve(sys.executable, [sys.executable, "-m", "ongrid_plugins", "--no-defaults", *argv], env)
    output = b""
    while True:
        ready, _, _ = select.select([fd], [], [], 30)
        if not ready:
            break
        try:
            chunk = os.read(fd, 4096)
        except OSError:
            break
        if not chunk:
            break
        output += chunk
    os.waitpid(pid, 0)
    os.close(fd)
    return output.decode(errors="replace")


@pytest.fixture
def terminal_env(tmp_path: Path) -> dict[str, str]:
    make_skill(tmp_path / "skills", "greet")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ONGRID_", "NO_COLOR", "FORCE_COLOR"))}
    env.update(TERM="xterm", ONGRID_SKILLS_EXTERNAL_DIRS=str(tmp_path / "skills"))
    env["ONGRID_STATE_DIR"] = str(tmp_path / "state")
    return env


def test_a_terminal_gets_a_bold_header_and_a_red_error(terminal_env: dict[str, str]) -> None:
    out = on_a_terminal(["list"], terminal_env)
    assert "\x1b[1mNAME" in out
    out = on_a_terminal(["run", "nope"], terminal_env)
    assert "\x1b[31mERROR\x1b[0m: no skill named 'nope'" in out


@pytest.mark.parametrize(("var", "value"), [("NO_COLOR", "1"), ("TERM", "dumb")])
def test_no_color_and_a_dumb_terminal_get_plain_text(
    terminal_env: dict[str, str], var: str, value: str
) -> None:
    out = on_a_terminal(["list"], {**terminal_env, var: value})
    assert "NAME" in out and "\x1b[" not in out


def test_a_pipe_gets_plain_text(terminal_env: dict[str, str]) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "ongrid_plugins", "--no-defaults", "run", "nope"],
        env=terminal_env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.stderr.startswith("ERROR: no skill named") and "\x1b[" not in done.stderr


def test_installed_plugins_and_resolve_have_header_rows(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from ongrid_plugins.testing import make_skill_md

    make_skill(tmp_path / "skills", "greet")
    make_skill_md(tmp_path / "skills", "notes", description="Notes.")
    monkeypatch.setenv("ONGRID_STATE_DIR", str(tmp_path / "state"))
    _code, out, _err = run_main(capsys, "plugins")
    assert out.splitlines()[0].split() == ["NAME", "KIND", "STATUS", "DISTRIBUTION", "HOOKS"]
    _code, out, _err = run_main(capsys, "--dirs", str(tmp_path / "skills"), "resolve", "hello")
    assert [line.split() for line in out.splitlines()] == [
        ["SKILL", "WHY", "TOOLS"],
        ["greet", "always", "greet"],
        ["notes", "always", "(prompt)"],
    ]
    monkeypatch.setenv("ONGRID_USER_SKILLS_DIR", str(tmp_path / "user-skills"))
    make_skill(tmp_path / "mypack", "packed")
    code, _out, err = run_main(capsys, "install", "--yes", str(tmp_path / "mypack"))
    assert code == 0, err
    _code, out, _err = run_main(capsys, "installed")
    assert out.splitlines()[0].split() == ["PACK", "KIND", "STATUS", "PATH"]


# ---------------------------------------------------------------------- repeated warnings


def run_cli(root: Path, env: dict[str, str], *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ongrid_plugins", "--no-defaults", "--dirs", str(root), *argv],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_a_repeated_state_warning_is_shown_once_per_change_and_v_shows_all(tmp_path: Path) -> None:
    root = tmp_path / "skills"
    make_skill(root, "greet", folder="a-first")
    make_skill(root, "greet", folder="b-shadowed")
    env = {k: v for k, v in os.environ.items() if not k.startswith("ONGRID_")}
    env.update(ONGRID_CACHE_DIR=str(tmp_path / "cache"), ONGRID_STATE_DIR=str(tmp_path / "state"))
    shadowed = 'skill loader: skill "greet" already registered, skipping'
    first = run_cli(root, env, "list")
    assert first.stderr.count(shadowed) == 1
    again = run_cli(root, env, "list")
    assert shadowed not in again.stderr
    assert "(1 warning(s) shown before are unchanged and not repeated: -v shows them all)" in again.stderr
    assert shadowed in run_cli(root, env, "-v", "list").stderr
    # A command that does not load (no host) forgets nothing.
    assert run_cli(root, env, "--version").returncode == 0
    assert shadowed not in run_cli(root, env, "list").stderr
    # A change: the new warning is shown, the old one still held back.
    make_skill(root, "greet", folder="c-shadowed-too")
    changed = run_cli(root, env, "list")
    assert changed.stderr.count(shadowed) == 1 and "c-shadowed-too" in changed.stderr
    # Once the cause is gone and comes back, it is news again.
    (root / "b-shadowed" / "skill.json").rename(root / "b-shadowed" / "off.json")
    run_cli(root, env, "list")
    (root / "b-shadowed" / "off.json").rename(root / "b-shadowed" / "skill.json")
    assert "b-shadowed" in run_cli(root, env, "list").stderr


def test_without_a_cache_dir_every_warning_is_shown(tmp_path: Path) -> None:
    root = tmp_path / "skills"
    make_skill(root, "greet", folder="a-first")
    make_skill(root, "greet", folder="b-shadowed")
    env = {k: v for k, v in os.environ.items() if not k.startswith("ONGRID_")}
    env.update(ONGRID_CACHE_DIR="off", ONGRID_STATE_DIR=str(tmp_path / "state"))
    for _ in range(2):
        assert "already registered" in run_cli(root, env, "list").stderr
