"""OpenTelemetry (``ONGRID_OTEL``, extra ``[otel]``): spans, events and metrics per call,
read back with the real OpenTelemetry SDK's in-memory exporter and reader."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

otel_sdk = pytest.importorskip("opentelemetry.sdk.trace")

from httpserve import running  # noqa: E402
from opentelemetry import metrics, trace  # noqa: E402
from opentelemetry.sdk.metrics import MeterProvider  # noqa: E402
from opentelemetry.sdk.metrics.export import InMemoryMetricReader  # noqa: E402
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402

from ongrid_plugins import SkillHost  # noqa: E402
from ongrid_plugins.testing import isolated_settings, make_skill  # noqa: E402

SECRET = "hunter2-never-in-telemetry"
TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
TRACEPARENT = f"00-{TRACE_ID}-00f067aa0ba902b7-01"

# The global providers can be set once per process: one exporter and one reader for the module.
EXPORTER = InMemorySpanExporter()
READER = InMemoryMetricReader()
_provider = TracerProvider()
_provider.add_span_processor(SimpleSpanProcessor(EXPORTER))
trace.set_tracer_provider(_provider)
metrics.set_meter_provider(MeterProvider(metric_readers=[READER]))


@pytest.fixture
def host(tmp_path: Path) -> Iterator[SkillHost]:
    skills = tmp_path / "skills"
    make_skill(skills, "echo", schema={"type": "object", "properties": {"word": {"type": "string"}}})
    make_skill(skills, "restart", class_="mutating")
    make_skill(skills, "wipe", class_="dangerous")
    EXPORTER.clear()
    yield SkillHost(isolated_settings(tmp_path, skills, otel=True))


def spans(name: str) -> list[Any]:
    return [s for s in EXPORTER.get_finished_spans() if s.name == name]


def everything_recorded() -> str:
    """Every attribute and event of every span, as one text (to look for argument values)."""
    parts = []
    for span in EXPORTER.get_finished_spans():
        parts.append(json.dumps(dict(span.attributes or {}), default=str))
        parts += [json.dumps([e.name, dict(e.attributes or {})], default=str) for e in span.events]
    return "\n".join(parts)


def points(name: str) -> list[tuple[dict[str, Any], Any]]:
    data = READER.get_metrics_data()
    found = []
    for resource in data.resource_metrics if data else ():
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                if metric.name == name:
                    for point in metric.data.data_points:
                        found.append((dict(point.attributes), getattr(point, "value", None) or point.count))
    return found


def test_a_call_is_an_execute_tool_span_with_the_genai_attributes_and_no_argument_value(
    host: SkillHost,
) -> None:
    result = host.call("echo", {"word": SECRET})
    assert result.ok
    [span] = spans("execute_tool echo")
    attributes = dict(span.attributes)
    assert attributes["gen_ai.operation.name"] == "execute_tool"
    assert attributes["gen_ai.tool.name"] == "echo" and attributes["gen_ai.tool.type"] == "function"
    assert attributes["gen_ai.tool.call.id"] == result.call_id
    assert attributes["ongrid.tool.class"] == "safe" and attributes["ongrid.persona"] == "operator"
    assert attributes["ongrid.decision"] == "allow" and attributes["ongrid.outcome"] == "ok"
    assert attributes["ongrid.duration"] > 0 and span.end_time > span.start_time
    assert span.status.status_code is trace.StatusCode.UNSET and "error.type" not in attributes
    assert span.kind is trace.SpanKind.INTERNAL
    assert SECRET not in everything_recorded()


def test_refusals_confirmations_and_tickets_are_events_and_errors(host: SkillHost) -> None:
    host.dispatch({"name": "restart", "arguments": {"unit": SECRET}})  # needs a confirmation
    host.call("restart", {"unit": SECRET}, confirm=True)
    asked, given = spans("execute_tool restart")
    assert asked.status.status_code is trace.StatusCode.ERROR
    assert asked.attributes["error.type"] == "needs_confirmation"
    assert [(e.name, dict(e.attributes)) for e in asked.events] == [
        ("ongrid.confirmation", {"ongrid.confirmation": "asked"})
    ]
    assert [(e.name, dict(e.attributes)) for e in given.events] == [
        ("ongrid.confirmation", {"ongrid.confirmation": "given"})
    ]
    first = host.dispatch({"name": "wipe", "arguments": {"disk": SECRET}}, persona="admin", caller="alice")
    ticket = json.loads(first["content"][0]["text"])["ticket"]["id"]
    host.approve(ticket, approver="bob")
    host.approve(ticket, approver="carol")
    host.call("wipe", {"disk": SECRET}, persona="admin", caller="alice", ticket=ticket)
    opened, executed = spans("execute_tool wipe")
    assert (
        opened.attributes["ongrid.decision"] == "dual_sign"
        and opened.attributes["error.type"] == "needs_approval"
    )
    assert [(e.name, dict(e.attributes)) for e in opened.events] == [
        ("ongrid.ticket", {"ongrid.ticket": "opened", "ongrid.ticket.id": ticket})
    ]
    assert executed.attributes["ongrid.outcome"] == "ok"
    assert [(e.name, dict(e.attributes)) for e in executed.events] == [
        ("ongrid.approval", {"ongrid.ticket.id": ticket, "ongrid.approvers": 2})
    ]
    assert SECRET not in everything_recorded()


def test_metrics_count_calls_and_refusals_by_reason_and_time_runs(host: SkillHost) -> None:
    before = {json.dumps(a, sort_keys=True): v for a, v in points("ongrid.tool.refusals")}
    host.dispatch({"name": "restart", "arguments": {}}, persona="viewer")  # denied
    host.dispatch({"name": "echo", "arguments": {"word": 3}})  # invalid arguments
    host.call("echo", {})
    refusals = {json.dumps(a, sort_keys=True): v for a, v in points("ongrid.tool.refusals")}
    for tool, reason in (("restart", "denied"), ("echo", "invalid_arguments")):
        key = json.dumps({"gen_ai.tool.name": tool, "ongrid.reason": reason}, sort_keys=True)
        assert refusals[key] == before.get(key, 0) + 1
    calls = {(a["gen_ai.tool.name"], a["ongrid.outcome"]) for a, _v in points("ongrid.tool.calls")}
    assert {("restart", "denied"), ("echo", "invalid_arguments"), ("echo", "ok")} <= calls
    assert any(
        a == {"gen_ai.tool.name": "echo", "ongrid.outcome": "ok"} and n >= 1
        for a, n in points("ongrid.tool.duration")
    )


def test_rest_calls_join_the_trace_of_their_traceparent_and_ignore_a_malformed_one(
    host: SkillHost, tmp_path: Path
) -> None:
    from ongrid_plugins.server.rest import create_app
    from ongrid_plugins.server.tokens import TokenStore, add_token

    tokens_file = tmp_path / "tokens.json"
    token = add_token(str(tokens_file), "olga", "operator")
    app = create_app(host, TokenStore.from_file(str(tokens_file)))
    headers = {"Authorization": f"Bearer {token}"}
    with running(app) as url, httpx.Client(base_url=url, timeout=30) as client:
        joined = client.post(
            "/v1/skills/echo/execute", json={"params": {}}, headers={**headers, "traceparent": TRACEPARENT}
        )
        assert joined.status_code == 200, joined.text
        bad = {**headers, "traceparent": "00-not-a-trace-id-01"}
        assert client.post("/v1/skills/echo/execute", json={"params": {}}, headers=bad).status_code == 200
        streamed = client.post(
            "/v1/skills/echo/execute/stream",
            json={"params": {}},
            headers={**headers, "traceparent": TRACEPARENT},
        )
        assert streamed.status_code == 200
    first, second, third = spans("execute_tool echo")
    assert format(first.context.trace_id, "032x") == TRACE_ID
    assert format(first.parent.span_id, "016x") == "00f067aa0ba902b7"
    assert second.parent is None and format(second.context.trace_id, "032x") != TRACE_ID  # a new trace
    assert format(third.context.trace_id, "032x") == TRACE_ID


def test_mcp_calls_join_the_trace_of_their_meta(host: SkillHost) -> None:
    from mcp import Client

    from ongrid_plugins.server.mcp import create_server

    async def main() -> None:
        async with Client(create_server(host), read_timeout_seconds=30) as client:
            result = await client.call_tool("echo", {"word": SECRET}, meta={"traceparent": TRACEPARENT})
            assert not result.is_error

    anyio.run(main)
    [span] = spans("execute_tool echo")
    assert format(span.context.trace_id, "032x") == TRACE_ID
    assert span.parent is not None  # the SDK's own tools/call span, itself the client's child
    assert SECRET not in everything_recorded()


def test_without_the_setting_there_is_no_plugin_and_nothing_of_opentelemetry_is_imported(
    tmp_path: Path,
) -> None:
    make_skill(tmp_path / "skills", "echo")
    code = (
        "import sys\n"
        "from ongrid_plugins import SkillHost\n"
        "from ongrid_plugins.testing import isolated_settings\n"
        f"host = SkillHost(isolated_settings({str(tmp_path)!r}, {str(tmp_path / 'skills')!r}))\n"
        "assert host.call('echo', {}).ok\n"
        "import ongrid_plugins.server.rest\n"
        "print(sorted(m for m in sys.modules if m.startswith('opentelemetry')), host.pm.has_plugin('otel'))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "ONGRID_OTEL"}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60, check=True
    )
    assert done.stdout.split() == ["[]", "False"]
    on = subprocess.run(
        [sys.executable, "-m", "ongrid_plugins", "--no-defaults", "plugins", "--json"],
        capture_output=True,
        text=True,
        env={**env, "ONGRID_OTEL": "1"},
        timeout=60,
        check=True,
    )
    assert any(p["name"] == "otel" and p["status"] == "active" for p in json.loads(on.stdout))
