"""Running ``ongrid-skills`` from tests: in a real process, or in this one."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ongrid_plugins.cli import main


def cli(root: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    """A real ``ongrid-skills`` process over ``root`` only (its audit rows are chained when it exits)."""
    return subprocess.run(
        [sys.executable, "-m", "ongrid_plugins", "--no-defaults", "--dirs", str(root), *argv],
        capture_output=True,
        text=True,
        timeout=60,
    )


def cmd(capsys: pytest.CaptureFixture[str], root: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    """The same command run in this process (faster, for everything that does not run a skill)."""
    code = main(["--no-defaults", "--dirs", str(root), *argv])
    out, err = capsys.readouterr()
    return subprocess.CompletedProcess(argv, code, out, err)
