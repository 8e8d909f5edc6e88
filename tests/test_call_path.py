"""The call path keeps every behaviour a call needs.

The per-call hooks follow plugins added and removed, in pluggy's order (and tracing sees
them); the executor's per-tool preparation follows reloads; the audit log's
connection follows a replaced database and links every row to the one before; a
concurrent ``acall`` that spawns from a thread still kills and reaps a cancelled child.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import attrs
import pytest

from ongrid_plugins import SkillHost
from ongrid_plugins.audit.chain import GENESIS, SCHEMA, append, row_hash, row_mac
from ongrid_plugins.executors import _drivers
from ongrid_plugins.executors.subprocess import ongrid_executor
from ongrid_plugins.testing import EventRecorder, assert_ok, isolated_settings, make_skill


def test_the_host_traces_its_call_hooks_when_asked(
    tmp_path: Path, root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    make_skill(root, "echo")
    host = SkillHost(isolated_settings(tmp_path, root, trace_plugins=True))
    assert_ok(host.call("echo", {"x": 1}))
    err = capsys.readouterr().err
    for hook in ("ongrid_before_call", "ongrid_executor", "ongrid_after_call"):
        assert hook in err, hook


def test_the_per_call_hooks_follow_plugins_added_and_removed_and_keep_pluggys_order(
    tmp_path: Path, root: Path
) -> None:
    """Hooks.before_call / after_call / executor see a plugin registered after the first
    call, call in pluggy's order, pass each implementation only the arguments it names,
    stop a firstresult hook at the first answer, and let an exception out unchanged."""
    from ongrid_plugins.core.hooks import hooks
    from ongrid_plugins.hookspecs import hookimpl

    make_skill(root, "echo")
    host = SkillHost(isolated_settings(tmp_path, root))
    assert_ok(host.call("echo"))
    seen: list[tuple[str, object]] = []

    class Late:
        @hookimpl
        def ongrid_before_call(self, request: Any) -> None:
            seen.append(("late before", request.tool.name))

        @hookimpl
        def ongrid_after_call(self, result: Any) -> None:  # names only one argument
            seen.append(("late after", result.ok))

    class Earliest:
        @hookimpl(tryfirst=True)
        def ongrid_before_call(self, request: Any) -> None:
            seen.append(("earliest before", request.call_id != ""))

    class Executing:
        def __init__(self) -> None:
            self.asked: list[str] = []

        @hookimpl(tryfirst=True)
        def ongrid_executor(self, tool: Any) -> None:
            self.asked.append(tool.name)  # no answer: the next implementation decides

    late, earliest, executing = Late(), Earliest(), Executing()
    for plugin in (late, earliest, executing):
        host.pm.register(plugin)
    result = host.call("echo")
    assert_ok(result)
    assert seen == [("earliest before", True), ("late before", "echo"), ("late after", True)]
    assert executing.asked == ["echo"]

    calls = hooks(host.pm)
    seen.clear()
    calls.before_call(request=_request(host))
    assert seen == [("earliest before", True), ("late before", "echo")]

    class Raising:
        @hookimpl
        def ongrid_before_call(self, request: Any) -> None:
            raise LookupError("from the plugin")

    raising = Raising()
    host.pm.register(raising)
    seen.clear()
    with pytest.raises(LookupError, match="from the plugin"):
        calls.before_call(request=_request(host))
    assert seen == [("earliest before", True)]  # tryfirst ran, then the newest raised

    for plugin in (late, earliest, executing, raising):
        host.pm.unregister(plugin)
    seen.clear()
    assert_ok(host.call("echo"))
    assert seen == [] and executing.asked == ["echo"]

    class Answering:  # a firstresult hook stops at the first answer: the built-in is not asked
        @hookimpl(tryfirst=True)
        def ongrid_executor(self, tool: Any) -> Any:
            return _Canned()

    class Wrapper:  # a wrapper sees the executor's answer
        @hookimpl(wrapper=True)
        def ongrid_after_call(self, request: Any, result: Any) -> Any:
            seen.append(("wrapper", result.value))
            return (yield)

    answering, wrapper = Answering(), Wrapper()
    host.pm.register(answering)
    host.pm.register(wrapper)
    assert host.call("echo").value == {"canned": True}
    assert seen == [("wrapper", {"canned": True})]


class _Canned:
    def run(self, request: Any) -> Any:
        from ongrid_plugins import CallResult

        return CallResult(request.tool.name, True, value={"canned": True})


def _request(host: SkillHost) -> Any:
    from ongrid_plugins.host.pipeline import check_arguments

    tool = host.get("echo")
    persona = host.persona("operator")
    attempt = check_arguments(
        host, tool, persona, {}, caller="me", confirm=False, ticket=None, on_event=None, timeout=None
    )
    return attempt.request


def test_the_per_call_hooks_go_through_pluggy_while_monitored(tmp_path: Path, root: Path) -> None:
    """Monitoring switched on after the first call sees every per-call hook, and stops when undone."""
    make_skill(root, "echo")
    host = SkillHost(isolated_settings(tmp_path, root))
    assert_ok(host.call("echo"))
    names: list[str] = []
    undo = host.pm.add_hookcall_monitoring(lambda name, impls, kwargs: names.append(name), lambda *a: None)
    assert_ok(host.call("echo"))
    undo()
    assert {"ongrid_before_call", "ongrid_executor", "ongrid_after_call"} <= set(names)
    names.clear()
    assert_ok(host.call("echo"))
    assert names == []


def test_a_result_is_completed_in_place_only_from_an_executor_whose_class_says_it_is_fresh(
    tmp_path: Path, root: Path
) -> None:
    """The built-in executor's result gets the decision and call id in place; a plugin's
    executor (or a subclass of the built-in one, which may keep its results) that hands
    back a shared object gets a copy, and the shared object stays as it was."""
    from ongrid_plugins import CallResult
    from ongrid_plugins.executors.subprocess import SubprocessExecutor
    from ongrid_plugins.hookspecs import hookimpl

    make_skill(root, "echo", script="#!/bin/sh\necho '{\"v\": 1}'\n")
    host = SkillHost(isolated_settings(tmp_path, root))
    result = host.call("echo")
    assert result.decision is not None and result.decision.verdict.value == "allow"
    assert result.call_id and result.value == {"v": 1}
    assert host.audit.entries(call_id=result.call_id)[0].verdict == "allow"

    shared = CallResult("echo", True, value={"shared": True})

    class Keeping:
        def run(self, request: Any) -> CallResult:
            return shared

        async def arun(self, request: Any) -> CallResult:
            return shared

    class KeepingSubclass(SubprocessExecutor):
        def run(self, request: Any) -> CallResult:
            return shared

    for executor in (Keeping(), KeepingSubclass(1024, 1.0)):

        class Plugin:
            def __init__(self, executor: object) -> None:
                self.executor = executor

            @hookimpl(tryfirst=True)
            def ongrid_executor(self, tool: Any) -> Any:
                return self.executor

        plugin = Plugin(executor)
        host.pm.register(plugin)
        first, second = host.call("echo"), host.call("echo")
        host.pm.unregister(plugin)
        assert first is not shared and second is not shared
        assert first.decision is not None and first.call_id != second.call_id
        assert (shared.decision, shared.call_id) == (None, "")


# ------------------------------------------------------------------ the executor


def test_the_executor_follows_a_reload(tmp_path: Path, root: Path) -> None:
    make_skill(root, "echo", script="#!/bin/sh\necho '{\"v\": 1}'\n")
    host = SkillHost(isolated_settings(tmp_path, root))
    assert host.call("echo").value == {"v": 1}
    executor = ongrid_executor(host.get("echo"), host.settings)
    assert executor is not None
    # Another entry in another folder: a reload makes a new tool the cache must not confuse.
    (root / "echo" / "skill.json").write_text(
        '{"name": "echo", "description": "d", "entry": "bin/other.sh"}', encoding="utf-8"
    )
    (root / "echo" / "bin").mkdir()
    other = root / "echo" / "bin" / "other.sh"
    other.write_text("#!/bin/sh\necho '{\"v\": 2}'\n", encoding="utf-8")
    other.chmod(0o755)
    host.reload()
    assert host.call("echo").value == {"v": 2}
    assert executor.run(_request(host)).value == {"v": 2}  # an executor made before the reload too


def test_the_executors_spec_is_the_one_processspec_builds_and_bad_limits_still_raise(
    tmp_path: Path, root: Path
) -> None:
    """Each call's spec is ProcessSpec's, field for field; an executor with limits
    ProcessSpec refuses gets ProcessSpec's error."""

    from ongrid_plugins.executors._spec import ProcessSpec
    from ongrid_plugins.executors.subprocess import SubprocessExecutor, _release

    make_skill(root, "echo")
    host = SkillHost(isolated_settings(tmp_path, root))
    request = _request(host)
    spec = SubprocessExecutor(4096, 0.5)._spec(request)
    assert isinstance(spec, ProcessSpec)
    try:
        assert spec == ProcessSpec(**attrs.asdict(spec, recurse=False))
        assert spec.argv == (host.get("echo").entry,) and spec.stdout_cap == 4096 and spec.kill_grace == 0.5
        assert spec.stdin == request.args_json.encode() and spec.timeout == host.get("echo").timeout
        assert spec.cwd == str(Path(spec.argv[0]).parent) and spec.env == {}
        confined = request.sandbox is not None and request.sandbox.confined
        assert (spec.confine is not None) == confined
        assert spec.exec_fd is not None and os.path.samefile(f"/proc/self/fd/{spec.exec_fd}", spec.argv[0])
    finally:
        _release(spec)
    entry = spec.argv[0]
    for cap, grace in ((-1, 1.0), (1024, -0.5), (1024, float("nan"))):
        with pytest.raises(ValueError, match="limits must be >= 0"):
            SubprocessExecutor(cap, grace).run(request)
    executor = SubprocessExecutor(4096, 0.5)
    for timeout in (-1.0, float("nan")):  # a tool a plugin built by hand, unchecked
        odd = attrs.evolve(request, tool=attrs.evolve(request.tool, timeout=timeout))
        with pytest.raises(ValueError, match="limits must be >= 0"):
            executor.run(odd)
    with pytest.raises(TypeError):
        executor.run(attrs.evolve(request, tool=attrs.evolve(request.tool, timeout=None)))
    with pytest.raises(UnicodeEncodeError):  # a lone surrogate cannot be the child's stdin
        executor.run(attrs.evolve(request, args_json=b'{"x":"\\ud800"}'.decode("unicode_escape")))
    assert _open_copies(entry) == 0  # the entry's descriptor is closed every time


def _open_copies(path: str) -> int:
    """How many of this process's descriptors are open on ``path`` (other threads' come and go)."""
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):  # closed meanwhile
            count += os.readlink(f"/proc/self/fd/{fd}") == path
    return count


# ------------------------------------------------------------------ the audit log's writes


def test_each_appended_row_links_to_the_one_before_and_carries_its_hmac(tmp_path: Path) -> None:
    rows = [{"time": float(i), "call_id": f"c{i}", "tool": "t", "args": "{}"} for i in range(5)]
    key = b"k" * 32
    conn = sqlite3.connect(tmp_path / "one.db", isolation_level=None)
    conn.executescript(SCHEMA)
    conn.execute("BEGIN")
    assert [append(conn, row, key) for row in rows] == [1, 2, 3, 4, 5]
    conn.commit()
    entries = conn.execute("SELECT * FROM entries ORDER BY seq").fetchall()
    macs = dict(conn.execute("SELECT seq, mac FROM macs").fetchall())
    assert conn.execute("SELECT seq, hash FROM head").fetchall() == [(5, entries[-1][-1])]
    conn.close()
    assert entries[0][-2] == GENESIS
    for before, row in itertools.pairwise(entries):
        assert row[-2] == before[-1]
    for row in entries:
        assert row[-1] == row_hash(list(row[:-1])) and macs[row[0]] == row_mac(key, row[-1])


def test_the_log_holds_the_database_open_until_it_is_closed(tmp_path: Path, root: Path) -> None:
    make_skill(root, "echo")
    host = SkillHost(isolated_settings(tmp_path, root))
    for n in range(3):
        assert_ok(host.call("echo", {"n": n}))
    host.audit.close()
    held = [os.readlink(f"/proc/self/fd/{fd}") for fd in os.listdir("/proc/self/fd") if _is_link(fd)]
    assert not [path for path in held if path.startswith(host.audit.path)]
    assert_ok(host.call("echo", {"n": 3}))  # the next call reconnects
    assert [entry.args for entry in host.audit.entries()] == [{"n": n} for n in range(4)]
    assert host.audit.verify().ok


def _is_link(fd: str) -> bool:
    try:
        os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return False
    return True


def test_the_argument_text_in_the_audit_row_is_the_canonical_one(tmp_path: Path, root: Path) -> None:
    make_skill(root, "echo")
    host = SkillHost(isolated_settings(tmp_path, root))
    assert_ok(host.call("echo", {"b": [1, 2.5, "é"], "a": {"y": None, "x": True}}))
    assert host.audit.flush()
    with sqlite3.connect(host.audit.path) as conn:
        args, redacted, approvers, stderr = conn.execute(
            "SELECT args, redacted, approvers, stderr_tail FROM entries"
        ).fetchone()
    assert args == '{"a":{"x":true,"y":null},"b":[1,2.5,"é"]}'
    assert (redacted, approvers, stderr) == ("[]", "[]", "[]")


# ------------------------------------------------------------------ concurrent acall


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat", encoding="ascii") as f:
        return f.read().split(")")[1].split()[0] != "Z"


def test_concurrent_acalls_spawn_aside_and_a_cancelled_one_is_killed(tmp_path: Path, root: Path) -> None:
    make_skill(root, "forever", script="#!/bin/sh\necho $$ >&2\nexec /bin/sleep 60\n")
    make_skill(root, "echo")
    host = SkillHost(isolated_settings(tmp_path, root, kill_grace=0.2))
    host.load()
    events = EventRecorder()

    async def main() -> list[Any]:
        holder = asyncio.ensure_future(host.acall("forever", on_event=events))
        while not events.stderr():  # one call in flight: the next ones spawn in a thread
            await asyncio.sleep(0.01)
        echoes = [asyncio.ensure_future(host.acall("echo", {"i": i})) for i in range(6)]
        done = await asyncio.gather(*echoes)
        holder.cancel()
        with pytest.raises(asyncio.CancelledError):
            await holder
        return done

    results = asyncio.run(main())
    assert [r.value for r in results] == [{"i": i} for i in range(6)]
    assert _drivers._spawners is not None
    assert not _alive(int(events.stderr()[0]))


def test_a_call_cancelled_while_it_spawns_aside_leaves_no_process(tmp_path: Path, root: Path) -> None:
    make_skill(root, "forever", script="#!/bin/sh\necho $$ >&2\nexec /bin/sleep 60\n")
    host = SkillHost(isolated_settings(tmp_path, root, kill_grace=0.2))
    host.load()
    first, second = EventRecorder(), EventRecorder()

    async def main() -> None:
        holder = asyncio.ensure_future(host.acall("forever", on_event=first))
        while not first.stderr():
            await asyncio.sleep(0.01)
        for delay in (0.0, 0.0005, 0.002, 0.01):
            victim = asyncio.ensure_future(host.acall("forever", on_event=second))
            await asyncio.sleep(delay)
            victim.cancel()
            with pytest.raises(asyncio.CancelledError):
                await victim
        holder.cancel()
        with pytest.raises(asyncio.CancelledError):
            await holder

    asyncio.run(main())
    pids = [int(line) for line in first.stderr() + second.stderr() if line.strip().isdigit()]
    assert pids and not any(_alive(pid) for pid in pids)
    # Every call that started has its row, cancelled ones included.
    assert host.audit.flush()
    outcomes = [entry.outcome for entry in host.audit.entries()]
    assert len(outcomes) == 5 and set(outcomes) == {"cancelled"}


# ------------------------------------------------------------------ a host killed after its calls

KILLED_AFTER_CALLS = r"""
import os, signal, sys
from ongrid_plugins import SkillHost
from ongrid_plugins.testing import isolated_settings
tmp, root = sys.argv[1:3]
host = SkillHost(isolated_settings(tmp, root))
ids = [host.call("echo", {"n": n, "secret_token": "hunter2"}).call_id for n in range(3)]
failed = host.call("fails", {"n": 9})
print(" ".join([*ids, failed.call_id]), flush=True)
os.kill(os.getpid(), signal.SIGKILL)  # no exit handler runs
"""


def test_calls_finished_before_a_sigkill_are_in_the_chain_whole(tmp_path: Path, root: Path) -> None:
    make_skill(root, "echo")
    make_skill(root, "fails", script="#!/bin/sh\necho 'disk full' >&2\nexit 3\n")
    # The same calls in a host that lives: the rows the killed one must have left, column by column.
    alive = SkillHost(isolated_settings(tmp_path / "alive", root))
    for n in range(3):
        alive.call("echo", {"n": n, "secret_token": "hunter2"})
    alive.call("fails", {"n": 9})
    expected = [_comparable(entry.to_dict()) for entry in alive.audit.entries()]

    out = subprocess.run(
        [sys.executable, "-c", KILLED_AFTER_CALLS, str(tmp_path), str(root)], capture_output=True, text=True
    )
    assert out.returncode == -9, out.stderr
    call_ids = out.stdout.split()

    host = SkillHost(isolated_settings(tmp_path, root))
    rows = host.audit.entries()
    assert [row.call_id for row in rows] == call_ids
    assert [_comparable(row.to_dict()) for row in rows] == expected
    assert all(row.sandbox and row.skill_digest for row in rows)
    assert all(row.args["secret_token"] == "[redacted]" for row in rows[:3])
    report = host.audit.verify()
    assert (report.ok, report.inflight) == (True, ())


def _comparable(row: dict[str, Any]) -> dict[str, Any]:
    """A row without what differs between two runs of the same calls."""
    # (the sandbox profile names the state folder, which differs between the two hosts)
    varying = {"seq", "time", "call_id", "duration", "pid", "hash", "prev_hash", "caller", "sandbox"}
    return {key: value for key, value in row.items() if key not in varying}


def test_the_in_flight_record_holds_only_columns_of_the_row() -> None:
    from ongrid_plugins.audit.chain import COLUMNS
    from ongrid_plugins.audit.inflight import START_COLUMNS

    assert set(START_COLUMNS) <= set(COLUMNS[1:-1])


@pytest.mark.parametrize("thread_ends", ["after the cancellation", "before the coroutine resumes"])
def test_an_acall_cancelled_again_and_again_while_it_begins_in_a_thread_is_recorded_cancelled(
    tmp_path: Path, root: Path, thread_ends: str
) -> None:
    """The attack (an MCP client closing stdin right after a tools/call): anyio delivers the
    cancellation at every await, so the coroutine never saw the thread's attempt, whose
    start the audit log had recorded: the call stayed in flight, then 'interrupted'."""
    import threading

    import anyio

    from ongrid_plugins.hookspecs import hookimpl

    make_skill(root, "echo")  # its first acall begins in a worker thread (no validator yet)
    host = SkillHost(isolated_settings(tmp_path, root))
    host.load()
    entered, release = threading.Event(), threading.Event()

    class Slow:
        @hookimpl(trylast=True)
        def ongrid_before_call(self, request: Any) -> None:
            entered.set()
            release.wait(10)

    host.pm.register(Slow())

    async def main() -> None:
        with anyio.CancelScope() as scope:
            async with anyio.create_task_group() as group:

                async def cancel_once_begun() -> None:
                    await anyio.to_thread.run_sync(entered.wait, 10)
                    if thread_ends == "before the coroutine resumes":
                        release.set()
                        time.sleep(0.2)  # the thread is done; the loop has not run its callback
                    scope.cancel()

                group.start_soon(cancel_once_begun)
                await host.acall("echo", {})
        release.set()

    anyio.run(main)
    [entry] = host.audit.entries()
    assert (entry.tool, entry.outcome, entry.error) == (
        "echo",
        "cancelled",
        "the call was interrupted: CancelledError",
    )
