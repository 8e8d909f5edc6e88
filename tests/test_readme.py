"""The README and the docs tell the truth: their Python examples run, their commands exist."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
DOC_FILES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


def python_blocks(path: Path) -> list[tuple[int, str]]:
    text = path.read_text()
    blocks = []
    for match in re.finditer(r"^```python\n(.*?)^```", text, re.MULTILINE | re.DOTALL):
        line = text[: match.start()].count("\n") + 1
        blocks.append((line, match.group(1)))
    return blocks


EXAMPLES = [(path, line, code) for path in DOC_FILES for line, code in python_blocks(path)]


def shell_blocks(path: Path) -> list[tuple[int, str]]:
    """```sh blocks marked runnable with a ``<!-- test: sh -->`` line just above them."""
    text = path.read_text()
    blocks = []
    for match in re.finditer(r"^<!-- test: sh -->\n```sh\n(.*?)^```", text, re.MULTILINE | re.DOTALL):
        blocks.append((text[: match.start()].count("\n") + 2, match.group(1)))
    return blocks


SHELL_EXAMPLES = [(path, line, code) for path in DOC_FILES for line, code in shell_blocks(path)]


def test_there_are_examples_to_run() -> None:
    assert len(EXAMPLES) >= 2 and len(SHELL_EXAMPLES) >= 2


@pytest.mark.parametrize(
    ("path", "line", "code"), EXAMPLES, ids=[f"{p.relative_to(REPO)}:{line}" for p, line, _c in EXAMPLES]
)
def test_python_example_runs(path: Path, line: int, code: str, tmp_path: Path) -> None:
    """Each ```python block runs on its own, in a fresh interpreter, in an empty folder.

    And leaves the user's folders alone: a reader who pastes an example gets no audit
    log, cache or tickets in their home (the examples say where their state goes).
    """
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ONGRID_", "XDG_"))}
    env["HOME"] = str(home)
    env["ONGRID_SYSTEM_SKILLS_DIR"] = str(tmp_path / "etc")
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, f"{path.name}:{line} failed:\n{result.stderr}"
    written = sorted(str(p.relative_to(home)) for p in home.rglob("*") if p.is_file())
    assert written == [], f"{path.name}:{line} wrote into the user's folders: {written}"


@pytest.mark.parametrize(
    ("path", "line", "code"),
    SHELL_EXAMPLES,
    ids=[f"{p.relative_to(REPO)}:{line}" for p, line, _c in SHELL_EXAMPLES],
)
def test_shell_example_runs(path: Path, line: int, code: str, tmp_path: Path) -> None:
    """Each runnable ```sh block runs with bash -e in an empty folder, as a fresh user would type it."""
    work = tmp_path / "work"
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ONGRID_", "XDG_"))}
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    env.update({f"XDG_{k}_HOME": str(tmp_path / k.lower()) for k in ("DATA", "CACHE", "STATE", "CONFIG")})
    env["ONGRID_SYSTEM_SKILLS_DIR"] = str(tmp_path / "etc")
    result = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", code],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, f"{path.name}:{line} failed:\n{result.stdout}\n{result.stderr}"


def test_readme_opens_with_the_two_quick_start_commands() -> None:
    text = (REPO / "README.md").read_text()
    quick = text.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    commands = re.findall(r"```sh\n(.*?)\n```", quick, re.DOTALL)
    assert len(commands) == 2
    assert "ongrid-skills run disk_usage" in commands[0]
    assert "pytest" in commands[1]
    ci = (REPO / ".ci" / "run").read_text()
    assert commands[1] in ci, ".ci/run must run the README's test command"


def test_readme_lists_every_cli_command() -> None:
    from ongrid_plugins.cli import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    text = (REPO / "README.md").read_text()
    for name in sub.choices:  # type: ignore[union-attr]
        assert f"  {name}" in text, f"README does not mention `{name}`"
