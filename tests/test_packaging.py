"""The package as a user gets it: a wheel built from this tree, installed with real pip in a fresh venv."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

import ongrid_plugins

REPO = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory, ongrid_wheel: Path) -> Path:
    """A fresh venv with the wheel of this tree (built once per session) installed; returns its bin folder."""
    base = tmp_path_factory.mktemp("pkg")
    wheel = ongrid_wheel
    subprocess.run([sys.executable, "-m", "venv", str(base / "venv")], check=True)
    bin_dir = base / "venv" / "bin"
    subprocess.run([str(bin_dir / "pip"), "install", "-q", str(wheel)], check=True, capture_output=True)
    return bin_dir


def clean_env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ONGRID_", "PYTHON"))}
    env["XDG_DATA_HOME"] = str(tmp_path / "data")
    env["XDG_CACHE_HOME"] = str(tmp_path / "cache")
    return env


def test_the_quick_start_command_works_from_the_installed_wheel(installed: Path, tmp_path: Path) -> None:
    (tmp_path / "tree").mkdir()
    (tmp_path / "tree" / "file.bin").write_bytes(b"x" * 10000)
    result = subprocess.run(
        [str(installed / "ongrid-skills"), "run", "disk_usage", json.dumps({"path": str(tmp_path / "tree")})],
        capture_output=True,
        text=True,
        env=clean_env(tmp_path),
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    value = json.loads(result.stdout)
    assert value["path"] == str(tmp_path / "tree")
    assert value["files"] == 1


def test_builtin_entries_keep_their_execute_bits_when_installed(installed: Path) -> None:
    site = subprocess.run(
        [
            str(installed / "python"),
            "-c",
            "import ongrid_plugins, os; print(os.path.dirname(ongrid_plugins.__file__))",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    entries = sorted(Path(site, "skills").glob("*/run.py"))
    assert entries, "no built-in skill entries were installed"
    for entry in entries:
        assert stat.S_IMODE(entry.stat().st_mode) & 0o111, f"{entry} lost its execute bit"
    assert Path(site, "py.typed").exists()
    assert Path(site, "schemas", "skill.schema.json").exists()


def test_python_m_and_the_console_script_agree(installed: Path, tmp_path: Path) -> None:
    env = clean_env(tmp_path)
    # cwd matters: `python -m` puts it first on sys.path, and the repo holds a package too.
    by_script = subprocess.run(
        [str(installed / "ongrid-skills"), "list", "--json"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
    )
    by_module = subprocess.run(
        [str(installed / "python"), "-m", "ongrid_plugins", "list", "--json"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
    )
    assert by_script.returncode == by_module.returncode == 0
    names = {i["name"] for i in json.loads(by_script.stdout)["items"]}
    assert {"disk_usage", "system_info"} <= names
    assert json.loads(by_script.stdout) == json.loads(by_module.stdout)


def test_version_in_pyproject_matches_the_package() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert project["version"] == ongrid_plugins.__version__
    assert project["scripts"]["ongrid-skills"] == "ongrid_plugins.cli:main"


def test_the_wheel_is_pure_python_and_runs_a_call(installed: Path, tmp_path: Path) -> None:
    code = (
        "from ongrid_plugins.executors import _process\n"
        "spec = _process.ProcessSpec(argv=('/bin/cat',), cwd='/', env={}, stdin=b'hi', timeout=5)\n"
        "print(_process.run_process(spec).stdout.decode())\n"
    )
    assert in_installed(installed, tmp_path, code).split() == ["hi"]
    assert ongrid_wheel_tag(installed) == "py3-none-any"


def in_installed(installed: Path, cwd: Path, code: str) -> str:
    """What ``code`` prints, run by the venv's Python (from ``cwd``, away from this checkout)."""
    done = subprocess.run(
        [str(installed / "python"), "-c", code], capture_output=True, text=True, check=True, cwd=cwd
    )
    return done.stdout


def ongrid_wheel_tag(installed: Path) -> str:
    site = Path(
        subprocess.run(
            [str(installed / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    )
    (wheel_file,) = site.glob("ongrid_plugins-*.dist-info/WHEEL")
    return next(
        line.split(": ", 1)[1] for line in wheel_file.read_text().splitlines() if line.startswith("Tag: ")
    )


def test_the_wheel_builds_without_a_c_compiler_and_holds_no_compiled_code(tmp_path: Path) -> None:
    env = {**os.environ, "CC": str(tmp_path / "no-such-cc")}
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-w", str(tmp_path / "dist"), str(REPO)],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert built.returncode == 0, built.stderr
    (wheel,) = (tmp_path / "dist").glob("*.whl")
    assert wheel.name.endswith("-py3-none-any.whl")
    assert not [n for n in zipfile.ZipFile(wheel).namelist() if n.endswith((".so", ".c"))]
