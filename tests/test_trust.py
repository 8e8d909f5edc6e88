"""Trust at install: capabilities shown, consented and pinned in skills.lock; growth re-asked.

Every step runs the real ``ongrid-skills`` on real packs in tmp_path (in this process, or
in a real one on a pseudo-terminal for the interactive yes/no).
"""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from clirun import run
from distributions import install_dist, skill_files

from ongrid_plugins.settings import Settings
from ongrid_plugins.testing import make_skill

SCHEMA = Path(__file__).resolve().parent.parent / "ongrid_plugins" / "schemas" / "skills-lock.schema.json"


def make_pack(base: Path, version: str = "1.0", name: str = "tools", **hello: Any) -> Path:
    """A pack with one tool ``hello`` (its manifest fields from ``hello``) and a pack.json."""
    pack = base / name
    make_skill(pack, "hello", **hello)
    (pack / "pack.json").write_text(json.dumps({"name": name, "version": version}))
    return pack


def settings() -> Settings:
    return Settings.from_env()


def lock() -> dict[str, Any]:
    return json.loads((Path(settings().user_skills_dir) / "skills.lock").read_text())


def tools(capsys: pytest.CaptureFixture[str]) -> dict[str, dict[str, Any]]:
    code, out, _err = run(capsys, "list", "--json", "--all")
    assert code == 0
    return {t["name"]: t for t in json.loads(out)["items"]}


def audit_outcomes(capsys: pytest.CaptureFixture[str]) -> list[tuple[str, str]]:
    code, out, _err = run(capsys, "audit", "list", "--json")
    assert code == 0
    rows = json.loads(out)
    rows = rows["items"] if isinstance(rows, dict) else rows
    return [(r["tool"], r["outcome"]) for r in rows]


def test_install_without_a_terminal_or_yes_prints_what_the_pack_may_do_and_changes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pack = make_pack(tmp_path / "src", sandbox={"network": True, "write": ["~/out"]}, env_allow=["API_TOKEN"])
    code, out, err = run(capsys, "install", str(pack))
    assert code == 1
    assert "pack tools 1.0: unsigned" in out
    assert "tool hello: class safe; runs hello/run.sh; network: yes" in out
    assert "writes ~/out" in out and "environment API_TOKEN" in out
    assert f"to consent, run `ongrid-skills install {pack} --yes`" in err
    assert not (Path(settings().user_skills_dir) / "tools").exists()
    assert ("pack:tools", "install_refused") in audit_outcomes(capsys)


def test_install_with_yes_pins_the_consented_capabilities_beside_the_digests(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pack = make_pack(tmp_path / "src", sandbox={"network": False})
    code, out, _err = run(capsys, "install", "--yes", str(pack))
    assert code == 0 and "installed tools 1.0" in out
    data = lock()
    jsonschema.validate(data, json.loads(SCHEMA.read_text()))
    consent = data["packs"]["tools"]["consent"]
    assert consent["version"] == "1.0" and consent["capabilities"]["tools"]["hello"]["network"] is False
    assert tools(capsys)["hello"]["available"] is True
    assert ("pack:tools", "consent") in audit_outcomes(capsys)
    code, out, _err = run(capsys, "audit", "verify")
    assert code == 0


def _on_a_terminal(argv: list[str], answer: bytes) -> tuple[int, str]:
    """Run ``ongrid-skills ARGV`` in a real process on a pseudo-terminal, answering ``answer``."""
    leader, follower = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "ongrid_plugins", *argv], stdin=follower, stdout=follower, stderr=follower
    )
    os.close(follower)
    seen = b""
    while b"[y/N]" not in seen:
        chunk = os.read(leader, 4096)
        assert chunk, seen
        seen += chunk
    os.write(leader, answer)
    while True:
        try:
            chunk = os.read(leader, 4096)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        seen += chunk
    os.close(leader)
    return proc.wait(timeout=60), seen.decode(errors="replace")


@pytest.mark.parametrize(("answer", "installed"), [(b"y\n", True), (b"n\n", False)])
def test_install_on_a_terminal_asks_once_and_a_no_changes_nothing(
    tmp_path: Path, answer: bytes, installed: bool
) -> None:
    code, seen = _on_a_terminal(["install", str(make_pack(tmp_path / "src"))], answer)
    assert "tool hello: class safe" in seen and seen.count("Consent to this? [y/N]") == 1
    assert (code == 0) is installed
    assert (Path(settings().user_skills_dir) / "tools").is_dir() is installed


def test_an_update_that_asks_for_more_is_stopped_with_a_readable_diff_until_consented(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    v1 = make_pack(tmp_path / "v1", sandbox={"network": False, "limits": {"memory_mb": 100}})
    assert run(capsys, "install", "--yes", str(v1))[0] == 0
    v2 = make_pack(
        tmp_path / "v2",
        "2.0",
        class_="dangerous",
        env_allow=["HOME_TOKEN"],
        sandbox={"network": True, "write": ["~/.cache/x"], "limits": {"memory_mb": 200}},
    )
    make_skill(v2, "extra")
    code, out, err = run(capsys, "install", "--replace", str(v2))
    assert code == 1 and "--yes" in err
    assert "since the consent for 1.0: it asks for more:" in out
    for line in (
        "+ extra: new tool",
        "+ hello: class raised safe -> dangerous",
        "+ hello: network gained",
        "+ hello: new write paths: ~/.cache/x",
        "+ hello: new environment names: HOME_TOKEN",
        "+ hello: limit memory_mb raised 100 -> 200",
    ):
        assert line in out
    assert tools(capsys)["hello"]["provenance"] == "tools 1.0 (installed)"  # the old one stays
    code, out, _err = run(capsys, "install", "--replace", "--yes", str(v2))
    assert code == 0 and "replacing 1.0" in out
    assert tools(capsys)["extra"]["available"] is True
    assert ("pack:tools", "reconsent") in audit_outcomes(capsys)


def test_an_update_that_only_narrows_is_recorded_without_asking(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    v1 = make_pack(tmp_path / "v1", class_="mutating", sandbox={"network": True})
    assert run(capsys, "install", "--yes", str(v1))[0] == 0
    v2 = make_pack(tmp_path / "v2", "2.0", sandbox={"network": False})
    code, out, _err = run(capsys, "install", "--replace", str(v2))  # no --yes, no terminal
    assert code == 0 and "nothing grew" in out
    assert lock()["packs"]["tools"]["consent"]["version"] == "2.0"
    assert ("pack:tools", "consent_narrowed") in audit_outcomes(capsys)


def test_inspect_and_show_print_what_an_installed_pack_may_do(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pack = make_pack(tmp_path / "src", sandbox={"read": ["~/data"]})
    assert run(capsys, "install", "--yes", str(pack))[0] == 0
    code, out, _err = run(capsys, "inspect", "tools")
    assert code == 0 and "signature: unsigned" in out and "consent: given by" in out
    assert "reads ~/data" in out
    code, out, _err = run(capsys, "show", "tools")
    assert code == 0 and "reads ~/data" in out
    code, out, _err = run(capsys, "inspect", "tools", "--json")
    state = json.loads(out)
    assert state["consent"]["version"] == "1.0" and state["grown"] == []
    assert state["capabilities"]["tools"]["hello"]["read"] == ["~/data"]


def test_install_json_carries_the_review(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "install", "--yes", "--json", str(make_pack(tmp_path / "src")))
    assert code == 0 and "tool hello" in err  # the words go to stderr, the JSON alone to stdout
    trust = json.loads(out)["trust"]
    assert trust["signature"]["status"] == "unsigned" and "hello" in trust["capabilities"]["tools"]
    assert trust["needs_consent"] is True and trust["previous_version"] is None


# -- pip packs --------------------------------------------------------------------------------


def _pip_pack(site: Path, version: str, network: bool, plugin: bool = False) -> None:
    for info in site.glob("ongrid_pack_pipdemo-*.dist-info"):
        for f in info.iterdir():
            f.unlink()
        info.rmdir()
    files = skill_files("ongrid_test_pipdemo", "pip_echo", "pip_other")
    manifest = json.loads(files["ongrid_test_pipdemo/pip_echo/skill.json"])
    manifest["sandbox"] = {"network": network}
    files["ongrid_test_pipdemo/pip_echo/skill.json"] = json.dumps(manifest)
    points = {"ongrid_skills": {"pipdemo": "ongrid_test_pipdemo"}}
    if plugin:
        files["ongrid_test_pipdemo_plugin.py"] = ""
        points["ongrid_plugins"] = {"pipdemo-plugin": "ongrid_test_pipdemo_plugin"}
    install_dist(site, "ongrid-pack-pipdemo", version, points, files)


def test_a_pip_pack_is_not_loaded_until_trusted_and_a_grown_tool_waits_for_consent(
    site: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _pip_pack(site, "1.0", network=False, plugin=True)
    assert "pip_echo" not in tools(capsys)
    code, out, _err = run(capsys, "installed", "--json")
    [item] = [i for i in json.loads(out)["items"] if i.get("name") == "pipdemo"]
    assert item["status"] == "unconsented" and "ongrid-skills trust pipdemo" in item["error"]
    code, out, err = run(capsys, "trust", "pipdemo")
    assert code == 1 and "`ongrid-skills trust pipdemo --yes`" in err
    assert "WARNING: this pack ships pluggy plugins (pipdemo-plugin = ongrid_test_pipdemo_plugin)" in out
    assert "NOT confined" in out
    assert run(capsys, "trust", "pipdemo", "--yes")[0] == 0
    assert tools(capsys)["pip_echo"]["available"] is True

    _pip_pack(site, "2.0", network=True, plugin=True)  # pip installed a new version
    listed = tools(capsys)
    assert listed["pip_other"]["available"] is True  # the rest of the pack keeps working
    [why] = listed["pip_echo"]["unavailable"]
    assert "pack pipdemo consented to less than tool pip_echo now asks (network gained)" in why
    assert "`ongrid-skills inspect pipdemo` shows the diff" in why
    code, out, _err = run(capsys, "inspect", "pipdemo")
    assert "+ pip_echo: network gained" in out
    code, out, _err = run(capsys, "trust", "pipdemo", "--yes")
    assert code == 0 and "(reconsent)" in out
    assert tools(capsys)["pip_echo"]["available"] is True
    outcomes = audit_outcomes(capsys)
    assert ("pack:pipdemo", "consent") in outcomes and ("pack:pipdemo", "reconsent") in outcomes


def test_the_plugins_command_shows_a_pip_pack_waiting_for_consent(
    site: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _pip_pack(site, "1.0", network=False)
    code, out, _err = run(capsys, "plugins", "--json")
    info = {i["name"]: i for i in json.loads(out)}["pipdemo"]
    assert code == 0 and info["status"] == "unconsented" and "ongrid-skills trust pipdemo" in info["error"]


def test_a_home_path_is_consented_as_written_so_another_home_does_not_make_it_grow(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    pack = make_pack(tmp_path / "src", class_="mutating", sandbox={"write": ["~/.cache/tools"]})
    assert run(capsys, "install", "--yes", str(pack))[0] == 0
    assert lock()["packs"]["tools"]["consent"]["capabilities"]["tools"]["hello"]["write"] == [
        "~/.cache/tools"
    ]
    monkeypatch.setenv("HOME", str(tmp_path / "another-home"))  # sudo -E, a service account, a CI job
    assert tools(capsys)["hello"]["available"] is True
