"""Hostile input from outside (issue 10): redaction, identities, plugins, packs, servers.

Each test is one reproduced attack, kept as the regression test of its fix.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ongrid_plugins import InvalidArguments, SkillHost
from ongrid_plugins.testing import make_skill

# ------------------------------------------------------- 7. lone surrogates in arguments


@pytest.fixture
def echo_host(root: Path, make_host: Any) -> SkillHost:
    make_skill(root, "echo", schema={"type": "object", "properties": {"a": {"type": "string"}}})
    return make_host(root)


@pytest.mark.parametrize("args", [{"a": "\ud800"}, {"\udfff": "x"}, {"a": ["ok", {"b": "x\ud83d"}]}])
def test_a_lone_surrogate_is_refused_with_an_audit_row(echo_host: SkillHost, args: dict[str, Any]) -> None:
    with pytest.raises(InvalidArguments, match="lone surrogate") as refused:
        echo_host.call("echo", args)
    str(refused.value).encode("utf-8")  # the message itself is UTF-8 text
    row = echo_host.audit.tail(1)[0]
    assert row.outcome == "invalid_arguments" and row.tool == "echo"


def test_dispatch_answers_a_lone_surrogate_with_an_error_result(echo_host: SkillHost) -> None:
    call = {"type": "tool_use", "id": "toolu_1", "name": "echo", "input": {"a": "\ud800"}}
    message = echo_host.dispatch(call)
    body = json.loads(message["content"])
    assert body["code"] == "invalid_arguments" and "surrogate" in json.dumps(body)
    json.dumps(message, ensure_ascii=False).encode("utf-8")
    assert echo_host.audit.tail(1)[0].outcome == "invalid_arguments"


def test_openai_arguments_text_with_an_escaped_surrogate(echo_host: SkillHost) -> None:
    call = {"id": "c", "type": "function", "function": {"name": "echo", "arguments": '{"a": "\\ud800"}'}}
    body = json.loads(echo_host.dispatch(call)["content"])
    assert body["code"] == "invalid_arguments"


# ------------------------------------------------------------- 7. no server paths in errors


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("cannot run /home/ops/skills/x/run.sh: denied", "cannot run …/run.sh: denied"),
        ("entry '/tmp/p/q' escapes root /etc/ongrid/skills", "entry '…/q' escapes root …/skills"),
        ("see https://example.com/a/b", "see https://example.com/a/b"),
        ("relative a/b/c stays", "relative a/b/c stays"),
    ],
)
def test_error_bodies_cut_absolute_paths(text: str, shown: str) -> None:
    pytest.importorskip("starlette")
    from ongrid_plugins.server.responses import ApiError

    body = json.loads(ApiError(400, "bad_request", text, reasons=[text]).response().body)
    assert body["error"] == shown and body["reasons"] == [shown]
