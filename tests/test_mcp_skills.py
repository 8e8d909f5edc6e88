"""MCP's Skills extension (``io.modelcontextprotocol/skills``), driven by a raw JSON-RPC
client over the stdio of a real ``python -m ongrid_plugins mcp`` (the SDK has no client
for the extension)."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import queue
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from ongrid_plugins.testing import make_skill, make_skill_md

MODERN = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
}
EXTENSION = "io.modelcontextprotocol/skills"
INVALID_PARAMS = -32602


class Raw:
    """A JSON-RPC client over a server's stdin/stdout, one JSON object per line."""

    def __init__(self, argv: list[str], env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, text=True)
        self.lines: queue.Queue[dict[str, Any]] = queue.Queue()
        self.notes: list[dict[str, Any]] = []
        self.ids = 0
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(json.loads(line))

    def send(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(message) + "\n")
        self.proc.stdin.flush()

    def call(
        self, method: str, params: dict[str, Any] | None = None, *, modern: bool = True
    ) -> dict[str, Any]:
        """The whole answer (``result`` or ``error``) to one request."""
        self.ids += 1
        body = dict(params or {})
        if modern:
            body["_meta"] = MODERN
        self.send({"jsonrpc": "2.0", "id": self.ids, "method": method, "params": body})
        while True:
            message = self.lines.get(timeout=30)
            if message.get("id") == self.ids:
                return message
            self.notes.append(message)

    def result(self, method: str, params: dict[str, Any] | None = None, **kw: Any) -> dict[str, Any]:
        answer = self.call(method, params, **kw)
        assert "result" in answer, answer
        return answer["result"]

    def note(self, timeout: float = 20) -> dict[str, Any]:
        if self.notes:
            return self.notes.pop(0)
        return self.lines.get(timeout=timeout)

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture
def skills(tmp_path: Path) -> Path:
    root = tmp_path / "skills"
    make_skill_md(
        root,
        "pdf-processing",
        description="Extract, fill, and assemble PDF documents.",
        body="# PDF\n\nPick a template from `templates/`.\n",
        files={
            "templates/invoice.md": "# Invoice\n",
            "templates/regional/eu-invoice.md": "# EU\n",
            "scripts/extract.py": "#!/usr/bin/env python3\nprint('x')\n",
            "assets/logo.bin": b"\x89\xff\x00",
        },
        license="Apache-2.0",
        metadata={"version": "2.1.0", "author": "ops"},
    )
    make_skill_md(root, "runbook", description="How to handle a full disk.", body="# Full disk\n")
    return root


def serve(tmp_path: Path, *dirs: Path, persona: str = "operator", watch: bool = False) -> Raw:
    env = {**os.environ, "ONGRID_STATE_DIR": str(tmp_path / "state")}
    argv = [sys.executable, "-m", "ongrid_plugins", "--no-defaults"]
    for folder in dirs:
        argv += ["--dirs", str(folder)]
    argv += ["mcp", "--persona", persona, *(["--watch"] if watch else [])]
    return Raw(argv, env)


@pytest.fixture
def server(tmp_path: Path, skills: Path) -> Any:
    raw = serve(tmp_path, skills)
    yield raw
    raw.close()


def read_bytes(raw: Raw, uri: str) -> bytes:
    [content] = raw.result("resources/read", {"uri": uri})["contents"]
    return content["text"].encode() if "text" in content else base64.b64decode(content["blob"])


def test_the_server_declares_the_extension_with_directory_reads(server: Raw) -> None:
    found = server.result("server/discover")
    assert found["capabilities"]["extensions"][EXTENSION] == {"directoryRead": True}
    assert "resources" in found["capabilities"]


def test_skills_list_entries_carry_verbatim_front_matter_and_digests_of_what_resources_read_returns(
    server: Raw, skills: Path
) -> None:
    listed = server.result("skills/list")
    assert listed["resultType"] == "complete" and "ttlMs" in listed and "cacheScope" in listed
    entries = {entry["uri"]: entry for entry in listed["skills"]}
    assert sorted(entries) == ["skill://pdf-processing/SKILL.md", "skill://runbook/SKILL.md"]
    pdf = entries["skill://pdf-processing/SKILL.md"]
    assert pdf["frontmatter"] == {
        "name": "pdf-processing",  # an Agent Skills name keeps its hyphen
        "description": "Extract, fill, and assemble PDF documents.",
        "license": "Apache-2.0",
        "metadata": {"version": "2.1.0", "author": "ops"},
    }
    uris = [r["uri"] for r in pdf["resources"]]
    assert uris == [
        "skill://pdf-processing/SKILL.md",
        "skill://pdf-processing/assets/logo.bin",
        "skill://pdf-processing/scripts/extract.py",
        "skill://pdf-processing/templates/invoice.md",
        "skill://pdf-processing/templates/regional/eu-invoice.md",
    ]
    for resource in pdf["resources"]:
        data = read_bytes(server, resource["uri"])
        assert resource["digest"] == "sha256:" + hashlib.sha256(data).hexdigest()
        assert resource["size"] == len(data)
    assert read_bytes(server, pdf["uri"]) == (skills / "pdf-processing" / "SKILL.md").read_bytes()
    got = server.result("skills/get", {"uri": "skill://pdf-processing/SKILL.md"})
    assert got["skill"] == pdf and got["resultType"] == "complete"


def test_skills_get_refuses_an_unknown_a_hidden_and_a_non_skill_uri(tmp_path: Path, skills: Path) -> None:
    tool = {
        "name": "purge",
        "description": "Purge.",
        "impl": "builtin:ongrid.disk_usage",
        "class": "dangerous",
    }
    make_skill_md(skills, "purger", description="Purges things.", tools=[tool])
    make_skill_md(skills, "secret", description="Only for people.", **{"disable-model-invocation": True})
    raw = serve(tmp_path, skills, persona="viewer")
    try:
        listed = [e["uri"] for e in raw.result("skills/list")["skills"]]
        assert "skill://purger/SKILL.md" not in listed and "skill://secret/SKILL.md" not in listed
        assert "skill://runbook/SKILL.md" in listed
        for uri in (
            "skill://nobody/SKILL.md",
            "skill://purger/SKILL.md",  # its one tool is denied to a viewer: hidden
            "skill://secret/SKILL.md",  # not for the model
            "skill://runbook/references",
            "skill://runbook",
            "file:///etc/passwd",
        ):
            answer = raw.call("skills/get", {"uri": uri})
            assert answer["error"]["code"] == INVALID_PARAMS, uri
            assert "No skill is served at" in answer["error"]["message"]
        assert raw.call("skills/get", {})["error"]["code"] == INVALID_PARAMS
    finally:
        raw.close()


def test_skills_list_pages_and_refuses_a_cursor_it_did_not_give(tmp_path: Path) -> None:
    root = tmp_path / "skills"
    for n in range(57):
        make_skill_md(root, f"skill-{n:02d}", description=f"Skill number {n}.")
    raw = serve(tmp_path, root)
    try:
        first = raw.result("skills/list")
        assert len(first["skills"]) == 50 and first["nextCursor"]
        second = raw.result("skills/list", {"cursor": first["nextCursor"]})
        assert "nextCursor" not in second
        names = [e["frontmatter"]["name"] for e in first["skills"] + second["skills"]]
        assert names == [f"skill-{n:02d}" for n in range(57)]
        directory_cursor = base64.urlsafe_b64encode(b'["ongrid-skills-cursor", "skill://x", 1]').decode()
        for cursor in ("abc", "", "bm90IGpzb24", directory_cursor, first["nextCursor"][:-2]):
            answer = raw.call("skills/list", {"cursor": cursor})
            assert answer["error"]["code"] == INVALID_PARAMS, cursor
    finally:
        raw.close()


def test_directory_read_lists_direct_children_and_refuses_anything_outside_a_skill_folder(
    server: Raw,
) -> None:
    top = server.result("resources/directory/read", {"uri": "skill://pdf-processing"})
    assert [(r["name"], r["mimeType"]) for r in top["resources"]] == [
        ("SKILL.md", "text/markdown"),
        ("assets", "inode/directory"),
        ("scripts", "inode/directory"),
        ("templates", "inode/directory"),
    ]
    templates = server.result("resources/directory/read", {"uri": "skill://pdf-processing/templates"})
    assert [(r["uri"], r["mimeType"]) for r in templates["resources"]] == [
        ("skill://pdf-processing/templates/invoice.md", "text/markdown"),
        ("skill://pdf-processing/templates/regional", "inode/directory"),
    ]
    for uri in (
        "skill://pdf-processing/SKILL.md",  # a file, not a folder
        "skill://pdf-processing/missing",
        "skill://pdf-processing/../runbook",
        "skill://pdf-processing/templates/../../etc",
        "skill://nobody",
        "skill://",
        "file:///etc",
    ):
        answer = server.call("resources/directory/read", {"uri": uri})
        assert answer["error"]["code"] == INVALID_PARAMS, uri


def test_a_skill_the_extension_cannot_describe_stays_a_plain_resource(tmp_path: Path, skills: Path) -> None:
    make_skill_md(skills, None, folder="bare", raw="# Bare\n\nNo front matter here.\n")
    make_skill_md(skills, "Odd Name", folder="odd", description="Its name is normalised.")
    raw = serve(tmp_path, skills)
    try:
        listed = [e["uri"] for e in raw.result("skills/list")["skills"]]
        assert listed == ["skill://pdf-processing/SKILL.md", "skill://runbook/SKILL.md"]
        plain = [r["uri"] for r in raw.result("resources/list")["resources"]]
        assert "skill://bare/SKILL.md" in plain
    finally:
        raw.close()


def test_a_skill_inside_another_skill_is_listed_under_the_enclosing_path(
    tmp_path: Path, skills: Path
) -> None:
    make_skill_md(skills / "pdf-processing", "forms", description="Fill PDF forms.", body="# Forms\n")
    raw = serve(tmp_path, skills)
    try:
        entries = {e["uri"]: e for e in raw.result("skills/list")["skills"]}
        nested = entries["skill://pdf-processing/forms/SKILL.md"]
        assert nested["frontmatter"]["name"] == "forms"
        outer = [r["uri"] for r in entries["skill://pdf-processing/SKILL.md"]["resources"]]
        assert "skill://pdf-processing/forms/SKILL.md" in outer  # its files are the enclosing skill's too
        assert read_bytes(raw, nested["uri"]).startswith(b"---\nname: forms\n")
        got = raw.result("skills/get", {"uri": "skill://pdf-processing/forms/SKILL.md"})
        assert got["skill"] == nested
    finally:
        raw.close()


def test_a_changed_skill_file_is_announced_as_a_resource_list_change(tmp_path: Path, skills: Path) -> None:
    make_skill(skills, "echo")
    raw = serve(tmp_path, skills, watch=True)
    try:
        hello = {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "raw", "version": "1"},
        }
        raw.result("initialize", hello, modern=False)
        raw.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        before = raw.result("skills/list", modern=False)["skills"]
        (skills / "pdf-processing" / "templates" / "credit-note.md").write_text("# Credit\n")
        methods = set()
        while "notifications/resources/list_changed" not in methods:
            methods.add(raw.note()["method"])
        after = raw.result("skills/get", {"uri": "skill://pdf-processing/SKILL.md"}, modern=False)["skill"]
        assert "skill://pdf-processing/templates/credit-note.md" in [r["uri"] for r in after["resources"]]
        assert after != next(e for e in before if e["uri"] == after["uri"])
    finally:
        raw.close()


def test_directory_read_pages_a_large_folder_and_keeps_its_cursor_to_that_folder(tmp_path: Path) -> None:
    files = {f"templates/t{n:02d}.md": f"# {n}\n" for n in range(53)}
    make_skill_md(tmp_path / "skills", "forms", description="Many templates.", files=files)
    raw = serve(tmp_path, tmp_path / "skills")
    try:
        first = raw.result("resources/directory/read", {"uri": "skill://forms/templates"})
        assert len(first["resources"]) == 50 and first["nextCursor"]
        rest = raw.result(
            "resources/directory/read", {"uri": "skill://forms/templates", "cursor": first["nextCursor"]}
        )
        names = [r["name"] for r in first["resources"] + rest["resources"]]
        assert names == [f"t{n:02d}.md" for n in range(53)] and "nextCursor" not in rest
        elsewhere = raw.call(
            "resources/directory/read", {"uri": "skill://forms", "cursor": first["nextCursor"]}
        )
        assert elsewhere["error"]["code"] == INVALID_PARAMS
        assert raw.call("skills/list", {"cursor": first["nextCursor"]})["error"]["code"] == INVALID_PARAMS
    finally:
        raw.close()
