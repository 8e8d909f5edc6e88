"""The built-in ``host_files`` tools read only beneath the configured folders (issue 9).

Native tools run inside the host process, where no kernel sandbox can narrow them, so
``tail_file`` and ``find_large_files`` confine themselves to ``host_files_dirs``
(``ONGRID_HOST_FILES_DIRS``) with descriptors. Each defence here is an attack kept as
a test: a secret outside the allowed folder, ``..``, symlinks inside the folder that
point out, and swap loops that keep turning a file or a folder into such a symlink
while calls run. Over ``SkillHost.call``, a real ``ongrid-skills`` process and the REST
API on 127.0.0.1, as the ``viewer`` persona that the issue reports read ``/etc/shadow``.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from httpserve import running
from swaps import Swapper

from ongrid_plugins import SkillHost
from ongrid_plugins.server.responses import scrub_paths
from ongrid_plugins.server.rest import create_app
from ongrid_plugins.server.tokens import TokenStore, add_token
from ongrid_plugins.settings import Settings
from ongrid_plugins.testing import isolated_settings

WIDEN = "an operator can widen them with ONGRID_HOST_FILES_DIRS (absolute folders separated by ':')"
SECRET = "root:$6$the-shadow-line:19000:0:99999:7:::"


@pytest.fixture
def place(tmp_path: Path) -> dict[str, Path]:
    """An allowed folder (like ``/var/log``) with a log, and an outside folder with a secret."""
    base = tmp_path.resolve()
    allowed = base / "var-log"
    (allowed / "app").mkdir(parents=True)
    (allowed / "app" / "app.log").write_text("one\ntwo\ninside\n")
    (allowed / "big.log").write_bytes(b"x" * 5000)
    outside = base / "etc"
    outside.mkdir()
    (outside / "shadow").write_text(SECRET + "\n")
    (outside / "outside-only.bin").write_bytes(b"s" * 9000)
    return {"base": base, "allowed": allowed, "outside": outside, "secret": outside / "shadow"}


def make_host(place: dict[str, Path], *folders: Path | str) -> SkillHost:
    """A host with the built-in skills, ``host_files`` allowed ``folders`` (the allowed folder by default)."""
    dirs = tuple(str(f) for f in folders) or (str(place["allowed"]),)
    host = SkillHost(isolated_settings(place["base"] / "host", include_defaults=True, host_files_dirs=dirs))
    host.load()
    return host


def outcome(host: SkillHost, name: str, args: dict[str, Any]) -> tuple[Any, str | None]:
    result = host.call(name, args, persona="viewer")
    assert result.ok == (result.error is None)
    return result.value, result.error


def outside_message(path: Path | str, allowed: Path | str) -> str:
    return f"PermissionError: {path} is outside the folders host_files may read ({allowed}); {WIDEN}"


# -- where host_files may read ---------------------------------------------------------


def test_the_default_is_var_log_and_etc_shadow_is_refused_without_being_opened(tmp_path: Path) -> None:
    assert Settings().host_files_dirs == ("/var/log",)
    assert Settings.from_env({}).host_files_dirs == ("/var/log",)
    host = SkillHost(isolated_settings(tmp_path, include_defaults=True))
    for name, path in (("tail_file", "/etc/shadow"), ("find_large_files", "/"), ("find_large_files", "/etc")):
        result = host.call(name, {"path": path}, persona="viewer")
        assert not result.ok and result.error == outside_message(path, "/var/log"), result.value


def test_a_file_in_the_allowed_folder_is_read(place: dict[str, Path]) -> None:
    host = make_host(place)
    value, error = outcome(host, "tail_file", {"path": str(place["allowed"] / "app" / "app.log"), "lines": 2})
    assert error is None and value["lines"] == ["two", "inside"]
    assert value["path"] == str(place["allowed"] / "app" / "app.log")
    value, error = outcome(host, "find_large_files", {"path": str(place["allowed"]), "min_bytes": 0})
    assert error is None and value["path"] == str(place["allowed"])
    assert [(f["path"], f["bytes"]) for f in value["files"]] == [
        (str(place["allowed"] / "big.log"), 5000),
        (str(place["allowed"] / "app" / "app.log"), 15),
    ]
    assert all(f["modified"] for f in value["files"])


def test_a_secret_outside_the_allowed_folder_is_refused_naming_the_folders_and_the_variable(
    place: dict[str, Path],
) -> None:
    host = make_host(place)
    secret = place["secret"]
    assert outcome(host, "tail_file", {"path": str(secret)}) == (
        None,
        outside_message(secret, place["allowed"]),
    )
    assert outcome(host, "find_large_files", {"path": str(place["outside"])}) == (
        None,
        outside_message(place["outside"], place["allowed"]),
    )
    assert outcome(host, "find_large_files", {"path": "/"})[1] == outside_message("/", place["allowed"])
    # A sibling whose name merely starts with the folder's is outside too.
    sibling = place["base"] / "var-log-old"
    sibling.mkdir()
    (sibling / "x.log").write_text("x\n")
    assert outcome(host, "tail_file", {"path": str(sibling / "x.log")})[1] == outside_message(
        sibling / "x.log", place["allowed"]
    )


@pytest.mark.parametrize(
    "relative",
    ["../etc/shadow", "app/../../etc/shadow", "./app/../../etc/shadow", "app/../../../" * 3 + "etc/shadow"],
)
def test_dot_dot_never_leaves_the_folder(place: dict[str, Path], relative: str) -> None:
    host = make_host(place)
    given = f"{place['allowed']}/{relative}"
    value, error = outcome(host, "tail_file", {"path": given})
    assert value is None and error == outside_message(os.path.normpath(given), place["allowed"])
    assert SECRET not in json.dumps(value)


def test_dot_dot_that_stays_inside_is_fine(place: dict[str, Path]) -> None:
    value, error = outcome(make_host(place), "tail_file", {"path": f"{place['allowed']}/app/../app/app.log"})
    assert error is None and value["lines"][-1] == "inside" and value["path"].endswith("/var-log/app/app.log")


@pytest.mark.parametrize(
    ("path", "error"),
    [
        (
            "var-log/app/app.log",
            "ValueError: path must be absolute (or start with ~), got 'var-log/app/app.log'",
        ),
        ("/x\0/etc/shadow", "ValueError: path must not contain NUL characters"),
    ],
)
def test_a_path_that_is_not_absolute_or_has_a_nul_is_refused(
    place: dict[str, Path], path: str, error: str
) -> None:
    assert outcome(make_host(place), "tail_file", {"path": path}) == (None, error)


@pytest.mark.usefixtures("beneath")
def test_symlinks_inside_the_folder_are_never_followed(place: dict[str, Path]) -> None:
    allowed = place["allowed"]
    (allowed / "shadow.log").symlink_to(place["secret"])
    (allowed / "etc").symlink_to(place["outside"])
    (allowed / "current.log").symlink_to("app/app.log")  # pointing inside: still a link, still refused
    host = make_host(place)
    for name, path in (
        ("tail_file", allowed / "shadow.log"),
        ("tail_file", allowed / "etc" / "shadow"),
        ("tail_file", allowed / "current.log"),
        ("find_large_files", allowed / "etc"),
    ):
        value, error = outcome(host, name, {"path": str(path)})
        assert value is None and error == (
            f"PermissionError: {path}: a symbolic link is on the way; host_files follows no links "
            f"(give the path of the file itself, beneath {allowed})"
        )
    value, error = outcome(host, "find_large_files", {"path": str(allowed), "min_bytes": 0})
    assert error is None
    assert [f["path"] for f in value["files"]] == [str(allowed / "big.log"), str(allowed / "app" / "app.log")]


def test_the_allowed_folder_may_itself_be_a_symlink_chosen_by_the_operator(place: dict[str, Path]) -> None:
    alias = place["base"] / "logs-alias"
    alias.symlink_to(place["allowed"])
    host = make_host(place, alias)
    for path in (alias / "app" / "app.log", place["allowed"] / "app" / "app.log"):
        value, error = outcome(host, "tail_file", {"path": str(path)})
        assert error is None and value["path"] == str(place["allowed"] / "app" / "app.log")
    assert outcome(host, "tail_file", {"path": str(place["secret"])})[1] == outside_message(
        place["secret"], alias
    )


def test_several_folders_and_none(place: dict[str, Path]) -> None:
    host = make_host(place, place["base"] / "missing", place["allowed"])
    assert outcome(host, "tail_file", {"path": str(place["allowed"] / "app" / "app.log")})[1] is None
    error = outcome(host, "tail_file", {"path": str(place["base"] / "missing" / "x.log")})[1]
    assert error == (
        f"FileNotFoundError: cannot open {place['base'] / 'missing'}, the allowed folder holding "
        f"{place['base'] / 'missing' / 'x.log'}: No such file or directory (the folders come from "
        "ONGRID_HOST_FILES_DIRS)"
    )
    nothing = SkillHost(isolated_settings(place["base"] / "h2", include_defaults=True, host_files_dirs=()))
    result = nothing.call("tail_file", {"path": str(place["allowed"] / "app" / "app.log")}, persona="viewer")
    assert result.error == outside_message(place["allowed"] / "app" / "app.log", "none are configured")


def test_the_setting_comes_from_the_environment_and_must_be_absolute() -> None:
    settings = Settings.from_env({"ONGRID_HOST_FILES_DIRS": "/var/log:/srv/app/logs, ~/logs"})
    assert settings.host_files_dirs == ("/var/log", "/srv/app/logs", "~/logs")
    with pytest.raises(Exception, match=r"ONGRID_HOST_FILES_DIRS.*'logs' is not an absolute folder"):
        Settings.from_env({"ONGRID_HOST_FILES_DIRS": "/var/log:logs"})


# -- swap loops --------------------------------------------------------------------


@pytest.mark.usefixtures("beneath")
def test_a_log_swapped_for_a_symlink_to_a_secret_is_never_read(place: dict[str, Path]) -> None:
    host = make_host(place)
    log = place["allowed"] / "app" / "app.log"
    seen = {"inside": 0, "outside": 0, "refused": 0}
    with Swapper(log, place["secret"]) as swapper:
        deadline = time.monotonic() + 2
        while time.monotonic() < deadline:
            value, error = outcome(host, "tail_file", {"path": str(log)})
            if error is not None:
                seen["refused"] += 1
            else:
                seen["outside" if SECRET in value["lines"] else "inside"] += 1
    assert seen["outside"] == 0, seen
    assert seen["inside"] > 0 and seen["refused"] > 0 and swapper.swaps > 100, (seen, swapper.swaps)


@pytest.mark.usefixtures("beneath")
def test_a_folder_swapped_for_a_symlink_to_an_outside_folder_is_never_read_or_listed(
    place: dict[str, Path],
) -> None:
    host = make_host(place)
    folder = place["allowed"] / "app"
    seen = {"inside": 0, "outside": 0, "refused": 0, "scans": 0}
    with Swapper(folder, place["outside"]) as swapper:
        deadline = time.monotonic() + 2
        while time.monotonic() < deadline:
            value, error = outcome(host, "tail_file", {"path": str(folder / "shadow")})
            seen["outside" if error is None else "refused"] += 1
            value, error = outcome(host, "tail_file", {"path": str(folder / "app.log")})
            seen["inside" if error is None else "refused"] += 1
            for path in (folder, place["allowed"]):
                value, error = outcome(host, "find_large_files", {"path": str(path), "min_bytes": 0})
                if error is None:
                    seen["scans"] += 1
                    if "outside-only" in json.dumps(value):
                        seen["outside"] += 1
    assert seen["outside"] == 0, seen
    assert seen["inside"] > 0 and seen["scans"] > 0 and swapper.swaps > 100, (seen, swapper.swaps)


# -- over the surfaces -------------------------------------------------------------


def cli(place: dict[str, Path], *argv: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ONGRID_")}
    env["ONGRID_SYSTEM_SKILLS_DIR"] = os.environ["ONGRID_SYSTEM_SKILLS_DIR"]
    env["ONGRID_HOST_FILES_DIRS"] = str(place["allowed"])
    return subprocess.run(
        [sys.executable, "-m", "ongrid_plugins", *argv],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )


def test_the_command_line_reads_inside_and_refuses_outside(place: dict[str, Path]) -> None:
    inside = cli(place, "run", "tail_file", json.dumps({"path": str(place["allowed"] / "app" / "app.log")}))
    assert inside.returncode == 0, inside.stderr
    assert json.loads(inside.stdout)["lines"] == ["one", "two", "inside"]
    refused = cli(place, "run", "tail_file", json.dumps({"path": str(place["secret"])}), "--json")
    assert refused.returncode == 1 and SECRET not in refused.stdout + refused.stderr
    assert json.loads(refused.stdout)["error"] == outside_message(place["secret"], place["allowed"])
    assert f"ERROR: tail_file: {outside_message(place['secret'], place['allowed'])}" in refused.stderr


@pytest.fixture
def api(place: dict[str, Path]) -> Iterator[dict[str, Any]]:
    host = make_host(place)
    tokens_file = place["base"] / "tokens.json"
    token = add_token(str(tokens_file), "vic", "viewer")
    with running(create_app(host, TokenStore.from_file(str(tokens_file)))) as url:
        yield {"url": url, "headers": {"Authorization": f"Bearer {token}"}}


def test_rest_reads_inside_and_refuses_outside_for_a_viewer(
    place: dict[str, Path], api: dict[str, Any]
) -> None:
    with httpx.Client(base_url=api["url"], headers=api["headers"], timeout=30) as client:
        inside = client.post(
            "/v1/skills/tail_file/execute",
            json={"params": {"path": str(place["allowed"] / "app" / "app.log")}},
        )
        assert inside.status_code == 200 and inside.json()["result"]["lines"][-1] == "inside"
        for name, path in (("tail_file", place["secret"]), ("find_large_files", Path("/"))):
            refused = client.post(f"/v1/skills/{name}/execute", json={"params": {"path": str(path)}})
            assert refused.status_code == 200 and SECRET not in refused.text
            body = refused.json()
            assert body["code"] == "failed" and "result" not in body
            # REST cuts server paths in error bodies to their last component (docs/security.md).
            assert body["error"] == scrub_paths(outside_message(path, place["allowed"]))


# -- disk_usage and system_info -----------------------------------------------------

SKILLS = Path(__file__).resolve().parent.parent / "ongrid_plugins" / "skills"
FS_WRITERS = {
    "write", "remove", "unlink", "rename", "replace", "mkdir", "makedirs", "rmdir", "removedirs",
    "chmod", "chown", "lchown", "truncate", "ftruncate", "symlink", "link", "mkfifo", "mknod",
    "utime", "rmtree", "copy", "copyfile", "copytree", "move",
}  # fmt: skip
PATH_WRITERS = {"write_text", "write_bytes", "touch", "mkdir", "unlink", "rmdir", "symlink_to", "chmod"}
WRITE_FLAGS = {"O_WRONLY", "O_RDWR", "O_CREAT", "O_TRUNC", "O_APPEND"}


def _writes(source: Path) -> list[str]:
    """What in ``source`` could write: an ``os``/``shutil``/``Path`` writer, a write flag or mode."""
    found = []
    for node in ast.walk(ast.parse(source.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Attribute) and node.attr in WRITE_FLAGS:
            found.append(f"{node.attr} at line {node.lineno}")
        if not isinstance(node, ast.Call):
            continue
        func, text = node.func, ast.unparse(node.func)
        if isinstance(func, ast.Attribute):
            owner = ast.unparse(func.value)
            if (owner in ("os", "shutil") and func.attr in FS_WRITERS) or (
                func.attr in PATH_WRITERS and owner not in ("os", "shutil")
            ):
                found.append(f"{text}() at line {node.lineno}")
            if func.attr == "write" and owner not in ("os", "sys.stdout"):
                found.append(f"{text}() at line {node.lineno}")
        if text == "open":
            modes = node.args[1:2] + [k.value for k in node.keywords if k.arg == "mode"]
            if any(not (isinstance(m, ast.Constant) and set(str(m.value)) <= set("rbt")) for m in modes):
                found.append(f"open() in a write mode at line {node.lineno}")
    return found


@pytest.mark.parametrize(
    "source",
    [
        SKILLS / "disk_usage" / "run.py",
        SKILLS / "system_info" / "run.py",
        SKILLS.parent / "discovery/builtin_tools.py",
    ],
    ids=lambda p: f"{p.parent.name}/{p.name}",
)
def test_the_builtin_tools_have_no_way_to_write(source: Path) -> None:
    """No call that writes, no write flag, no ``open`` in a write mode: only stdout of a direct run."""
    assert _writes(source) == []


def test_the_write_detector_finds_writes(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text(
        "import os, shutil\nos.open(p, os.O_WRONLY)\nopen(p, 'w')\nopen(p, mode='a')\nopen(p, m)\n"
        "os.unlink(p)\nshutil.rmtree(p)\nPath(p).write_text('x')\nhandle.write('x')\n"
        "sys.stdout.write('ok')\nopen(p)\nopen(p, 'rb')\n'a'.replace('a', 'b')\n"
    )
    assert sorted(int(item.rsplit(" at line ", 1)[1]) for item in _writes(sample)) == [2, 3, 4, 5, 6, 7, 8, 9]
