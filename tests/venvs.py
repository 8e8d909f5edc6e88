"""Real wheels, real pip, throwaway virtual environments: for the tests of what users install.

Creating a venv and installing into it is the slow part of the suite, so the
package's own wheel is built once per session (``ongrid_wheel`` in
conftest.py) and each test module makes one venv (``Venv.create``), installing
and uninstalling example distributions in it as its tests go.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PIP = [sys.executable, "-m", "pip", "--disable-pip-version-check"]


def build_wheels(projects: Sequence[Path], out: Path) -> dict[str, Path]:
    """Build a wheel of each project (one pip call); return them by distribution name."""
    out.mkdir(parents=True, exist_ok=True)
    cmd = [*PIP, "wheel", "--no-deps", "-q", "-w", str(out), *map(str, projects)]
    subprocess.run(cmd, check=True, capture_output=True, text=True)
    return {w.name.split("-")[0].replace("_", "-"): w for w in out.glob("*.whl")}


class Venv:
    """A virtual environment without pip of its own: the suite's pip installs into it."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.bin = path / "bin"
        self.python = str(self.bin / "python")

    @classmethod
    def create(cls, path: Path, *wheels: Path, extra: Sequence[str] = ("pytest",)) -> Venv:
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True)
        venv = cls(path)
        venv.pip("install", "-q", *map(str, wheels), *extra)
        return venv

    def pip(self, *args: str) -> subprocess.CompletedProcess[str]:
        """Run the suite's pip against this venv's interpreter."""
        cmd = [*PIP, "--python", self.python, *args]
        result = subprocess.run(cmd, capture_output=True, text=True)
        assert result.returncode == 0, f"pip {' '.join(args)} failed:\n{result.stderr}"
        return result

    def install(self, *wheels: Path) -> None:
        self.pip("install", "-q", "--no-deps", *map(str, wheels))

    def uninstall(self, *dists: str) -> None:
        self.pip("uninstall", "-y", "-q", *dists)

    def installed(self) -> set[str]:
        out = self.pip("list", "--format=freeze").stdout
        return {line.split("==")[0].lower() for line in out.splitlines() if "==" in line}

    def run(
        self, *argv: str, env: dict[str, str], cwd: Path, check: bool = False, stdin: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        """Run a program of this venv's bin folder (``ongrid-skills``, ``python``)."""
        cmd = [str(self.bin / argv[0]), *argv[1:]]
        result = subprocess.run(
            cmd, capture_output=True, text=True, env=env, cwd=cwd, input=stdin, timeout=300
        )
        if check:
            assert result.returncode == 0, (
                f"{' '.join(argv)} exited {result.returncode}:\n{result.stdout}\n{result.stderr}"
            )
        return result


def clean_env(home: Path, **extra: str) -> dict[str, str]:
    """The environment a user would have: no ONGRID_* or PYTHON* leaking in, private XDG folders."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ONGRID_", "PYTHON", "XDG_"))}
    for var, sub in (
        ("XDG_DATA_HOME", "data"),
        ("XDG_CACHE_HOME", "cache"),
        ("XDG_STATE_HOME", "state"),
        ("XDG_CONFIG_HOME", "config"),
    ):
        env[var] = str(home / sub)
    env["ONGRID_SYSTEM_SKILLS_DIR"] = str(home / "etc-ongrid-skills")
    env.update(extra)
    return env
