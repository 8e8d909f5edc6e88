"""Progressive disclosure: bodies and skill files read on demand, never outside the skill folder.

The swap loops are the attacks of issue 9: a thread swaps a folder of the skill
between a real folder and a symlink to an outside one while reads and listings run.
"""

from __future__ import annotations

import collections
import os
import time
from pathlib import Path
from typing import Any

import pytest
from swaps import Swapper

from ongrid_plugins import ManifestParseError, ResourceRefused, UnknownSkill
from ongrid_plugins.testing import ECHO_SH, make_skill, make_skill_md

BODY = "# Guide\n\nStep one.\n\n---\n\nAfter a rule.\n"


def test_the_body_is_everything_after_the_closing_fence(make_host: Any, root: Path) -> None:
    make_skill_md(root, "guide", body=BODY)
    host = make_host(root)
    instructions = host.instructions("guide")
    assert instructions.body == "\n" + BODY  # verbatim: the blank line after the fence included
    assert instructions.path == os.path.realpath(root / "guide" / "SKILL.md")
    assert "body" not in host.skill("guide").to_dict()  # listings never carry it


def test_crlf_bodies_come_back_with_lf(make_host: Any, root: Path) -> None:
    make_skill_md(root, None, folder="crlf", raw="---\r\nname: crlf\r\ndescription: d\r\n---\r\nA\r\nB\r\n")
    assert make_host(root).instructions("crlf").body == "A\nB\n"


def test_the_body_is_read_now_not_at_load(make_host: Any, root: Path) -> None:
    folder = make_skill_md(root, "live", body="old\n")
    host = make_host(root)
    host.load()
    (folder / "SKILL.md").write_text("---\nname: live\ndescription: d\n---\nnew\n")
    assert host.instructions("live").body == "new\n"


def test_a_tool_name_finds_its_skill_and_unknown_names_suggest(make_host: Any, root: Path) -> None:
    make_skill_md(
        root,
        "kit",
        tools=[{"name": "kit_run", "impl": "exec:run.sh", "description": "r"}],
        files={"run.sh": ECHO_SH},
        body="Use kit_run.\n",
    )
    host = make_host(root)
    assert host.instructions("kit_run").body == "\nUse kit_run.\n"
    with pytest.raises(UnknownSkill) as info:
        host.instructions("kit_rn")
    assert info.value.suggestions == ("kit_run",)


def test_skill_json_skills_have_no_body(make_host: Any, root: Path) -> None:
    make_skill(root, "plain")
    assert make_host(root).instructions("plain").body == ""


def test_files_under_scripts_references_and_assets_are_listed_with_sizes(make_host: Any, root: Path) -> None:
    make_skill_md(
        root,
        "docs",
        files={
            "references/api.md": "# API\n",
            "references/deep/more.md": "more",
            "scripts/run.sh": ECHO_SH,
            "assets/logo.bin": b"\x89PNG",
            "notes/ignored.md": "not a standard folder",
        },
    )
    instructions = make_host(root).instructions("docs")
    listed = [(r.path, r.kind, r.size, r.refused) for r in instructions.resources]
    assert listed == [
        ("scripts/run.sh", "scripts", len(ECHO_SH), ""),
        ("references/api.md", "references", 6, ""),
        ("references/deep/more.md", "references", 4, ""),
        ("assets/logo.bin", "assets", 4, ""),
    ]
    assert instructions.read_text("references/api.md") == "# API\n"
    assert instructions.read("assets/logo.bin") == b"\x89PNG"
    assert instructions.read_text("notes/ignored.md") == "not a standard folder"  # inside the folder: fine


@pytest.mark.usefixtures("beneath")
def test_symlinks_are_listed_as_refused_with_their_target_and_never_read(
    make_host: Any, root: Path, tmp_path: Path
) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("do not read me")
    folder = make_skill_md(root, "sneaky", files={"scripts/ok.sh": ECHO_SH, "assets/real.txt": "real"})
    (folder / "scripts" / "evil").symlink_to(secret)
    (folder / "scripts" / "dangling").symlink_to(tmp_path / "nowhere")
    (folder / "scripts" / "inside").symlink_to("ok.sh")  # even a link that stays inside is not followed
    (folder / "references").symlink_to(tmp_path)
    os.mkfifo(folder / "scripts" / "fifo")
    instructions = make_host(root).instructions("sneaky")
    refused = {r.path: r.refused for r in instructions.resources if r.refused}
    assert refused == {
        "scripts/dangling": f"a symbolic link (to {tmp_path / 'nowhere'}): links are not followed",
        "scripts/evil": f"a symbolic link (to {secret}): links are not followed",
        "scripts/fifo": "not a regular file",
        "scripts/inside": "a symbolic link (to ok.sh): links are not followed",
        "references": f"a symbolic link (to {tmp_path}): links are not followed",
    }
    assert [r.path for r in instructions.resources if not r.refused] == ["scripts/ok.sh", "assets/real.txt"]
    reasons = {
        "scripts/evil": "a symbolic link is on the way: links are not followed",
        "scripts/inside": "a symbolic link is on the way: links are not followed",
        "references/secret.txt": "a symbolic link is on the way: links are not followed",
        "../../secret.txt": "it leaves the skill folder",
        "scripts/../../../secret.txt": "it leaves the skill folder",
        str(secret): "give a path relative to the skill folder",
        "scripts/missing": "no such file or directory",
    }
    for path, reason in reasons.items():
        with pytest.raises(ResourceRefused) as info:
            instructions.read(path)
        assert info.value.reason == reason, path
    with pytest.raises(ResourceRefused) as info:
        instructions.read("scripts/fifo")  # opened non-blocking, refused by its fstat: never blocks
    assert str(info.value) == "skill 'sneaky': file 'scripts/fifo' refused: not a regular file"
    assert instructions.read_text("scripts/ok.sh") == ECHO_SH


def _outside_folder(tmp_path: Path) -> Path:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "note.md").write_text("OUTSIDE")
    (outside / "only-outside.md").write_text("OUTSIDE")
    return outside


@pytest.mark.usefixtures("beneath")
def test_a_parent_folder_swapped_for_a_symlink_never_makes_a_read_leave_the_folder(
    make_host: Any, root: Path, tmp_path: Path
) -> None:
    outside = _outside_folder(tmp_path)
    folder = make_skill_md(root, "racy", files={"references/sub/note.md": "inside"})
    instructions = make_host(root).instructions("racy")
    seen = {"inside": 0, "outside": 0, "refused": 0}
    with Swapper(folder / "references" / "sub", outside) as swapper:
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline:
            try:
                data = instructions.read("references/sub/note.md")
            except ResourceRefused:
                seen["refused"] += 1
            else:
                seen["outside" if data == b"OUTSIDE" else "inside"] += 1
    assert seen["outside"] == 0, seen
    assert seen["inside"] > 0 and seen["refused"] > 0 and swapper.swaps > 100, (seen, swapper.swaps)


@pytest.mark.usefixtures("beneath")
def test_a_parent_folder_swapped_for_a_symlink_is_never_listed_through(
    make_host: Any, root: Path, tmp_path: Path
) -> None:
    outside = _outside_folder(tmp_path)
    folder = make_skill_md(root, "racy", files={"references/sub/note.md": "inside"})
    host = make_host(root)
    host.load()
    listed: collections.Counter[str] = collections.Counter()
    with Swapper(folder / "references" / "sub", outside) as swapper:
        deadline = time.monotonic() + 2
        while time.monotonic() < deadline:
            for resource in host.instructions("racy").resources:
                listed[resource.path if not resource.refused else f"refused {resource.path}"] += 1
    assert not [path for path in listed if "only-outside" in path], listed
    assert listed["references/sub/note.md"] > 0 and swapper.swaps > 100, (listed, swapper.swaps)


def test_a_skill_md_replaced_by_a_symlink_since_the_load_is_not_read_through_it(
    make_host: Any, root: Path, tmp_path: Path
) -> None:
    folder = make_skill_md(root, "guide", body="inside body\n")
    (tmp_path / "outside.md").write_text("---\nname: guide\ndescription: d\n---\nOUTSIDE BODY\n")
    host = make_host(root)
    host.load()
    os.replace(folder / "SKILL.md", folder / "SKILL.md.bak")
    (folder / "SKILL.md").symlink_to(tmp_path / "outside.md")
    with pytest.raises(ManifestParseError) as info:
        host.instructions("guide")
    assert str(info.value).endswith(
        "SKILL.md: cannot open: a symbolic link is on the way: links are not followed"
    )


@pytest.mark.usefixtures("beneath")
def test_a_skill_md_swapped_for_a_symlink_never_gives_an_outside_body(
    make_host: Any, root: Path, tmp_path: Path
) -> None:
    folder = make_skill_md(root, "guide", body="inside body\n")
    (tmp_path / "outside.md").write_text("---\nname: guide\ndescription: d\n---\nOUTSIDE BODY\n")
    host = make_host(root)
    host.load()
    seen = {"inside": 0, "outside": 0, "refused": 0}
    with Swapper(folder / "SKILL.md", tmp_path / "outside.md") as swapper:
        deadline = time.monotonic() + 2
        while time.monotonic() < deadline:
            try:
                body = host.instructions("guide").body
            except ManifestParseError:
                seen["refused"] += 1
            else:
                seen["outside" if "OUTSIDE" in body else "inside"] += 1
    assert seen["outside"] == 0, seen
    assert seen["inside"] > 0 and seen["refused"] > 0 and swapper.swaps > 100, (seen, swapper.swaps)


def test_big_files_are_refused_past_the_limit(make_host: Any, root: Path) -> None:
    make_skill_md(root, "big", files={"assets/big.bin": b"x" * 100})
    instructions = make_host(root).instructions("big")
    assert instructions.read("assets/big.bin", limit=100) == b"x" * 100
    with pytest.raises(ResourceRefused) as info:
        instructions.read("assets/big.bin", limit=99)
    assert info.value.reason == "it is 100 bytes; at most 99 are read"
