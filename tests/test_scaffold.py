"""``ongrid-skills new``: scaffolds validate and run; a scaffolded pack builds, installs, passes its test."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from clirun import run
from venvs import REPO, Venv, build_wheels, clean_env


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory, ongrid_wheel: Path) -> Venv:
    """One venv for the module: this tree's wheel and pytest; each test installs its pack and removes it."""
    return Venv.create(tmp_path_factory.mktemp("scaffold") / "venv", ongrid_wheel)


@pytest.mark.parametrize("fmt", ["json", "md"])
@pytest.mark.parametrize(
    ("lang", "expected"),
    [("sh", {"ok": True, "args": {"who": "ada"}}), ("python", {"greeting": "hello, ada"})],
)
def test_a_scaffolded_skill_validates_and_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], fmt: str, lang: str, expected: dict
) -> None:
    code, out, _err = run(capsys, "new", "greet", "--format", fmt, "--lang", lang, "--dir", str(tmp_path))
    assert code == 0 and f"created {tmp_path / 'greet'}" in out
    manifest = "skill.json" if fmt == "json" else "SKILL.md"
    assert sorted(p.name for p in (tmp_path / "greet").iterdir()) == sorted(
        ["README.md", manifest, "run.sh" if lang == "sh" else "run.py"]
    )
    assert run(capsys, "--no-defaults", "validate", "--strict", str(tmp_path / "greet"))[0] == 0
    code, out, err = run(capsys, "--no-defaults", "--dirs", str(tmp_path), "run", "greet", '{"who": "ada"}')
    assert code == 0, err
    assert json.loads(out) == expected
    assert "greet:" in err  # the entry's log line, streamed from stderr
    assert "ongrid-skills validate ." in (tmp_path / "greet" / "README.md").read_text()


def test_new_refuses_bad_names_and_existing_folders(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(capsys, "new", "Bad-Name", "--dir", str(tmp_path))[0] == 2
    assert run(capsys, "new", "greet", "--dir", str(tmp_path))[0] == 0
    code, _out, err = run(capsys, "new", "greet", "--dir", str(tmp_path))
    assert code == 2 and "already exists" in err


def test_new_says_which_dir_is_unusable_instead_of_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a_file = tmp_path / "notes.txt"
    a_file.write_text("")
    code, out, err = run(capsys, "new", "greet", "--dir", str(a_file))
    assert (code, out) == (2, "")
    assert err == f"ERROR: --dir {a_file} is not a folder; give the folder to create the skill in\n"
    code, out, err = run(capsys, "new", "greet", "--dir", str(a_file / "sub"))
    assert (code, out) == (2, "")
    assert (
        err
        == f"ERROR: cannot write {a_file / 'sub' / 'greet'}: Not a directory; give a --dir you can write to\n"
    )
    code, out, _err = run(capsys, "new", "greet", "--dir", str(tmp_path / "missing"))
    assert (code, out.splitlines()[0]) == (0, f"created {tmp_path / 'missing' / 'greet'}")  # made, as before
    # /proc/1 is a folder nobody can create anything in: the write itself fails
    code, out, err = run(capsys, "new", "greet", "--dir", "/proc/1")
    assert (code, out) == (2, "")
    assert err.startswith("ERROR: cannot write /proc/1/greet: ")
    assert err.endswith("; give a --dir you can write to\n")
    assert "Traceback" not in err


def test_new_cuts_a_huge_name_in_its_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _out, err = run(capsys, "new", "a" * 100_000, "--dir", str(tmp_path))
    assert code == 2
    assert err == (
        "ERROR: skill name '" + "a" * 80 + "'…(100000 characters) must be lower_snake: "
        "a letter, then letters, digits or _ (64 at most)\n"
    )
    assert list(tmp_path.iterdir()) == []


def test_a_native_pack_declares_its_plugin_and_is_unavailable_until_installed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert (
        run(capsys, "new", "greet", "--pack", "--format", "md", "--lang", "python", "--dir", str(tmp_path))[0]
        == 0
    )
    pack = tmp_path / "ongrid-pack-greet"
    assert (
        '[project.entry-points.ongrid_plugins]\ngreet = "ongrid_pack_greet.plugin"'
        in (pack / "pyproject.toml").read_text()
    )
    assert "impl: builtin:greet.greet" in (pack / "ongrid_pack_greet" / "greet" / "SKILL.md").read_text()
    code, out, _err = run(capsys, "--no-defaults", "validate", str(pack / "ongrid_pack_greet"))
    assert (
        code == 0 and "no plugin provides builtin:greet.greet" in out
    )  # a warning: the plugin is not installed


def test_a_scaffolded_pack_has_the_entry_point_a_readme_and_a_test(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(capsys, "new", "greet", "--pack", "--dir", str(tmp_path))[0] == 0
    pack = tmp_path / "ongrid-pack-greet"
    assert (
        '[project.entry-points.ongrid_skills]\ngreet = "ongrid_pack_greet"'
        in (pack / "pyproject.toml").read_text()
    )
    assert (pack / "ongrid_pack_greet" / "greet" / "run.sh").stat().st_mode & 0o111
    assert "pip install ." in (pack / "README.md").read_text()
    assert "pack_host" in (pack / "tests" / "test_greet.py").read_text()
    assert run(capsys, "--no-defaults", "validate", str(pack / "ongrid_pack_greet"))[0] == 0


@pytest.mark.slow
@pytest.mark.parametrize(
    ("name", "fmt", "lang"),
    [("greet", "json", "sh"), ("greet_python", "json", "python"), ("greet_native", "md", "python")],
)
def test_a_scaffolded_pack_builds_installs_and_passes_its_own_test(
    tmp_path: Path, venv: Venv, name: str, fmt: str, lang: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A pack of each kind; greet_native is a SKILL.md tool implemented by the pack's own plugin."""
    assert run(capsys, "new", name, "--pack", "--format", fmt, "--lang", lang, "--dir", str(tmp_path))[0] == 0
    dist = "ongrid-pack-" + name.replace("_", "-")
    wheel = build_wheels([tmp_path / dist], tmp_path / "dist")[dist]
    venv.install(wheel)
    env = clean_env(tmp_path / "home")
    tests = tmp_path / dist / "tests"
    result = venv.run(
        "python", "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tests), env=env, cwd=tmp_path
    )
    assert result.returncode == 0 and "2 passed" in result.stdout, result.stdout + result.stderr
    venv.run("ongrid-skills", "trust", name, "--yes", env=env, cwd=tmp_path, check=True)  # docs/trust.md
    out = venv.run("ongrid-skills", "run", name, '{"who": "ada"}', env=env, cwd=tmp_path, check=True).stdout
    assert "ada" in out
    listing = venv.run("ongrid-skills", "list", "--json", env=env, cwd=tmp_path, check=True).stdout
    item = {i["name"]: i for i in json.loads(listing)["items"]}[name]
    assert (item["provenance"], item["kind"]) == (f"{dist} 0.1.0", "native" if fmt == "md" else "subprocess")
    venv.uninstall(dist)
    listing = venv.run("ongrid-skills", "list", "--json", env=env, cwd=tmp_path, check=True).stdout
    assert name not in {i["name"] for i in json.loads(listing)["items"]}


def test_docs_testing_md_shows_the_scaffolded_test_verbatim(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The test in docs/testing.md is the one the slow test above runs against an installed pack."""
    assert run(capsys, "new", "greet", "--pack", "--dir", str(tmp_path))[0] == 0
    written = (tmp_path / "ongrid-pack-greet" / "tests" / "test_greet.py").read_text()
    assert f"```py\n{written}```" in (REPO / "docs" / "testing.md").read_text()


def test_the_pack_hint_names_folders_as_paths_never_as_index_names(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    code, out, _err = run(capsys, "new", "greet", "--pack")
    assert code == 0
    hint = out.splitlines()[1]
    pip_part = hint.removeprefix("next: ").split(" && ")[0]
    words = shlex.split(pip_part)
    assert words[:2] == ["pip", "install"]
    # Every thing pip is given is a path (./ or /), so no name is looked up on an index.
    targets = [w for w in words[2:] if w != "-e"]
    assert "./ongrid-pack-greet" in targets
    assert all(w.startswith(("./", "/")) for w in targets), hint
    assert str(REPO) in targets  # this checkout: the pack depends on ongrid-plugins


@pytest.mark.slow
def test_a_scaffolded_pack_installs_in_a_fresh_venv_from_the_hint_alone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    _code, out, _err = run(capsys, "new", "greet_two", "--pack")
    hint = out.splitlines()[1].removeprefix("next: ")
    pip_part, trust, rest = hint.split(" && ")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "venv")], check=True)
    fresh = Venv(tmp_path / "venv")
    fresh.pip(*shlex.split(pip_part)[1:])  # the hint's `pip install ...`, into the fresh venv
    env = clean_env(tmp_path / "home")
    assert trust == "ongrid-skills trust greet_two --yes"  # consent first (docs/trust.md)
    fresh.run(*shlex.split(trust), env=env, cwd=work, check=True)
    argv = shlex.split(rest)
    done = fresh.run(*argv, env=env, cwd=work, check=True)
    assert json.loads(done.stdout) == {"ok": True, "args": {"who": "ada"}}


def test_the_skill_hint_validates_the_new_folder_even_when_a_distribution_has_its_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`validate attrs` checks the installed distribution attrs, not the folder `new attrs` wrote."""
    monkeypatch.chdir(tmp_path)
    code, out, _err = run(capsys, "new", "attrs")
    assert code == 0
    validate = out.splitlines()[1].removeprefix("next: ").split(" && ")[0]
    assert validate == "ongrid-skills validate ./attrs"
    code, out, _err = run(capsys, *shlex.split(validate)[1:])
    assert code == 0 and "skill.json (attrs): ok" in out
