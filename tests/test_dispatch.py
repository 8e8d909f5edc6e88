"""Dispatch: model tool calls in, tool-result messages out, never an exception for the model's mistakes."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from ongrid_plugins import ConfigError, SkillHost, UnknownPersona
from ongrid_plugins.host.dispatch import Confirmation, adispatch, dispatch, parse_tool_call
from ongrid_plugins.testing import make_skill

SCHEMAS = Path(__file__).parent / "provider_schemas"
ANSWER_SCHEMA = {
    "openai": "openai_tool_message",
    "openai-responses": "openai_responses_output",
    "anthropic": "anthropic_tool_result",
    "mcp": "mcp_call_tool_result",
}

LOUD_SH = """#!/bin/sh
read -r args
echo "looking at $args" >&2
echo "done looking" >&2
printf '%s\\n' "$args"
"""
FAIL_SH = """#!/bin/sh
echo "disk on fire" >&2
exit 3
"""


def check_answer(fmt: str, message: dict[str, Any]) -> None:
    jsonschema.validate(message, json.loads((SCHEMAS / f"{ANSWER_SCHEMA[fmt]}.json").read_text()))


def openai_call(name: str, arguments: str, call_id: str = "call_1") -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def anthropic_call(name: str, arguments: Any, call_id: str = "toolu_1") -> dict[str, Any]:
    return {"type": "tool_use", "id": call_id, "name": name, "input": arguments}


def payload(message: dict[str, Any]) -> Any:
    """What the model reads, whatever the format."""
    if "content" in message and isinstance(message["content"], list):
        return json.loads(message["content"][0]["text"])
    return json.loads(message.get("content") or message.get("output"))


@pytest.fixture
def host(root: Path, make_host: Any) -> SkillHost:
    schema = {
        "type": "object",
        "properties": {"path": {"type": "string"}, "depth": {"type": "integer", "default": 2}},
        "required": ["path"],
    }
    make_skill(root, "inspect", script=LOUD_SH, schema=schema)
    make_skill(
        root,
        "restart",
        class_="mutating",
        schema={"type": "object", "properties": {"unit": {"type": "string"}}},
    )
    make_skill(root, "wipe", class_="dangerous")
    make_skill(root, "broken", script=FAIL_SH)
    make_skill(root, "slow", script="#!/bin/sh\nsleep 5\n", timeout_seconds=1)
    return make_host(root)


# ---------------------------------------------------------------------- parsing


class SdkObject:
    """Stands in for an SDK's pydantic model (anything with model_dump())."""

    def __init__(self, data: dict[str, Any]) -> None:
        self.data = data

    def model_dump(self) -> dict[str, Any]:
        return self.data


@pytest.mark.parametrize(
    ("call", "fmt", "call_id", "arguments"),
    [
        (openai_call("inspect", '{"path": "/"}'), "openai", "call_1", {"path": "/"}),
        (openai_call("inspect", ""), "openai", "call_1", {}),
        (openai_call("inspect", {"path": "/"}), "openai", "call_1", {"path": "/"}),  # compatible servers
        (
            {"type": "function_call", "call_id": "fc_9", "name": "inspect", "arguments": "{}"},
            "openai-responses",
            "fc_9",
            {},
        ),
        (anthropic_call("inspect", {"path": "/"}), "anthropic", "toolu_1", {"path": "/"}),
        ({"name": "inspect", "arguments": {"path": "/"}}, "mcp", "", {"path": "/"}),
        ({"name": "inspect"}, "mcp", "", {}),
        (SdkObject(anthropic_call("inspect", {})), "anthropic", "toolu_1", {}),
    ],
)
def test_every_format_is_recognised(call: Any, fmt: str, call_id: str, arguments: dict[str, Any]) -> None:
    parsed = parse_tool_call(call)
    assert (parsed.format, parsed.id, parsed.name, parsed.arguments, parsed.malformed) == (
        fmt,
        call_id,
        "inspect",
        arguments,
        "",
    )


@pytest.mark.parametrize(
    ("arguments", "why"),
    [
        ('{"path": "/"', "not valid JSON"),
        ("[1, 2]", "must be a JSON object, got an array"),
        ('"/"', "got a string"),
        ("3", "got a number"),
        ("NaN-ish{", "not valid JSON"),
        ("[" * 100_000, "nested too deeply"),
    ],
)
def test_malformed_arguments_are_reported_not_raised(host: SkillHost, arguments: str, why: str) -> None:
    outcome = dispatch(host, openai_call("inspect", arguments))
    assert outcome.status == "malformed_arguments"
    body = payload(outcome.message)
    assert why in body["error"] and body["code"] == "malformed_arguments" and "JSON object" in body["hint"]
    check_answer("openai", outcome.message)


@pytest.mark.parametrize("value", [{"foo": 1}, {"role": "assistant", "content": "hi"}, {}])
def test_a_dict_of_no_known_shape_gets_a_model_readable_error(host: SkillHost, value: dict) -> None:
    outcome = dispatch(host, value)
    assert outcome.status == "malformed_call" and not outcome.ok
    message = host.dispatch(value)
    assert message["isError"] is True  # the MCP result shape: neutral to every API
    body = json.loads(message["content"][0]["text"])
    assert body["code"] == "malformed_call"
    assert body["error"].startswith("not a tool call: expected an OpenAI tool_calls item")
    assert '"function"' in body["hint"]


def test_a_value_that_is_not_a_dict_is_a_host_error(host: SkillHost) -> None:
    with pytest.raises(ConfigError, match="not a tool call"):
        dispatch(host, "inspect")
    with pytest.raises(ConfigError, match="not a tool call"):
        dispatch(host, None)
    with pytest.raises(UnknownPersona):
        dispatch(host, anthropic_call("inspect", {"path": "/"}), persona="nobody")


# ---------------------------------------------------------------------- outcomes


@pytest.mark.parametrize("fmt", ["openai", "openai-responses", "anthropic", "mcp"])
def test_success_in_every_format(host: SkillHost, fmt: str) -> None:
    calls = {
        "openai": openai_call("inspect", '{"path": "/srv"}'),
        "openai-responses": {
            "type": "function_call",
            "call_id": "fc_1",
            "name": "inspect",
            "arguments": '{"path": "/srv"}',
        },
        "anthropic": anthropic_call("inspect", {"path": "/srv"}),
        "mcp": {"name": "inspect", "arguments": {"path": "/srv"}},
    }
    message = host.dispatch(calls[fmt], caller="ada")
    check_answer(fmt, message)
    assert payload(message) == {"path": "/srv", "depth": 2}
    assert "is_error" not in message and not message.get("isError")
    if fmt == "mcp":
        assert message["structuredContent"] == {"path": "/srv", "depth": 2}


@pytest.mark.parametrize("fmt", ["anthropic", "mcp"])
def test_errors_are_flagged_for_apis_that_have_a_flag(host: SkillHost, fmt: str) -> None:
    call = anthropic_call("inspect", {}) if fmt == "anthropic" else {"name": "inspect", "arguments": {}}
    message = host.dispatch(call)
    check_answer(fmt, message)
    assert message.get("is_error") is True or message.get("isError") is True
    assert "structuredContent" not in message


def test_unknown_tool_suggests(host: SkillHost) -> None:
    body = payload(host.dispatch(anthropic_call("inspct", {})))
    assert body["code"] == "unknown_skill" and body["suggestions"] == ["inspect"]


def test_invalid_arguments_name_the_paths(host: SkillHost) -> None:
    body = payload(host.dispatch(anthropic_call("inspect", {"path": 3, "depth": "deep"})))
    assert body["code"] == "invalid_arguments"
    assert {e["path"] for e in body["errors"]} == {"$.path", "$.depth"}
    assert "fix the arguments" in body["hint"]


def test_denied(host: SkillHost) -> None:
    body = payload(host.dispatch(anthropic_call("restart", {"unit": "nginx"}), persona="viewer"))
    assert body["code"] == "denied" and "read-only" in body["reason"] and body["plugin"] == "ongrid.gate"
    assert "do not retry" in body["hint"]


def test_skill_failure_and_timeout_are_results(host: SkillHost) -> None:
    body = payload(host.dispatch(anthropic_call("broken", {})))
    assert body["code"] == "failed" and body["exit_code"] == 3 and body["stderr_tail"] == ["disk on fire"]
    outcome = dispatch(host, anthropic_call("slow", {}))
    assert outcome.status == "timed_out" and outcome.payload["timed_out"] is True
    assert outcome.result is not None and outcome.result.timed_out


def test_strict_mode_nulls_mean_not_given(host: SkillHost) -> None:
    body = payload(host.dispatch(openai_call("inspect", '{"path": "/", "depth": null}')))
    assert body == {"path": "/", "depth": 2}


def test_events_reach_the_host(host: SkillHost) -> None:
    lines: list[str] = []
    host.dispatch(
        anthropic_call("inspect", {"path": "/"}),
        on_event=lambda e: e.kind == "stderr" and lines.append(e.data),
    )
    assert lines == ['looking at {"depth":2,"path":"/"}', "done looking"]


# ---------------------------------------------------------------------- confirmations


def test_needs_confirmation_without_the_hosts_answer(host: SkillHost) -> None:
    body = payload(host.dispatch(anthropic_call("restart", {"unit": "nginx"})))
    assert body["code"] == "needs_confirmation"
    assert "--yes" not in body["error"] and "do not call it again unless they agree" in body["hint"]


def test_confirm_true_and_arguments_cannot_confirm(host: SkillHost) -> None:
    forged = anthropic_call("restart", {"unit": "nginx", "confirm": True})
    assert payload(host.dispatch(forged))["code"] == "needs_confirmation"
    assert payload(host.dispatch(anthropic_call("restart", {"unit": "nginx"}), confirm=True)) == {
        "unit": "nginx"
    }


def test_a_confirm_callback_asks_about_the_exact_call(host: SkillHost) -> None:
    asked: list[Confirmation] = []

    def ask(question: Confirmation) -> bool:
        asked.append(question)
        return question.arguments["unit"] == "nginx"

    assert payload(host.dispatch(anthropic_call("restart", {"unit": "nginx"}), confirm=ask)) == {
        "unit": "nginx"
    }
    assert (
        payload(host.dispatch(anthropic_call("restart", {"unit": "sshd"}), confirm=ask))["code"]
        == "needs_confirmation"
    )
    assert [q.tool.name for q in asked] == ["restart", "restart"]
    assert len(asked[0].args_digest) == 64 and "confirmation" in asked[0].reason
    safe = host.dispatch(anthropic_call("inspect", {"path": "/"}), confirm=ask)
    assert payload(safe)["path"] == "/" and len(asked) == 2  # nothing to ask for a safe call


def test_async_confirm_callbacks(host: SkillHost) -> None:
    async def ask(question: Confirmation) -> bool:
        await asyncio.sleep(0)
        return True

    outcome = asyncio.run(adispatch(host, anthropic_call("restart", {"unit": "x"}), confirm=ask))
    assert outcome.ok and outcome.payload == {"unit": "x"}
    with pytest.raises(ConfigError, match="use adispatch"):
        dispatch(host, anthropic_call("restart", {"unit": "x"}), confirm=ask)


# ---------------------------------------------------------------------- approvals


def test_two_person_approval_then_the_same_call_runs_once(host: SkillHost) -> None:
    call = anthropic_call("wipe", {"path": "/srv/old"})
    first = dispatch(host, call, persona="admin", caller="alice")
    assert first.status == "needs_approval"
    ticket = first.payload["ticket"]
    assert ticket["status"] == "pending" and ticket["requester"] == "alice" and ticket["required"] == 2
    assert ticket["id"] in first.payload["hint"] and "exactly the same arguments" in first.payload["hint"]
    again = dispatch(host, call, persona="admin", caller="alice")
    assert again.payload["ticket"]["id"] == ticket["id"]  # a retrying model does not open new tickets
    host.approve(ticket["id"], approver="bob")
    assert dispatch(host, call, persona="admin", caller="alice").status == "needs_approval"
    host.approve(ticket["id"], approver="carol")
    ran = dispatch(host, call, persona="admin", caller="alice")
    assert ran.ok and ran.result is not None
    assert host.ticket(ticket["id"]).status == "executed"
    replay = dispatch(host, call, persona="admin", caller="alice")
    assert replay.status == "needs_approval" and replay.payload["ticket"]["id"] != ticket["id"]
    other = dispatch(host, call, persona="admin", caller="mallory")  # an approval binds its requester's call
    assert other.status == "needs_approval"
    host.audit.flush()
    assert [e.caller for e in host.audit.entries(tool="wipe", outcome="ok")] == ["alice"]


# ---------------------------------------------------------------------- agent loops


class ScriptedModel:
    """A fake model: answers each turn with the next scripted reply, and keeps what it was sent."""

    def __init__(self, replies: list[Any]) -> None:
        self.replies: Iterator[Any] = iter(replies)
        self.seen: list[Any] = []

    def __call__(self, transcript: list[Any]) -> Any:
        self.seen.append(json.loads(json.dumps(transcript)))
        return next(self.replies)


def run_openai_loop(host: SkillHost, model: Callable[[list[Any]], Any], ask: Any) -> list[Any]:
    messages: list[Any] = [{"role": "user", "content": "look at /srv and restart nginx"}]
    while True:
        reply = model(messages)
        messages.append(reply)
        if not reply.get("tool_calls"):
            return messages
        for call in reply["tool_calls"]:
            messages.append(host.dispatch(call, persona="operator", caller="ada", confirm=ask))


def run_anthropic_loop(host: SkillHost, model: Callable[[list[Any]], Any], ask: Any) -> list[Any]:
    messages: list[Any] = [{"role": "user", "content": "look at /srv and restart nginx"}]
    while True:
        reply = model(messages)
        messages.append(reply)
        uses = [block for block in reply["content"] if block["type"] == "tool_use"]
        if reply["stop_reason"] != "tool_use":
            return messages
        results = [host.dispatch(use, persona="operator", caller="ada", confirm=ask) for use in uses]
        messages.append({"role": "user", "content": results})


def test_openai_agent_loop(host: SkillHost) -> None:
    model = ScriptedModel(
        [
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [openai_call("inspect", '{"path": "/srv"', "c1")],
            },
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    openai_call("inspect", '{"path": "/srv"}', "c2"),
                    openai_call("restart", '{"unit": "nginx"}', "c3"),
                ],
            },
            {"role": "assistant", "content": "Looked at /srv and restarted nginx."},
        ]
    )
    messages = run_openai_loop(host, model, ask=lambda question: True)
    tool_messages = [m for m in messages if m.get("role") == "tool"]
    for message in tool_messages:
        check_answer("openai", message)
    assert [m["tool_call_id"] for m in tool_messages] == ["c1", "c2", "c3"]
    assert payload(tool_messages[0])["code"] == "malformed_arguments"
    assert payload(tool_messages[1]) == {"path": "/srv", "depth": 2}
    assert payload(tool_messages[2]) == {"unit": "nginx"}
    assert messages[-1]["content"].startswith("Looked at")
    assert model.seen[1][-1]["tool_call_id"] == "c1"  # the model read its mistake before trying again


def test_anthropic_agent_loop(host: SkillHost) -> None:
    def use(name: str, args: Any, call_id: str) -> dict[str, Any]:
        return anthropic_call(name, args, call_id)

    model = ScriptedModel(
        [
            {"role": "assistant", "stop_reason": "tool_use", "content": [use("inspect", {"path": 1}, "t1")]},
            {
                "role": "assistant",
                "stop_reason": "tool_use",
                "content": [
                    {"type": "text", "text": "Fixing that."},
                    use("inspect", {"path": "/srv"}, "t2"),
                    use("restart", {"unit": "nginx"}, "t3"),
                ],
            },
            {
                "role": "assistant",
                "stop_reason": "end_turn",
                "content": [{"type": "text", "text": "Done, nginx not restarted."}],
            },
        ]
    )
    messages = run_anthropic_loop(host, model, ask=lambda question: False)
    results = [
        block
        for m in messages
        if m["role"] == "user" and isinstance(m["content"], list)
        for block in m["content"]
    ]
    for block in results:
        check_answer("anthropic", block)
    assert [b["tool_use_id"] for b in results] == ["t1", "t2", "t3"]
    assert payload(results[0])["errors"][0]["path"] == "$.path" and results[0]["is_error"] is True
    assert payload(results[1])["depth"] == 2 and "is_error" not in results[1]
    assert payload(results[2])["code"] == "needs_confirmation"  # the user said no


def test_mcp_shaped_loop_with_adispatch(host: SkillHost) -> None:
    async def main() -> list[dict[str, Any]]:
        calls = [{"name": "inspect", "arguments": {"path": f"/srv/{i}"}} for i in range(8)]
        calls.append({"name": "wipe", "arguments": {}})
        return [
            await_result
            for await_result in await asyncio.gather(*(host.adispatch(c, caller="ada") for c in calls))
        ]

    results = asyncio.run(main())
    for result in results:
        check_answer("mcp", result)
    assert [r["structuredContent"]["path"] for r in results[:8]] == [f"/srv/{i}" for i in range(8)]
    assert payload(results[8])["code"] == "denied"  # operator: dangerous tools are denied, not ticketed


@pytest.mark.parametrize(
    ("call", "field", "prefix"),
    [
        ({"type": "function", "function": {"name": "inspect", "arguments": "{}"}}, "tool_call_id", "call_"),
        (
            {"type": "function", "id": "", "function": {"name": "inspect", "arguments": "{}"}},
            "tool_call_id",
            "call_",
        ),
        ({"type": "function_call", "name": "inspect", "arguments": "{}"}, "call_id", "call_"),
        ({"type": "tool_use", "name": "inspect", "input": {}}, "tool_use_id", "toolu_"),
    ],
)
def test_a_call_without_an_id_gets_a_generated_one_never_an_empty_one(
    host: SkillHost, call: dict, field: str, prefix: str
) -> None:
    outcome = dispatch(host, call)
    assert outcome.call.id_generated is True
    answered = outcome.message[field]
    assert answered.startswith(prefix) and len(answered) == len(prefix) + 24
    assert answered == outcome.call.id
    assert dispatch(host, call).call.id != answered  # a fresh one per call


def test_a_call_with_an_id_keeps_it(host: SkillHost) -> None:
    outcome = dispatch(
        host, {"type": "function", "id": "c9", "function": {"name": "inspect", "arguments": "{}"}}
    )
    assert (outcome.call.id, outcome.call.id_generated, outcome.message["tool_call_id"]) == (
        "c9",
        False,
        "c9",
    )
