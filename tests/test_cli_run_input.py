"""How ``ongrid-skills run`` reads a call's arguments: any option order, bounded input, hints.

Hostile input (an endless device, a FIFO, JSON nested thousands deep) must end in one
``ERROR:`` line and exit code 2, never a hang, a memory blow-up or a traceback.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from ongrid_plugins.cli import main
from ongrid_plugins.testing import make_skill

#: The limits the README promises (checked against the module's constants below).
MAX_ARGS_BYTES = 1024 * 1024
MAX_ARGS_DEPTH = 64


def run_main(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["--no-defaults", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def cli(
    root: Path, *argv: str, stdin: bytes = b"", timeout: float = 60
) -> subprocess.CompletedProcess[bytes]:
    """The command in a fresh process whose address space is capped at 1 GiB (an unbounded
    read fails fast there instead of eating the machine)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ONGRID_")}
    env["ONGRID_SKILLS_EXTERNAL_DIRS"] = str(root)

    def cap_memory() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))

    return subprocess.run(
        [sys.executable, "-m", "ongrid_plugins", "--no-defaults", *argv],
        input=stdin,
        capture_output=True,
        env=env,
        timeout=timeout,
        preexec_fn=cap_memory,
    )


@pytest.fixture
def skills(root: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``greet`` echoes its arguments back; ``change`` is mutating."""
    make_skill(root, "greet", schema={"type": "object", "properties": {"who": {"type": "string"}}})
    make_skill(root, "change", class_="mutating")
    monkeypatch.setenv("ONGRID_SKILLS_EXTERNAL_DIRS", str(root))
    return root


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


# ---------------------------------------------------------------------- option order


@pytest.mark.parametrize(
    "argv",
    [
        ["run", "greet", "--timeout", "5", '{"who": "ada"}'],
        ["run", "greet", "--json", '{"who": "ada"}'],
        ["run", "--timeout", "5", "greet", "--persona", "viewer", '{"who": "ada"}'],
        ["run", "greet", '{"who": "ada"}', "--timeout", "5"],
    ],
    ids=["timeout_first", "json_first", "between_and_before", "after"],
)
def test_options_may_come_before_between_or_after_the_arguments(
    skills: Path, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    code, out, err = run_main(capsys, *argv)
    assert (code, err) == (0, "")
    result = json.loads(out)
    assert result.get("value", result) == {"who": "ada"}


def test_yes_before_the_arguments_confirms_a_mutating_call(
    skills: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run_main(capsys, "run", "change", "--yes", '{"path": "/srv"}')
    assert (code, err, json.loads(out)) == (0, "", {"path": "/srv"})


def test_a_dash_after_an_option_still_reads_stdin(skills: Path) -> None:
    result = cli(skills, "run", "greet", "--timeout", "5", "-", stdin=b'{"who": "bo"}')
    assert (result.returncode, json.loads(result.stdout)) == (0, {"who": "bo"})


def test_a_second_positional_is_still_refused(skills: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _out, err = run_main(capsys, "run", "greet", "--json", "{}", "{}")
    assert code == 2
    assert "unrecognized arguments: {}" in err
