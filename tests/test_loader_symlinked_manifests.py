"""A symlinked manifest is claimed by the name the walk found, and read from where it really lives.

``R/x/skill.json -> ../y/m.json`` is a skill.json (the walk found it under that name), its
content is m.json's and its entry is relative to ``R/y``. The loaders used to pick by the
target's name, so the skill was dropped without a word (and ``validate`` said "m.json: no
loader accepted this file"). Log lines and ``validate`` name the path the walk found.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest
from clirun import run

from ongrid_plugins.catalog.loader import load_dirs
from ongrid_plugins.testing import make_skill, make_skill_md

LOADER = "ongrid_plugins.loader"


def _linked(root: Path, manifest: str, target: str) -> tuple[Path, Path]:
    """``root/x/MANIFEST`` -> ``root/y/TARGET``, the target being the manifest ``make_*`` wrote in ``y``."""
    (root / "y" / manifest).rename(root / "y" / target)
    (root / "x").mkdir()
    link = root / "x" / manifest
    link.symlink_to(os.path.join("..", "y", target))
    return link, (root / "y" / target).resolve()


@pytest.fixture
def json_link(root: Path) -> tuple[Path, Path]:
    make_skill(root, "linked", folder="y")  # its entry, run.sh, lives next to m.json only
    return _linked(root, "skill.json", "m.json")


def test_a_symlinked_skill_json_with_another_target_name_is_loaded(
    root: Path, json_link: tuple[Path, Path], caplog: pytest.LogCaptureFixture
) -> None:
    link, real = json_link
    with caplog.at_level(logging.INFO, logger=LOADER):
        [skill] = load_dirs([str(root)])
    assert (skill.name, skill.format, skill.path) == ("linked", "skill.json", str(real))
    assert skill.tools[0].entry == str(real.parent / "run.sh")  # relative to where it really lives
    lines = [r.getMessage() for r in caplog.records if r.name == LOADER]
    assert f'skill loader: registered subprocess skill "linked" from {link} (a symlink to {real})' in lines


def test_a_symlinked_skill_md_with_another_target_name_is_loaded(
    root: Path, caplog: pytest.LogCaptureFixture
) -> None:
    make_skill_md(root, "noted", folder="y")
    link, real = _linked(root, "SKILL.md", "notes.md")
    with caplog.at_level(logging.INFO, logger=LOADER):
        [skill] = load_dirs([str(root)])
    assert (skill.name, skill.format, skill.path) == ("noted", "SKILL.md", str(real))
    lines = [r.getMessage() for r in caplog.records if r.name == LOADER]
    assert f'skill loader: registered SKILL.md skill "noted" from {link} (a symlink to {real})' in lines


def test_a_broken_symlinked_manifest_is_logged_by_the_path_the_walk_found(
    root: Path, caplog: pytest.LogCaptureFixture
) -> None:
    make_skill(root, "broken", folder="y", raw="{not json")
    link, real = _linked(root, "skill.json", "m.json")
    with caplog.at_level(logging.WARNING, logger=LOADER):
        assert load_dirs([str(root)]) == []
    [line] = [r.getMessage() for r in caplog.records if r.name == LOADER]
    assert line.startswith(f"skill loader: parse {link} (a symlink to {real}): ")


@pytest.mark.parametrize(("manifest", "target"), [("skill.json", "m.json"), ("SKILL.md", "notes.md")])
def test_validate_reads_a_symlinked_manifest_by_the_name_it_was_found_under(
    root: Path, capsys: pytest.CaptureFixture[str], manifest: str, target: str
) -> None:
    """The tester's case: ``ln -s m.json R/x/skill.json``, the target next to the link."""
    if manifest == "skill.json":
        make_skill(root, "linked", folder="x")
    else:
        make_skill_md(root, "linked", folder="x")
    (root / "x" / manifest).rename(root / "x" / target)
    link = root / "x" / manifest
    link.symlink_to(target)
    for given in (root, root / "x", link):
        code, out, _err = run(capsys, "--no-defaults", "validate", str(given))
        assert (code, out.splitlines()[0]) == (0, f"{link} (linked): ok"), out


@pytest.mark.parametrize(
    ("target", "said"),
    [
        (
            "skill.json",
            "manifest is a symlink loop (Too many levels of symbolic links); point it at the real manifest",
        ),
        ("../nowhere/skill.json", "manifest is a dangling symlink (No such file or directory)"),
    ],
    ids=["loop", "dangling"],
)
def test_a_manifest_symlink_that_resolves_nowhere_says_whether_it_loops_or_dangles(
    root: Path, caplog: pytest.LogCaptureFixture, target: str, said: str
) -> None:
    (root / "x").mkdir()
    link = root / "x" / "skill.json"
    link.symlink_to(target)
    with caplog.at_level(logging.WARNING, logger=LOADER):
        assert load_dirs([str(root)]) == []
    [line] = [r.getMessage() for r in caplog.records if r.name == LOADER]
    assert line == f"skill loader: parse {link}: {said}"
