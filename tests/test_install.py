"""``ongrid-skills install / uninstall / installed``: packs as a unit in the user skills dir."""

from __future__ import annotations

import io
import json
import os
import tarfile
import zipfile
from pathlib import Path

import pytest
from clirun import run

from ongrid_plugins import SkillHost
from ongrid_plugins.packs import MARKER, installed_packs
from ongrid_plugins.packs import install as install_mod
from ongrid_plugins.packs.archive import UnsafeArchive
from ongrid_plugins.packs.install import InstallError, install_pack, uninstall_pack
from ongrid_plugins.testing import isolated_settings, make_skill


@pytest.fixture
def user_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "user-skills"
    monkeypatch.setenv("ONGRID_USER_SKILLS_DIR", str(path))
    return path


def make_pack(
    base: Path, name: str = "tools", version: str = "1.0", skills: tuple[str, ...] = ("hello",)
) -> Path:
    pack = base / name
    for skill in skills:
        make_skill(pack, skill)
    if version:
        (pack / "pack.json").write_text(json.dumps({"name": name, "version": version}))
    return pack


def tar_of(folder: Path, archive: Path) -> Path:
    with tarfile.open(archive, "w:gz") as tf:
        tf.add(folder, arcname=folder.name)
    return archive


def zip_of(folder: Path, archive: Path) -> Path:
    with zipfile.ZipFile(archive, "w") as zf:
        for path in sorted(folder.rglob("*")):
            info = zipfile.ZipInfo.from_file(path, str(path.relative_to(folder)))
            zf.writestr(info, "" if path.is_dir() else path.read_bytes())
    return archive


@pytest.mark.parametrize("form", ["folder", "tar.gz", "zip"])
def test_install_then_list_run_and_uninstall(
    tmp_path: Path, user_dir: Path, capsys: pytest.CaptureFixture[str], form: str
) -> None:
    pack = make_pack(tmp_path / "src")
    source = {"folder": pack, "tar.gz": tar_of(pack, tmp_path / "tools-1.0.tar.gz")}.get(form)
    source = source or zip_of(pack, tmp_path / "tools.zip")
    code, out, _err = run(capsys, "install", "--yes", str(source))
    assert code == 0, out
    assert f"installed tools 1.0 into {user_dir / 'tools'} (new; skills: hello)" in out
    marker = json.loads((user_dir / "tools" / MARKER).read_text())
    assert (marker["name"], marker["version"], marker["skills"]) == ("tools", "1.0", ["hello"])
    assert (marker["sha256"] is None) == (form == "folder")
    code, out, _err = run(capsys, "list", "--json")
    items = {i["name"]: i for i in json.loads(out)["items"]}
    assert items["hello"]["provenance"] == "tools 1.0 (installed)"
    assert run(capsys, "run", "hello", '{"x": 1}')[1].strip().replace(" ", "").replace("\n", "") == '{"x":1}'
    code, out, _err = run(capsys, "installed", "--json")
    assert [i["name"] for i in json.loads(out)["items"] if i["kind"] == "installed"] == ["tools"]
    assert run(capsys, "uninstall", "tools")[0] == 0
    assert not (user_dir / "tools").exists()
    assert "hello" not in json.loads(run(capsys, "list", "--json")[1])["items"]
    assert sorted(os.listdir(user_dir)) == [
        ".ongrid-install.lock",
        "skills.lock",
    ]  # no staging or trash left behind


def test_a_pack_name_comes_from_pack_json_then_the_folder_then_the_option(tmp_path: Path) -> None:
    settings = isolated_settings(tmp_path)
    pm = SkillHost(settings).pm
    named = make_pack(tmp_path / "a", name="folder-name", version="")
    (named / "pack.json").write_text('{"name": "from-json", "version": "2.1"}')
    assert install_pack(str(named), pm, settings).pack.name == "from-json"
    plain = make_pack(tmp_path / "b", name="plain", version="", skills=("other",))
    assert install_pack(str(plain), pm, settings).pack.name == "plain"
    assert install_pack(str(plain), pm, settings, name="chosen").pack.name == "chosen"
    with pytest.raises(InstallError, match="not usable as a folder name"):
        install_pack(str(plain), pm, settings, name="../up")


def test_an_archive_without_a_top_folder_is_named_after_the_file(tmp_path: Path) -> None:
    settings = isolated_settings(tmp_path)
    pack = make_pack(tmp_path / "src", version="")
    archive = zip_of(pack, tmp_path / "flat-pack.zip")
    result = install_pack(str(archive), SkillHost(settings).pm, settings)
    assert result.pack.name == "flat-pack" and (Path(result.pack.path) / "hello" / "skill.json").is_file()


def test_an_invalid_pack_is_refused_with_file_pointer_and_hint_and_nothing_is_installed(
    tmp_path: Path, user_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pack = make_pack(tmp_path / "src")
    make_skill(pack, "broken", timeout_seconds="30s")
    archive = tar_of(pack, tmp_path / "tools.tar.gz")
    code, _out, err = run(capsys, "install", "--yes", str(archive))
    assert code == 1
    assert f"{archive}!/tools/broken/skill.json#/timeout_seconds" in err
    assert "0 means the default of 30 s" in err  # the hint
    assert not (user_dir / "tools").exists()
    assert [p for p in os.listdir(user_dir) if p.startswith(".ongrid-staging")] == []


def test_a_pack_without_any_manifest_is_refused(tmp_path: Path, user_dir: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "README.md").write_text("nothing here")
    settings = isolated_settings(tmp_path, user_skills_dir=str(user_dir))
    with pytest.raises(InstallError, match="no manifest"):
        install_pack(str(empty), SkillHost(settings).pm, settings)


def test_strict_refuses_warnings_too(tmp_path: Path) -> None:
    settings = isolated_settings(tmp_path)
    pack = make_pack(tmp_path / "src")
    make_skill(pack, "typo", timeout=5)
    pm = SkillHost(settings).pm
    with pytest.raises(InstallError, match='unknown field "timeout"'):
        install_pack(str(pack), pm, settings, strict=True)
    assert install_pack(str(pack), pm, settings).reports


def test_a_hostile_archive_is_refused_and_nothing_is_installed(
    tmp_path: Path, user_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    archive = tmp_path / "slip.tar.gz"
    with tarfile.open(archive, "w:gz") as tf:
        info = tarfile.TarInfo("../../escaped.sh")
        tf.addfile(info)
    code, _out, err = run(capsys, "install", "--yes", str(archive))
    assert code == 1 and 'contains ".."' in err
    assert not (tmp_path / "escaped.sh").exists() and not (user_dir.parent / "escaped.sh").exists()


@pytest.mark.parametrize("exchange", [True, False], ids=["renameat2", "two_renames"])
def test_reinstalling_replaces_the_pack_and_a_bad_new_version_keeps_the_old(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, exchange: bool
) -> None:
    if not exchange:
        monkeypatch.setattr(install_mod, "_exchange", lambda a, b: False)
    settings = isolated_settings(tmp_path, include_defaults=True)
    host = SkillHost(settings)
    v1 = make_pack(tmp_path / "v1", version="1.0", skills=("hello", "old_only"))
    install_pack(str(v1), host.pm, settings)
    assert host.get("old_only").provenance == "tools 1.0 (installed)"

    bad = make_pack(tmp_path / "bad", version="3.0")
    make_skill(bad, "broken", entry="missing.sh", script=None)
    with pytest.raises(InstallError, match="is not a valid pack"):
        install_pack(str(bad), host.pm, settings, replace=True)
    assert host.reload().registered and host.get("old_only").provenance == "tools 1.0 (installed)"

    v2 = make_pack(tmp_path / "v2", version="2.0", skills=("hello",))
    result = install_pack(str(v2), host.pm, settings, replace=True)
    assert result.replaced == "1.0"
    host.reload()
    assert host.get("hello").provenance == "tools 2.0 (installed)"
    assert "old_only" not in [t.name for t in host.tools()]
    assert sorted(p.name for p in Path(settings.user_skills_dir).iterdir()) == [
        ".ongrid-install.lock",
        "skills.lock",
        "tools",
    ]


def test_install_refuses_to_replace_a_folder_it_did_not_install(tmp_path: Path) -> None:
    settings = isolated_settings(tmp_path)
    make_skill(Path(settings.user_skills_dir) / "tools", "mine")
    with pytest.raises(InstallError, match="was not installed by `ongrid-skills install`"):
        install_pack(str(make_pack(tmp_path / "src")), SkillHost(settings).pm, settings)
    assert (Path(settings.user_skills_dir) / "tools" / "mine" / "skill.json").exists()


def test_uninstall_refuses_folders_it_did_not_install_and_names_the_installed_ones(tmp_path: Path) -> None:
    settings = isolated_settings(tmp_path)
    install_pack(str(make_pack(tmp_path / "src")), SkillHost(settings).pm, settings)
    make_skill(Path(settings.user_skills_dir), "manual")
    with pytest.raises(InstallError, match=r"no pack named 'manual' .* \(installed: tools\)"):
        uninstall_pack("manual", settings)
    with pytest.raises(InstallError, match=r"no pack named '\.\.'"):
        uninstall_pack("..", settings)
    assert uninstall_pack("tools", settings).version == "1.0"
    assert installed_packs(settings.user_skills_dir) == []


def test_the_walker_never_reads_a_staging_folder(tmp_path: Path) -> None:
    settings = isolated_settings(tmp_path, include_defaults=True)
    make_skill(Path(settings.user_skills_dir) / ".ongrid-staging-abc" / "unpacked", "half_written")
    assert "half_written" not in [t.name for t in SkillHost(settings).tools()]


def test_install_warns_when_a_skill_is_shadowed(
    tmp_path: Path, user_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pack = make_pack(tmp_path / "src", skills=("disk_usage",))
    code, out, _err = run(capsys, "install", "--yes", str(pack))
    assert code == 0
    assert 'skill "disk_usage" is not loaded: built-in provides it first' in out


def test_install_json_output(tmp_path: Path, user_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _err = run(capsys, "install", "--yes", "--json", str(make_pack(tmp_path / "src")))
    data = json.loads(out)
    assert code == 0 and data["name"] == "tools" and data["replaced"] is None and data["shadowed"] == []
    code, out, _err = run(capsys, "uninstall", "--json", "tools")
    assert json.loads(out)["uninstalled"]["name"] == "tools"


def test_install_of_a_missing_path_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _out, err = run(capsys, "install", "--yes", str(tmp_path / "nope"))
    assert code == 2 and "does not exist" in err


def test_installed_with_nothing_installed(user_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _err = run(capsys, "--no-defaults", "installed")
    assert code == 0 and "no packs installed" in out


def test_the_cli_loads_the_install_machinery_only_when_asked() -> None:
    """Every command builds the full parser; archives and hashing must not cost `list` its start-up."""
    import subprocess
    import sys

    code = (
        "import sys, ongrid_plugins.cli as cli; cli.build_parser(); "
        "print(sorted(m for m in ('tarfile', 'zipfile', 'ongrid_plugins.packs.install',"
        " 'ongrid_plugins.packs.sources', 'ongrid_plugins.packs.archive') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_a_member_name_that_is_not_utf8_is_refused_before_anything_is_installed(
    tmp_path: Path, user_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Such a name once made the lock write fail after the pack was renamed in: live, but unlocked."""
    pack = make_pack(tmp_path / "src")
    archive = tmp_path / "tools.tar.gz"
    with tarfile.open(archive, "w:gz") as tf:
        tf.add(pack, arcname="tools")
        info = tarfile.TarInfo("tools/\udcff.txt")  # the bytes b"tools/\xff.txt"
        tf.addfile(info, io.BytesIO(b""))
    code, _out, err = run(capsys, "install", "--yes", str(archive))
    assert code == 1 and "Traceback" not in err
    assert "tools/\\xff.txt: is not valid UTF-8" in err
    assert not (user_dir / "tools").exists()
    assert not (user_dir / "skills.lock").exists()


@pytest.mark.parametrize("replace", [False, True], ids=["fresh", "replace"])
def test_a_lock_that_cannot_be_written_undoes_the_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, replace: bool
) -> None:
    """Installed means locked: a pack renamed into place without its lock entry is never left."""
    settings = isolated_settings(tmp_path)
    pm = SkillHost(settings).pm
    user = Path(settings.user_skills_dir)
    if replace:
        install_pack(str(make_pack(tmp_path / "v1", version="1.0")), pm, settings)

    def full_disk(*_args: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(install_mod, "write_entry", full_disk)
    with pytest.raises(
        InstallError, match=r"skills\.lock \(No space left on device\); nothing was installed"
    ):
        install_pack(str(make_pack(tmp_path / "v2", version="2.0")), pm, settings, replace=replace)
    installed = installed_packs(settings.user_skills_dir)
    assert [p.version for p in installed] == (["1.0"] if replace else [])
    assert sorted(p.name for p in user.iterdir() if p.name.startswith(".ongrid-s")) == []
    monkeypatch.undo()
    assert install_pack(str(make_pack(tmp_path / "v3", version="3.0")), pm, settings, replace=True)


@pytest.mark.parametrize("spelling", ["skills.lock", "Skills.LOCK"])
def test_a_pack_may_not_be_named_like_the_lock_file(
    tmp_path: Path, user_dir: Path, capsys: pytest.CaptureFixture[str], spelling: str
) -> None:
    """A pack named skills.lock took the lock's path: every later install crashed."""
    pack = make_pack(tmp_path / "src")
    (pack / "pack.json").write_text(json.dumps({"name": spelling, "version": "1"}))
    archive = tmp_path / "evil.tar.gz"
    with tarfile.open(archive, "w:gz") as tf:
        tf.add(pack, arcname=".")
    code, _out, err = run(capsys, "install", "--yes", str(archive))
    assert code == 1 and "Traceback" not in err
    assert f"pack name '{spelling}' is reserved" in err and "give another one with --name" in err
    assert not (user_dir / spelling).exists()
    code, _out, err = run(capsys, "install", "--yes", "--name", spelling, str(archive))
    assert code == 2 and "is reserved" in err
    assert run(capsys, "install", "--yes", "--name", "fine", str(archive))[0] == 0
    assert (user_dir / "skills.lock").is_file()


def test_a_lock_path_taken_by_an_old_pack_folder_fails_installs_cleanly_and_says_how_to_recover(
    tmp_path: Path, user_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(capsys, "install", "--yes", "--name", "x", str(make_pack(tmp_path / "a")))[0] == 0
    (user_dir / "skills.lock").unlink()
    os.rename(user_dir / "x", user_dir / "skills.lock")  # what an older version let a pack do
    code, _out, err = run(capsys, "install", "--yes", str(make_pack(tmp_path / "b", name="other")))
    assert code == 1 and "Traceback" not in err
    assert "`ongrid-skills uninstall skills.lock` removes it; nothing was installed" in err
    assert not (user_dir / "other").exists()
    assert run(capsys, "uninstall", "skills.lock")[0] == 0
    assert run(capsys, "install", "--yes", str(make_pack(tmp_path / "c", name="other")))[0] == 0


def _wrapped_with_link(tmp_path: Path, link: str, target: str) -> Path:
    """An archive whose pack is the wrapper folder ``tools/``, holding the link ``tools/<link>``."""
    pack = make_pack(tmp_path / "src")
    archive = tmp_path / f"tools-{link.replace('/', '_')}.tar.gz"
    with tarfile.open(archive, "w:gz") as tf:
        tf.add(pack, arcname="tools")
        info = tarfile.TarInfo(f"tools/{link}")
        info.type, info.linkname = tarfile.SYMTYPE, target
        tf.addfile(info)
    return archive


@pytest.mark.parametrize(
    ("link", "target"), [("up", ".."), ("lock", "../skills.lock"), ("hello/other", "../../other/x")]
)
def test_a_link_that_leaves_the_wrapper_folder_is_refused_by_install_and_validate(
    tmp_path: Path, user_dir: Path, capsys: pytest.CaptureFixture[str], link: str, target: str
) -> None:
    """Links were checked against the unpacked archive, one level above a wrapper folder's pack."""
    archive = _wrapped_with_link(tmp_path, link, target)
    code, _out, err = run(capsys, "install", "--yes", str(archive))
    assert code == 1
    assert f"{archive}: tools/{link}: is a link to '{target}', which resolves outside the pack" in err
    assert not (user_dir / "tools").exists()
    code, out, _err = run(capsys, "--no-defaults", "validate", "--json", str(archive))
    [problem] = json.loads(out)["files"][0]["problems"]
    assert code == 1 and problem["code"] == "unsafe_archive" and problem["path"] == f"{archive}!/tools/{link}"


def test_a_wrapper_pack_cannot_link_into_another_installed_pack(
    tmp_path: Path, user_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Validated in staging, the entry pointed at the attacker's copy; installed, at the victim's file."""
    victim = make_pack(tmp_path / "v", name="victim", skills=("v",))
    assert run(capsys, "install", "--yes", str(victim))[0] == 0
    src = tmp_path / "evil" / "victim"
    make_skill(src, "v")  # the attacker's copy of victim/v/run.sh, there only while validating
    make_skill(src, "evil_tool", script=None, entry="run.sh")
    (src / "evil_tool" / "run.sh").symlink_to("../../victim/v/run.sh")
    (src / "pack.json").write_text('{"name": "evil", "version": "1"}')
    archive = tmp_path / "evil.tar.gz"
    with tarfile.open(archive, "w:gz") as tf:
        tf.add(src, arcname="victim")
    code, _out, err = run(capsys, "install", "--yes", str(archive))
    assert code == 1 and "victim/evil_tool/run.sh: is a link to '../../victim/v/run.sh'" in err
    assert not (user_dir / "evil").exists()


def test_a_link_that_climbs_out_and_back_in_through_the_staging_name_is_refused(
    tmp_path: Path, user_dir: Path
) -> None:
    """In staging the pack is `unpacked/`: `../unpacked/x` stayed inside; installed, it names another pack."""
    settings = isolated_settings(tmp_path, user_skills_dir=str(user_dir))
    pack = make_pack(tmp_path / "src")
    (pack / "back").symlink_to("../unpacked/hello")
    with pytest.raises(
        UnsafeArchive, match=r"back: is a link to '../unpacked/hello', which resolves outside"
    ):
        install_pack(str(pack), SkillHost(settings).pm, settings)
    (pack / "back").unlink()
    (pack / "fine").symlink_to("hello/../hello/skill.json")
    assert install_pack(str(pack), SkillHost(settings).pm, settings).pack.name == "tools"


FORGED = '\x1b]0;owned\x07\nskill loader: registered subprocess skill "fake"'


def assert_no_raw_controls(text: str) -> None:
    """Nothing a terminal obeys, and no line forged by a newline in pack-provided text."""
    assert "\x1b" not in text and "\x07" not in text, text
    assert not any(line.startswith("skill loader:") for line in text.splitlines()), text


def test_pack_text_in_install_verify_and_uninstall_output_has_its_control_characters_escaped(
    tmp_path: Path, user_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A pack's version and file names used to reach the terminal raw: a new title, forged lines."""
    pack = make_pack(tmp_path / "src")
    (pack / "pack.json").write_text(json.dumps({"name": "tools", "version": "1.0" + FORGED}))
    (pack / "hello" / ("data" + FORGED)).write_text("x")
    code, out, err = run(capsys, "install", "--yes", str(pack))
    assert code == 0 and "installed tools 1.0\\x1b]0;owned\\x07\\nskill loader:" in out
    assert_no_raw_controls(out + err)
    code, out, err = run(capsys, "install", "--yes", str(pack))  # refused: already installed
    assert code == 1 and "already installed: 1.0\\x1b]0;owned" in err
    assert_no_raw_controls(out + err)
    (user_dir / "tools" / "hello" / ("data" + FORGED)).write_text("changed")
    code, out, err = run(capsys, "verify")
    assert code == 1 and "changed hello/data\\x1b]0;owned\\x07\\nskill loader:" in out
    assert_no_raw_controls(out + err)
    code, out, err = run(capsys, "list")
    assert "does not match skills.lock: changed file" in err
    assert_no_raw_controls(out + err)
    code, out, err = run(capsys, "uninstall", "tools")
    assert code == 0 and out.startswith("uninstalled tools 1.0\\x1b]0;owned\\x07\\nskill")
    assert_no_raw_controls(out + err)


@pytest.mark.parametrize("command", ["install", "validate"])
def test_an_archive_member_name_with_control_characters_is_shown_escaped(
    tmp_path: Path, user_dir: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    archive = tmp_path / "esc.tar.gz"
    info = tarfile.TarInfo("x" + FORGED)
    info.type = tarfile.CHRTYPE
    with tarfile.open(archive, "w:gz", format=tarfile.PAX_FORMAT) as tf:
        tf.addfile(info)
    code, out, err = run(capsys, command, str(archive))
    assert code == 1 and "x\\x1b]0;owned\\x07" in out + err
    assert_no_raw_controls(out + err)


def test_a_pack_version_over_100_characters_is_refused(tmp_path: Path, user_dir: Path) -> None:
    settings = isolated_settings(tmp_path, user_skills_dir=str(user_dir))
    pack = make_pack(tmp_path / "src")
    (pack / "pack.json").write_text(json.dumps({"name": "tools", "version": "1." * 500}))
    with pytest.raises(InstallError, match=r"pack\.json: version is 1000 characters long; 100 at most"):
        install_pack(str(pack), SkillHost(settings).pm, settings)
    assert not (user_dir / "tools").exists()


@pytest.mark.parametrize("kind", ["file", "folder", "link"])
def test_a_pack_that_ships_its_own_marker_is_refused_and_nothing_is_written_through_it(
    tmp_path: Path, user_dir: Path, capsys: pytest.CaptureFixture[str], kind: str
) -> None:
    """A folder made install crash; a link to skill.json made install overwrite the validated file."""
    pack = make_pack(tmp_path / "src")
    marker = pack / MARKER
    if kind == "file":
        marker.write_text("{}")
    elif kind == "folder":
        marker.mkdir()
    else:
        marker.symlink_to("hello/skill.json")
    before = (pack / "hello" / "skill.json").read_bytes()
    archive = tar_of(pack, tmp_path / "tools.tar.gz")
    code, out, err = run(capsys, "install", "--yes", str(archive))
    assert code == 1 and "Traceback" not in err
    assert f"tools/{MARKER}: is the name of the marker install writes" in err
    assert not (user_dir / "tools").exists()
    assert (pack / "hello" / "skill.json").read_bytes() == before
    code, out, _ = run(capsys, "validate", str(archive))
    assert code == 1 and f"tools.tar.gz!/tools/{MARKER}: FAILED" in out


def test_packs_with_a_broken_or_missing_marker_are_listed_as_broken_and_uninstall_removes_them(
    tmp_path: Path, user_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """They vanished from `installed` while their skills loaded, and `uninstall` said "no pack named"."""
    for name in ("p1", "p2", "p3", "ok"):
        pack = make_pack(tmp_path / "src", name, skills=(f"s_{name}",))
        assert run(capsys, "install", "--yes", str(pack))[0] == 0
    (user_dir / "p1" / MARKER).write_text("{bad")
    (user_dir / "p2" / MARKER).unlink()
    (user_dir / "p3" / MARKER).write_text("[1]")
    make_skill(user_dir, "manual")  # no marker, no lock entry: the user's own folder
    code, out, _ = run(capsys, "installed", "--json")
    items = {item["name"]: item for item in json.loads(out)["items"]}
    assert sorted(items) == ["ok", "p1", "p2", "p3"]
    assert items["ok"]["status"] == "active"
    assert items["p1"]["status"] == "broken" and "not valid JSON" in items["p1"]["error"]
    assert items["p2"]["status"] == "broken" and f"its {MARKER} is missing" in items["p2"]["error"]
    assert items["p3"]["status"] == "broken" and "not a JSON object" in items["p3"]["error"]
    assert "uninstall p2" in items["p2"]["error"]
    code, out, _ = run(capsys, "installed")
    rows = out.splitlines()[1:]
    assert [" broken " in row for row in rows] == [False, True, True, True]
    assert f"its {MARKER} is missing" in rows[2]
    for name in ("p1", "p2", "p3"):
        code, out, err = run(capsys, "uninstall", name)
        assert (code, err) == (0, "") and out.startswith(f"uninstalled {name} 1.0 from")
        assert not (user_dir / name).exists()
    assert sorted(json.loads((user_dir / "skills.lock").read_text())["packs"]) == ["ok"]
    code, _out, err = run(capsys, "uninstall", "manual")
    assert code == 1 and "(installed: ok)" in err and (user_dir / "manual").exists()
