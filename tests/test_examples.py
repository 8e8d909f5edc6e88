"""The example distributions in plugins/: built into wheels, installed with real pip, driven, uninstalled.

One venv for the module, with this tree's wheel and pytest; each test installs
one example's wheel, drives it through the ``ongrid-skills`` CLI, runs the
example's own tests against the installed copy, uninstalls it and checks
that every trace of it is gone from listings.
"""

from __future__ import annotations

import datetime
import json
import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from venvs import REPO, Venv, build_wheels, clean_env

from ongrid_plugins.testing import make_skill

pytestmark = pytest.mark.slow

PLUGINS = REPO / "plugins"
EXAMPLES = ("ongrid-pack-disk", "ongrid-policy-window", "ongrid-pack-netcheck")
#: The ongrid_skills entry points of each example, consented to once installed.
PACK_POINTS = {"ongrid-pack-disk": ("disk",), "ongrid-pack-netcheck": ("netcheck",)}


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return build_wheels([PLUGINS / name for name in EXAMPLES], tmp_path_factory.mktemp("example-wheels"))


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory, ongrid_wheel: Path) -> Venv:
    return Venv.create(tmp_path_factory.mktemp("examples") / "venv", ongrid_wheel)


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return clean_env(tmp_path / "home")


class Installed:
    """One example installed for one test; uninstalled (and checked gone) at the end."""

    def __init__(self, venv: Venv, dist: str, env: dict[str, str], cwd: Path) -> None:
        self.venv, self.dist, self.env, self.cwd = venv, dist, env, cwd

    def cli(self, *argv: str, code: int = 0, **extra: str) -> str:
        result = self.venv.run("ongrid-skills", *argv, env={**self.env, **extra}, cwd=self.cwd)
        assert result.returncode == code, f"{argv}: {result.returncode}\n{result.stdout}\n{result.stderr}"
        return result.stdout + result.stderr

    def json(self, *argv: str, **extra: str) -> dict:
        return json.loads(
            self.venv.run("ongrid-skills", *argv, env={**self.env, **extra}, cwd=self.cwd).stdout
        )

    def own_tests(self, **extra: str) -> str:
        tests = PLUGINS / self.dist / "tests"
        result = self.venv.run(
            "python",
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            str(tests),
            env={**self.env, **extra},
            cwd=self.cwd,
        )
        assert result.returncode == 0, result.stdout + result.stderr
        return result.stdout


@pytest.fixture
def installed(venv: Venv, wheels: dict[str, Path], env: dict[str, str], tmp_path: Path) -> Iterator:
    done: list[Installed] = []

    def install(dist: str) -> Installed:
        venv.install(wheels[dist])
        done.append(Installed(venv, dist, env, tmp_path))
        for pack in PACK_POINTS.get(dist, ()):  # a pip pack loads once consented (docs/trust.md)
            assert "consent" in done[-1].cli("trust", pack, "--yes")
        return done[-1]

    yield install
    for item in done:
        if item.dist in venv.installed():
            venv.uninstall(item.dist)


def test_the_disk_pack_end_to_end(installed, tmp_path: Path) -> None:
    disk = installed("ongrid-pack-disk")
    tools = {t["name"]: t for t in disk.json("list", "--json")["items"]}
    assert tools["disk_cleaner"]["provenance"] == "ongrid-pack-disk 0.1.0"
    assert tools["cache_report"]["class"] == "safe" and tools["disk_cleaner"]["class"] == "mutating"
    assert "ongrid-pack-disk 0.1.0" in disk.cli("list")
    plugins = {p["name"]: p for p in disk.json("plugins", "--json")}
    assert (plugins["disk"]["kind"], plugins["disk"]["status"]) == ("pack", "active")

    # disk_cleaner may write only where it declares (~/.cache, /var/cache): the
    # test's cache lives in the test home's ~/.cache, as a user's would.
    disk.env["HOME"] = str(tmp_path / "home")
    cache = tmp_path / "home" / ".cache" / "app"
    (cache / "sub").mkdir(parents=True)
    for name, age in (("old.bin", 30), ("sub/old.o", 20), ("new.bin", 0)):
        (cache / name).write_bytes(b"x" * 100)
        os.utime(cache / name, (time.time() - age * 86400,) * 2)
    report = disk.json("run", "cache_report", json.dumps({"path": str(cache)}))
    assert (report["files"], report["stale_files"]) == (3, 2)
    disk.cli("run", "disk_cleaner", json.dumps({"path": str(cache)}), code=3)  # mutating: needs --yes
    dry = disk.json("run", "disk_cleaner", json.dumps({"path": str(cache)}), "--yes")
    assert (dry["dry_run"], dry["files_matched"], dry["files_deleted"]) == (True, 2, 0)
    real = disk.json(
        "run", "disk_cleaner", json.dumps({"path": str(cache), "dry_run": False}), "--yes", "--json"
    )
    assert (real["value"]["files_deleted"], real["value"]["freed_bytes"]) == (2, 200)
    assert sorted(p.name for p in cache.rglob("*") if p.is_file()) == ["new.bin"]
    assert "0 with errors" in disk.cli("validate", "ongrid-pack-disk")
    assert "9 passed" in disk.own_tests()

    disk.venv.uninstall("ongrid-pack-disk")
    assert "disk_cleaner" not in {t["name"] for t in disk.json("list", "--json")["items"]}
    assert "disk" not in {p["name"] for p in disk.json("plugins", "--json")}
    assert "neither a path nor an installed distribution" in disk.cli("validate", "ongrid-pack-disk", code=1)
    disk.cli("run", "disk_cleaner", "{}", code=4)


def test_the_policy_window_plugin_end_to_end(installed, tmp_path: Path) -> None:
    policy = installed("ongrid-policy-window")
    root = tmp_path / "skills"
    make_skill(root, "change", class_="mutating")
    log = tmp_path / "calls.jsonl"
    day = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")[
        (datetime.datetime.now(datetime.UTC).weekday() + 3) % 7
    ]
    closed = {
        "ONGRID_POLICY_WINDOW_WINDOWS": f"{day} 02:00-04:00",
        "ONGRID_POLICY_WINDOW_AUDIT_LOG": str(log),
    }
    opened = {**closed, "ONGRID_POLICY_WINDOW_WINDOWS": "00:00-24:00"}

    info = {p["name"]: p for p in policy.json("plugins", "--json")}["policy_window"]
    assert (info["status"], info["distribution"], info["version"]) == (
        "active",
        "ongrid-policy-window",
        "0.1.0",
    )
    out = policy.cli("--dirs", str(root), "run", "change", "--yes", code=3, **closed)
    assert "denied by policy_window: mutating calls run only in maintenance windows" in out
    policy.cli("--dirs", str(root), "run", "change", '{"a": 1}', "--yes", **opened)
    outcomes = [json.loads(line)["outcome"] for line in log.read_text().splitlines()]
    assert outcomes == ["denied", "ok"]
    policy.cli(
        "--dirs", str(root), "run", "change", "--yes", ONGRID_DISABLE_PLUGINS="policy_window", **closed
    )
    assert "passed" in policy.own_tests()

    policy.venv.uninstall("ongrid-policy-window")
    assert "policy_window" not in {p["name"] for p in policy.json("plugins", "--json")}
    policy.cli("--dirs", str(root), "run", "change", "--yes", **closed)  # nothing denies it any more
    assert (
        len(log.read_text().splitlines()) == 2
    )  # neither the disabled plugin nor the uninstalled one logged


def test_the_netcheck_pack_end_to_end(installed, tmp_path: Path) -> None:
    """A SKILL.md pack whose tools are builtin: keys of the distribution's own plugin; 127.0.0.1 only."""
    net = installed("ongrid-pack-netcheck")
    tools = {t["name"]: t for t in net.json("list", "--json")["items"]}
    for name in ("tcp_probe", "http_probe", "dns_lookup"):
        assert (tools[name]["provenance"], tools[name]["kind"]) == ("ongrid-pack-netcheck 0.1.0", "native")
    kinds = {(p["name"], p["kind"]): p for p in net.json("plugins", "--json")}
    assert kinds[("netcheck", "pack")]["status"] == kinds[("netcheck", "entrypoint")]["status"] == "active"
    assert kinds[("netcheck", "entrypoint")]["hooks"] == ["ongrid_native_tools"]
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        value = net.json(
            "run", "tcp_probe", json.dumps({"host": "127.0.0.1", "port": port}), "--persona", "viewer"
        )
    assert value["reachable"] is True
    assert (
        "127.0.0.1" in net.json("run", "dns_lookup", '{"name": "localhost", "family": "ipv4"}')["addresses"]
    )
    assert "Three read-only probes" in net.cli("show", "netcheck", "--body")
    assert "0 with errors" in net.cli("validate", "ongrid-pack-netcheck")
    assert "passed" in net.own_tests()

    net.venv.uninstall("ongrid-pack-netcheck")
    names = {t["name"] for t in net.json("list", "--json", "--all")["items"]}
    assert not names & {"tcp_probe", "http_probe", "dns_lookup"}
    assert "netcheck" not in {p["name"] for p in net.json("plugins", "--json")}
