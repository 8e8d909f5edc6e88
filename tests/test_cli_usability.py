"""What a new user trips on at the command line: paths, output, usage errors, hints.

Through ``main()`` in this process (same parser, same handlers) unless a real
terminal or process is the point.
"""

from __future__ import annotations

import json
import os
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
