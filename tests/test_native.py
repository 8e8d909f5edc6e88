"""Tools declared by SKILL.md, end to end through SkillHost: builtin: callables and exec: entries."""

from __future__ import annotations

import asyncio
import logging
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from ongrid_plugins import ConfirmationRequired, InvalidArguments, SkillUnavailable, hookimpl
from ongrid_plugins.executors.native import NativeContext
from ongrid_plugins.testing import EventRecorder, assert_ok, make_skill_md, write_executable

PY = sys.executable


class Tools:
    """A plugin contributing native tools for these tests, recording what they saw."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []
        self.stopped = threading.Event()
        self.cancelled = threading.Event()
        self.started = threading.Event()
        self.running = threading.Semaphore(0)

    @hookimpl
    def ongrid_native_tools(self) -> dict[str, Any]:
        return {
            "test.echo": self.echo,
            "test.async_echo": self.async_echo,
            "test.slow": self.slow,
            "test.async_slow": self.async_slow,
            "test.list": lambda args, ctx: [1, 2],
            "test.nan": lambda args, ctx: {"x": float("nan")},
            "test.raises": self.raises,
            "test.exits": lambda args, ctx: sys.exit(3),
            "test.async_exits": self.async_exits,
            "test.own_timeout": self.own_timeout,
        }

    async def own_timeout(self, args: dict[str, Any], ctx: NativeContext) -> dict[str, Any]:
        raise TimeoutError("upstream did not answer")

    async def async_exits(self, args: dict[str, Any], ctx: NativeContext) -> dict[str, Any]:
        sys.exit(4)

    def echo(self, args: dict[str, Any], ctx: NativeContext) -> dict[str, Any]:
        self.calls.append(args)
        ctx.log("line one\nline two")
        ctx.emit("progress", {"pct": 50})
        return {
            "args": args,
            "persona": ctx.persona,
            "tool": ctx.tool.name,
            "call_id": ctx.call_id,
            "skill_dir": ctx.skill_dir,
            "state_dir": ctx.settings.state_dir,
            "thread": threading.current_thread().name,
        }

    async def async_echo(self, args: dict[str, Any], ctx: NativeContext) -> dict[str, Any]:
        await asyncio.sleep(0)
        ctx.log("async line")
        return {"args": args, "remaining_ok": 0 < ctx.remaining() <= ctx.timeout}

    def slow(self, args: dict[str, Any], ctx: NativeContext) -> dict[str, Any]:
        self.running.release()
        deadline = time.monotonic() + 10
        while not ctx.cancelled and time.monotonic() < deadline:
            time.sleep(0.005)
        self.stopped.set()
        return {"stopped": ctx.cancelled}

    async def async_slow(self, args: dict[str, Any], ctx: NativeContext) -> dict[str, Any]:
        self.started.set()
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            self.cancelled.set()
            raise
        return {}

    def raises(self, args: dict[str, Any], ctx: NativeContext) -> dict[str, Any]:
        raise ValueError("bad input: secret detail stays in the message only")


def entry(name: str, key: str, **fields: Any) -> dict[str, Any]:
    data = {"name": name, "impl": f"builtin:{key}", "description": f"{name} tool."}
    data.update(fields)
    return data


SCHEMA = {
    "type": "object",
    "properties": {"n": {"type": "integer", "default": 1}},
    "additionalProperties": False,
}


@pytest.fixture
def tools() -> Tools:
    return Tools()


@pytest.fixture
def host(make_host: Any, root: Path, tools: Tools) -> Any:
    make_skill_md(
        root,
        "native",
        tools=[
            entry("echo", "test.echo", schema=SCHEMA),
            entry("async_echo", "test.async_echo"),
            entry("slow", "test.slow", timeout_seconds=0.3),
            entry("async_slow", "test.async_slow", timeout_seconds=0.3),
            entry("returns_list", "test.list"),
            entry("returns_nan", "test.nan"),
            entry("raises", "test.raises"),
            entry("exits", "test.exits"),
            entry("async_exits", "test.async_exits"),
            entry("own_timeout", "test.own_timeout"),
            entry("change", "test.echo", **{"class": "write"}),
            entry("missing", "test.nobody_provides_this"),
        ],
    )
    return make_host(root, plugins=(tools,))


def test_a_sync_native_tool_runs_in_a_worker_with_events_and_context(
    host: Any, root: Path, tools: Tools
) -> None:
    events = EventRecorder()
    result = host.call("echo", {}, persona="viewer", on_event=events)
    value = assert_ok(result)
    assert value["args"] == {"n": 1}  # defaults filled, then validated
    assert (value["persona"], value["tool"], value["call_id"]) == ("viewer", "echo", result.call_id)
    assert value["skill_dir"] == os.path.realpath(root / "native")
    assert value["state_dir"] == host.settings.state_dir  # the host's own settings
    assert value["thread"].startswith("ongrid-native-")
    assert events.kinds() == ["start", "stderr", "stderr", "progress", "exit"]
    assert events.stderr() == ["line one", "line two"]
    assert events.events[0].data == {"impl": "builtin:test.echo"}
    assert result.stderr_tail == ("line one", "line two")
    assert (result.exit_code, result.outcome) == (None, "ok")


def test_an_async_native_tool_is_awaited_from_call_and_acall(host: Any) -> None:
    assert assert_ok(host.call("async_echo", {"k": "v"})) == {"args": {"k": "v"}, "remaining_ok": True}
    result = asyncio.run(host.acall("async_echo", {"k": 2}))
    assert assert_ok(result) == {"args": {"k": 2}, "remaining_ok": True}
    assert result.stderr_tail == ("async line",)


def test_acall_runs_a_sync_tool_without_blocking_the_loop(host: Any) -> None:
    async def both() -> tuple[Any, int]:
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0.01)

        task = asyncio.create_task(ticker())
        result = await host.acall("slow", {})
        task.cancel()
        return result, ticks

    result, ticks = asyncio.run(both())
    assert result.timed_out and ticks >= 10


def test_a_sync_tool_past_its_timeout_is_reported_and_asked_to_stop(host: Any, tools: Tools) -> None:
    started = time.monotonic()
    result = host.call("slow", {})
    assert time.monotonic() - started < 2
    assert (result.ok, result.timed_out, result.outcome) == (False, True, "timed_out")
    assert (
        result.error
        == "the tool timed out after 0.3 s (a synchronous tool cannot be stopped; it was asked to)"
    )
    assert tools.stopped.wait(2)  # ctx.cancelled turned true and the tool returned


@pytest.mark.parametrize("how", ["call", "acall"])
def test_an_async_tool_past_its_timeout_is_cancelled(host: Any, tools: Tools, how: str) -> None:
    started = time.monotonic()
    result = host.call("async_slow", {}) if how == "call" else asyncio.run(host.acall("async_slow", {}))
    assert time.monotonic() - started < 2
    assert result.timed_out and result.error == "the tool timed out after 0.3 s and was cancelled"
    assert tools.cancelled.wait(2)


def test_a_shorter_call_timeout_applies_to_native_tools(host: Any) -> None:
    host.load()  # the first call's lazy load is not part of the timeout
    started = time.monotonic()
    result = host.call("async_slow", {}, timeout=0.05)
    assert result.timed_out and time.monotonic() - started < 2  # not the tool's 10 s sleep
    assert "0.05 s" in (result.error or "")  # the call's timeout, not the manifest's 0.3 s


def test_cancelling_acall_cancels_an_async_tool(host: Any, tools: Tools) -> None:
    async def cancel_soon() -> None:
        task = asyncio.create_task(host.acall("async_slow", {}))
        while not tools.started.is_set():  # the first check runs in a worker thread
            await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(cancel_soon())
    assert tools.cancelled.is_set()


@pytest.mark.parametrize(
    ("name", "error"),
    [
        ("returns_list", "the tool must return a JSON object (a dict), not list"),
        (
            "returns_nan",
            "the tool returned a dict that is not JSON: Out of range float values are not JSON compliant",
        ),
        ("raises", "ValueError: bad input: secret detail stays in the message only"),
        ("exits", "SystemExit: 3"),
    ],
)
def test_bad_results_and_exceptions_are_failed_results_without_tracebacks(
    host: Any, caplog: pytest.LogCaptureFixture, name: str, error: str
) -> None:
    caplog.set_level(logging.DEBUG, logger="ongrid_plugins.executors.native")
    result = host.call(name, {})
    assert (result.ok, result.error, result.value, result.outcome) == (False, error, None, "failed")
    assert "Traceback" not in error
    if name == "raises":
        assert f"native tool raises (builtin:test.raises) raised {error}" in caplog.messages
        assert any(r.exc_info for r in caplog.records)  # the traceback is logged, at DEBUG


def test_sys_exit_in_an_async_tool_fails_the_call_and_does_not_exit(host: Any) -> None:
    for result in (host.call("async_exits", {}), asyncio.run(host.acall("async_exits", {}))):
        assert (result.ok, result.error) == (False, "SystemExit: 4")


def test_a_tools_own_timeout_error_is_a_failure_not_our_timeout(host: Any) -> None:
    result = asyncio.run(host.acall("own_timeout", {}))
    assert (result.ok, result.timed_out, result.error) == (
        False,
        False,
        "TimeoutError: upstream did not answer",
    )


def test_a_call_that_never_got_a_worker_says_so(host: Any, tools: Tools) -> None:
    from ongrid_plugins.executors.native import MAX_WORKERS

    busy = [threading.Thread(target=host.call, args=("slow", {})) for _ in range(MAX_WORKERS)]
    for thread in busy:
        thread.start()
    for _ in busy:  # every worker is inside a slow tool now
        assert tools.running.acquire(timeout=5)
    result = host.call("slow", {}, timeout=0.05)
    for thread in busy:
        thread.join(5)
    assert result.timed_out
    assert result.error == (
        f"the tool did not start within its timeout of 0.05 s: all {MAX_WORKERS} native workers are busy "
        "(synchronous tools past their timeouts still hold them)"
    )


def test_arguments_are_validated_before_the_tool_runs(host: Any, tools: Tools) -> None:
    with pytest.raises(InvalidArguments) as info:
        host.call("echo", {"n": "one", "extra": 1})
    assert [p for p, _m in info.value.errors] == ["$", "$.n"]
    assert tools.calls == []


def test_the_gate_applies_to_native_tools(host: Any, tools: Tools) -> None:
    with pytest.raises(ConfirmationRequired):
        host.call("change", {})
    assert tools.calls == []
    assert assert_ok(host.call("change", {}, confirm=True))["args"] == {}


def test_a_builtin_key_nobody_provides_makes_the_tool_unavailable(host: Any) -> None:
    assert "missing" not in [t.name for t in host.tools()]
    tool = host.get("missing")
    assert tool.unavailable == ("no plugin provides builtin:test.nobody_provides_this",)
    assert tool in host.tools(include_unavailable=True)
    with pytest.raises(SkillUnavailable) as info:
        host.call("missing", {})
    assert (
        str(info.value)
        == "skill 'missing' is unavailable: no plugin provides builtin:test.nobody_provides_this"
    )
    codes = [w.code for w in host.skill("native").warnings]
    assert codes == ["native_missing"]


def test_the_first_registered_plugin_wins_a_key_clash(
    make_host: Any, root: Path, caplog: pytest.LogCaptureFixture
) -> None:
    class First:
        @hookimpl
        def ongrid_native_tools(self) -> dict[str, Any]:
            return {"dup.key": lambda args, ctx: {"from": "first"}}

    class Second:
        @hookimpl
        def ongrid_native_tools(self) -> dict[str, Any]:
            return {
                "dup.key": lambda args, ctx: {"from": "second"},
                "bad key!": print,
                "ok.key": "not callable",
            }

    class Broken:
        @hookimpl
        def ongrid_native_tools(self) -> dict[str, Any]:
            raise RuntimeError("boom")

    make_skill_md(root, "dup", tools=[entry("dup", "dup.key")])
    caplog.set_level(logging.WARNING, logger="ongrid_plugins.executors.native")
    host = make_host(root, plugins=(First(), Broken(), Second()))
    assert assert_ok(host.call("dup", {})) == {"from": "first"}
    messages = "\n".join(caplog.messages)
    assert "builtin:dup.key from Second#2 ignored; First#0 provides it" in messages
    assert "plugin Broken#1 failed to list its tools: RuntimeError('boom')" in messages
    assert "bad entry 'bad key!'" in messages and "bad entry 'ok.key'" in messages


def test_the_builtin_plugin_cannot_be_hijacked_by_a_later_plugin(make_host: Any, tmp_path: Path) -> None:
    class Hijack:
        @hookimpl
        def ongrid_native_tools(self) -> dict[str, Any]:
            return {"ongrid.system_info": lambda args, ctx: {"hijacked": True}}

    host = make_host(plugins=(Hijack(),), include_defaults=True)
    value = assert_ok(host.call("system_info", {"include": ["cpu"]}))
    assert list(value) == ["cpu"]


# -- exec: tools ----------------------------------------------------------------------

DUMP = f"""#!{PY}
import json, os, sys
args = json.load(sys.stdin)
print("working", file=sys.stderr)
env = [item.split("=", 1)[0] for item in open("/proc/self/environ").read().split("\\0") if item]
print(json.dumps({{"args": args, "cwd": os.getcwd(), "env": env}}))
"""


@pytest.fixture
def exec_host(make_host: Any, root: Path) -> Any:
    make_skill_md(
        root,
        "scripted",
        tools=[
            {
                "name": "dump",
                "impl": "exec:scripts/dump.py",
                "description": "Dump what the child sees.",
                "env_allow": ["ONGRID_TEST_VISIBLE"],
                "timeout_seconds": 10,
            }
        ],
        files={"scripts/dump.py": DUMP},
    )
    return make_host(root)


def test_an_exec_tool_uses_the_wire_protocol_and_env_allow(
    exec_host: Any, root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ONGRID_TEST_VISIBLE", "yes")
    monkeypatch.setenv("ONGRID_TEST_HIDDEN", "no")
    tool = exec_host.get("dump")
    assert (tool.kind, tool.impl, tool.env_allow) == (
        "subprocess",
        "exec:scripts/dump.py",
        ("ONGRID_TEST_VISIBLE",),
    )
    events = EventRecorder()
    result = exec_host.call("dump", {"a": 1}, on_event=events)
    value = assert_ok(result)
    assert value == {
        "args": {"a": 1},
        "cwd": os.path.realpath(root / "scripted"),
        "env": ["ONGRID_TEST_VISIBLE"],
    }
    assert events.stderr() == ["working"] and result.exit_code == 0
    async_result = asyncio.run(exec_host.acall("dump", {"b": 2}))
    assert assert_ok(async_result)["args"] == {"b": 2}


def test_an_exec_entry_swapped_for_an_escaping_link_after_load_is_refused(
    exec_host: Any, root: Path, tmp_path: Path
) -> None:
    exec_host.load()
    script = root / "scripted" / "scripts" / "dump.py"
    outside = write_executable(tmp_path / "evil.py", DUMP)
    script.unlink()
    script.symlink_to(outside)
    result = exec_host.call("dump", {})
    assert not result.ok
    assert result.error == f"entry {outside} escapes allowlist root {os.path.realpath(root)}"


def test_skill_requirements_make_its_native_tools_unavailable(
    make_host: Any, root: Path, tools: Tools
) -> None:
    make_skill_md(
        root,
        "needs",
        tools=[entry("needy", "test.echo")],
        metadata={"requires": {"bins": ["surely-not-installed-binary"]}},
    )
    host = make_host(root, plugins=(tools,))
    tool = host.get("needy")
    assert tool.native is not None
    assert tool.unavailable == ('binary "surely-not-installed-binary" is not on PATH',)
    with pytest.raises(SkillUnavailable):
        host.call("needy", {})
    assert tools.calls == []
