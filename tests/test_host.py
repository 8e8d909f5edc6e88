"""SkillHost: the call pipeline end to end, with real subprocesses."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from ongrid_plugins import (
    CallResult,
    ConfigError,
    ConfirmationRequired,
    InvalidArguments,
    PermissionDenied,
    SkillHost,
    UnknownPersona,
    UnknownSkill,
    hookimpl,
)
from ongrid_plugins.testing import EventRecorder, assert_ok, make_skill, write_executable

PY = sys.executable

DUMP_PY = f"""#!{PY}
import json, os, sys
raw = sys.stdin.read()
env = dict(item.split("=", 1) for item in open("/proc/self/environ").read().split("\\0") if item)
print(json.dumps({{"stdin": raw, "argv": sys.argv[1:], "cwd": os.getcwd(), "env": env}}))
"""


def dump_skill(root: Path, name: str = "dump", **fields: Any) -> Path:
    return make_skill(root, name, script=DUMP_PY, entry="run.py", **fields)


def test_missing_args_mean_an_empty_object(make_host: Any, root: Path) -> None:
    make_skill(root, "echo")
    host = make_host(root)
    assert host.call("echo").value == {}
    assert host.call("echo", None).value == {}


def test_top_level_defaults_are_filled_before_the_child_reads_them(make_host: Any, root: Path) -> None:
    schema = {
        "type": "object",
        "required": ["path"],
        "properties": {
            "path": {"type": "string"},
            "dry_run": {"type": "boolean", "default": True},
            "tags": {"type": "array", "default": []},
        },
    }
    make_skill(root, "disk_cleaner", schema=schema, class_="mutating")
    host = make_host(root)
    result = host.call("disk_cleaner", {"path": "/var/cache"}, confirm=True)
    assert result.value == {"path": "/var/cache", "dry_run": True, "tags": []}


def test_invalid_arguments_list_every_error_with_its_path_and_start_no_process(
    make_host: Any, root: Path, tmp_path: Path
) -> None:
    marker = tmp_path / "ran"
    schema = {
        "type": "object",
        "required": ["path"],
        "additionalProperties": False,
        "properties": {"path": {"type": "string"}, "count": {"type": "integer", "minimum": 1}},
    }
    make_skill(root, "strict", schema=schema, script=f"#!/bin/sh\n: > {marker}\necho '{{}}'\n")
    host = make_host(root)
    with pytest.raises(InvalidArguments) as info:
        host.call("strict", {"count": 0, "extra": 1})
    paths = [path for path, _msg in info.value.errors]
    assert paths == ["$", "$", "$.count"]
    assert any("'path' is a required property" in m for _p, m in info.value.errors)
    assert any(
        "Additional properties are not allowed ('extra' was unexpected)" in m for _p, m in info.value.errors
    )
    assert not marker.exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([1, 2], "arguments must be a JSON object, got list"),
        ("{}", "arguments must be a JSON object, got str"),
        ({"x": float("nan")}, "arguments are not valid JSON"),
        ({"x": {1, 2}}, "arguments are not valid JSON"),
        ({"a": "x", "b": [1, {2: 3}]}, "is not of type 'string'"),
    ],
    ids=["list", "string", "nan", "set", "nested"],
)
def test_non_json_arguments_are_invalid_not_a_crash(
    make_host: Any, root: Path, args: Any, message: str
) -> None:
    make_skill(root, "echo", schema={"type": "object", "additionalProperties": {"type": "string"}})
    host = make_host(root)
    with pytest.raises(InvalidArguments) as info:
        host.call("echo", args)
    assert message in str(info.value)


def test_arguments_reach_the_skill_as_plain_json(make_host: Any, root: Path) -> None:
    make_skill(root, "echo")
    host = make_host(root)
    assert host.call("echo", {"t": (1, 2)}).value == {"t": [1, 2]}
    assert host.call("echo", {3: "int key"}).value == {"3": "int key"}


def test_hugely_nested_arguments_are_refused_cleanly(make_host: Any, root: Path) -> None:
    make_skill(root, "echo")
    nested: Any = []
    for _ in range(100_000):
        nested = [nested]
    with pytest.raises(InvalidArguments, match=r"not valid JSON|nested too deeply"):
        make_host(root).call("echo", {"x": nested})


def test_unknown_skill_suggests_close_names(make_host: Any, root: Path) -> None:
    make_skill(root, "disk_usage_report")
    with pytest.raises(UnknownSkill, match="did you mean 'disk_usage_report'"):
        make_host(root).call("disk_usage_reprot")


def test_child_gets_exactly_env_allow_and_nothing_else(
    make_host: Any, root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ONGRID_TEST_SECRET", "hunter2")
    monkeypatch.setenv("ALLOWED_ONE", "yes")
    monkeypatch.delenv("NOT_SET_ANYWHERE", raising=False)
    dump_skill(root, "allowed", env_allow=["ALLOWED_ONE", "NOT_SET_ANYWHERE"])
    dump_skill(root, "bare")
    host = make_host(root)
    assert host.call("allowed").value["env"] == {"ALLOWED_ONE": "yes"}
    assert host.call("bare").value["env"] == {}


def test_the_hosts_own_secrets_never_reach_a_skill_that_lists_them(
    make_host: Any, root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The attack: a safe skill listing ONGRID_TOKEN got the approvals bearer token, and
    ONGRID_BROKER_URL the broker's password."""
    secrets = {
        "ONGRID_TOKEN": "bearer-secret",
        "ONGRID_BROKER_URL": "redis://:pw@127.0.0.1:1/0",
        "ONGRID_APPROVALS_URL": "https://user:pw@127.0.0.1:1",
    }
    for name, value in secrets.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("ONGRID_HOST_FILES_DIRS", "/var/log")
    dump_skill(root, "greedy", env_allow=[*secrets, "ONGRID_HOST_FILES_DIRS"])
    assert make_host(root).call("greedy").value["env"] == {"ONGRID_HOST_FILES_DIRS": "/var/log"}


def test_args_travel_only_on_stdin_and_cwd_is_the_manifest_folder(make_host: Any, root: Path) -> None:
    folder = dump_skill(root)
    value = make_host(root).call("dump", {"secret": "s3cr3t"}).value
    assert value["argv"] == []
    assert json.loads(value["stdin"]) == {"secret": "s3cr3t"}
    assert value["cwd"] == os.path.realpath(folder)


def test_a_failing_skill_is_a_result_with_exit_code_and_stderr_tail(make_host: Any, root: Path) -> None:
    make_skill(
        root,
        "fails",
        script='#!/bin/sh\necho "step 1" >&2\necho "disk full" >&2\n'
        'echo \'{"error": "disk full"}\'\nexit 3\n',
    )
    result = make_host(root).call("fails")
    assert (result.ok, result.exit_code, result.signal) == (False, 3, None)
    assert result.stderr_tail == ("step 1", "disk full")
    assert result.value == {"error": "disk full"}
    assert result.error == "the skill exited with status 3: disk full"
    assert result.outcome == "failed"


@pytest.mark.parametrize(
    ("stdout", "fragment"),
    [
        ("", "printed nothing on stdout"),
        ("not json at all", "stdout is not one JSON object"),
        ("[1, 2, 3]", "stdout must be a JSON object, not list"),
        ('{"a": 1}\\n{"b": 2}', "stdout is not one JSON object"),
        ('{"a": NaN}', "stdout is not one JSON object"),
        ('{"a": ' + "[" * 5000 + "]" * 5000 + "}", "stdout is nested too deeply to read (print a flatter"),
    ],
    ids=["empty", "text", "array", "two_objects", "nan", "too_deep"],
)
def test_bad_output_fails_with_the_first_bytes_quoted(
    make_host: Any, root: Path, stdout: str, fragment: str
) -> None:
    make_skill(root, "bad", script=f"#!/bin/sh\nprintf '{stdout}'\n")
    result = make_host(root).call("bad")
    assert not result.ok
    assert fragment in str(result.error)


def test_a_lone_surrogate_escape_on_stdout_fails_the_call_and_keeps_its_audit_row(
    make_host: Any, root: Path
) -> None:
    """``"\\udcff"`` is valid JSON but no UTF-8: the audit row lost its digest over it (the
    after-call hook raised, the row never reached the chain). Now the call fails, naming
    where, and its row is chained; a surrogate pair escape is plain UTF-8 and passes."""
    make_skill(root, "lone", script='#!/bin/sh\ncat >/dev/null\necho \'{"x": ["ok", "\\udcff"]}\'\n')
    make_skill(root, "pair", script='#!/bin/sh\ncat >/dev/null\necho \'{"y": "\\ud83d\\ude00"}\'\n')
    host = make_host(root)
    lone = host.call("lone")
    assert (lone.ok, lone.value) == (False, None)
    assert "stdout holds a lone surrogate at $.x[1]" in str(lone.error)
    assert "escaping surrogates only in pairs" in str(lone.error)
    pair = host.call("pair")
    assert (pair.ok, pair.value) == (True, {"y": "\U0001f600"})
    assert host.audit.flush()
    assert host.audit.verify().ok
    assert [(e.tool, e.outcome) for e in host.audit.entries()][-2:] in (
        [("lone", "failed"), ("pair", "ok")],
        [("pair", "ok"), ("lone", "failed")],
    )


def test_binary_garbage_on_stdout_fails_cleanly(make_host: Any, root: Path) -> None:
    make_skill(root, "garbage", script=f"#!{PY}\nimport os\nos.write(1, bytes(range(256)) * 4)\n")
    result = make_host(root).call("garbage")
    assert not result.ok
    assert "stdout is not one JSON object (invalid UTF-8 at byte 128)" in str(result.error)
    assert "starts with b'\\x00\\x01" in str(result.error)


def test_stdout_over_the_cap_kills_the_skill(make_host: Any, root: Path) -> None:
    make_skill(root, "flood", script=f"#!{PY}\nimport sys\nwhile True: sys.stdout.write('x' * 65536)\n")
    started = time.monotonic()
    result = make_host(root, stdout_cap=1024 * 1024).call("flood")
    assert not result.ok
    assert result.error == "the skill printed more than the stdout cap of 1 MiB; it was killed"
    assert time.monotonic() - started < 10


def test_timeout_kills_the_skill_and_its_grandchildren(make_host: Any, root: Path) -> None:
    script = '#!/bin/sh\n/bin/sleep 60 &\necho "child $!" >&2\n/bin/sleep 60\n'
    make_skill(root, "sleepy", script=script)
    recorder = EventRecorder()
    result = make_host(root, kill_grace=0.2).call("sleepy", timeout=0.5, on_event=recorder)
    assert result.timed_out and not result.ok
    assert result.error == "the skill timed out after 0.5 s and was killed"
    grandchild = int(recorder.stderr()[0].split()[1])
    assert not _alive(grandchild)


def _alive(pid: int, settle: float = 2.0) -> bool:
    """Whether pid is still a live process; a signal already sent gets ``settle`` seconds to land."""
    deadline = time.monotonic() + settle
    while _running(pid) and time.monotonic() < deadline:
        time.sleep(0.02)
    return _running(pid)


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    status = Path(f"/proc/{pid}/stat").read_text().split()[2] if Path(f"/proc/{pid}/stat").exists() else "X"
    return status not in ("Z", "X")


def test_events_stream_stderr_lines_as_they_arrive(make_host: Any, root: Path) -> None:
    make_skill(root, "slow", script="#!/bin/sh\necho one >&2\n/bin/sleep 0.5\necho two >&2\necho '{}'\n")
    seen: list[tuple[str, float]] = []
    start = time.monotonic()

    def on_event(event: Any) -> None:
        seen.append(
            (event.kind if event.kind != "stderr" else f"stderr:{event.data}", time.monotonic() - start)
        )

    result = make_host(root).call("slow", on_event=on_event)
    assert result.ok
    assert [kind for kind, _t in seen] == ["start", "stderr:one", "stderr:two", "exit"]
    assert seen[1][1] < seen[2][1] - 0.3


def test_a_raising_event_callback_does_not_break_the_call(make_host: Any, root: Path) -> None:
    make_skill(root, "chatty", script="#!/bin/sh\necho hi >&2\necho '{\"ok\": 1}'\n")

    def explode(event: Any) -> None:
        raise RuntimeError("callback bug")

    assert make_host(root).call("chatty", on_event=explode).value == {"ok": 1}


def test_entry_swapped_for_an_escaping_symlink_after_load_is_refused(make_host: Any, root: Path) -> None:
    folder = make_skill(root, "swapped")
    host = make_host(root)
    host.load()
    (folder / "run.sh").unlink()
    (folder / "run.sh").symlink_to("/bin/sh")
    result = host.call("swapped")
    assert not result.ok
    assert (
        result.error == f"entry {os.path.realpath('/bin/sh')} escapes allowlist root {os.path.realpath(root)}"
    )


def test_entry_deleted_or_made_unexecutable_after_load_is_refused(make_host: Any, root: Path) -> None:
    folder = make_skill(root, "gone")
    make_skill(root, "noexec")
    host = make_host(root)
    host.load()
    (folder / "run.sh").unlink()
    (root / "noexec" / "run.sh").chmod(0o644)
    assert "is gone" in str(host.call("gone").error)
    assert "no longer an executable file" in str(host.call("noexec").error)


def test_concurrent_calls_from_threads_all_succeed(make_host: Any, root: Path) -> None:
    make_skill(root, "echo")
    host = make_host(root)
    host.load()
    results: list[CallResult] = []
    lock = threading.Lock()

    def worker(n: int) -> None:
        for i in range(10):
            r = host.call("echo", {"n": n, "i": i})
            with lock:
                results.append(r)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 80
    assert sorted((r.value["n"], r.value["i"]) for r in results) == [
        (n, i) for n in range(8) for i in range(10)
    ]


def test_concurrent_async_calls_all_succeed(make_host: Any, root: Path) -> None:
    make_skill(root, "echo")
    host = make_host(root)

    async def main() -> list[CallResult]:
        return await asyncio.gather(*(host.acall("echo", {"i": i}) for i in range(30)))

    results = asyncio.run(main())
    assert [r.value["i"] for r in results] == list(range(30))


def test_cancelling_acall_kills_the_skill(make_host: Any, root: Path, tmp_path: Path) -> None:
    # A safe skill may not write a pid file: it says its pid on stderr instead.
    make_skill(root, "forever", script="#!/bin/sh\necho $$ >&2\nexec /bin/sleep 60\n")
    host = make_host(root, kill_grace=0.2)
    host.load()
    events = EventRecorder()

    async def main() -> None:
        task = asyncio.ensure_future(host.acall("forever", on_event=events))
        while not events.stderr():
            await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    assert not _alive(int(events.stderr()[0]))


class Started:
    """A plugin that says when a call is past its lookup (its before_call hooks run)."""

    def __init__(self) -> None:
        self.event = threading.Event()

    @hookimpl
    def ongrid_before_call(self, request: Any) -> None:
        self.event.set()


def test_reload_during_a_call_does_not_disturb_it(make_host: Any, root: Path) -> None:
    make_skill(root, "slow", script="#!/bin/sh\n/bin/sleep 0.4\necho '{\"v\": 1}'\n")
    started = Started()
    host = make_host(root, plugins=(started,))
    host.load()
    out: list[CallResult] = []
    t = threading.Thread(target=lambda: out.append(host.call("slow")))
    t.start()
    assert started.event.wait(10)  # the call has its snapshot
    (root / "slow" / "skill.json").unlink()
    host.reload()
    t.join()
    assert out[0].value == {"v": 1}
    with pytest.raises(UnknownSkill):
        host.get("slow")


# ---------------------------------------------------------------- the gate


def test_mutating_needs_a_confirmation_bound_to_the_exact_arguments(make_host: Any, root: Path) -> None:
    make_skill(root, "mutate", class_="mutating")
    host = make_host(root)
    with pytest.raises(ConfirmationRequired) as info:
        host.call("mutate", {"path": "/a"})
    digest = info.value.args_digest
    assert host.call("mutate", {"path": "/a"}, confirm=digest).ok
    with pytest.raises(ConfirmationRequired):
        host.call("mutate", {"path": "/b"}, confirm=digest)
    assert host.call("mutate", {"path": "/b"}, confirm=True).ok


def test_viewer_may_not_run_mutating_and_the_reason_names_the_rule(make_host: Any, root: Path) -> None:
    make_skill(root, "mutate", class_="mutating")
    with pytest.raises(PermissionDenied) as info:
        make_host(root).call("mutate", persona="viewer", confirm=True)
    assert info.value.decision.plugin == "ongrid.gate"
    assert "persona viewer is read-only" in str(info.value)


def test_dangerous_is_refused_with_the_two_person_rule(make_host: Any, root: Path) -> None:
    make_skill(root, "wipe", class_="dangerous")
    host = make_host(root)
    with pytest.raises(PermissionDenied, match="dual-sign-required"):
        host.call("wipe", persona="operator", confirm=True)
    with pytest.raises(PermissionDenied, match="two-person approval"):
        host.call("wipe", persona="admin", confirm=True)


def test_unknown_persona_is_an_error_not_a_fallback(make_host: Any, root: Path) -> None:
    make_skill(root, "echo")
    with pytest.raises(UnknownPersona, match="known personas: admin, operator, viewer"):
        make_host(root).call("echo", persona="root")


def test_tools_for_a_persona_hide_what_it_may_never_call(make_host: Any, root: Path) -> None:
    make_skill(root, "look")
    make_skill(root, "change", class_="mutating")
    make_skill(root, "destroy", class_="dangerous")
    host = make_host(root)
    assert [t.name for t in host.tools("viewer")] == ["look"]
    assert [t.name for t in host.tools("operator")] == ["change", "look"]
    assert [t.name for t in host.tools("admin")] == ["change", "destroy", "look"]


def test_a_plugin_vote_can_tighten_but_never_loosen(make_host: Any, root: Path) -> None:
    from ongrid_plugins import Decision, Verdict

    class Permissive:
        @hookimpl
        def ongrid_check_permission(self, tool: Any) -> Decision:
            return Decision(Verdict.ALLOW, "everything goes", "permissive")

    class NoFridays:
        @hookimpl
        def ongrid_check_permission(self, tool: Any) -> Decision | None:
            if tool.name == "look":
                return Decision(Verdict.DENY, "not on fridays", "no_fridays")
            return None

    make_skill(root, "look")
    make_skill(root, "change", class_="mutating")
    host = make_host(root, plugins=(Permissive(), NoFridays()))
    with pytest.raises(PermissionDenied, match="denied by no_fridays: not on fridays"):
        host.call("look")
    with pytest.raises(ConfirmationRequired):
        host.call("change")


def test_before_and_after_hooks_see_every_attempt_including_refused_ones(make_host: Any, root: Path) -> None:
    seen: list[tuple[str, str, str]] = []

    class Audit:
        @hookimpl
        def ongrid_before_call(self, request: Any) -> None:
            seen.append(("before", request.tool.name, request.persona.name))

        @hookimpl
        def ongrid_after_call(self, request: Any, result: CallResult) -> None:
            seen.append(("after", request.tool.name, result.outcome))

    make_skill(root, "echo", schema={"type": "object", "properties": {"n": {"type": "integer"}}})
    make_skill(root, "mutate", class_="mutating")
    host = make_host(root, plugins=(Audit(),))
    host.call("echo", {"n": 1})
    with pytest.raises(InvalidArguments):
        host.call("echo", {"n": "x"})
    with pytest.raises(ConfirmationRequired):
        host.call("mutate")
    with pytest.raises(PermissionDenied):
        host.call("mutate", persona="viewer")
    assert seen == [
        ("before", "echo", "operator"),
        ("after", "echo", "ok"),
        ("before", "echo", "operator"),
        ("after", "echo", "invalid_arguments"),
        ("before", "mutate", "operator"),
        ("after", "mutate", "needs_confirmation"),
        ("before", "mutate", "viewer"),
        ("after", "mutate", "denied"),
    ]


def test_a_plugin_executor_can_take_over_a_tool(make_host: Any, root: Path) -> None:
    class Remote:
        def run(self, request: Any) -> CallResult:
            return CallResult(request.tool.name, True, {"ran": "remotely", "args": dict(request.args)})

        async def arun(self, request: Any) -> CallResult:
            return self.run(request)

    class Router:
        @hookimpl
        def ongrid_executor(self, tool: Any) -> Remote | None:
            return Remote() if tool.name == "routed" else None

    make_skill(root, "routed")
    make_skill(root, "local")
    host = make_host(root, plugins=(Router(),))
    assert host.call("routed", {"a": 1}).value == {"ran": "remotely", "args": {"a": 1}}
    assert asyncio.run(host.acall("routed")).value["ran"] == "remotely"
    assert host.call("local", {"a": 1}).value == {"a": 1}


@pytest.mark.parametrize("timeout", [0, -1, "5", True, float("nan")])
def test_bad_timeout_override_is_a_config_error(make_host: Any, root: Path, timeout: Any) -> None:
    make_skill(root, "echo")
    with pytest.raises(ConfigError, match="timeout must be a positive number of seconds"):
        make_host(root).call("echo", timeout=timeout)


def test_host_loads_lazily_on_first_use(make_host: Any, root: Path) -> None:
    make_skill(root, "echo")
    host: SkillHost = make_host(root)
    assert "not loaded" in repr(host)
    assert assert_ok(host.call("echo", {"x": 1})) == {"x": 1}
    assert host.report.registered == 1


def test_acall_and_call_give_the_same_result(make_host: Any, root: Path) -> None:
    write_executable(root / "x" / "run.sh", "#!/bin/sh\necho warn >&2\necho '{\"a\": [1, 2]}'\n")
    make_skill(root, "same", folder="x", script=None)
    host = make_host(root)
    sync = host.call("same")
    async_ = asyncio.run(host.acall("same"))
    assert (sync.ok, sync.value, sync.stderr_tail) == (async_.ok, async_.value, async_.stderr_tail)


def test_a_debug_line_before_the_json_says_log_lines_belong_on_stderr(make_host: Any, root: Path) -> None:
    make_skill(root, "chatty", script="#!/bin/sh\necho 'debug: starting'\necho '{\"ok\": true}'\n")
    result = make_host(root).call("chatty")
    assert not result.ok
    error = str(result.error)
    assert error.startswith("stdout is not one JSON object (")
    assert 'it starts with b\'debug: starting\\n{"ok": true}' in error
    assert error.endswith(
        "; it holds text and then a JSON object: log lines belong on stderr "
        "(print(..., file=sys.stderr), echo ... >&2), stdout carries only the result"
    )
