"""Every real SKILL.md of the corpus loads with the right name and description.

The corpus (``tests/fixtures/skillmd-corpus``, copied byte for byte from four public
collections; see its SOURCES.md) is read, never executed. Expected names and
descriptions come from an independent reading: ``yaml.safe_load`` of the text between
the first two ``---`` lines, or the raw ``description:`` line for the two files whose
front matter is not valid YAML, or the folder name and first paragraph for the two
files without front matter.
"""

from __future__ import annotations

import collections
import os
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from ongrid_plugins import SkillHost, SkillRoot
from ongrid_plugins.catalog.availability import current_os
from ongrid_plugins.loaders.skill_md import load_skill_md
from ongrid_plugins.testing import isolated_settings

CORPUS = Path(__file__).resolve().parent / "fixtures" / "skillmd-corpus"
FILES = sorted(CORPUS.rglob("SKILL.md"))
SOURCES = {"anthropics-skills": 12, "obra-superpowers": 10, "getsentry-skills": 15, "clawdbot-clawdbot": 18}
NO_FRONT_MATTER = {
    "canvas": "Display HTML content on connected Moltbot nodes (Mac app, iOS, Android).",
    "lobster": "Lobster executes multi-step workflows with approval checkpoints.",  # "Use it when:" dropped
}


def source_of(path: Path) -> str:
    return path.relative_to(CORPUS).parts[0]


def expected(path: Path) -> tuple[str, str]:
    """(name, description) read independently of the loader."""
    text = path.read_text(encoding="utf-8")
    if not text.startswith("---"):
        return path.parent.name, NO_FRONT_MATTER[path.parent.name]
    front = text[4 : text.index("\n---", 3)]
    try:
        data: dict[str, Any] = yaml.safe_load(front)
    except yaml.YAMLError:
        data = dict(re.findall(r"^([a-z]+): (.*)$", front, re.MULTILINE))
    # Agent Skills names (lowercase, digits, hyphens) are kept as written.
    return str(data["name"]), str(data["description"]).strip()


def load(path: Path) -> Any:
    return load_skill_md(str(path), SkillRoot(str(CORPUS), real=os.path.realpath(CORPUS)))


def test_the_corpus_is_complete() -> None:
    counts = collections.Counter(source_of(p) for p in FILES)
    assert counts == SOURCES
    for licence in ("obra-superpowers/LICENSE", "getsentry-skills/LICENSE", "clawdbot-clawdbot/LICENSE"):
        assert (CORPUS / licence).is_file()
    assert (CORPUS / "SOURCES.md").is_file() and (CORPUS / "EDGE_CASES.md").is_file()


@pytest.mark.parametrize("path", FILES, ids=[str(p.parent.relative_to(CORPUS)) for p in FILES])
def test_every_corpus_file_loads_with_its_name_and_description(path: Path) -> None:
    skill = load(path)
    assert (skill.name, skill.description) == expected(path)
    assert skill.format == "SKILL.md"
    assert not [w for w in skill.warnings if w.code in ("wrong_type", "unknown_field")], skill.warnings


def test_the_whole_corpus_in_one_host_every_file_accounted_for(tmp_path: Path) -> None:
    host = SkillHost(isolated_settings(tmp_path, CORPUS))
    report = host.load()
    by_path = {e.path: e for e in report.events if e.outcome != "warning"}
    assert sorted(by_path) == sorted(str(p) for p in FILES)
    assert report.errors == []
    here = current_os()
    for path in FILES:
        event = by_path[str(path)]
        oses = load(path).requires.os
        if oses and here not in oses:
            assert (event.outcome, event.message) == (
                "skipped",
                f"for {', '.join(oses)} only, this is {here}",
            )
        elif path.parent.name == "brand-guidelines" and source_of(path) == "getsentry-skills":
            assert (event.outcome, event.message) == (
                "duplicate",
                'skill "brand-guidelines" already registered',
            )
        else:
            assert event.outcome == "registered", event
    # The first of two same-named skills wins: walk order puts anthropics-skills first.
    assert host.skill("brand-guidelines").path.startswith(str(CORPUS / "anthropics-skills"))


def test_pack_skills_take_the_pack_name_as_provenance(tmp_path: Path) -> None:
    host = SkillHost(isolated_settings(tmp_path, CORPUS))
    assert host.skill("prose").provenance == "open-prose"  # clawdbot.plugin.json, skills: ["./skills"]
    assert host.skill("lobster").provenance == "lobster"  # SKILL.md at the pack root
    commit = host.skill("commit")  # getsentry's skills sit beside .claude-plugin/, not under skills/
    assert commit.provenance == str(CORPUS)
    assert [w.code for w in commit.warnings] == ["outside_pack"]


def test_corpus_edge_cases_keep_their_values(tmp_path: Path) -> None:
    skills = {p.parent.name: load(p) for p in FILES if source_of(p) != "getsentry-skills"}
    sentry = {p.parent.name: load(p) for p in FILES if source_of(p) == "getsentry-skills"}
    assert [w.code for w in skills["discord"].warnings] == ["yaml_retried_quoted"]
    assert skills["discord"].requires.config == ("channels.discord",)
    assert skills["weather"].extra["homepage"] == "https://wttr.in/:help"
    assert skills["weather"].extra["metadata"]["moltbot"]["emoji"] == "🌤️"
    tts = skills["sherpa-onnx-tts"].requires
    assert tts.os == ("darwin", "linux", "windows")
    assert tts.env == ("SHERPA_ONNX_RUNTIME_DIR", "SHERPA_ONNX_MODEL_DIR")
    assert skills["spotify-player"].requires.any_bins == (("spogo", "spotify_player"),)
    assert skills["voice-call"].requires.config == ("plugins.entries.voice-call.enabled",)
    assert skills["1password"].name == "1password"
    assert "spec_description_length" in [w.code for w in skills["claude-api"].warnings]
    assert sentry["create-branch"].extra["argument-hint"] == "[optional description of the work]"
    assert sentry["iterate-pr"].model_invocable is True
    assert sentry["gha-security-review"].extra["allowed-tools"] == "Read, Grep, Glob, Bash, Task"


def test_corpus_skills_needing_missing_things_are_unavailable_with_reasons(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no binaries at all
    host = SkillHost(isolated_settings(tmp_path, CORPUS))
    github = host.skill("github")
    assert github.unavailable == ('binary "gh" is not on PATH (install: Install GitHub CLI (brew))',)
    assert "github" not in {r.name for r in host.resolve("open a PR on github")}
    assert host.skill("bluebubbles").available  # needs nothing
