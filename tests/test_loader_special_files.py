"""A FIFO or a folder with a manifest's name is a manifest the loader refuses, with a log line;
the folder is still walked for the skills inside it.

The specification treats every file named ``skill.json`` as a manifest; the walk used to
skip these without a word, and ``validate`` read the FIFO as an empty SKILL.md.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ongrid_plugins.catalog.loader import load_dirs
from ongrid_plugins.testing import make_skill

HANG = 30


def _special_root(tmp_path: Path) -> Path:
    root = tmp_path / "skills"
    make_skill(root, "good_one")
    (root / "fifo").mkdir()
    os.mkfifo(root / "fifo" / "skill.json")
    (root / "folder" / "SKILL.md").mkdir(parents=True)
    # the tree is walked recursively (the specification): a folder of a manifest's name too
    make_skill(root / "folder" / "SKILL.md", "nested_one")
    return root


@pytest.mark.timeout(HANG)
def test_a_fifo_or_folder_named_like_a_manifest_is_logged_and_the_folder_still_walked(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    root = _special_root(tmp_path)
    with caplog.at_level(logging.INFO, logger="ongrid_plugins.loader"):
        skills = load_dirs([str(root)])
    assert sorted(s.name for s in skills) == ["good_one", "nested_one"]
    lines = [r.getMessage() for r in caplog.records if "is not a regular file" in r.getMessage()]
    fifo, folder = root / "fifo" / "skill.json", root / "folder" / "SKILL.md"
    assert lines == [
        f"skill loader: parse {fifo}: manifest {fifo} is not a regular file (it is a FIFO)",
        f"skill loader: parse {folder}: manifest {folder} is not a regular file (it is a folder)",
    ]


def test_validate_of_a_fifo_skill_md_says_it_is_not_a_regular_file(tmp_path: Path) -> None:
    (tmp_path / "s").mkdir()
    fifo = tmp_path / "s" / "SKILL.md"
    os.mkfifo(fifo)
    env = {k: v for k, v in os.environ.items() if not k.startswith("ONGRID_")}
    result = subprocess.run(
        [sys.executable, "-m", "ongrid_plugins", "--no-defaults", "validate", str(fifo)],
        capture_output=True,
        text=True,
        env=env,
        timeout=HANG,
    )
    assert result.returncode == 1
    assert f"manifest {fifo} is not a regular file (it is a FIFO)" in result.stdout + result.stderr
    assert "front matter" not in result.stdout + result.stderr


def test_validate_of_a_folder_named_skill_json_reports_what_the_loader_logs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from clirun import run

    folder = tmp_path / "dir" / "skill.json"
    folder.mkdir(parents=True)
    code, out, _err = run(capsys, "--no-defaults", "validate", str(folder))
    assert code == 1
    assert out.splitlines() == [
        f"{folder}: FAILED",
        f"  error: manifest {folder} is not a regular file (it is a folder)",
        "1 manifest(s) checked, 1 with errors",
    ]  # before: "no manifest (SKILL.md, skill.json, skill.md) under ..."
    # and, as the loader does, the folder is still checked for the manifests inside it
    make_skill(folder, "nested_one")
    code, out, _err = run(capsys, "--no-defaults", "validate", str(folder))
    assert code == 1
    assert f"  error: manifest {folder} is not a regular file (it is a folder)" in out.splitlines()
    assert f"{folder}/nested_one/skill.json (nested_one): ok" in out.splitlines()


@pytest.mark.timeout(HANG)
@pytest.mark.parametrize("name", ["x.tar.gz", "x.zip", "notes.txt"])
def test_validate_of_a_fifo_that_is_no_manifest_says_it_is_not_a_regular_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    from clirun import run

    fifo = tmp_path / name
    os.mkfifo(fifo)
    code, out, _err = run(capsys, "--no-defaults", "validate", str(fifo))
    assert code == 1
    assert out.splitlines()[:2] == [
        f"{fifo}: FAILED",
        f"  error: {fifo} is not a regular file (it is a FIFO)"
        " — give a skill or pack folder, a manifest or a pack archive",
    ]  # before: "... is not a manifest (expected one of: ...)"
