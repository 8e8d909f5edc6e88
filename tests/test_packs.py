"""Skill packs from the ``ongrid_skills`` entry-point group: roots, provenance, contained failures."""

from __future__ import annotations

import json
import logging
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
from distributions import install_dist, skill_files

from ongrid_plugins import PackLoadError, PluginLoadError, SkillHost
from ongrid_plugins.cli import main
from ongrid_plugins.packs import PackRoots
from ongrid_plugins.settings import Settings
from ongrid_plugins.testing import assert_ok, isolated_settings, make_skill, run_skill, trust_packs


def pack_settings(tmp_path: Path, *roots: Path, **overrides: Any) -> Any:
    """Settings that load pip packs, every pack installed so far consented to (docs/trust.md)."""
    values = {"include_defaults": True, "load_entry_points": True, **overrides}
    settings = isolated_settings(tmp_path, *roots, **values)
    if not settings.strict:
        trust_packs(settings)
    return settings


def trust_env_packs() -> None:
    """Consent to the pip packs installed so far, for commands run with the environment's settings."""
    trust_packs(Settings.from_env())


def install_pack(site: Path, dist: str = "ongrid-pack-demo", version: str = "1.2.3", **kw: Any) -> None:
    package = kw.pop("package", "ongrid_test_demo")
    names = kw.pop("names", ("demo_echo",))
    install_dist(site, dist, version, {"ongrid_skills": {"demo": package}}, skill_files(package, *names))


def test_a_pack_folder_is_a_root_and_its_skills_show_the_distribution(site: Path, tmp_path: Path) -> None:
    install_pack(site)
    host = SkillHost(pack_settings(tmp_path))
    tool = host.get("demo_echo")
    assert tool.provenance == "ongrid-pack-demo 1.2.3"
    assert host.registry.snapshot.skills["demo_echo"].provenance == "ongrid-pack-demo 1.2.3"
    result, events = run_skill(host, "demo_echo", {"n": 1})
    assert assert_ok(result) == {"n": 1}
    assert events.kinds()[0] == "start"
    assert str(site / "ongrid_test_demo") in host.report.roots


def test_the_pack_package_is_found_without_running_its_code(site: Path, tmp_path: Path) -> None:
    install_pack(site)
    (site / "ongrid_test_demo" / "__init__.py").write_text("raise RuntimeError('must not be imported')\n")
    host = SkillHost(pack_settings(tmp_path))
    assert host.get("demo_echo").provenance == "ongrid-pack-demo 1.2.3"


def test_a_dotted_pack_is_found_without_running_its_parent_packages_code(
    site: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """find_spec("pkg.skills") imports pkg: its __init__ ran on every command, though the docs say
    an entry point's code is not run."""
    files = skill_files("ongrid_test_dotted", "dotted_echo", folder="skills")
    marker = tmp_path / "ran"
    files["ongrid_test_dotted/__init__.py"] = f"open({str(marker)!r}, 'w').write('ran')\n1/0\n"
    points = {"ongrid_skills": {"dotted": "ongrid_test_dotted.skills"}}
    install_dist(site, "ongrid-pack-dotted", "0.2", points, files)
    host = SkillHost(pack_settings(tmp_path))
    assert host.get("dotted_echo").provenance == "ongrid-pack-dotted 0.2"
    info = next(i for i in host.plugins() if i.name == "dotted")
    assert info.status == "active"
    assert main(["installed"]) == 0
    assert "ongrid-pack-dotted 0.2" in capsys.readouterr().out
    assert not marker.exists()
    assert "ongrid_test_dotted" not in sys.modules


def test_a_data_folder_inside_a_package_may_be_the_root(site: Path, tmp_path: Path) -> None:
    files = skill_files("ongrid_test_nested", "inner_echo", folder="skills")
    install_dist(
        site, "ongrid-pack-nested", "0.1", {"ongrid_skills": {"n": "ongrid_test_nested.skills"}}, files
    )
    host = SkillHost(pack_settings(tmp_path))
    assert host.get("inner_echo").provenance == "ongrid-pack-nested 0.1"


def test_listings_show_the_provenance(site: Path, capsys: pytest.CaptureFixture[str]) -> None:
    install_pack(site)
    trust_env_packs()
    assert main(["list", "--json"]) == 0
    items = {i["name"]: i for i in json.loads(capsys.readouterr().out)["items"]}
    assert items["demo_echo"]["provenance"] == "ongrid-pack-demo 1.2.3"
    assert items["disk_usage"]["provenance"] == "built-in"
    assert main(["list"]) == 0
    row = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("demo_echo"))
    assert "ongrid-pack-demo 1.2.3" in row


@pytest.mark.parametrize(
    ("value", "files", "cause"),
    [
        ("ongrid_test_missing", {}, "module ongrid_test_missing is not installed"),
        # The parent's code is never run (it would raise): the missing sub-package is the cause.
        (
            "ongrid_test_parent.sub",
            {"ongrid_test_parent/__init__.py": "1/0"},
            "ongrid_test_parent.sub is not",
        ),
        ("ongrid_test_attr:folder", {"ongrid_test_attr/__init__.py": ""}, "names an attribute"),
        ("ongrid_test_toplevel", {"ongrid_test_toplevel.py": ""}, "is a top-level module"),
    ],
    ids=["module_missing", "sub_missing", "attribute", "top_level_module"],
)
def test_a_broken_pack_is_logged_with_its_distribution_and_skipped(
    site: Path,
    tmp_path: Path,
    root: Path,
    caplog: pytest.LogCaptureFixture,
    value: str,
    files: dict[str, str],
    cause: str,
) -> None:
    install_dist(site, "ongrid-pack-broken", "0.9", {"ongrid_skills": {"broken": value}}, files)
    install_pack(site)
    make_skill(root, "local_echo")
    caplog.set_level(logging.WARNING)
    host = SkillHost(pack_settings(tmp_path, root))
    assert host.call("local_echo", {"x": 1}).ok  # the host still starts
    assert host.get("demo_echo").provenance == "ongrid-pack-demo 1.2.3"  # other packs still load
    info = next(i for i in host.plugins() if i.name == "broken")
    assert (info.kind, info.status, info.distribution, info.version) == (
        "pack",
        "failed",
        "ongrid-pack-broken",
        "0.9",
    )
    assert cause in info.error
    line = next(r.getMessage() for r in caplog.records if "broken" in r.getMessage())
    assert line.startswith("skill packs: cannot load pack broken (distribution ongrid-pack-broken 0.9): ")


def test_a_pack_folder_that_vanished_is_contained(site: Path, tmp_path: Path) -> None:
    install_pack(site)
    host = SkillHost(pack_settings(tmp_path))
    assert host.pm.get_plugin("packs").packs[0].status == "active"  # the folder was found
    shutil.rmtree(site / "ongrid_test_demo")
    report = host.load()
    [event] = [e for e in report.events if e.outcome == "root_skipped" and "ongrid_test_demo" in e.path]
    assert event.message.endswith("ongrid_test_demo (from ongrid-pack-demo 1.2.3) does not exist, skipping")


def test_a_pack_without_a_folder_on_disk_is_contained(
    site: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import zipfile

    archive = tmp_path / "zipped.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("ongrid_test_zipped/__init__.py", "")
    monkeypatch.syspath_prepend(str(archive))
    install_dist(site, "ongrid-pack-zipped", "1.0", {"ongrid_skills": {"zipped": "ongrid_test_zipped"}})
    info = next(i for i in SkillHost(pack_settings(tmp_path)).plugins() if i.name == "zipped")
    assert info.status == "failed" and "does not exist (is the distribution zipped?)" in info.error


def test_strict_mode_turns_a_broken_pack_into_an_error(site: Path, tmp_path: Path) -> None:
    install_dist(site, "ongrid-pack-broken", "0.9", {"ongrid_skills": {"broken": "ongrid_test_nope"}})
    with pytest.raises(
        PackLoadError, match=r"skill pack 'broken' could not be loaded: module ongrid_test_nope"
    ):
        SkillHost(pack_settings(tmp_path, strict=True)).load()
    assert issubclass(PackLoadError, PluginLoadError)


def test_strict_mode_from_the_environment_fails_the_cli(
    site: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    install_dist(site, "ongrid-pack-broken", "0.9", {"ongrid_skills": {"broken": "ongrid_test_nope"}})
    monkeypatch.setenv("ONGRID_STRICT", "1")
    assert main(["list"]) == 2
    assert "skill pack 'broken' could not be loaded" in capsys.readouterr().err
    monkeypatch.setenv("ONGRID_STRICT", "0")
    assert main(["list"]) == 0


def test_disable_plugins_blocks_a_pack_by_name(site: Path, tmp_path: Path) -> None:
    install_pack(site)
    host = SkillHost(pack_settings(tmp_path, disable_plugins=("demo",)))
    assert "demo_echo" not in [t.name for t in host.tools()]
    assert next(i for i in host.plugins() if i.name == "demo").status == "blocked"


def test_no_defaults_and_no_entry_points_mean_no_packs(site: Path, tmp_path: Path) -> None:
    install_pack(site)
    for overrides in ({"include_defaults": False}, {"load_entry_points": False}):
        host = SkillHost(pack_settings(tmp_path, **overrides))
        assert "demo_echo" not in [t.name for t in host.tools()]


def test_configured_roots_win_a_name_clash_over_packs(site: Path, tmp_path: Path, root: Path) -> None:
    install_pack(site)
    make_skill(root, "demo_echo")
    host = SkillHost(pack_settings(tmp_path, root))
    assert host.get("demo_echo").provenance == str(root)
    assert any(e.outcome == "duplicate" for e in host.load().events)


def test_entry_points_are_read_once_per_host(
    site: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import importlib.metadata

    install_pack(site)
    calls = []
    real = importlib.metadata.entry_points

    def counting(**kw: Any) -> Any:
        calls.append(kw)
        return real(**kw)

    settings = pack_settings(tmp_path)  # consenting reads them too: before counting
    monkeypatch.setattr(importlib.metadata, "entry_points", counting)
    host = SkillHost(settings)
    host.load()
    host.reload()
    host.tools()
    assert len(calls) == 1
    roots = host.pm.get_plugin("packs")
    assert isinstance(roots, PackRoots) and [p.name for p in roots.packs] == ["demo"]


def test_the_plugins_command_lists_packs(
    site: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    install_pack(site)
    install_dist(site, "ongrid-pack-broken", "0.9", {"ongrid_skills": {"broken": "ongrid_test_nope"}})
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    trust_env_packs()
    assert main(["plugins", "--json"]) == 0
    infos = {i["name"]: i for i in json.loads(capsys.readouterr().out)}
    assert infos["demo"]["kind"] == "pack" and infos["demo"]["status"] == "active"
    assert infos["demo"]["distribution"] == "ongrid-pack-demo"
    assert infos["broken"]["status"] == "failed" and "not installed" in infos["broken"]["error"]
    assert infos["packs"]["hooks"] == ["ongrid_skill_roots"]
    assert main(["plugins"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["NAME", "KIND", "STATUS", "DISTRIBUTION", "HOOKS"]
    demo = next(line.split() for line in lines if line.startswith("demo "))
    assert demo == ["demo", "pack", "active", "ongrid-pack-demo", "1.2.3", "-"]
    broken = next(line for line in lines if line.startswith("broken "))
    assert "failed" in broken and "error: " in broken


def test_installed_lists_pip_packs_with_their_status(site: Path, capsys: pytest.CaptureFixture[str]) -> None:
    install_pack(site)
    install_dist(site, "ongrid-pack-broken", "0.9", {"ongrid_skills": {"broken": "ongrid_test_nope"}})
    assert main(["installed", "--json"]) == 0
    items = {i["name"]: i for i in json.loads(capsys.readouterr().out)["items"]}
    assert items["demo"]["kind"] == "pip" and items["demo"]["provenance"] == "ongrid-pack-demo 1.2.3"
    assert items["demo"]["path"] == str(site / "ongrid_test_demo")
    assert items["broken"]["status"] == "failed"


def test_uninstall_of_a_pip_pack_points_at_pip(site: Path, capsys: pytest.CaptureFixture[str]) -> None:
    install_pack(site)
    assert main(["uninstall", "ongrid-pack-demo"]) == 1
    assert "run `pip uninstall ongrid-pack-demo`" in capsys.readouterr().err
