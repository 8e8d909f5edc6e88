"""Progressive disclosure: bodies and skill files read on demand, never outside the skill folder."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from ongrid_plugins import ResourceRefused, UnknownSkill
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


def test_an_escaping_symlink_in_scripts_is_listed_as_refused_and_never_read(
    make_host: Any, root: Path, tmp_path: Path
) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("do not read me")
    folder = make_skill_md(root, "sneaky", files={"scripts/ok.sh": ECHO_SH})
    (folder / "scripts" / "evil").symlink_to(secret)
    (folder / "scripts" / "dangling").symlink_to(tmp_path / "nowhere")
    (folder / "references").symlink_to(tmp_path)
    os.mkfifo(folder / "scripts" / "fifo")
    instructions = make_host(root).instructions("sneaky")
    refused = {r.path: r.refused for r in instructions.resources if r.refused}
    assert refused == {
        "scripts/dangling": "no such file or directory",
        "scripts/evil": f"it resolves to {secret}, outside the skill folder",
        "scripts/fifo": "not a regular file",
        "references": f"it resolves to {os.path.realpath(tmp_path)}, outside the skill folder",
    }
    for path in ("scripts/evil", "references/secret.txt", "../../secret.txt", str(secret)):
        with pytest.raises(ResourceRefused):
            instructions.read(path)
    with pytest.raises(ResourceRefused) as info:
        instructions.read("scripts/fifo")  # refused before it is opened: never blocks
    assert str(info.value) == "skill 'sneaky': file 'scripts/fifo' refused: not a regular file"


def test_big_files_are_refused_past_the_limit(make_host: Any, root: Path) -> None:
    make_skill_md(root, "big", files={"assets/big.bin": b"x" * 100})
    instructions = make_host(root).instructions("big")
    assert instructions.read("assets/big.bin", limit=100) == b"x" * 100
    with pytest.raises(ResourceRefused) as info:
        instructions.read("assets/big.bin", limit=99)
    assert info.value.reason == "it is 100 bytes; at most 99 are read"
