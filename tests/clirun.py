"""Run ``ongrid-skills`` in-process and capture what it printed."""

from __future__ import annotations

import pytest

from ongrid_plugins.cli import main


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """``(exit code, stdout, stderr)`` of ``ongrid-skills ARGV...``."""
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err
