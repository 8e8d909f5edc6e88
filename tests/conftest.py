"""Shared fixtures: every test runs with a clean ONGRID_* environment and private XDG dirs."""

from __future__ import annotations

import importlib
import logging
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest_plugins = ["ongrid_plugins.testing"]

REPO = Path(__file__).resolve().parent.parent
CORPUS = REPO.parent / "shared" / "corpus" / "skillmd"


def pytest_configure(config: pytest.Config) -> None:
    """Keep test folders out of /tmp.

    A confined skill sees a private, empty /tmp (docs/sandbox.md), so fixtures under
    /tmp would be invisible to the skills they are made for; real skills and their
    data live elsewhere too. /var/tmp is what pytest uses instead (its own rotation
    and per-run numbering still apply).
    """
    if "PYTEST_DEBUG_TEMPROOT" not in os.environ and os.path.isdir("/var/tmp"):
        os.environ["PYTEST_DEBUG_TEMPROOT"] = "/var/tmp"


@pytest.fixture(autouse=True)
def _isolated_environment(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """No test reads or writes the real user's skills, cache, state or config."""
    for name in list(os.environ):
        if name.startswith("ONGRID_"):
            monkeypatch.delenv(name)
    home = tmp_path_factory.mktemp("home")
    for var, sub in (
        ("XDG_DATA_HOME", "data"),
        ("XDG_CACHE_HOME", "cache"),
        ("XDG_STATE_HOME", "state"),
        ("XDG_CONFIG_HOME", "config"),
    ):
        monkeypatch.setenv(var, str(home / sub))
    monkeypatch.setenv("ONGRID_SYSTEM_SKILLS_DIR", str(home / "etc-ongrid-skills"))


@pytest.fixture
def deep_tmp_path(tmp_path: Path) -> Iterator[Path]:
    """``tmp_path`` for trees a thousand levels deep: emptied without recursion afterwards, pass or fail.

    pytest removes old test folders with ``shutil.rmtree``, which raises RecursionError on them
    and would end later sessions (of every checkout sharing the temporary root) with a traceback.
    """
    from ongrid_plugins.packs.archive import remove_tree

    yield tmp_path
    for child in tmp_path.iterdir():
        remove_tree(str(child))


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """An empty allow-list root."""
    path = tmp_path / "skills"
    path.mkdir()
    return path


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A folder on sys.path where tests install distributions; their packages are named ongrid_test_*."""
    path = tmp_path / "site"
    path.mkdir()
    monkeypatch.syspath_prepend(str(path))
    importlib.invalidate_caches()
    yield path
    for name in [n for n in sys.modules if n.startswith("ongrid_test_")]:
        del sys.modules[name]


@pytest.fixture(autouse=True)
def _restore_package_logger() -> Iterator[None]:
    """``cli.main()`` points the package logger at the (captured) stderr; undo that after each test."""
    logger = logging.getLogger("ongrid_plugins")
    saved = (list(logger.handlers), logger.level, logger.propagate)
    yield
    logger.handlers[:], logger.level, logger.propagate = saved[0], saved[1], saved[2]


@pytest.fixture(scope="session")
def ongrid_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel of this tree, built once per session for every test that installs it into a venv."""
    from venvs import build_wheels

    return build_wheels([REPO], tmp_path_factory.mktemp("ongrid-wheel"))["ongrid-plugins"]


@pytest.fixture(params=["openat2", "walk"])
def beneath(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Both ways ``roots.open_beneath`` works: ``openat2``, and the component walk of older kernels."""
    from ongrid_plugins.discovery import roots

    if request.param == "walk":
        monkeypatch.setattr(roots, "_openat2", False)
    return str(request.param)


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A private redis-server on a free 127.0.0.1 port for one test module (``tests/remotekit.py``)."""
    from remotekit import redis_server

    yield from redis_server(tmp_path_factory)
