"""Live catalog changes on the surfaces: a real REST server's /v1/events, a real MCP client session."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpserve
import httpx
import mcp.types as types
import pytest
from mcp import Client, StdioServerParameters

from ongrid_plugins import SkillHost
from ongrid_plugins.server.rest import close_event_streams, create_app
from ongrid_plugins.server.tokens import Principal, TokenStore, add_token, hash_token
from ongrid_plugins.testing import isolated_settings, make_skill, make_skill_md

TOKENS = {
    "admin-token": ("alice", "admin"),
    "bob-token": ("bob", "admin"),
    "carol-token": ("carol", "admin"),
    "viewer-token": ("vic", "viewer"),
}
MARK_SH = """#!/bin/sh
read -r args
echo ran >> ran
printf '%s\\n' "$args"
"""


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@contextlib.contextmanager
def running(app: Any) -> Iterator[str]:
    """Serve ``app`` on 127.0.0.1, ending its event streams before the server stops."""
    with httpserve.running(app, before_stop=close_event_streams) as url:
        yield url


class Events:
    """Reads one /v1/events stream in a thread; ``next(kind)`` waits for the next event of a kind."""

    def __init__(self, url: str, token: str) -> None:
        self.items: list[tuple[str, Any]] = []
        self._cond = threading.Condition()
        self._client = httpx.Client(base_url=url, timeout=httpx.Timeout(30, read=None))
        self._response = self._client.send(
            self._client.build_request("GET", "/v1/events", headers={"Authorization": f"Bearer {token}"}),
            stream=True,
        )
        assert self._response.status_code == 200
        threading.Thread(target=self._read, daemon=True).start()
        self.wait("ready")

    def _read(self) -> None:
        event = ""
        with contextlib.suppress(httpx.HTTPError):
            for line in self._response.iter_lines():
                if line.startswith("event: "):
                    event = line[7:]
                elif line.startswith("data: "):
                    with self._cond:
                        self.items.append((event, json.loads(line[6:])))
                        self._cond.notify_all()

    def wait(self, kind: str, name: str | None = None, timeout: float = 15.0) -> Any:
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                for index, (event, data) in enumerate(self.items):
                    if event == kind and (name is None or data.get("name") == name):
                        del self.items[: index + 1]
                        return data
                left = deadline - time.monotonic()
                assert left > 0, f"no {kind} event for {name} (got {self.items})"
                self._cond.wait(left)

    def close(self) -> None:
        self._response.close()
        self._client.close()


def token_store() -> TokenStore:
    return TokenStore((hash_token(t), Principal(who, persona)) for t, (who, persona) in TOKENS.items())


def test_the_rest_event_stream_sees_live_add_change_break_and_delete(tmp_path: Path) -> None:
    root = tmp_path / "skills"
    make_skill(root, "echo")
    host = SkillHost(isolated_settings(tmp_path, root))
    with running(create_app(host, token_store())) as url, host.watch(debounce=0.05):
        assert httpx.get(f"{url}/v1/events").status_code == 401
        admin, viewer = Events(url, "admin-token"), Events(url, "viewer-token")
        try:
            folder = make_skill(root, "fresh")
            added = admin.wait("added", "fresh")
            assert added["digest"] == host.skill("fresh").digest and added["tools"] == ["fresh"]
            assert viewer.wait("added", "fresh")["digest"] == added["digest"]
            listed = httpx.get(f"{url}/v1/skills/fresh", headers={"Authorization": "Bearer admin-token"})
            assert listed.json()["digest"] == added["digest"] and listed.json()["stale"] == ""

            (folder / "run.sh").write_text((folder / "run.sh").read_text() + "# edited\n")
            changed = admin.wait("changed", "fresh")
            assert changed["previous"] == added["digest"] and changed["digest"] != added["digest"]

            (folder / "skill.json").write_text("{broken")
            stale = admin.wait("stale", "fresh")
            assert stale["digest"] == changed["digest"] and stale["message"].startswith("Expecting")
            listed = httpx.get(f"{url}/v1/skills", headers={"Authorization": "Bearer admin-token"}).json()
            assert [i["stale"] != "" for i in listed["items"] if i["name"] == "fresh"] == [True]

            (folder / "skill.json").unlink()
            assert admin.wait("removed", "fresh")["previous"] == changed["digest"]
            assert viewer.wait("removed", "fresh")["name"] == "fresh"

            make_skill(root, "wipe", class_="dangerous")  # a viewer may not list it: no event for it
            admin.wait("added", "wipe")
            (root / "wipe" / "skill.json").unlink()
            admin.wait("removed", "wipe")
            make_skill(root, "marker")
            viewer.wait("added", "marker")
            assert all(data["name"] != "wipe" for _e, data in viewer.items)
        finally:
            admin.close()
            viewer.close()


def test_approve_then_swap_is_refused_over_rest(tmp_path: Path) -> None:
    root = tmp_path / "skills"
    folder = make_skill(root, "wipe", script=MARK_SH, class_="dangerous")
    host = SkillHost(isolated_settings(tmp_path, root))
    with running(create_app(host, token_store())) as url, httpx.Client(base_url=url, timeout=30) as client:
        asked = client.post("/v1/skills/wipe/execute", headers=bearer("admin-token"), json={})
        assert asked.status_code == 409
        ticket = asked.json()["ticket"]
        assert ticket["skill_digest"] == host.skill("wipe").digest
        for approver in ("bob-token", "carol-token"):
            approved = client.post(f"/v1/approvals/{ticket['id']}/approve", headers=bearer(approver), json={})
            assert approved.status_code == 200
        (folder / "run.sh").write_text(MARK_SH.replace("ran", "swapped"))
        refused = client.post(
            "/v1/skills/wipe/execute", headers=bearer("admin-token"), json={"ticket": ticket["id"]}
        )
        now = client.get("/v1/skills/wipe", headers=bearer("admin-token")).json()["digest"]
        assert refused.json()["reason"] == "skill_changed"
        assert refused.json()["error"] == (
            f"the skill changed since approval (digest {ticket['skill_digest']} -> {_disk_digest(host)})"
        )
        assert now == ticket["skill_digest"]  # not reloaded: the listing still shows what was loaded
        assert not (folder / "ran").exists()


def _disk_digest(host: SkillHost) -> str:
    from ongrid_plugins.catalog import skill_digest

    return skill_digest(host.skill("wipe")).digest


def test_serve_watch_streams_changes_from_the_command(tmp_path: Path) -> None:
    root = tmp_path / "skills"
    make_skill(root, "echo")
    tokens = tmp_path / "tokens.json"
    env = {**os.environ, "ONGRID_STATE_DIR": str(tmp_path / "state")}
    command = [sys.executable, "-m", "ongrid_plugins", "--no-defaults", "--dirs", str(root), "serve"]
    command += ["--port", "0", "--watch", "--tokens", str(tokens)]
    token = add_token(str(tokens), "alice", "admin")
    proc = subprocess.Popen(command, env=env, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        while "listening on" not in line:
            assert line, "the server exited"
            line = proc.stderr.readline()
        events = Events(line.rsplit(" ", 1)[1].strip(), token)
        try:
            make_skill(root, "fresh")
            assert events.wait("added", "fresh")["tools"] == ["fresh"]
        finally:
            events.close()
    finally:
        proc.terminate()
        proc.wait(10)


# ---------------------------------------------------------------------- MCP


def mcp_params(root: Path, tmp_path: Path) -> StdioServerParameters:
    env = {**os.environ, "ONGRID_STATE_DIR": str(tmp_path / "state")}
    args = ["-m", "ongrid_plugins", "--no-defaults", "--dirs", str(root), "mcp", "--watch"]
    return StdioServerParameters(command=sys.executable, args=args, env=env)


def test_mcp_sessions_are_told_of_live_add_change_break_and_delete(tmp_path: Path) -> None:
    root = tmp_path / "skills"
    make_skill(root, "echo")
    notes: list[str] = []
    arrived = anyio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification | types.PromptListChangedNotification):
            notes.append(message.method)
            arrived.set()

    async def next_note() -> list[str]:
        nonlocal arrived
        with anyio.fail_after(20):
            await arrived.wait()
        await anyio.sleep(0.2)  # the prompts notification follows the tools one
        arrived = anyio.Event()
        got = sorted(set(notes))
        notes.clear()
        return got

    async def tools(client: Client) -> dict[str, dict[str, Any]]:
        return {t.name: dict(t.meta or {}) for t in (await client.list_tools()).tools}

    async def main() -> None:
        params = mcp_params(root, tmp_path)
        async with Client(
            params, mode="legacy", read_timeout_seconds=30, message_handler=on_message
        ) as client:
            capabilities = client.server_capabilities
            assert capabilities.tools is not None and capabilities.tools.list_changed is True
            assert capabilities.prompts is not None and capabilities.prompts.list_changed is True
            assert capabilities.resources is not None and capabilities.resources.list_changed is True
            assert len((await tools(client))["echo"]["ongrid/digest"]) == 64

            folder = make_skill(root, "fresh")  # add
            assert await next_note() == ["notifications/tools/list_changed"]
            first = (await tools(client))["fresh"]["ongrid/digest"]

            (folder / "run.sh").write_text((folder / "run.sh").read_text() + "# edited\n")  # change
            assert await next_note() == ["notifications/tools/list_changed"]
            assert (await tools(client))["fresh"]["ongrid/digest"] != first

            (folder / "skill.json").write_text("{broken")  # break: the last good version stays
            assert await next_note() == ["notifications/tools/list_changed"]
            assert "ongrid/stale" in (await tools(client))["fresh"]

            (folder / "skill.json").unlink()  # delete
            assert await next_note() == ["notifications/tools/list_changed"]
            assert sorted(await tools(client)) == ["echo"]

            make_skill_md(root, "runbook", description="How to.", body="# Do it\n")  # a prompt appears
            assert await next_note() == ["notifications/prompts/list_changed"]
            assert [p.name for p in (await client.list_prompts()).prompts] == ["runbook"]

    anyio.run(main)


def test_mcp_listen_streams_get_list_changed_and_stale_tools_are_marked(tmp_path: Path) -> None:
    root = tmp_path / "skills"
    folder = make_skill(root, "echo")

    async def main() -> None:
        async with Client(mcp_params(root, tmp_path), read_timeout_seconds=30) as client:
            async with client.listen(tools_list_changed=True) as subscription:
                (folder / "skill.json").write_text("{broken")
                with anyio.fail_after(20):
                    async for _event in subscription:
                        break
            [tool] = (await client.list_tools()).tools
            assert (tool.meta or {})["ongrid/stale"].startswith("Expecting property name")

    anyio.run(main)


@pytest.mark.parametrize("mode", ["legacy"])
def test_without_watch_nothing_changes_and_nothing_is_announced(tmp_path: Path, mode: str) -> None:
    root = tmp_path / "skills"
    make_skill(root, "echo")
    params = mcp_params(root, tmp_path)
    params.args.remove("--watch")
    seen: list[Any] = []

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            seen.append(message)

    async def main() -> None:
        async with Client(params, mode=mode, read_timeout_seconds=30, message_handler=on_message) as client:
            await client.list_tools()
            make_skill(root, "fresh")
            await anyio.sleep(1.0)
            assert [t.name for t in (await client.list_tools()).tools] == ["echo"]

    anyio.run(main)
    assert seen == []
