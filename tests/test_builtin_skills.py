"""The built-in skills under ``ongrid_plugins/skills``: SKILL.md files with native tools.

Behaviour is tested the way the host runs it: through ``SkillHost.call``, in-process,
with the arguments checked against the SKILL.md schema first. The ``run.py`` scripts
that hold the logic of ``disk_usage`` and ``system_info`` still run on their own (the
skill.json wire protocol, Python >= 3.8); those script-level behaviours are tested by
running them as real subprocesses.
"""

from __future__ import annotations

import gc
import json
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from ongrid_plugins import InvalidArguments, SkillHost, Tool
from ongrid_plugins.testing import isolated_settings

SKILLS = Path(__file__).resolve().parent.parent / "ongrid_plugins" / "skills"
NAMES = ("disk_usage", "system_info")
TOOLS = ("disk_usage", "system_info", "tail_file", "find_large_files")
NOBODY = 65534


@pytest.fixture(scope="module")
def host(tmp_path_factory: pytest.TempPathFactory) -> SkillHost:
    """A host loading only the built-in skills; ``host_files`` may read every test's ``tmp_path``."""
    base = tmp_path_factory.mktemp("builtin-host")
    temp = str(tmp_path_factory.getbasetemp())
    host = SkillHost(isolated_settings(base, include_defaults=True, host_files_dirs=(temp,)))
    host.load()
    return host


def call(host: SkillHost, name: str, args: dict[str, Any]) -> dict[str, Any]:
    """The value of a successful call through the host."""
    result = host.call(name, args)
    assert result.ok, result.error
    assert result.exit_code is None and result.status == ""
    value: dict[str, Any] = result.value
    json.dumps(value, allow_nan=False)  # plain JSON, as a subprocess would have printed
    return value


def failure(host: SkillHost, name: str, args: dict[str, Any]) -> str:
    """The error of a failed call through the host."""
    result = host.call(name, args)
    assert not result.ok, result.value
    assert result.error is not None
    return result.error


def tool(host: SkillHost, name: str) -> Tool:
    return host.get(name)


def run(
    name: str,
    args: dict[str, Any] | bytes,
    *,
    timeout: float = 15,
    env: dict[str, str] | None = None,
    **popen: Any,
) -> subprocess.CompletedProcess[bytes]:
    """Run a skill's ``run.py`` as a script, the way the skill.json wire protocol runs an entry."""
    skill_dir = SKILLS / name
    entry = skill_dir / "run.py"
    data = args if isinstance(args, bytes) else json.dumps(args).encode()
    return subprocess.run(
        [str(entry)],
        input=data,
        capture_output=True,
        env={"PATH": os.environ["PATH"]} if env is None else env,
        cwd=skill_dir,
        timeout=timeout,
        check=False,
        **popen,
    )


def result_of(proc: subprocess.CompletedProcess[bytes]) -> dict[str, Any]:
    """The single JSON object on stdout of a successful run."""
    assert proc.returncode == 0, proc.stderr.decode()
    text = proc.stdout.decode()
    assert text.endswith("\n") and text.count("\n") == 1, text  # exactly one JSON object
    value: dict[str, Any] = json.loads(text)
    assert isinstance(value, dict)
    return value


def error_of(proc: subprocess.CompletedProcess[bytes], status: int) -> str:
    """The message of a failed run: a JSON ``error`` on stdout and one line on stderr."""
    assert proc.returncode == status, (proc.stdout, proc.stderr)
    value = json.loads(proc.stdout)
    assert set(value) == {"error"}
    message: str = value["error"]
    stderr = proc.stderr.decode()
    assert stderr.count("\n") == 1 and message in stderr
    return message


def usage(path: Path, *, apparent: bool) -> int:
    st = path.lstat()
    return st.st_size if apparent else st.st_blocks * 512


def tree_usage(root: Path, *, apparent: bool, skip_links: bool = False) -> int:
    """What ``du -s`` (with or without ``--apparent-size``) says about ``root``."""
    total = usage(root, apparent=apparent)
    for path in root.rglob("*"):
        if not (skip_links and path.is_symlink()):
            total += usage(path, apparent=apparent)
    return total


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A small tree with known file sizes."""
    root = tmp_path / "tree"
    (root / "docs" / "nested").mkdir(parents=True)
    (root / "logs").mkdir()
    (root / "empty").mkdir()
    sizes = {
        "big.bin": 50_000,
        "small.txt": 10,
        "docs/a.txt": 20_000,
        "docs/b.txt": 1_000,
        "docs/nested/c.bin": 30_000,
        "logs/d.log": 40_000,
    }
    for rel, size in sizes.items():
        (root / rel).write_bytes(b"x" * size)
    return root


# -- manifests ----------------------------------------------------------------


@pytest.mark.parametrize("name", TOOLS)
def test_builtin_tools_are_native_safe_and_valid(host: SkillHost, name: str) -> None:
    found = tool(host, name)
    assert re.fullmatch(r"[a-z0-9_]+", found.name)
    assert found.kind == "native" and found.impl == f"builtin:ongrid.{name}"
    assert found.native is not None and found.available
    assert found.tool_class.value == "safe"
    assert found.category == "system"
    assert found.provenance == "built-in"
    assert isinstance(found.description, str) and len(found.description) > 40
    assert 0 < found.timeout <= 60

    schema = dict(found.schema)
    jsonschema.Draft202012Validator.check_schema(schema)
    assert schema["type"] == "object"
    assert schema["additionalProperties"] is False
    validator = jsonschema.Draft202012Validator(schema)
    defaults: dict[str, Any] = {}
    for key, prop in schema["properties"].items():
        assert prop.get("description"), f"{key} has no description"
        if "default" in prop:
            jsonschema.Draft202012Validator(prop).validate(prop["default"])
            defaults[key] = prop["default"]
    required = {key: "/" for key in schema.get("required", [])}
    validator.validate({**defaults, **required})


def test_builtin_skills_are_skill_md_named_after_their_folders_without_warnings(host: SkillHost) -> None:
    skills = {skill.name: skill for skill in host.skills()}
    assert set(skills) == {"disk_usage", "system_info", "host_files"}
    for name, skill in skills.items():
        assert skill.format == "SKILL.md"
        assert Path(skill.path) == SKILLS / name / "SKILL.md"
        assert skill.warnings == ()
        assert skill.when_to_use and skill.version == "1.0.0"
    assert [t.name for t in skills["host_files"].tools] == ["tail_file", "find_large_files"]
    assert not list(SKILLS.rglob("skill.json")), "the built-ins are SKILL.md only: one definition per name"


@pytest.mark.parametrize("name", NAMES)
def test_scripts_are_still_runnable_entries(name: str) -> None:
    entry = SKILLS / name / "run.py"
    assert os.access(entry, os.X_OK)
    assert stat.S_IMODE(entry.stat().st_mode) == 0o755
    assert entry.read_text(encoding="utf-8").startswith("#!/usr/bin/env python3\n")


def find_python38() -> str | None:
    """A working Python 3.8 interpreter, the oldest the entries promise to support."""
    candidates = [shutil.which("python3.8"), "/usr/bin/python3.8", "/usr/local/bin/python3.8"]
    candidates += sorted(str(p) for p in Path.home().glob(".pyenv/versions/3.8*/bin/python3.8"))
    for candidate in candidates:
        if not candidate or not os.path.exists(candidate):
            continue
        try:
            proc = subprocess.run(
                [candidate, "-c", "import sys; print(sys.version_info[:2])"],
                capture_output=True,
                timeout=10,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired):
            continue
        if proc.returncode == 0 and proc.stdout.strip() == b"(3, 8)":
            return candidate
    return None


@pytest.mark.parametrize("name", NAMES)
def test_entry_runs_on_python_3_8(name: str, tmp_path: Path) -> None:
    import ast

    source = (SKILLS / name / "run.py").read_text(encoding="utf-8")
    ast.parse(source, feature_version=(3, 8))
    python38 = find_python38()
    if python38 is None:
        pytest.skip("no Python 3.8 interpreter here")
    (tmp_path / "python3").symlink_to(python38)  # what #!/usr/bin/env python3 will find
    args = {"path": str(SKILLS), "max_depth": 2} if name == "disk_usage" else {}
    out = result_of(run(name, args, env={"PATH": f"{tmp_path}:/usr/bin:/bin"}))
    assert out


# -- disk_usage -----------------------------------------------------------------


def test_disk_usage_totals_and_largest(host: SkillHost, tree: Path) -> None:
    out = call(host, "disk_usage", {"path": str(tree), "apparent_size": True})
    assert out["path"] == str(tree.resolve())
    assert out["type"] == "dir"
    assert out["size_kind"] == "apparent"
    assert out["total_bytes"] == tree_usage(tree, apparent=True)
    assert (out["files"], out["dirs"], out["symlinks"], out["other"]) == (6, 4, 0, 0)
    assert out["errors"] == 0 and out["error_samples"] == []
    assert out["truncated"] is False and out["truncated_reason"] is None
    assert out["entries_scanned"] == 10

    # Depth 1: the children of the path, directories with their recursive totals.
    expected = sorted(
        (
            (tree_usage(child, apparent=True), child.name, "dir" if child.is_dir() else "file")
            for child in tree.iterdir()
        ),
        key=lambda item: (-item[0], item[1]),
    )
    got = [(e["bytes"], Path(e["path"]).name, e["type"]) for e in out["largest"]]
    assert got == expected
    assert [name for _, name, _ in got[:3]] == ["docs", "big.bin", "logs"]
    assert got[0][0] == 51_000 + usage(tree / "docs", apparent=True) + usage(
        tree / "docs" / "nested", apparent=True
    )
    assert all(e["path"].startswith(str(tree) + "/") and e["human"] for e in out["largest"])

    files = [(e["bytes"], e["path"]) for e in out["largest_files"]]
    assert files == [
        (50_000, str(tree / "big.bin")),
        (40_000, str(tree / "logs" / "d.log")),
        (30_000, str(tree / "docs" / "nested" / "c.bin")),
        (20_000, str(tree / "docs" / "a.txt")),
        (1_000, str(tree / "docs" / "b.txt")),
        (10, str(tree / "small.txt")),
    ]

    fs = out["filesystem"]
    assert fs["total_bytes"] > 0 and 0 <= fs["free_bytes"] <= fs["total_bytes"]
    assert 0 <= fs["used_percent"] <= 100
    assert fs["mount_point"] and str(tree).startswith(fs["mount_point"])


def test_disk_usage_top_and_depth(host: SkillHost, tree: Path) -> None:
    out = call(host, "disk_usage", {"path": str(tree), "top": 2, "apparent_size": True})
    assert [Path(e["path"]).name for e in out["largest"]] == ["docs", "big.bin"]
    assert [Path(e["path"]).name for e in out["largest_files"]] == ["big.bin", "d.log"]

    deep = call(host, "disk_usage", {"path": str(tree), "top": 100, "max_depth": 2, "apparent_size": True})
    ranked = {e["path"]: e["bytes"] for e in deep["largest"]}
    nested = tree / "docs" / "nested"
    assert ranked[str(nested)] == tree_usage(nested, apparent=True)
    assert str(tree / "docs" / "a.txt") in ranked
    assert str(nested / "c.bin") not in ranked  # depth 3
    assert len(ranked) == 10 - 1


def test_disk_usage_allocated_blocks_by_default(host: SkillHost, tree: Path) -> None:
    out = call(host, "disk_usage", {"path": str(tree)})
    assert out["size_kind"] == "allocated"
    assert out["total_bytes"] == tree_usage(tree, apparent=False)


def test_disk_usage_hard_links_count_once(host: SkillHost, tree: Path) -> None:
    os.link(tree / "big.bin", tree / "logs" / "big-again.bin")
    out = call(host, "disk_usage", {"path": str(tree), "apparent_size": True})
    assert out["files"] == 7
    assert out["total_bytes"] == tree_usage(tree, apparent=True) - 50_000


def test_disk_usage_symlink_loops_are_not_followed(host: SkillHost, tree: Path) -> None:
    (tree / "docs" / "nested" / "up").symlink_to("..")
    (tree / "self").symlink_to(".")
    (tree / "root-link").symlink_to(tree)
    (tree / "file-link").symlink_to(tree / "big.bin")
    (tree / "dangling").symlink_to(tree / "missing")

    started = time.monotonic()
    out = call(host, "disk_usage", {"path": str(tree), "apparent_size": True})
    assert time.monotonic() - started < 10
    assert out["symlinks"] == 5 and out["dirs"] == 4 and out["files"] == 6
    assert out["total_bytes"] == tree_usage(tree, apparent=True)  # links count as themselves
    assert out["truncated"] is False

    followed = call(host, "disk_usage", {"path": str(tree), "apparent_size": True, "follow_symlinks": True})
    # Every directory is entered once; the file link names a file already counted;
    # only the dangling link is left as a link.
    assert followed["dirs"] == 4 and followed["symlinks"] == 1
    no_links = tree_usage(tree, apparent=True, skip_links=True)
    assert followed["total_bytes"] == no_links + usage(tree / "dangling", apparent=True)
    assert followed["truncated"] is False


def test_disk_usage_never_opens_a_fifo(host: SkillHost, tree: Path) -> None:
    fifo = tree / "logs" / "pipe"
    os.mkfifo(fifo)  # opening it for reading would block forever: no writer
    out = call(host, "disk_usage", {"path": str(tree), "apparent_size": True})
    assert out["other"] == 1 and out["errors"] == 0
    assert out["total_bytes"] == tree_usage(tree, apparent=True)

    direct = call(host, "disk_usage", {"path": str(fifo)})
    assert direct["type"] == "other" and direct["total_bytes"] == 0


@pytest.fixture
def shared_tmp() -> Iterator[Path]:
    """A temporary folder other users may traverse (pytest's tmp_path is private to root)."""
    path = Path(tempfile.mkdtemp(prefix="ongrid-du-"))
    path.chmod(0o755)
    yield path
    for dirpath, dirnames, _ in os.walk(path):  # unlock folders before walking into them
        for dirname in dirnames:
            os.chmod(os.path.join(dirpath, dirname), 0o755)
    shutil.rmtree(path)


def nobody_can_run_skills() -> str | None:
    """Why the entries cannot run as ``nobody`` here, or ``None`` when they can."""
    if not hasattr(os, "setuid"):
        return "no setuid on this platform"
    python = shutil.which("python3", path="/usr/local/bin:/usr/bin:/bin")
    if python is None:
        return "no python3 outside private folders"
    for path in [*(SKILLS / "disk_usage").parents, Path(python).parent]:
        if path.exists() and not path.stat().st_mode & stat.S_IXOTH:
            return f"{path} is not searchable by other users"
    if not (SKILLS / "disk_usage" / "run.py").stat().st_mode & stat.S_IROTH:
        return "run.py is not readable by other users"
    return None


def test_disk_usage_counts_unreadable_directories(shared_tmp: Path) -> None:
    root = shared_tmp / "tree"
    (root / "open").mkdir(parents=True)
    (root / "open" / "f").write_bytes(b"x" * 100)
    locked = root / "locked"
    locked.mkdir()
    (locked / "secret").write_bytes(b"x" * 1000)
    locked.chmod(0)

    if os.geteuid() == 0:  # root reads everything: run the entry as nobody instead
        reason = nobody_can_run_skills()
        if reason:
            pytest.skip(reason)
        python = shutil.which("python3", path="/usr/local/bin:/usr/bin:/bin")
        assert python is not None
        proc = run(
            "disk_usage",
            {"path": str(root), "apparent_size": True},
            env={"PATH": os.path.dirname(python)},
            user=NOBODY,
            group=NOBODY,
            extra_groups=[],
        )
    else:
        proc = run("disk_usage", {"path": str(root), "apparent_size": True})
    out = result_of(proc)
    assert out["errors"] == 1
    assert out["error_samples"] == [{"path": str(locked), "error": "Permission denied"}]
    assert out["dirs"] == 2 and out["files"] == 1  # the locked folder's own size still counts
    expected = sum(usage(p, apparent=True) for p in (root, root / "open", root / "open" / "f"))
    assert out["total_bytes"] == expected + usage(locked, apparent=True)


def test_disk_usage_missing_path_fails(host: SkillHost, tmp_path: Path) -> None:
    missing = tmp_path / "nope"
    message = failure(host, "disk_usage", {"path": str(missing)})
    assert message.startswith("MeasureError: ")
    assert str(missing) in message and "No such file" in message
    assert str(missing) in error_of(run("disk_usage", {"path": str(missing)}), 1)  # the script: exit 1

    afile = tmp_path / "plain"
    afile.write_text("hi")
    assert "Not a directory" in failure(host, "disk_usage", {"path": str(afile / "below")})
    assert "absolute" in failure(host, "disk_usage", {"path": "relative/dir"})


@pytest.mark.parametrize(
    ("args", "path"),
    [
        ({}, "$"),
        ({"path": "/", "colour": "red"}, "$"),
        ({"path": "/", "top": 0}, "$.top"),
        ({"path": "/", "top": True}, "$.top"),
        ({"path": "/", "one_filesystem": "yes"}, "$.one_filesystem"),
        ({"path": ""}, "$.path"),
    ],
)
def test_disk_usage_arguments_are_checked_against_the_schema_before_it_runs(
    host: SkillHost, args: dict[str, Any], path: str
) -> None:
    with pytest.raises(InvalidArguments) as info:
        host.call("disk_usage", args)
    assert [p for p, _m in info.value.errors] == [path]


def test_disk_usage_of_a_file(host: SkillHost, tmp_path: Path) -> None:
    afile = tmp_path / "data.bin"
    afile.write_bytes(b"y" * 12_345)
    link = tmp_path / "link"
    link.symlink_to(afile)
    out = call(host, "disk_usage", {"path": str(link), "apparent_size": True})
    assert out["path"] == str(afile.resolve())
    assert out["type"] == "file"
    assert (out["total_bytes"], out["files"], out["dirs"]) == (12_345, 1, 0)
    assert out["largest"] == [
        {"path": str(afile.resolve()), "bytes": 12_345, "human": "12.1 KiB", "type": "file"}
    ]
    assert out["truncated"] is False

    blocks = call(host, "disk_usage", {"path": str(afile)})
    assert blocks["total_bytes"] == afile.stat().st_blocks * 512


def test_disk_usage_bounds_its_work(host: SkillHost, tree: Path) -> None:
    out = call(host, "disk_usage", {"path": str(tree), "max_entries": 3})
    assert out["truncated"] is True
    assert "max_entries" in out["truncated_reason"]
    assert out["entries_scanned"] == 3

    many = tree / "many"
    many.mkdir()
    for i in range(1100):
        (many / f"f{i}").touch()
    out = call(host, "disk_usage", {"path": str(tree), "time_budget_seconds": 1e-6})
    assert out["truncated"] is True
    assert "time_budget_seconds" in out["truncated_reason"]
    assert out["entries_scanned"] <= 1024


def test_disk_usage_of_root_finishes_in_time(host: SkillHost) -> None:
    timeout = tool(host, "disk_usage").timeout
    started = time.monotonic()
    out = call(host, "disk_usage", {"path": "/"})
    assert time.monotonic() - started < timeout
    assert out["path"] == "/" and out["type"] == "dir"
    assert out["total_bytes"] > 0 and out["files"] > 0 and out["dirs"] > 0
    assert 1 <= len(out["largest"]) <= 10
    for other in ("/proc", "/sys"):
        if os.path.ismount(other):
            assert other in out["skipped_mounts"]
        assert not any(e["path"].startswith(other + "/") for e in out["largest_files"])
    assert out["filesystem"]["mount_point"] == "/"


@pytest.mark.parametrize(
    ("stdin", "needle"),
    [
        (b"", "'path' is required"),
        (b"   \n", "'path' is required"),
        (b"{not json", "not valid JSON"),
        (b"[1, 2]", "JSON object"),
        (b'{"path": "/", "colour": "red"}', "unknown argument"),
        (b'{"path": "/", "top": 0}', "'top'"),
        (b'{"path": "/", "top": true}', "'top'"),
        (b'{"path": "/", "one_filesystem": "yes"}', "'one_filesystem'"),
    ],
)
def test_disk_usage_script_rejects_bad_arguments(stdin: bytes, needle: str) -> None:
    assert needle in error_of(run("disk_usage", stdin), 2)


# -- system_info ------------------------------------------------------------------


def test_system_info_reports_this_machine(host: SkillHost) -> None:
    out = call(host, "system_info", {})  # empty stdin means {}
    assert list(out) == ["os", "cpu", "load", "memory", "swap", "uptime", "processes"]

    os_ = out["os"]
    assert set(os_) == {"system", "release", "version", "machine", "hostname", "distro"}
    uname = os.uname()
    assert os_["system"] == uname.sysname and os_["release"] == uname.release
    assert os_["machine"] == uname.machine
    assert isinstance(os_["hostname"], str) and os_["hostname"]
    if Path("/etc/os-release").exists():
        assert set(os_["distro"]) == {"name", "version", "id", "pretty_name"}
        assert isinstance(os_["distro"]["name"], str)

    cpu = out["cpu"]
    assert set(cpu) == {"count", "usable", "physical_cores", "model"}
    assert cpu["count"] == os.cpu_count() and cpu["count"] >= 1
    assert 1 <= cpu["usable"] <= cpu["count"]
    assert cpu["model"] is None or isinstance(cpu["model"], str)

    load = out["load"]
    assert set(load) == {"1min", "5min", "15min"}
    assert all(isinstance(v, float) and v >= 0 for v in load.values())

    memory = out["memory"]
    assert set(memory) == {"total_bytes", "available_bytes", "used_bytes", "used_percent"}
    assert memory["total_bytes"] > 0
    assert 0 <= memory["available_bytes"] <= memory["total_bytes"]
    assert memory["used_bytes"] == memory["total_bytes"] - memory["available_bytes"]
    assert 0 <= memory["used_percent"] <= 100

    swap = out["swap"]
    assert set(swap) == {"total_bytes", "free_bytes", "used_bytes", "used_percent"}
    assert swap["total_bytes"] >= 0 and 0 <= swap["free_bytes"] <= swap["total_bytes"]

    uptime = out["uptime"]
    assert set(uptime) == {"seconds", "boot_time", "boot_time_epoch"}
    assert uptime["seconds"] > 0
    assert abs(uptime["boot_time_epoch"] + uptime["seconds"] - time.time()) < 120
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", uptime["boot_time"])

    processes = out["processes"]
    assert processes["count"] >= 2  # this test and the skill
    assert processes["running"] >= 1


def test_system_info_include_filter(host: SkillHost) -> None:
    out = call(host, "system_info", {"include": ["memory", "load"]})
    assert list(out) == ["load", "memory"]


def test_system_info_defaults_match_an_empty_call(host: SkillHost) -> None:
    default = tool(host, "system_info").schema["properties"]["include"]["default"]
    assert list(call(host, "system_info", {"include": default})) == default
    assert list(call(host, "system_info", {})) == default


@pytest.mark.parametrize(
    ("stdin", "needle"),
    [
        (b'{"include": ["disk"]}', "unknown section"),
        (b'{"include": []}', "non-empty"),
        (b'{"verbose": true}', "unknown argument"),
        (b"nope", "not valid JSON"),
    ],
)
def test_system_info_script_rejects_bad_arguments(stdin: bytes, needle: str) -> None:
    assert needle in error_of(run("system_info", stdin), 2)


def test_system_info_without_proc_degrades_to_nulls(tmp_path: Path) -> None:
    """Run the collectors with every file unreadable: each fact becomes null, no crash."""
    script = (
        "import builtins, json, os, runpy, sys\n"
        "def fail(*a, **k):\n"
        "    raise OSError('no')\n"
        "builtins.open = fail\n"
        "os.listdir = fail\n"
        "os.getloadavg = fail\n"
        "sys.argv = ['run.py']\n"
        "runpy.run_path('run.py', run_name='__main__')\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", script],
        input=b"{}",
        capture_output=True,
        env={"PATH": os.environ["PATH"]},
        cwd=SKILLS / "system_info",
        timeout=10,
        check=False,
    )
    out = result_of(proc)
    assert out["memory"]["available_bytes"] is None
    assert out["memory"]["total_bytes"] is None or out["memory"]["total_bytes"] > 0
    assert out["swap"] == {
        "total_bytes": None,
        "free_bytes": None,
        "used_bytes": None,
        "used_percent": None,
    }
    assert out["load"] == {"1min": None, "5min": None, "15min": None}
    assert out["uptime"] == {"seconds": None, "boot_time": None, "boot_time_epoch": None}
    assert out["processes"] == {"count": None, "running": None}
    assert out["os"]["distro"] is None and out["os"]["system"]
    assert out["cpu"]["model"] is None and out["cpu"]["count"] >= 1


# -- host_files -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("content", "lines", "expected"),
    [
        ("a\nb\nc\n", 2, ["b", "c"]),
        ("a\nb\nc", 2, ["b", "c"]),
        ("a\nb\n", 10, ["a", "b"]),
        ("", 5, []),
        ("only\n", 1, ["only"]),
        ("x\n\ny\n", 3, ["x", "", "y"]),
    ],
)
def test_tail_file_returns_the_last_lines(
    host: SkillHost, tmp_path: Path, content: str, lines: int, expected: list[str]
) -> None:
    path = tmp_path / "f.log"
    path.write_text(content)
    out = call(host, "tail_file", {"path": str(path), "lines": lines})
    assert (out["lines"], out["line_count"], out["truncated"]) == (expected, len(expected), False)
    assert out["size_bytes"] == len(content.encode()) and out["path"] == str(path.resolve())
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", out["modified"])


def test_tail_file_reads_only_the_end_of_a_big_file(host: SkillHost, tmp_path: Path) -> None:
    path = tmp_path / "big.log"
    path.write_text("".join(f"line {i}\n" for i in range(200_000)))
    out = call(host, "tail_file", {"path": str(path), "lines": 3})
    assert out["lines"] == ["line 199997", "line 199998", "line 199999"]
    cut = call(host, "tail_file", {"path": str(path), "lines": 100, "max_bytes": 40})
    assert cut["truncated"] is True
    assert cut["lines"] == ["line 199997", "line 199998", "line 199999"]  # 40 bytes: the cut line is dropped


def test_tail_file_replaces_invalid_utf8(host: SkillHost, tmp_path: Path) -> None:
    path = tmp_path / "bin.log"
    path.write_bytes(b"ok\n\xff\xfe end\n")
    assert call(host, "tail_file", {"path": str(path), "lines": 2})["lines"] == ["ok", "\ufffd\ufffd end"]


def test_tail_file_refuses_what_is_not_a_regular_file_without_blocking(
    host: SkillHost, tmp_path: Path
) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    started = time.monotonic()
    assert failure(host, "tail_file", {"path": str(fifo)}) == f"ValueError: {fifo} is not a regular file"
    assert time.monotonic() - started < 5
    assert (
        failure(host, "tail_file", {"path": str(tmp_path)}) == f"ValueError: {tmp_path} is not a regular file"
    )
    assert "must be absolute" in failure(host, "tail_file", {"path": "relative.log"})
    assert "No such file" in failure(host, "tail_file", {"path": str(tmp_path / "missing")})


def test_find_large_files_lists_big_files_largest_first(host: SkillHost, tree: Path) -> None:
    out = call(host, "find_large_files", {"path": str(tree), "min_bytes": 20_000})
    assert [(Path(f["path"]).name, f["bytes"]) for f in out["files"]] == [
        ("big.bin", 50_000),
        ("d.log", 40_000),
        ("c.bin", 30_000),
        ("a.txt", 20_000),
    ]
    assert out["count"] == 4 and out["truncated"] is False and out["entries_scanned"] == 10
    assert all(f["modified"] and f["type"] == "file" for f in out["files"])
    top = call(host, "find_large_files", {"path": str(tree), "min_bytes": 0, "top": 2})
    assert [Path(f["path"]).name for f in top["files"]] == ["big.bin", "d.log"]


def test_find_large_files_is_bounded_and_refuses_files(host: SkillHost, tree: Path) -> None:
    out = call(host, "find_large_files", {"path": str(tree), "min_bytes": 0, "max_entries": 2})
    assert out["truncated"] is True and "max_entries=2" in out["truncated_reason"]
    assert failure(host, "find_large_files", {"path": str(tree / "big.bin")}) == (
        f"NotADirectoryError: {tree / 'big.bin'} is not a directory"
    )


def test_a_short_call_timeout_shortens_the_scan_instead_of_timing_out(host: SkillHost) -> None:
    # 2 s: the budget leaves a quarter of the call (0.5 s) to stop and report; the 0.25 s a
    # 1 s call leaves was overrun once with every CPU of a 2-core machine busy. The garbage
    # earlier tests left goes first: a full collection of it, due at any moment, took 0.67 s
    # on such a machine (a scan makes little garbage of its own: no full collection in 3 s).
    gc.collect()
    result = host.call("disk_usage", {"path": "/", "one_filesystem": False}, timeout=2.0)
    assert result.ok, result.error  # not timed_out: the scan budget was cut to fit the call
    assert result.value["truncated"] is True
    assert result.value["truncated_reason"] == "stopped when time_budget_seconds ran out"
