"""``ongrid-skills validate`` on pack archives and installed distributions."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path

import pytest
from clirun import run
from distributions import install_dist, skill_files

from ongrid_plugins.testing import make_skill


def tarball(folder: Path, archive: Path, *extra: tarfile.TarInfo) -> Path:
    with tarfile.open(archive, "w:gz") as tf:
        tf.add(folder, arcname=folder.name)
        for info in extra:
            tf.addfile(info)
    return archive


def test_a_good_archive_validates(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    make_skill(tmp_path / "pack", "hello")
    archive = tarball(tmp_path / "pack", tmp_path / "pack.tar.gz")
    code, out, _err = run(capsys, "--no-defaults", "validate", str(archive))
    assert code == 0
    assert f"{archive}!/pack/hello/skill.json (hello): ok" in out


def test_an_archive_problem_names_the_file_inside_the_archive_its_pointer_and_hint(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    make_skill(tmp_path / "pack", "slow", timeout_seconds=-1)
    archive = tarball(tmp_path / "pack", tmp_path / "pack.tar.gz")
    code, out, _err = run(capsys, "--no-defaults", "validate", "--json", str(archive))
    assert code == 1
    [problem] = json.loads(out)["files"][0]["problems"]
    assert problem["path"] == f"{archive}!/pack/slow/skill.json"
    assert (problem["pointer"], problem["hint"]) == ("/timeout_seconds", "0 means the default of 30 s")
    assert "/tmp/ongrid-validate" not in out


def test_an_unsafe_archive_member_is_an_error_naming_the_member(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    make_skill(tmp_path / "pack", "hello")
    link = tarfile.TarInfo("pack/hello/passwd")
    link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
    archive = tarball(tmp_path / "pack", tmp_path / "pack.tar.gz", link)
    code, out, _err = run(capsys, "--no-defaults", "validate", "--json", str(archive))
    assert code == 1
    [problem] = json.loads(out)["files"][0]["problems"]
    assert problem["code"] == "unsafe_archive" and problem["path"] == f"{archive}!/pack/hello/passwd"
    assert "only relative links" in problem["message"] and problem["hint"]


@pytest.mark.parametrize("name", ["bad.tar.gz", "bad.tgz", "bad.zip", "BAD.TAR"])
def test_a_corrupt_file_named_like_an_archive_is_no_readable_archive(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    corrupt = tmp_path / name
    corrupt.write_bytes(b"not an archive at all\n" * 40)
    code, out, _err = run(capsys, "--no-defaults", "validate", str(corrupt))
    assert code == 1
    assert out.splitlines() == [
        f"{corrupt}: FAILED",
        "  error: not a readable archive: not a tar archive (.tar, .tar.gz, .tgz) or a .zip"
        " — repack the pack, or give its folder",
        "1 manifest(s) checked, 1 with errors",
    ]  # before: "is not a manifest (expected one of: SKILL.md, skill.json, skill.md)"
    problem = json.loads(run(capsys, "--no-defaults", "validate", "--json", str(corrupt))[1])["files"][0]
    assert problem["problems"][0]["code"] == "unreadable_archive"


def test_an_installed_distribution_validates_by_name(site: Path, capsys: pytest.CaptureFixture[str]) -> None:
    files = skill_files("ongrid_test_val", "val_ok", "val_bad")
    files["ongrid_test_val/val_bad/skill.json"] = '{"name": "val_bad", "description": "", "entry": "run.sh"}'
    install_dist(site, "ongrid-pack-val", "3.1", {"ongrid_skills": {"val": "ongrid_test_val"}}, files)
    code, out, _err = run(capsys, "validate", "ongrid-pack-val")
    assert code == 1
    assert f"{site}/ongrid_test_val/val_ok/skill.json (val_ok): ok" in out
    assert '  error at /description: "description" must not be empty' in out
    assert run(capsys, "validate", "--json", "ongrid_pack_val")[0] == 1  # the normalised name too


def test_a_distribution_whose_plugin_or_pack_is_broken_fails_validation(
    site: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    groups = {"ongrid_skills": {"gone": "ongrid_test_gone"}, "ongrid_plugins": {"boom": "ongrid_test_boom"}}
    install_dist(
        site, "ongrid-pack-broken", "0.1", groups, {"ongrid_test_boom.py": "raise ImportError('no')"}
    )
    code, out, _err = run(capsys, "validate", "--json", "ongrid-pack-broken")
    assert code == 1
    problems = {p["code"]: p for f in json.loads(out)["files"] for p in f["problems"]}
    assert "ImportError: no" in problems["plugin_failed"]["message"]
    assert "module ongrid_test_gone is not installed" in problems["pack_unusable"]["message"]


def test_a_distribution_without_packs_and_an_unknown_name(
    site: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    install_dist(site, "ongrid-nothing", "1.0", {"console_scripts": {"x": "y:z"}})
    code, out, _err = run(capsys, "validate", "--json", "ongrid-nothing", "no-such-thing")
    assert code == 1
    files = json.loads(out)["files"]
    assert (
        files[0]["problems"][0]["code"] == "no_pack"
        and "entry-points.ongrid_skills" in files[0]["problems"][0]["hint"]
    )
    assert (
        files[1]["problems"][0]["message"] == "no-such-thing is neither a path nor an installed distribution"
    )


def test_folders_archives_and_distributions_mix_in_one_call(
    site: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    install_dist(
        site,
        "ongrid-pack-mix",
        "1.0",
        {"ongrid_skills": {"m": "ongrid_test_mix"}},
        skill_files("ongrid_test_mix", "mix_a"),
    )
    make_skill(tmp_path / "folder", "mix_b")
    make_skill(tmp_path / "pack", "mix_c")
    archive = tarball(tmp_path / "pack", tmp_path / "pack.tgz")
    code, out, _err = run(capsys, "validate", str(tmp_path / "folder"), "ongrid-pack-mix", str(archive))
    assert code == 0 and "3 manifest(s) checked, 0 with errors" in out


def test_a_bare_name_is_the_installed_distribution_even_beside_a_folder_of_that_name(
    site: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    files = skill_files("ongrid_test_side", "side_ok")
    install_dist(site, "ongrid-pack-side", "1.0", {"ongrid_skills": {"side": "ongrid_test_side"}}, files)
    checkout = tmp_path / "work" / "ongrid-pack-side"  # the scaffolded source, next to the user
    make_skill(checkout, "src_only")
    monkeypatch.chdir(tmp_path / "work")
    code, out, _err = run(capsys, "validate", "ongrid-pack-side")
    assert code == 0
    assert f"{site}/ongrid_test_side/side_ok/skill.json (side_ok): ok" in out and "src_only" not in out
    code, out, _err = run(capsys, "validate", "./ongrid-pack-side")
    assert code == 0 and "(src_only): ok" in out


def test_what_this_machine_lacks_is_a_warning_that_strict_does_not_count(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from ongrid_plugins.catalog.availability import current_os
    from ongrid_plugins.testing import make_skill_md

    other = "darwin" if current_os() != "darwin" else "linux"
    monkeypatch.delenv("NOPE_TOKEN_XYZ", raising=False)
    make_skill_md(tmp_path, "elsewhere", description="Another OS.", metadata={"openclaw": {"os": [other]}})
    needs = {"openclaw": {"requires": {"bins": ["no-such-bin-xyz"], "env": ["NOPE_TOKEN_XYZ"]}}}
    make_skill_md(tmp_path, "needs", description="Needs things.", metadata=needs)
    code, out, _err = run(capsys, "validate", "--strict", str(tmp_path))
    assert code == 0
    assert (
        f"  warning (this machine, not the manifest): will not load on this machine: for {other} only" in out
    )
    assert (
        '  warning (this machine, not the manifest): unavailable on this machine: binary "no-such-bin-xyz"'
        in out
    )
    assert "environment variable NOPE_TOKEN_XYZ is not set" in out
    data = json.loads(run(capsys, "validate", "--json", str(tmp_path))[1])
    machine = {f["skill"]: f["machine"] for f in data["files"]}
    assert len(machine["needs"]) == 2 and machine["elsewhere"][0].startswith("will not load")


def test_strict_never_says_ok_for_a_file_it_then_counts_as_failed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from ongrid_plugins.testing import make_skill_md

    folder = make_skill_md(tmp_path, "Hello World", folder="hello", description="Greets.")
    code, out, _err = run(capsys, "validate", "--strict", str(folder))
    assert code == 1
    first, *_rest, summary = out.splitlines()
    assert first.endswith(": FAILED (--strict: 3 warning(s))"), first  # normalised, spec_name, folder
    assert summary == "1 manifest(s) checked, 1 with problems"
    code, out, _err = run(capsys, "validate", str(folder))
    assert code == 0 and out.splitlines()[0].endswith(": ok")


def test_a_deep_archive_is_an_error_and_leaves_no_temporary_folder(
    deep_tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import tempfile

    scratch = deep_tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    archive = deep_tmp_path / "deep.tar.gz"
    with tarfile.open(archive, "w:gz") as tf:
        for i in range(1, 1400):
            info = tarfile.TarInfo("/".join(["d"] * i))
            info.type = tarfile.DIRTYPE
            tf.addfile(info)
    code, out, _err = run(capsys, "--no-defaults", "validate", "--json", str(archive))
    assert code == 1
    [problem] = json.loads(out)["files"][0]["problems"]
    assert problem["code"] == "unsafe_archive" and "the limit is 64" in problem["message"]
    assert list(scratch.iterdir()) == []


def test_a_misspelled_schema_keyword_fails_validate_strict_with_did_you_mean(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    schema = {"type": "object", "properties": {"path": {"type": "string"}}, "requried": ["path"]}
    make_skill(tmp_path, "req", schema=schema)
    code, out, _err = run(capsys, "validate", str(tmp_path))
    assert code == 0
    assert 'unknown JSON Schema keyword "requried" — did you mean "required"?' in out
    code, out, _err = run(capsys, "validate", "--strict", str(tmp_path))
    assert code == 1
    assert 'unknown JSON Schema keyword "requried" — did you mean "required"?' in out


def test_validate_reports_every_problem_of_a_schema_in_one_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    schema = {
        "type": "object",
        "properties": {"path": {"type": "strin"}, "n": {"minimum": "zero"}},
        "required": "path",
        "additonalProperties": False,
    }
    make_skill(tmp_path, "many", schema=schema)
    code, out, _err = run(capsys, "validate", str(tmp_path))
    assert code == 1
    assert (
        "at /properties/path/type: 'strin' is not a type — did you mean \"string\"? "
        "(valid: array, boolean, integer, null, number, object, string)" in out
    )
    assert "at /properties/n/minimum: 'zero' is not of type 'number'" in out
    assert "at /required: 'path' is not of type 'array'" in out
    assert 'unknown JSON Schema keyword "additonalProperties"' in out


def test_a_crlf_shebang_is_caught_with_the_fix(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    make_skill(tmp_path, "crlf", script="#!/bin/sh\r\nread -r args\r\necho '{}'\r\n")
    code, out, _err = run(capsys, "validate", str(tmp_path))
    entry = tmp_path / "crlf" / "run.sh"
    assert f"entry {entry} has Windows line ends (CRLF)" in out
    assert f"sed -i 's/\\r$//' {entry} (or: dos2unix {entry})" in out
    code, out, _err = run(capsys, "validate", "--strict", str(tmp_path))
    assert code == 1
