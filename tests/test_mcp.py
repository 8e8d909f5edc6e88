"""The MCP server, driven by the official SDK's client over stdio (``python -m ongrid_plugins mcp``)."""

from __future__ import annotations

import itertools
import json
import os
import sys
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import jsonschema
import mcp.types as types
import pytest
from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPError

from ongrid_plugins import SkillHost
from ongrid_plugins.gate.tickets import os_identity
from ongrid_plugins.testing import isolated_settings, make_skill, make_skill_md

SCHEMAS = Path(__file__).parent / "provider_schemas"
LOUD_SH = """#!/bin/sh
read -r args
echo "checking $args" >&2
echo "all good" >&2
printf '%s\\n' "$args"
"""
MARK_SH = """#!/bin/sh
read -r args
touch ran
printf '%s\\n' "$args"
"""
Session = Callable[[Client], Awaitable[None]]


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    skills = tmp_path / "skills"
    make_skill(skills, "echo", schema={"type": "object", "properties": {"n": {"type": "integer"}}})
    make_skill(skills, "loud", script=LOUD_SH)
    make_skill(skills, "restart", script=MARK_SH, class_="mutating")
    make_skill(skills, "wipe", script=MARK_SH, class_="dangerous")
    make_skill_md(
        skills,
        "runbook",
        description="How to handle a full disk.",
        body="# Full disk\n\nRun `echo` first, then ask.\n",
        files={"references/checklist.md": "- look\n- ask\n", "assets/logo.bin": b"\x89\xff\x00"},
    )
    return tmp_path


def run(
    workspace: Path,
    session: Session,
    *,
    persona: str = "operator",
    mode: str = "auto",
    options: tuple[str, ...] = (),
    **client: Any,
) -> None:
    """Start ``ongrid-skills mcp`` as a subprocess and run ``session`` against it with the SDK client."""
    env = {**os.environ, "ONGRID_STATE_DIR": str(workspace / "state")}
    params = StdioServerParameters(
        command=sys.executable,
        args=_server_argv(workspace, "--persona", persona, *options)[1:],
        env=env,
    )

    async def main() -> None:
        async with Client(params, mode=mode, read_timeout_seconds=30, **client) as connected:
            await session(connected)

    anyio.run(main)


def _server_argv(workspace: Path, *options: str) -> list[str]:
    """``python -m ongrid_plugins ... mcp OPTIONS`` over the workspace's skills."""
    return [
        sys.executable,
        "-m",
        "ongrid_plugins",
        "--no-defaults",
        "--dirs",
        str(workspace / "skills"),
        "mcp",
        *options,
    ]


def text(result: types.CallToolResult) -> Any:
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return json.loads(block.text)


def host_for(workspace: Path) -> SkillHost:
    return SkillHost(isolated_settings(workspace, workspace / "skills", state_dir=str(workspace / "state")))


# ---------------------------------------------------------------------- tools


def test_list_and_call(workspace: Path) -> None:
    async def session(client: Client) -> None:
        listed = (await client.list_tools()).tools
        assert [t.name for t in listed] == ["echo", "loud"]
        for tool in listed:
            jsonschema.validate(
                tool.model_dump(by_alias=True, exclude_none=True),
                json.loads((SCHEMAS / "mcp_tool.json").read_text()),
            )
            assert tool.annotations is not None and tool.annotations.read_only_hint is True
        ok = await client.call_tool("echo", {"n": 3})
        assert not ok.is_error and ok.structured_content == {"n": 3} and text(ok) == {"n": 3}
        bad = await client.call_tool("echo", {"n": "three"})
        assert bad.is_error and text(bad)["errors"] == [
            {"path": "$.n", "message": "'three' is not of type 'integer'"}
        ]
        unknown = await client.call_tool("ecco", {})
        assert unknown.is_error and text(unknown)["suggestions"] == ["echo"]
        hidden = await client.call_tool("restart", {})  # a viewer may not call it: as if absent
        assert hidden.is_error and text(hidden)["code"] == "unknown_skill"

    run(workspace, session, persona="viewer")


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_stderr_lines_arrive_as_progress_and_log_messages(workspace: Path, mode: str) -> None:
    progress: list[tuple[float, str | None]] = []
    logs: list[Any] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append((value, message))

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        logs.append(params.data)

    async def session(client: Client) -> None:
        result = await client.call_tool("loud", {"disk": "/"}, progress_callback=on_progress)
        assert result.structured_content == {"disk": "/"}

    run(workspace, session, mode=mode, logging_callback=on_log, log_level="info")
    assert progress == [(1.0, 'checking {"disk":"/"}'), (2.0, "all good")]
    assert logs == [{"tool": "loud", "line": 'checking {"disk":"/"}'}, {"tool": "loud", "line": "all good"}]


# ---------------------------------------------------------------------- confirmations


def answer(action: str, confirm: bool = True) -> Any:
    asked: list[str] = []

    async def elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        assert isinstance(params, types.ElicitRequestFormParams)
        asked.append(params.message)
        return types.ElicitResult(action=action, content={"confirm": confirm} if action == "accept" else None)

    elicit.asked = asked  # type: ignore[attr-defined]
    return elicit


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_a_change_is_confirmed_through_elicitation(workspace: Path, mode: str) -> None:
    elicit = answer("accept")

    async def session(client: Client) -> None:
        result = await client.call_tool("restart", {"unit": "nginx"})
        assert not result.is_error and result.structured_content == {"unit": "nginx"}

    run(workspace, session, mode=mode, elicitation_callback=elicit)
    assert len(elicit.asked) == 1 and "restart" in elicit.asked[0] and '"unit": "nginx"' in elicit.asked[0]
    assert (workspace / "skills" / "restart" / "ran").exists()


def test_a_call_waiting_for_the_users_answer_does_not_hold_a_call_slot(workspace: Path) -> None:
    """With --max-calls 1, a change waiting for the user's confirmation kept every other
    call waiting: a person slow to answer stopped the whole server."""
    asked, answered = anyio.Event(), anyio.Event()

    async def elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.set()
        await answered.wait()  # the user answers once the other call has ended
        return types.ElicitResult(action="accept", content={"confirm": True})

    async def session(client: Client) -> None:
        results: dict[str, types.CallToolResult] = {}

        async def change() -> None:
            results["restart"] = await client.call_tool("restart", {"unit": "nginx"})

        async with anyio.create_task_group() as group:
            group.start_soon(change)
            await asked.wait()
            with anyio.fail_after(20):
                results["echo"] = await client.call_tool("echo", {"n": 1})
            answered.set()
        assert not results["echo"].is_error and text(results["echo"]) == {"n": 1}
        assert not results["restart"].is_error

    run(workspace, session, mode="legacy", options=("--max-calls", "1"), elicitation_callback=elicit)
    assert (workspace / "skills" / "restart" / "ran").exists()


@pytest.mark.parametrize(
    ("mode", "action", "confirm"),
    [("auto", "decline", True), ("legacy", "cancel", True), ("auto", "accept", False)],
)
def test_a_declined_change_does_not_run(workspace: Path, mode: str, action: str, confirm: bool) -> None:
    async def session(client: Client) -> None:
        result = await client.call_tool("restart", {"unit": "nginx"})
        assert result.is_error and text(result)["code"] == "declined"
        assert "the user declined" in text(result)["error"]

    run(workspace, session, mode=mode, elicitation_callback=answer(action, confirm))
    assert not (workspace / "skills" / "restart" / "ran").exists()


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_a_client_without_elicitation_gets_a_clear_refusal(workspace: Path, mode: str) -> None:
    async def session(client: Client) -> None:
        result = await client.call_tool("restart", {"unit": "nginx"})
        assert result.is_error
        body = text(result)
        assert body["code"] == "needs_confirmation"
        assert "cannot ask for one (it does not support elicitation)" in body["error"]

    run(workspace, session, mode=mode)
    assert not (workspace / "skills" / "restart" / "ran").exists()


# ---------------------------------------------------------------------- approvals


def test_a_dangerous_call_returns_its_ticket_and_runs_once_approved(workspace: Path) -> None:
    tickets: list[str] = []

    async def first(client: Client) -> None:
        result = await client.call_tool("wipe", {"path": "/srv/old"})
        body = text(result)
        assert result.is_error and body["code"] == "needs_approval"
        assert body["ticket"]["requester"] == os_identity() and body["ticket"]["status"] == "pending"
        assert f"ongrid-skills approvals approve {body['ticket']['id']}" in body["hint"]
        tickets.append(body["ticket"]["id"])

    run(workspace, first, persona="admin", elicitation_callback=answer("accept"))
    host = host_for(workspace)
    host.approve(tickets[0], approver="bob")
    host.approve(tickets[0], approver="carol")

    async def again(client: Client) -> None:
        result = await client.call_tool("wipe", {"path": "/srv/old"})
        assert not result.is_error and result.structured_content == {"path": "/srv/old"}
        replay = await client.call_tool("wipe", {"path": "/srv/old"})
        assert replay.is_error and text(replay)["ticket"]["id"] != tickets[0]

    run(workspace, again, persona="admin")
    assert host.ticket(tickets[0]).status == "executed"
    host.audit.flush()
    [row] = host.audit.entries(tool="wipe", outcome="ok")
    assert row.caller == os_identity() and row.approvers == ("bob", "carol")


# ---------------------------------------------------------------------- instructions


def test_skill_md_instructions_as_prompts_and_resources(workspace: Path) -> None:
    async def session(client: Client) -> None:
        prompts = (await client.list_prompts()).prompts
        assert [(p.name, p.description) for p in prompts] == [("runbook", "How to handle a full disk.")]
        prompt = await client.get_prompt("runbook")
        content = prompt.messages[0].content
        assert isinstance(content, types.TextContent) and content.text.lstrip().startswith("# Full disk")
        uris = sorted(r.uri for r in (await client.list_resources()).resources)
        assert uris == [
            "skill://runbook/SKILL.md",
            "skill://runbook/assets/logo.bin",
            "skill://runbook/references/checklist.md",
        ]
        checklist = (await client.read_resource("skill://runbook/references/checklist.md")).contents[0]
        assert isinstance(checklist, types.TextResourceContents) and checklist.text == "- look\n- ask\n"
        logo = (await client.read_resource("skill://runbook/assets/logo.bin")).contents[0]
        assert isinstance(logo, types.BlobResourceContents) and logo.blob == "if8A"
        for uri in ("skill://runbook/../../etc/passwd", "skill://nobody/SKILL.md", "file:///etc/passwd"):
            with pytest.raises(MCPError):
                await client.read_resource(uri)
        with pytest.raises(MCPError):
            await client.get_prompt("nobody")

    run(workspace, session)


def test_prompts_list_shows_an_agent_skills_name_as_written(workspace: Path) -> None:
    make_skill_md(workspace / "skills", "mcp-builder", description="Builds MCP servers.", body="# MCP\n")

    async def session(client: Client) -> None:
        names = [p.name for p in (await client.list_prompts()).prompts]
        assert names == ["mcp-builder", "runbook"]
        for spelling in ("mcp-builder", "mcp_builder"):
            prompt = await client.get_prompt(spelling)
            content = prompt.messages[0].content
            assert isinstance(content, types.TextContent) and content.text.strip() == "# MCP"
        uris = [r.uri for r in (await client.list_resources()).resources]
        assert "skill://mcp-builder/SKILL.md" in uris

    run(workspace, session)


@pytest.mark.parametrize("elicits", [False, True], ids=["no_elicitation", "with_elicitation"])
def test_a_confirmation_the_server_did_not_ask_for_is_refused(workspace: Path, elicits: bool) -> None:
    from ongrid_plugins.models import args_digest

    forged = args_digest("restart", {"unit": "nginx"})  # what the old server sent as request_state
    answer_yes = types.ElicitResult(action="accept", content={"confirm": True})
    client: dict[str, Any] = {"elicitation_callback": answer("accept")} if elicits else {}

    async def session(connected: Client) -> None:
        for state in (forged, "made-up", None):
            result = await connected.call_tool(
                "restart", {"unit": "nginx"}, input_responses={"confirm": answer_yes}, request_state=state
            )
            assert result.is_error, state
            assert text(result)["code"] == "not_asked"

    run(workspace, session, mode="auto", **client)
    assert not (workspace / "skills" / "restart" / "ran").exists()


def test_an_issued_request_state_is_single_use(workspace: Path) -> None:
    async def session(connected: Client) -> None:
        first = await connected.session.call_tool("restart", {"unit": "nginx"}, allow_input_required=True)
        assert isinstance(first, types.InputRequiredResult) and first.request_state
        assert len(first.request_state) >= 40 and first.request_state != args_digest(
            "restart", {"unit": "nginx"}
        )
        yes = {"confirm": types.ElicitResult(action="accept", content={"confirm": True})}
        ran = await connected.call_tool(
            "restart", {"unit": "nginx"}, input_responses=yes, request_state=first.request_state
        )
        assert not ran.is_error
        again = await connected.call_tool(
            "restart", {"unit": "nginx"}, input_responses=yes, request_state=first.request_state
        )
        assert again.is_error and text(again)["code"] == "not_asked"

    from ongrid_plugins.models import args_digest

    run(workspace, session, mode="auto", elicitation_callback=answer("accept"))
    assert (workspace / "skills" / "restart" / "ran").exists()


# ---------------------------------------------------------------------- lines the SDK cannot parse


def test_a_line_the_sdk_cannot_parse_still_gets_its_answer(workspace: Path) -> None:
    """A raw client (the SDK's own cannot send these): text that is not JSON gets a parse
    error, a tools/call holding a lone surrogate its invalid_arguments result and audit
    row, another request with one an invalid-params error; the session goes on."""
    import subprocess

    client = {"name": "raw", "version": "1"}
    hello = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": client}
    lines = [
        json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": hello}),
        json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"n":"\\ud800"}}}',
        "garbage{",
        '{"jsonrpc":"2.0","id":4,"method":"prompts/get","params":{"name":"\\udc00"}}',
        json.dumps({"jsonrpc": "2.0", "id": 3, "method": "ping"}),
    ]
    env = {**os.environ, "ONGRID_STATE_DIR": str(workspace / "state")}
    argv = [sys.executable, "-m", "ongrid_plugins", "--no-defaults", "--dirs", str(workspace / "skills")]
    argv.append("mcp")
    with subprocess.Popen(
        argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, text=True
    ) as proc:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write("\n".join(lines) + "\n")
        proc.stdin.flush()
        answers: dict[Any, dict[str, Any]] = {}
        while len(answers) < 5:
            message = json.loads(proc.stdout.readline())
            if "id" in message:
                answers[message["id"]] = message
        proc.stdin.close()
        proc.wait(timeout=30)
    refused = json.loads(answers[2]["result"]["content"][0]["text"])
    assert answers[2]["result"]["isError"] is True
    assert refused["code"] == "invalid_arguments" and refused["errors"][0]["path"] == "$.n"
    assert answers[None]["error"]["code"] == -32700 and "garbage{" in answers[None]["error"]["message"]
    assert answers[4]["error"]["code"] == -32602
    assert answers[3]["result"] == {}
    log = host_for(workspace).audit
    assert [(e.tool, e.outcome) for e in log.entries()] == [("echo", "invalid_arguments")]


def _raw_session(
    workspace: Path, lines: list[str], want: int, *options: str, **env: str
) -> dict[Any, dict[str, Any]]:
    """Send ``lines`` after the handshake to ``ongrid-skills mcp``; the first ``want`` answers by id."""
    import subprocess

    hello = {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "raw", "version": "1"},
    }
    head = [
        json.dumps({"jsonrpc": "2.0", "id": "init", "method": "initialize", "params": hello}),
        json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    ]
    environ = {**os.environ, "ONGRID_STATE_DIR": str(workspace / "state"), **env}
    argv = _server_argv(workspace, *options)
    with subprocess.Popen(
        argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=environ, text=True
    ) as proc:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write("\n".join(head + lines) + "\n")
        proc.stdin.flush()
        answers: dict[Any, dict[str, Any]] = {}
        stuck = threading.Timer(60, proc.kill)  # an answer that never comes fails, not hangs
        stuck.start()
        try:
            while len(answers) < want + 1:
                line = proc.stdout.readline()
                assert line, f"the server ended or went silent after {len(answers)} answers: {answers}"
                message = json.loads(line)  # every stdout line is JSON-RPC
                if "id" in message:
                    answers[message["id"]] = message
        finally:
            stuck.cancel()
        proc.stdin.close()
        assert proc.wait(timeout=30) == 0
    return answers


def test_a_request_nested_deeper_than_the_sdk_reads_is_refused_and_the_server_lives(workspace: Path) -> None:
    """The attack: ~1 KB of arguments nested 300 deep made the echoed result unwritable and
    ended the server (exit 1); nothing may run for it, and the next request is answered."""
    deep = "[" * 300 + "]" * 300
    lines = [
        '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"n":'
        + deep
        + "}}}",
        '{"jsonrpc":"2.0","id":5,"method":"ping","params":{"x":' + deep + "}}",
        json.dumps({"jsonrpc": "2.0", "id": 3, "method": "ping"}),
    ]
    answers = _raw_session(workspace, lines, 3)
    for request_id in (2, 5):
        error = answers[request_id]["error"]
        assert error["code"] == -32600 and "recursion limit" in error["message"], error
    assert answers[3]["result"] == {}
    assert host_for(workspace).audit.entries() == []  # nothing ran


@pytest.mark.parametrize(
    ("line", "answer_id", "says"),
    [
        ('{"jsonrpc":"2.0","id":7,"method":"tools/list","params":[1]}', 7, "object params"),
        ('{"jsonrpc":"1.0","id":7,"method":"ping"}', 7, '"jsonrpc": "2.0"'),
        ('{"id":7,"method":"ping"}', 7, '"jsonrpc": "2.0"'),
        ('{"jsonrpc":"2.0","id":7,"method":5}', 7, '"method" that is a string'),
        ('{"jsonrpc":"2.0","id":7}', 7, '"method" that is a string'),
        ('[{"jsonrpc":"2.0","id":7,"method":"ping"}]', None, "batches are not supported"),
        ("5", None, "one JSON object"),
    ],
)
def test_json_that_is_no_valid_request_gets_an_invalid_request_error(
    workspace: Path, line: str, answer_id: Any, says: str
) -> None:
    """The SDK validates each line and only logs what fails: the client waited for ever."""
    lines = [line, '{"jsonrpc":"2.0","method":"notifications/x","params":[1]}']
    lines.append(json.dumps({"jsonrpc": "2.0", "id": 3, "method": "ping"}))
    answers = _raw_session(workspace, lines, 2)
    error = answers[answer_id]["error"]
    assert error["code"] == -32600 and says in error["message"], error
    assert answers[3]["result"] == {}  # the notification got no answer, the session goes on
    assert set(answers) == {"init", answer_id, 3}


def test_a_result_nested_deeper_than_the_sdk_writes_comes_as_text_alone(workspace: Path) -> None:
    """The attack: a skill printing an object 400 levels deep made the SDK answer with an
    error of code 0 ("Maximum serialization depth exceeded"), though the call had run."""
    for name, depth in (("deep", 400), ("shallow", 150)):
        value = "[" * depth + "]" * depth
        make_skill(
            workspace / "skills", name, script=f"#!/bin/sh\ncat >/dev/null\necho '{{\"v\":{value}}}'\n"
        )
    lines = [
        json.dumps(
            {"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": {"name": n, "arguments": {}}}
        )
        for i, n in ((2, "deep"), (4, "shallow"))
    ]
    answers = _raw_session(workspace, lines, 2)
    deep, shallow = answers[2]["result"], answers[4]["result"]
    assert deep["isError"] is False and "structuredContent" not in deep
    value = json.loads(deep["content"][0]["text"])["v"]
    for _ in range(399):
        value = value[0]
    assert value == []  # the whole value, as text
    assert (
        shallow["isError"] is False
        and json.loads(shallow["content"][0]["text"]) == shallow["structuredContent"]
    )


def test_a_client_that_leaves_right_after_a_call_ends_the_server_cleanly(workspace: Path) -> None:
    """The attack: stdin closed right after a tools/call holding a lone surrogate (answered
    by the server's own task) ended the server with a ClosedResourceError traceback."""
    import subprocess

    hello = {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "raw", "version": "1"},
    }
    lines = [
        json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": hello}),
        json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"n":"\\ud800"}}}',
    ]
    env = {**os.environ, "ONGRID_STATE_DIR": str(workspace / "state")}
    done = subprocess.run(
        _server_argv(workspace),
        input="\n".join(lines) + "\n",
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert [(e.tool, e.outcome) for e in host_for(workspace).audit.entries()] == [
        ("echo", "invalid_arguments")
    ]


def test_a_tool_the_persona_may_not_call_is_answered_as_absent_and_never_suggested(workspace: Path) -> None:
    """As REST answers: calling the hidden 'wipe' said 'denied' with its class, and 'wip'
    was answered "did you mean 'wipe'?": a model learned which hidden tools exist."""

    async def session(client: Client) -> None:
        listed = {tool.name for tool in (await client.list_tools()).tools}
        assert "wipe" not in listed and "echo" in listed
        hidden = text(await client.call_tool("wipe", {}))
        absent = text(await client.call_tool("no_such_tool", {}))
        assert hidden == {**absent, "error": hidden["error"]} and hidden["code"] == "unknown_skill"
        assert hidden["error"] == "no skill named 'wipe' is registered (see `ongrid-skills list`)"
        assert text(await client.call_tool("wip", {}))["suggestions"] == []
        assert text(await client.call_tool("ech", {}))["suggestions"] == ["echo"]  # one it may call

    run(workspace, session, persona="viewer")
    assert not (workspace / "skills" / "wipe" / "ran").exists()


def test_a_plugin_printing_while_the_host_loads_does_not_reach_the_mcp_stream(
    workspace: Path, tmp_path: Path
) -> None:
    """docs/writing-plugins.md's first example prints each skill it sees registered."""
    plugin = tmp_path / "plugin"
    plugin.mkdir()
    (plugin / "printplug.py").write_text(
        "import os\nfrom ongrid_plugins import hookimpl\n"
        "@hookimpl\ndef ongrid_skill_registered(skill):\n"
        "    print('registered', skill.name)\n    os.write(1, b'raw fd 1\\n')\n"
    )
    dist = plugin / "printplug-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: printplug\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[ongrid_plugins]\nprintplug = printplug\n")
    path = os.pathsep.join(filter(None, [str(plugin), os.environ.get("PYTHONPATH", "")]))
    answers = _raw_session(
        workspace, [json.dumps({"jsonrpc": "2.0", "id": 3, "method": "ping"})], 1, PYTHONPATH=path
    )
    assert answers[3]["result"] == {}  # and every line before it parsed as JSON-RPC


def test_calls_beyond_max_calls_wait_for_one_to_end(workspace: Path) -> None:
    """A client flooding the server with calls does not start skills without end."""
    make_skill(workspace / "skills", "nap", script="#!/bin/sh\n/bin/sleep 0.5\necho '{}'\n")
    call = '{{"jsonrpc":"2.0","id":{},"method":"tools/call","params":{{"name":"nap","arguments":{{}}}}}}'
    answers = _raw_session(workspace, [call.format(n) for n in (2, 3, 4)], 3, "--max-calls", "1")
    assert all(answers[n]["result"]["isError"] is False for n in (2, 3, 4))
    rows = sorted(host_for(workspace).audit.entries(tool="nap"), key=lambda e: e.time)
    assert len(rows) == 3
    # one at a time: each starts after the last one ended
    for earlier, later in itertools.pairwise(rows):
        assert later.time >= earlier.time + earlier.duration - 0.05, (earlier, later)
