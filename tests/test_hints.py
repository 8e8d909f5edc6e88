"""``ongrid_plugins.core.hints``: install hints name local things as paths, never as index names."""

from __future__ import annotations

import json
from importlib.metadata import PathDistribution
from pathlib import Path

import pytest
from venvs import REPO

from ongrid_plugins.core import hints


@pytest.mark.parametrize(
    ("folder", "shown"),
    [
        ("ongrid-pack-greet", "./ongrid-pack-greet"),
        ("./ongrid-pack-greet", "./ongrid-pack-greet"),
        ("../x/ongrid-pack-greet", "../x/ongrid-pack-greet"),
        ("/abs/ongrid-pack-greet", "/abs/ongrid-pack-greet"),
        ("sub/ongrid-pack-greet", "./sub/ongrid-pack-greet"),
    ],
)
def test_a_folder_is_always_written_as_a_path(folder: str, shown: str) -> None:
    assert hints.local_path(folder) == shown


def test_this_checkout_is_named_by_its_folder() -> None:
    # The suite runs from an editable install of this checkout.
    assert hints.install_source() == (str(REPO), True)
    assert hints.extra_install("server") == f"pip install -e '{REPO}[server]'"
    assert hints.pack_install("ongrid-pack-greet") == f"pip install -e {REPO} ./ongrid-pack-greet"


def _fake_dist(monkeypatch: pytest.MonkeyPatch, info: Path, direct_url: object | None) -> None:
    info.mkdir(parents=True)
    if direct_url is not None:
        (info / "direct_url.json").write_text(json.dumps(direct_url))
    monkeypatch.setattr(hints, "_dist_info", lambda: PathDistribution(info))


def test_an_install_from_an_index_is_named_by_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_dist(monkeypatch, tmp_path / "ongrid_plugins-0.1.0.dist-info", None)
    assert hints.extra_install("mcp") == "pip install 'ongrid-plugins[mcp]'"
    assert hints.pack_install("ongrid-pack-greet") == "pip install ./ongrid-pack-greet"


def test_an_install_from_a_local_wheel_is_named_by_the_wheel(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    wheel = tmp_path / "dist" / "ongrid_plugins-0.1.0-py3-none-any.whl"
    direct = {"url": wheel.as_uri(), "archive_info": {}}
    _fake_dist(monkeypatch, tmp_path / "ongrid_plugins-0.1.0.dist-info", direct)
    assert hints.extra_install("server") == f"pip install '{wheel}[server]'"
