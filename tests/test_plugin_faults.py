"""A third-party plugin cannot stop the host: not by exiting, answering nonsense, printing or stalling.

Each test installs a real distribution with an ``ongrid_plugins`` entry point into a
folder on ``sys.path`` (``tests/distributions.py``) and builds a real host over it; the
stdout tests run ``python -m ongrid_plugins`` in a real process.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest
from distributions import install_dist

from ongrid_plugins import PluginLoadError, SkillHost, get_plugin_manager
from ongrid_plugins.testing import isolated_settings, make_skill

REPO = Path(__file__).resolve().parent.parent


def _install_plugin(site: Path, name: str, source: str, dist: str = "ongrid-faulty") -> None:
    module = f"ongrid_test_plugin_{name}"
    install_dist(site, dist, "0.1", {"ongrid_plugins": {name: module}}, {f"{module}.py": source})


def _host(tmp_path: Path, root: Path, **overrides: object) -> SkillHost:
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
