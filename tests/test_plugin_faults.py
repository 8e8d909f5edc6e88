"""A third-party plugin cannot stop the host: not by exiting, answering nonsense, printing or stalling.

Each test installs a real distribution with an ``ongrid_plugins`` entry point into a
folder on ``sys.path`` (``tests/distributions.py``) and builds a real host over it; the
stdout tests run ``python -m ongrid_plugins`` in a real process.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from distributions import install_dist, skill_files

from ongrid_plugins import PermissionDenied, PluginLoadError, SkillHost, get_plugin_manager
from ongrid_plugins.errors import PluginFailed
from ongrid_plugins.testing import isolated_settings, make_skill, trust_packs

REPO = Path(__file__).resolve().parent.parent


def _install_plugin(site: Path, name: str, source: str, dist: str = "ongrid-faulty") -> None:
    module = f"ongrid_test_plugin_{name}"
    install_dist(site, dist, "0.1", {"ongrid_plugins": {name: module}}, {f"{module}.py": source})


def _host(tmp_path: Path, root: Path, **overrides: Any) -> SkillHost:
    return SkillHost(isolated_settings(tmp_path, root, load_entry_points=True, **overrides))


def _lines(caplog: pytest.LogCaptureFixture, needle: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if needle in r.getMessage()]


# ------------------------------------------------------------ 1. exiting at import


@pytest.mark.parametrize(
    ("source", "cause"),
    [
        ("import sys\nsys.exit(7)\n", "SystemExit: 7"),
        ("raise SystemExit('bye')\n", "SystemExit: bye"),
        ("class Stop(BaseException):\n    pass\nraise Stop('halt')\n", "Stop: halt"),
    ],
    ids=["sys_exit", "system_exit_message", "base_exception"],
)
def test_a_plugin_exiting_at_import_is_logged_and_skipped(
    site: Path, tmp_path: Path, root: Path, caplog: pytest.LogCaptureFixture, source: str, cause: str
) -> None:
    _install_plugin(site, "exits", source)
    make_skill(root, "echo")
    caplog.set_level(logging.WARNING)
    host = _host(tmp_path, root)
    assert host.call("echo", {"still": "works"}).value == {"still": "works"}
    info = next(i for i in host.plugins() if i.name == "exits")
    assert (info.status, info.error) == ("failed", cause)
    assert _lines(caplog, "exits") == [
        f"plugins: cannot load plugin exits (distribution ongrid-faulty 0.1): {cause}"
    ]


def test_strict_mode_turns_a_plugin_exiting_at_import_into_an_error(site: Path, tmp_path: Path) -> None:
    _install_plugin(site, "exits", "import sys\nsys.exit(7)\n")
    settings = isolated_settings(tmp_path, load_entry_points=True, strict=True)
    with pytest.raises(PluginLoadError, match="plugin 'exits' could not be loaded: SystemExit: 7"):
        get_plugin_manager(settings)


def test_ctrl_c_while_a_plugin_imports_still_stops_the_host(site: Path, tmp_path: Path) -> None:
    _install_plugin(site, "interrupted", "raise KeyboardInterrupt\n")
    with pytest.raises(KeyboardInterrupt):
        get_plugin_manager(isolated_settings(tmp_path, load_entry_points=True))


def test_a_pack_whose_parent_package_exits_at_import_loads_since_that_code_never_runs(
    site: Path, tmp_path: Path, root: Path, caplog: pytest.LogCaptureFixture
) -> None:
    files = skill_files("ongrid_test_exiting_pack", "packed", folder="skills")
    files["ongrid_test_exiting_pack/__init__.py"] = "import sys\nsys.exit(7)\n"
    points = {"ongrid_skills": {"exiting": "ongrid_test_exiting_pack.skills"}}
    install_dist(site, "ongrid-exiting", "1.0", points, files)
    make_skill(root, "echo")
    trust_packs(isolated_settings(tmp_path, root, load_entry_points=True, include_defaults=True))
    caplog.clear()  # what the host that consented said before it did
    caplog.set_level(logging.WARNING)
    host = _host(tmp_path, root, include_defaults=True)
    assert host.call("echo", {"still": "works"}).value == {"still": "works"}
    info = next(i for i in host.plugins() if i.name == "exiting")
    assert (info.kind, info.status) == ("pack", "active")
    assert host.get("packed").provenance == "ongrid-exiting 1.0"
    assert _lines(caplog, "exiting") == []


def _run(site: Path, root: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    """A real ``python -m ongrid_plugins`` over ``root`` with ``site``'s distributions installed."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(REPO)])}
    command = [sys.executable, "-m", "ongrid_plugins", "--dirs", str(root), *argv]
    return subprocess.run(command, capture_output=True, text=True, timeout=60, env=env, cwd=str(REPO))


def test_a_plugin_exiting_at_import_does_not_end_a_command(site: Path, root: Path) -> None:
    _install_plugin(site, "exits", "import sys\nsys.exit(7)\n")
    make_skill(root, "echo")
    done = _run(site, root, "list", "--json")
    assert done.returncode == 0, done.stderr
    assert "echo" in [item["name"] for item in json.loads(done.stdout)["items"]]
    assert "plugins: cannot load plugin exits (distribution ongrid-faulty 0.1): SystemExit: 7" in done.stderr


# ------------------------------------------------------------ 2. answers of the wrong type

HOOK = "from ongrid_plugins import hookimpl\n\n@hookimpl\ndef {hook}:\n    return {answer}\n"


@pytest.mark.parametrize(
    ("hook", "answer", "line"),
    [
        (
            "ongrid_skill_roots(settings)",
            "[42]",
            "42 (int) in its list, expected a SkillRoot with a str path",
        ),
        ("ongrid_skill_roots(settings)", "'/tmp'", "'/tmp' (str), expected a list of SkillRoot"),
        (
            "ongrid_skill_roots(settings)",
            "['rel/dir']",
            "'rel/dir' (str) in its list, expected a SkillRoot with a str path",
        ),
        (
            "ongrid_skill_roots(settings)",
            "[__import__('ongrid_plugins').SkillRoot(42)]",
            "SkillRoot(path=42, source='settings', provenance='', require…(76 characters) (SkillRoot) "
            "in its list, expected a SkillRoot with a str path",
        ),
        ("ongrid_manifest_names()", "'skill.json'", "'skill.json' (str), expected a list of file names"),
        ("ongrid_manifest_names()", "[1]", "1 (int) in its list, expected a file name"),
        ("ongrid_manifest_names()", "['a/b.json']", "'a/b.json' (str) in its list, expected a file name"),
        (
            "ongrid_load_manifest(path)",
            "'oops'",
            "'oops' (str) for {path}, expected a Skill or None",
        ),
        (
            "ongrid_load_manifest(path)",
            "{'name': 'echo'}",
            "{'name': 'echo'} (dict) for {path}, expected a Skill or None",
        ),
        (
            "ongrid_validate_skill(skill)",
            "'oops'",
            "'oops' (str) for skill \"echo\", expected a list of Problem",
        ),
        ("ongrid_validate_skill(skill)", "[1]", '1 (int) in its list for skill "echo", expected a Problem'),
    ],
)
def test_a_hook_answer_of_the_wrong_type_is_dropped_with_a_warning(
    site: Path,
    tmp_path: Path,
    root: Path,
    caplog: pytest.LogCaptureFixture,
    hook: str,
    answer: str,
    line: str,
) -> None:
    _install_plugin(site, "odd", HOOK.format(hook=hook, answer=answer))
    make_skill(root, "echo")
    caplog.set_level(logging.WARNING)
    host = _host(tmp_path, root)
    host.load()
    assert host.call("echo", {"still": "works"}).value == {"still": "works"}
    assert next(i for i in host.plugins() if i.name == "odd").status == "active"
    name = hook.partition("(")[0]
    expected = f"hook {name}: plugin odd returned {line}; dropped"
    assert _lines(caplog, "hook ") == [expected.replace("{path}", str(root / "echo" / "skill.json"))]


def test_only_the_wrong_items_of_a_list_are_dropped(
    site: Path, tmp_path: Path, root: Path, caplog: pytest.LogCaptureFixture
) -> None:
    extra = tmp_path / "extra"
    make_skill(extra, "other")
    source = f"""
        from ongrid_plugins import SkillRoot, hookimpl

        @hookimpl
        def ongrid_skill_roots(settings):
            return [None, SkillRoot({str(extra)!r})]

        @hookimpl
        def ongrid_manifest_names():
            return [b"skill.json", "tool.toml"]
    """
    _install_plugin(site, "mixed", source)
    make_skill(root, "echo")
    caplog.set_level(logging.WARNING)
    host = _host(tmp_path, root)
    assert sorted(s.name for s in host.skills()) == ["echo", "other"]
    assert _lines(caplog, "hook ") == [
        "hook ongrid_skill_roots: plugin mixed returned None (NoneType) in its list, "
        "expected a SkillRoot with a str path; dropped",
        "hook ongrid_manifest_names: plugin mixed returned b'skill.json' (bytes) in its list, "
        "expected a file name; dropped",
    ]


def test_a_wrong_loader_answer_leaves_the_file_to_the_other_loaders(
    site: Path, tmp_path: Path, root: Path, caplog: pytest.LogCaptureFixture
) -> None:
    _install_plugin(site, "greedy", HOOK.format(hook="ongrid_load_manifest(path)", answer="'x'"))
    for name in ("one", "two"):
        make_skill(root, name)
    caplog.set_level(logging.WARNING)
    host = _host(tmp_path, root)
    assert sorted(s.name for s in host.skills()) == ["one", "two"]
    assert len(_lines(caplog, "hook ongrid_load_manifest: plugin greedy returned 'x' (str) for ")) == 2


def test_a_long_wrong_answer_is_shortened_in_the_log_line(
    site: Path, tmp_path: Path, root: Path, caplog: pytest.LogCaptureFixture
) -> None:
    _install_plugin(site, "chatty", HOOK.format(hook="ongrid_manifest_names()", answer="'x\\n' * 99"))
    caplog.set_level(logging.WARNING)
    _host(tmp_path, root).load()
    (line,) = _lines(caplog, "hook ")
    assert len(line) < 250 and "\n" not in line and "…(" in line


def _odd() -> Any:
    """A plugin answering ``ongrid_manifest_names`` with a string, not a list."""
    from ongrid_plugins import hookimpl

    class Odd:
        @hookimpl
        def ongrid_manifest_names(self) -> str:
            return "skill.json"

    return Odd()


def test_behind_a_wrapper_the_wrong_answer_is_from_a_plugin(
    site: Path, tmp_path: Path, root: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from ongrid_plugins import hookimpl
    from ongrid_plugins.core.hooks import hooks

    class Wrapper:
        @hookimpl(wrapper=True)
        def ongrid_manifest_names(self) -> Any:
            return (yield)

    pm = get_plugin_manager(isolated_settings(tmp_path, root))
    pm.add_plugin(_odd(), "odd")
    pm.add_plugin(Wrapper(), "wrapper")
    caplog.set_level(logging.WARNING)
    assert hooks(pm).manifest_names() == {"skill.json", "SKILL.md", "skill.md"}
    assert _lines(caplog, "hook ") == [
        "hook ongrid_manifest_names: a plugin returned 'skill.json' (str), "
        "expected a list of file names; dropped"
    ]


def test_a_recorded_manager_sees_one_call_and_still_names_a_certain_plugin(
    tmp_path: Path, root: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from ongrid_plugins.core.hooks import hooks
    from ongrid_plugins.testing import HookRecorder

    pm = get_plugin_manager(isolated_settings(tmp_path, root))
    pm.add_plugin(_odd(), "odd")
    caplog.set_level(logging.WARNING)
    with HookRecorder(pm) as recorder:
        assert hooks(pm).manifest_names() == {"skill.json", "SKILL.md", "skill.md"}
    assert len(recorder.calls_of("ongrid_manifest_names")) == 1
    assert _lines(caplog, "hook ") == [
        "hook ongrid_manifest_names: plugin odd returned 'skill.json' (str), "
        "expected a list of file names; dropped"
    ]


# ------------------------------------------------------------ 3. printing at import

NOISY = """
    import os
    import sys

    print("plugin says hello")
    sys.stdout.write("and writes to sys.stdout\\n")
    sys.stdout.flush()
    os.write(1, b"and to file descriptor 1\\n")
"""


def _install_noisy(site: Path) -> None:
    files = {
        "ongrid_test_plugin_noisy.py": NOISY,
        **skill_files("ongrid_test_noisy_pack", "packed", folder="skills"),
    }
    files["ongrid_test_noisy_pack/__init__.py"] = NOISY  # never run: the pack's parent is not imported
    points = {"ongrid_plugins": {"noisy": "ongrid_test_plugin_noisy"}}
    points["ongrid_skills"] = {"noisy-pack": "ongrid_test_noisy_pack.skills"}
    install_dist(site, "ongrid-noisy", "1.0", points, files)


@pytest.mark.parametrize(
    ("argv", "names"),
    [
        (("list", "--json"), lambda out: sorted(item["name"] for item in out["items"])),
        (("export", "--format", "openai"), lambda out: sorted(tool["function"]["name"] for tool in out)),
    ],
    ids=["list", "export"],
)
def test_a_plugin_printing_at_import_does_not_reach_stdout(
    site: Path, root: Path, argv: Any, names: Any
) -> None:
    _install_noisy(site)
    make_skill(root, "echo")
    trusted = _run(site, root, "trust", "noisy-pack", "--yes")  # pip packs load once consented
    assert trusted.returncode == 0 and "pluggy plugins (noisy = ongrid_test_plugin_noisy)" in trusted.stdout
    done = _run(site, root, *argv)
    assert done.returncode == 0, done.stderr
    assert {"echo", "packed"} <= set(names(json.loads(done.stdout)))
    for said in ("plugin says hello", "and writes to sys.stdout", "and to file descriptor 1"):
        assert done.stderr.count(said) == 1  # the plugin's, moved to stderr (the pack's never runs)


def test_stdout_is_ours_again_after_the_plugins_are_loaded(
    site: Path, tmp_path: Path, root: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    _install_noisy(site)
    stdout = sys.stdout
    get_plugin_manager(isolated_settings(tmp_path, root, load_entry_points=True, include_defaults=True))
    print("ours")
    os.write(1, b"ours too\n")
    out, err = capfd.readouterr()
    assert sys.stdout is stdout
    assert out == "ours\nours too\n"
    assert "plugin says hello" in err and "and to file descriptor 1" in err


def test_stdout_is_restored_when_the_code_inside_raises(capfd: pytest.CaptureFixture[str]) -> None:
    from ongrid_plugins.core.stdio import stdout_to_stderr

    stdout = sys.stdout
    with pytest.raises(SystemExit), stdout_to_stderr():
        print("moved")
        os.write(1, b"moved too\n")
        raise SystemExit(3)
    print("back")
    os.write(1, b"back too\n")
    out, err = capfd.readouterr()
    assert sys.stdout is stdout
    assert (out, err) == ("back\nback too\n", "moved\nmoved too\n")


# ------------------------------------------------------------ 4. slow imports


def test_a_slow_plugin_import_is_named_with_its_seconds(
    site: Path, tmp_path: Path, root: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ongrid_plugins import plugins

    monkeypatch.setattr(plugins, "SLOW_IMPORT_SECONDS", 0.2)
    _install_plugin(site, "slow", "import time\ntime.sleep(0.3)\n", dist="ongrid-slow")
    _install_plugin(site, "quick", "", dist="ongrid-quick")
    caplog.set_level(logging.WARNING)
    get_plugin_manager(isolated_settings(tmp_path, root, load_entry_points=True))
    (line,) = _lines(caplog, "slow")
    assert line.startswith("plugins: importing plugin slow (distribution ongrid-slow 0.1) took 0.")
    assert line.endswith(" s, over 0.2 s: it delays every start of the host")
    assert not _lines(caplog, "quick")


# ------------------------------------------------------------ 5. a hook raising on the call path

RAISING_VOTE = """from ongrid_plugins import Decision, hookimpl

@hookimpl
def ongrid_check_permission(tool, persona):
    return Decision.deny("a mistaken constructor")
"""
STRING_VOTE = """from ongrid_plugins import hookimpl

@hookimpl
def ongrid_check_permission(tool):
    return 'deny'
"""
RAISING_BEFORE = """from ongrid_plugins import hookimpl

@hookimpl
def ongrid_before_call(request):
    raise RuntimeError("quota service down")
"""
RAISING_EXECUTOR = """from ongrid_plugins import hookimpl

class Flaky:
    def run(self, request):
        raise RuntimeError("backend gone")

    async def arun(self, request):
        raise RuntimeError("backend gone")

@hookimpl(tryfirst=True)
def ongrid_executor(tool, settings):
    return Flaky()
"""


def test_a_permission_vote_that_raises_is_a_deny_naming_the_plugin_with_an_audit_row(
    site: Path, tmp_path: Path, root: Path
) -> None:
    _install_plugin(site, "voter", RAISING_VOTE)
    make_skill(root, "echo")
    host = _host(tmp_path, root)
    with pytest.raises(PermissionDenied) as caught:
        host.call("echo", {})
    message = str(caught.value)
    assert "plugin voter (distribution ongrid-faulty 0.1)" in message
    assert "AttributeError" in message and "deny" in message
    assert caught.value.decision.plugin == "voter"
    assert host.audit.flush()
    assert [(e.tool, e.outcome) for e in host.audit.entries()][-1] == ("echo", "denied")


def test_a_vote_of_the_wrong_type_is_a_deny_naming_the_plugin(site: Path, tmp_path: Path, root: Path) -> None:
    _install_plugin(site, "stringly", STRING_VOTE)
    make_skill(root, "echo")
    with pytest.raises(
        PermissionDenied, match=r"plugin stringly \(distribution ongrid-faulty 0.1\) returned 'deny'"
    ):
        _host(tmp_path, root).call("echo", {})


def test_a_raising_vote_is_exit_3_on_the_cli_without_a_traceback(site: Path, root: Path) -> None:
    _install_plugin(site, "voter", RAISING_VOTE)
    make_skill(root, "echo")
    done = _run(site, root, "run", "echo", "{}")
    assert done.returncode == 3, done.stderr
    assert "Traceback" not in done.stderr
    assert "plugin voter (distribution ongrid-faulty 0.1)" in done.stderr


def _execute_over_rest(site: Path, tmp_path: Path, root: Path, plugin: str, source: str) -> Any:
    """POST an ``echo`` call to a real REST server whose host has the plugin ``source`` installed."""
    import httpx
    from httpserve import running

    from ongrid_plugins.server.rest import create_app
    from ongrid_plugins.server.tokens import TokenStore

    _install_plugin(site, plugin, source)
    make_skill(root, "echo")
    app = create_app(_host(tmp_path, root), TokenStore.single("t" * 43, "ann", "admin"))
    with running(app) as url:
        return httpx.post(
            f"{url}/v1/skills/echo/execute", headers={"Authorization": "Bearer " + "t" * 43}, timeout=30
        )


def test_a_raising_vote_is_a_403_over_rest(site: Path, tmp_path: Path, root: Path) -> None:
    response = _execute_over_rest(site, tmp_path, root, "voter", RAISING_VOTE)
    assert response.status_code == 403, response.text
    body = response.json()
    assert body["code"] == "denied" and body["plugin"] == "voter"
    assert "distribution ongrid-faulty 0.1" in body["error"]


def test_a_before_call_hook_that_raises_ends_the_call_naming_the_plugin(
    site: Path, tmp_path: Path, root: Path
) -> None:
    _install_plugin(site, "quota", RAISING_BEFORE)
    make_skill(root, "echo")
    host = _host(tmp_path, root)
    with pytest.raises(PluginFailed) as caught:
        host.call("echo", {})
    assert str(caught.value) == (
        "call to 'echo' failed: plugin quota (distribution ongrid-faulty 0.1) raised "
        "RuntimeError: quota service down in ongrid_before_call"
    )
    assert host.audit.flush()
    assert [(e.tool, e.outcome) for e in host.audit.entries()][-1] == ("echo", "aborted")


def test_an_executor_that_raises_ends_the_call_naming_the_plugin(
    site: Path, tmp_path: Path, root: Path
) -> None:
    _install_plugin(site, "flaky", RAISING_EXECUTOR)
    make_skill(root, "echo")
    host = _host(tmp_path, root)
    with pytest.raises(
        PluginFailed, match=r"plugin flaky \(distribution ongrid-faulty 0.1\) raised RuntimeError"
    ):
        host.call("echo", {})
    with pytest.raises(PluginFailed, match=r"backend gone in Flaky\.arun"):
        asyncio.run(host.acall("echo", {}))
    done = _run(site, root, "run", "echo", "{}")
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert "plugin flaky (distribution ongrid-faulty 0.1) raised RuntimeError: backend gone" in done.stderr


def test_a_raising_before_call_hook_is_not_a_500_over_rest(site: Path, tmp_path: Path, root: Path) -> None:
    response = _execute_over_rest(site, tmp_path, root, "quota", RAISING_BEFORE)
    assert response.status_code == 502, response.text
    assert response.json()["code"] == "plugin_failed"
    assert "plugin quota (distribution ongrid-faulty 0.1)" in response.json()["error"]


RAISING_LOADER = """from ongrid_plugins import hookimpl

@hookimpl(tryfirst=True)
def ongrid_load_manifest(path):
    raise RuntimeError("boom")
"""


def test_a_loader_that_raises_is_named_with_its_distribution(site: Path, tmp_path: Path, root: Path) -> None:
    _install_plugin(site, "crashy", RAISING_LOADER)
    make_skill(root, "victim")
    [event] = _host(tmp_path, root).load().events
    line = "loader plugin crashy (distribution ongrid-faulty 0.1) raised RuntimeError('boom')"
    assert event.message == line
    done = _run(site, root, "validate", str(root))
    assert line in done.stdout + done.stderr


@pytest.mark.parametrize(
    ("name", "source", "status"),
    [("voter", RAISING_VOTE, "denied"), ("quota", RAISING_BEFORE, "plugin_failed")],
    ids=["vote", "before_call"],
)
def test_a_model_reads_a_refusal_naming_the_plugin_not_a_crash(
    site: Path, tmp_path: Path, root: Path, name: str, source: str, status: str
) -> None:
    from ongrid_plugins.host.dispatch import dispatch

    _install_plugin(site, name, source)
    make_skill(root, "echo")
    call = {"type": "tool_use", "id": "toolu_1", "name": "echo", "input": {}}
    done = dispatch(_host(tmp_path, root), call, persona="admin")
    assert done.status == status
    assert f"plugin {name} (distribution ongrid-faulty 0.1)" in done.payload["error"]
    assert done.message["is_error"] is True
