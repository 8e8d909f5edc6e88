"""``scripts/bootstrap`` and ``.ci/run``: the README's test command works on a fresh machine.

The script runs for real, with stand-in ``apt-get`` / ``id`` / ``sudo`` programs first on
PATH that record how they were called: nothing is installed by these tests.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
BOOTSTRAP = REPO / "scripts" / "bootstrap"


def _stub(bin_dir: Path, name: str, body: str) -> None:
    path = bin_dir / name
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(0o755)


def _run(tmp_path: Path, packages: str, *, uid: str, sudo: bool = False) -> subprocess.CompletedProcess[str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    log = tmp_path / "calls.log"
    _stub(bin_dir, "apt-get", f'echo "apt-get $*" >> {log}')
    _stub(bin_dir, "id", f"echo {uid}")
    _stub(bin_dir, "present-tool", "true")
    if sudo:
        _stub(bin_dir, "sudo", f'echo "sudo $*" >> {log}; [ "$2" = true ] || {{ shift; exec "$@"; }}')
    # The script's one external helper besides the stand-ins: PATH holds nothing else.
    (bin_dir / "dirname").symlink_to(shutil.which("dirname") or "/usr/bin/dirname")
    listing = tmp_path / "packages"
    listing.write_text(packages)
    env = {"PATH": str(bin_dir), "ONGRID_BOOTSTRAP_PACKAGES": str(listing)}
    bash = shutil.which("bash") or "/bin/bash"
    return subprocess.run([bash, str(BOOTSTRAP)], env=env, capture_output=True, text=True, timeout=30)


def _calls(tmp_path: Path) -> list[str]:
    log = tmp_path / "calls.log"
    return log.read_text().splitlines() if log.exists() else []


def test_bootstrap_does_nothing_when_every_command_is_present(tmp_path: Path) -> None:
    result = _run(tmp_path, "# comment\n\npresent-tool present-package\n", uid="0")
    assert result.returncode == 0, result.stderr
    assert _calls(tmp_path) == []


def test_bootstrap_installs_only_the_missing_packages_as_root(tmp_path: Path) -> None:
    result = _run(tmp_path, "present-tool present-pkg\nno-such-tool-xyz needed-pkg\n", uid="0")
    assert result.returncode == 0, result.stderr
    calls = _calls(tmp_path)
    assert calls[0].startswith("apt-get ") and calls[0].endswith(" update -qq")
    assert calls[1].startswith("apt-get ") and "install" in calls[1]
    assert calls[1].split()[-1] == "needed-pkg" and "present-pkg" not in calls[1]
    assert "installing system packages: needed-pkg" in result.stderr


def test_bootstrap_as_a_user_without_sudo_names_the_packages_and_fails(tmp_path: Path) -> None:
    result = _run(tmp_path, "no-such-tool-xyz needed-pkg\n", uid="1000")
    assert result.returncode == 1
    assert _calls(tmp_path) == []
    assert "the tests need these system packages: needed-pkg" in result.stderr
    assert "sudo apt-get install -y needed-pkg" in result.stderr


def test_bootstrap_as_a_user_uses_a_passwordless_sudo(tmp_path: Path) -> None:
    result = _run(tmp_path, "no-such-tool-xyz needed-pkg\n", uid="1000", sudo=True)
    assert result.returncode == 0, result.stderr
    calls = _calls(tmp_path)
    assert calls[0] == "sudo -n true"
    assert any(c.startswith("apt-get ") and c.endswith("needed-pkg") for c in calls)


def test_the_system_package_list_covers_chromium_the_console_tests_need() -> None:
    pairs = [
        line.split()[:2]
        for line in (REPO / "scripts" / "system-packages").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    assert ["chromium", "chromium"] in pairs and ["chromedriver", "chromium-driver"] in pairs


def test_ci_runs_exactly_the_readme_test_command() -> None:
    text = (REPO / "README.md").read_text()
    quick = text.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    command = re.findall(r"```sh\n(.*?)\n```", quick, re.DOTALL)[1]
    assert command.startswith("scripts/bootstrap && ")
    steps = [
        line
        for line in (REPO / ".ci" / "run").read_text().splitlines()
        if line.strip() and not line.startswith("#") and not line.startswith(("set ", "cd "))
    ]
    assert steps == [command]
