"""The walker: roots, the recursive walk, ordering, duplicates, containment of broken loaders."""

from __future__ import annotations

import logging
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

from ongrid_plugins import Settings, SkillHost, hookimpl
from ongrid_plugins.catalog.loader import MAX_DEPTH, iter_manifests, load_dirs
from ongrid_plugins.errors import ManifestBuildError, PluginLoadError
from ongrid_plugins.settings import split_dirs
from ongrid_plugins.testing import isolated_settings, make_skill

LOADER = "ongrid_plugins.loader"


def loader_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == LOADER]


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("/a:/b", ("/a", "/b")),
        ("/a,/b", ("/a", "/b")),
        ("/a;/b", ("/a", "/b")),
        (" /a : /b ,, ;/c ", ("/a", "/b", "/c")),
        ("", ()),
    ],
)
def test_external_dirs_split_on_colon_comma_and_semicolon(raw: str, expected: tuple[str, ...]) -> None:
    assert split_dirs(raw) == expected
    assert Settings.from_env({"ONGRID_SKILLS_EXTERNAL_DIRS": raw}).env_dirs == expected


def test_relative_missing_and_file_roots_are_skipped_with_a_log_line(
    make_host: Any, root: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    make_skill(root, "ok")
    a_file = tmp_path / "not-a-dir"
    a_file.write_text("x")
    host = make_host("relative/skills", tmp_path / "missing", a_file, root)
    caplog.set_level(logging.INFO, logger=LOADER)
    report = host.load()
    assert report.registered == 1
    assert loader_lines(caplog)[:3] == [
        "skill loader: root relative/skills is not an absolute path (roots must be absolute: "
        f"did you mean {os.path.abspath('relative/skills')}?), skipping",
        f"skill loader: root {tmp_path / 'missing'} does not exist, skipping",
        f"skill loader: root {a_file} is not a directory, skipping",
    ]
    assert [e.outcome for e in report.events][:3] == ["root_skipped"] * 3
    assert report.roots == (os.path.realpath(root),)


def test_env_dirs_are_walked_after_explicit_dirs(tmp_path: Path) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    make_skill(first, "same", description="from first")
    make_skill(second, "same", description="from second")
    settings = isolated_settings(tmp_path, first, env_dirs=(str(second),))
    host = SkillHost(settings)
    assert host.get("same").description == "from first"
    assert [e.outcome for e in host.report.events] == ["registered", "duplicate"]


def test_missing_default_roots_boot_quietly(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    settings = isolated_settings(tmp_path, include_defaults=True)
    caplog.set_level(logging.WARNING, logger=LOADER)
    report = SkillHost(settings).load()
    assert report.registered >= 2  # the built-in skills
    assert loader_lines(caplog) == []


def test_only_files_named_exactly_skill_json_are_manifests(make_host: Any, root: Path) -> None:
    make_skill(root, "real")
    for decoy in ("Skill.json", "skill.json.bak", "skill.JSON", "myskill.json"):
        (root / "real" / decoy).write_text('{"name": "decoy", "description": "d", "entry": "run.sh"}')
    host = make_host(root)
    assert [t.name for t in host.tools()] == ["real"]


def test_walk_is_recursive_and_skips_vcs_and_dependency_folders(make_host: Any, root: Path) -> None:
    make_skill(root / "a" / "b" / "c" / "d", "deep")
    make_skill(root / ".git", "in_git")
    make_skill(root / "node_modules", "in_node_modules")
    make_skill(root / ".agents" / "skills", "hidden_but_walked")
    host = make_host(root)
    assert [t.name for t in host.tools()] == ["deep", "hidden_but_walked"]


def test_symlinked_directories_inside_a_root_are_not_followed(
    make_host: Any, root: Path, tmp_path: Path
) -> None:
    elsewhere = tmp_path / "elsewhere"
    make_skill(elsewhere, "outside")
    (root / "link").symlink_to(elsewhere)
    make_skill(root, "loop_guard")
    (root / "loop_guard" / "self").symlink_to(root)
    host = make_host(root)
    assert [t.name for t in host.tools()] == ["loop_guard"]


def test_a_root_that_is_a_symlink_is_walked_through_its_target(
    make_host: Any, root: Path, tmp_path: Path
) -> None:
    make_skill(root, "via_link")
    link = tmp_path / "root-link"
    link.symlink_to(root)
    host = make_host(link)
    assert host.get("via_link").source == f"{os.path.realpath(root)}/via_link/skill.json"


def test_duplicates_first_wins_by_root_order_then_path_order(make_host: Any, tmp_path: Path) -> None:
    r1, r2 = tmp_path / "r1", tmp_path / "r2"
    make_skill(r1, "dup", folder="zeta", description="r1 zeta")
    make_skill(r1, "dup", folder="alpha", description="r1 alpha")
    make_skill(r2, "dup", folder="aaa", description="r2 aaa")
    host = make_host(r1, r2)
    assert host.get("dup").description == "r1 alpha"
    assert [Path(e.path).parent.name for e in host.report.events] == ["alpha", "zeta", "aaa"]


def test_walk_order_is_files_first_then_sorted_subfolders(tmp_path: Path) -> None:
    for rel in ("b/skill.json", "a/z/skill.json", "a/skill.json", "skill.json", "a/b/skill.json"):
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("{}")
    found = [
        os.path.relpath(p, tmp_path) for p, _link in iter_manifests(str(tmp_path), frozenset({"skill.json"}))
    ]
    assert found == ["skill.json", "a/skill.json", "a/b/skill.json", "a/z/skill.json", "b/skill.json"]


def test_the_same_root_twice_is_walked_once(make_host: Any, root: Path) -> None:
    make_skill(root, "once")
    host = make_host(root, str(root) + "/", root)
    assert [e.outcome for e in host.load().events] == ["registered"]


def test_nested_roots_do_not_produce_duplicate_lines(make_host: Any, root: Path) -> None:
    make_skill(root / "inner", "inner_skill")
    make_skill(root, "outer_skill")
    for order in ((root / "inner", root), (root, root / "inner")):
        report = make_host(*order).load()
        assert sorted(e.outcome for e in report.events) == ["registered", "registered"]


def test_folders_nested_deeper_than_the_limit_are_not_walked(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    deep = tmp_path
    for i in range(MAX_DEPTH + 2):
        deep = deep / f"d{i}"
    make_skill(deep, "too_deep")
    make_skill(tmp_path, "shallow")
    caplog.set_level(logging.WARNING, logger=LOADER)
    assert [s.name for s in load_dirs([str(tmp_path)])] == ["shallow"]
    assert any("nests deeper than" in line for line in loader_lines(caplog))


def _nested(root: Path, top: str, depth: int) -> Path:
    """The folder ``depth`` levels below ``root``, made, whose first level is ``top``."""
    folder = root / top
    for i in range(depth - 1):
        folder = folder / f"n{i}"
    folder.mkdir(parents=True)
    return folder


def _cut(root: Path, top: str) -> str:
    """The folder of ``root/top`` where the walk stops: MAX_DEPTH levels below ``root``."""
    return str(root / top / "/".join(f"n{i}" for i in range(MAX_DEPTH - 1)))


def test_every_subtree_cut_at_the_depth_limit_is_logged(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    for top, depth in (("a", 33), ("b", 40), ("c", 200)):
        make_skill(_nested(tmp_path, top, depth), f"deep_{top}")
    make_skill(tmp_path, "shallow")
    caplog.set_level(logging.WARNING, logger=LOADER)
    assert [s.name for s in load_dirs([str(tmp_path)])] == ["shallow"]
    assert loader_lines(caplog) == [
        f"skill loader: {_cut(tmp_path, top)} nests deeper than {MAX_DEPTH} folders; not walked"
        for top in ("a", "b", "c")
    ]


def test_the_depth_lines_of_one_root_are_capped_with_a_count_of_the_rest(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from ongrid_plugins.catalog.loader import MAX_DEPTH_LINES

    tops = [f"t{i:02}" for i in range(MAX_DEPTH_LINES + 5)]
    for top in tops:
        _nested(tmp_path, top, MAX_DEPTH + 1)
    caplog.set_level(logging.WARNING, logger=LOADER)
    assert list(iter_manifests(str(tmp_path), frozenset({"skill.json"}))) == []
    lines = loader_lines(caplog)
    assert lines[:-1] == [
        f"skill loader: {_cut(tmp_path, top)} nests deeper than {MAX_DEPTH} folders; not walked"
        for top in tops[:MAX_DEPTH_LINES]
    ]
    assert lines[-1] == (
        f"skill loader: 5 more folders under {tmp_path} nest deeper than {MAX_DEPTH} folders; not walked"
    )


def test_unreadable_folder_is_logged_and_the_walk_goes_on(tmp_path: Path) -> None:
    # root reads every folder, so the walk runs as an unprivileged user when we are root.
    base = Path(tempfile.mkdtemp(prefix="ongrid-unreadable-"))
    try:
        make_skill(base, "fine")
        make_skill(base / "locked", "hidden")
        for path in [base, *base.rglob("*")]:
            path.chmod(0o755 if path.is_dir() or path.suffix == ".sh" else 0o644)
        (base / "locked").chmod(0)
        code = (
            "import logging, sys; sys.path[:0] = sys.argv[2:]\n"
            "logging.basicConfig(format='%(message)s')\n"
            "from ongrid_plugins.catalog.loader import load_dirs\n"
            "print(sorted(s.name for s in load_dirs([sys.argv[1]])))"
        )
        site = next(p for p in sys.path if p.endswith("site-packages"))
        repo = str(Path(__file__).resolve().parent.parent)
        python, user = (_unprivileged_python(), 65534) if os.geteuid() == 0 else (sys.executable, None)
        env = {"HOME": str(base), "XDG_CACHE_HOME": str(base / ".cache")}
        result = subprocess.run(
            [python, "-c", code, str(base), repo, site],
            capture_output=True,
            text=True,
            user=user,
            env=env,
            timeout=60,
            check=False,
        )
        assert result.returncode == 0, result.stderr
        assert result.stdout.strip() == "['fine']"
        assert f"skill loader: cannot read {base}/locked: Permission denied" in result.stderr
    finally:
        (base / "locked").chmod(0o755)
        shutil.rmtree(base)


def _unprivileged_python() -> str:
    """A Python the ``nobody`` user may run (ours may live under root's 0700 home)."""
    for candidate in (sys.executable, f"/usr/bin/python{sys.version_info[0]}.{sys.version_info[1]}"):
        try:
            probe = subprocess.run([candidate, "-c", "pass"], user=65534, capture_output=True, check=False)
        except OSError:
            continue
        if probe.returncode == 0:
            return candidate
    raise AssertionError("no Python runnable by nobody; cannot test unreadable folders as root")


def test_a_crashing_third_party_loader_is_contained(make_host: Any, root: Path) -> None:
    class Crashy:
        @hookimpl(tryfirst=True)
        def ongrid_load_manifest(self, path: str) -> None:
            raise RuntimeError("boom")

    make_skill(root, "victim")
    host = make_host(root, plugins=(Crashy(),))
    [event] = host.load().events
    assert event.outcome == "parse_error"
    assert re.fullmatch(r"loader plugin \S+ raised RuntimeError\('boom'\)", event.message), event.message


def test_a_crashing_loader_raises_in_strict_mode(make_host: Any, root: Path) -> None:
    class Crashy:
        @hookimpl(tryfirst=True)
        def ongrid_load_manifest(self, path: str) -> None:
            raise RuntimeError("boom")

    make_skill(root, "victim")
    with pytest.raises(PluginLoadError, match="boom"):
        make_host(root, plugins=(Crashy(),), strict=True).load()


def test_a_validation_plugin_can_reject_a_skill_with_one_line(
    make_host: Any, root: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from ongrid_plugins import Problem

    class Policy:
        @hookimpl
        def ongrid_validate_skill(self, skill: Any) -> list[Problem]:
            return [
                Problem("error", "no_tmp", "tools may not be named tmp*"),
                Problem("error", "other", "and another thing"),
                Problem("warning", "style", "just a warning"),
            ]

    make_skill(root, "tmp_thing")
    caplog.set_level(logging.WARNING, logger=LOADER)
    host = make_host(root, plugins=(Policy(),))
    assert host.load().registered == 0
    assert 'skill loader: build "tmp_thing": tools may not be named tmp*; and another thing' in loader_lines(
        caplog
    )


def test_validation_warnings_are_kept_on_the_registered_skill(make_host: Any, root: Path) -> None:
    from ongrid_plugins import Problem

    class Style:
        @hookimpl
        def ongrid_validate_skill(self) -> list[Problem]:
            return [Problem("warning", "style", "description is short")]

    make_skill(root, "short")
    host = make_host(root, plugins=(Style(),))
    assert [w.code for w in host.skills()[0].warnings] == ["style"]


def test_a_third_party_loader_feeds_the_same_registry(make_host: Any, root: Path) -> None:
    from ongrid_plugins import Skill, Tool, ToolClass

    class TomlLoader:
        @hookimpl
        def ongrid_manifest_names(self) -> list[str]:
            return ["tool.toml"]

        @hookimpl
        def ongrid_load_manifest(self, path: str, root: Any) -> Skill | None:
            if not path.endswith("tool.toml"):
                return None
            name = Path(path).read_text().split("=")[1].strip().strip('"')
            tool = Tool(
                name=name,
                description="from toml",
                schema={"type": "object"},
                tool_class=ToolClass.SAFE,
                skill=name,
                source=path,
                kind="native",
            )
            return Skill(
                name=name, description="from toml", format="tool.toml", path=path, root=root, tools=[tool]
            )

    (root / "t").mkdir()
    (root / "t" / "tool.toml").write_text('name = "from_toml"')
    make_skill(root, "from_json")
    host = make_host(root, plugins=(TomlLoader(),))
    assert [t.name for t in host.tools()] == ["from_json", "from_toml"]


def test_loader_rejection_with_build_error_is_logged_like_the_builtin(
    make_host: Any, root: Path, caplog: pytest.LogCaptureFixture
) -> None:
    class Strict:
        @hookimpl(tryfirst=True)
        def ongrid_load_manifest(self, path: str) -> None:
            raise ManifestBuildError(path, "custom", "custom rule broken")

    make_skill(root, "x")
    caplog.set_level(logging.WARNING, logger=LOADER)
    make_host(root, plugins=(Strict(),)).load()
    assert loader_lines(caplog) == ['skill loader: build "custom": custom rule broken']


def test_load_dirs_returns_the_registered_skills_for_the_benchmark(tmp_path: Path) -> None:
    make_skill(tmp_path, "one")
    make_skill(tmp_path, "two")
    make_skill(tmp_path, "bad", raw="{")
    assert sorted(s.name for s in load_dirs([str(tmp_path)])) == ["one", "two"]


def test_reload_picks_up_new_and_removed_manifests(make_host: Any, root: Path) -> None:
    make_skill(root, "first")
    host = make_host(root)
    assert [t.name for t in host.tools()] == ["first"]
    make_skill(root, "second")
    (root / "first" / "skill.json").unlink()
    host.reload()
    assert [t.name for t in host.tools()] == ["second"]


@pytest.mark.parametrize(
    ("name", "message"),
    [
        (5, '"name" must be a string'),
        (["x"], '"name" must be a string'),
        ("", '"name"'),
        ("Bad Name", '"name" must match [a-z0-9_]+'),
        ("../../etc", '"name" must match [a-z0-9_]+'),
    ],
)
def test_a_build_line_names_the_file_when_the_name_is_unusable(
    make_host: Any, root: Path, caplog: pytest.LogCaptureFixture, name: object, message: str
) -> None:
    manifest = {"name": name, "description": "d", "schema": {"type": "object"}, "entry": "run.sh"}
    folder = make_skill(root, "x", folder="odd", manifest=manifest)
    caplog.set_level(logging.WARNING, logger=LOADER)
    make_host(root).load()
    [line] = loader_lines(caplog)
    path = os.path.realpath(folder / "skill.json")
    assert line.startswith(f"skill loader: build {path}: "), line
    assert message in line


def test_a_build_line_keeps_the_specification_form_for_a_usable_name(
    make_host: Any, root: Path, caplog: pytest.LogCaptureFixture
) -> None:
    manifest = {"name": "bad_path", "description": "d", "schema": {"type": "object"}, "entry": "missing.sh"}
    make_skill(root, "bad_path", manifest=manifest, script=None)
    caplog.set_level(logging.WARNING, logger=LOADER)
    make_host(root).load()
    [line] = loader_lines(caplog)
    assert line.startswith('skill loader: build "bad_path": ')


# ---------------------------------------------------------------- the folder listing


def listing(folder: Path) -> object:
    """``_list_folder`` of ``folder``: its claimed files and the sub-folders to walk."""
    from ongrid_plugins.catalog import loader

    return loader._list_folder(str(folder), frozenset({"skill.json", "SKILL.md"}))


def test_a_folder_lists_its_claimed_files_and_the_folders_to_walk_by_name(tmp_path: Path) -> None:
    folder = tmp_path / "root"
    folder.mkdir()
    (folder / "skill.json").write_text("{}")
    (folder / "SKILL.md").symlink_to(folder / "skill.json")  # a claimed symlink: (name, True)
    for name in ("b", "a", "Z", "é", ".hidden", "node_modules", ".git", ".ongrid-staging", "x.ongrid-"):
        (folder / name).mkdir()
    (folder / "linked").symlink_to(folder / "a")  # a symlinked folder is never walked
    (folder / "plain.txt").write_text("")
    os.mkfifo(folder / "fifo")
    os.mkdir(folder / b"\xff-not-utf8".decode(errors="surrogateescape"))
    assert listing(folder) == (
        (("SKILL.md", True), ("skill.json", False)),
        (".hidden", "Z", "a", "b", "x.ongrid-", "é", "\udcff-not-utf8"),
    )


def test_a_claimed_name_that_is_a_folder_or_a_fifo_is_listed_flagged_and_a_folder_walked(
    tmp_path: Path,
) -> None:
    """Listed as not regular (the read refuses it with a log line, tests/test_loader_special_files.py);
    a folder is a folder of the tree too, walked recursively as the specification says."""
    (tmp_path / "skill.json").mkdir()
    os.mkfifo(tmp_path / "SKILL.md")
    assert listing(tmp_path) == ((("SKILL.md", True), ("skill.json", True)), ("skill.json",))


def test_an_unreadable_or_missing_folder_is_skipped_with_the_same_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    missing = tmp_path / "gone"
    with caplog.at_level(logging.WARNING, logger="ongrid_plugins.loader"):
        assert listing(missing) is None
    lines = [r.getMessage() for r in caplog.records]
    assert lines == [f"skill loader: cannot read {missing}: No such file or directory"]


def test_a_folder_of_many_entries_is_listed_in_name_order(tmp_path: Path) -> None:
    for i in range(300):
        (tmp_path / f"d{(i * 7919) % 300:03d}").mkdir()
        (tmp_path / f"f{i}").write_text("")
    listed = listing(tmp_path)
    assert isinstance(listed, tuple) and list(listed[1]) == sorted(f"d{i:03d}" for i in range(300))


def test_names_given_as_a_set_are_walked_as_a_frozenset_is(tmp_path: Path) -> None:
    make_skill(tmp_path, "one")
    make_skill(tmp_path / "deeper", "two")
    claimed = list(iter_manifests(str(tmp_path), frozenset({"skill.json"})))
    assert len(claimed) == 2
    assert list(iter_manifests(str(tmp_path), {"skill.json"})) == claimed  # type: ignore[arg-type]


def test_a_folder_path_with_a_nul_is_refused_not_cut_short_at_it(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "real" / "skill.json").write_text("{}")
    from ongrid_plugins.catalog import loader

    # never read up to the NUL: the folder "real", which the path does not name
    with pytest.raises(ValueError, match="null"):
        loader._list_folder(f"{tmp_path}/real\0/elsewhere", frozenset({"skill.json"}))


# ---------------------------------------------------------------------- echoed values in the log lines


def _manifest(root: Path, folder: str, text: str) -> Path:
    path = root / folder / "skill.json"
    path.parent.mkdir(parents=True)
    path.write_text(text)
    (root / folder / "run.sh").write_text("#!/bin/sh\necho '{}'\n")
    (root / folder / "run.sh").chmod(0o755)
    return path


def test_a_number_too_long_for_python_is_said_to_be_too_long(
    make_host: Any, root: Path, caplog: pytest.LogCaptureFixture
) -> None:
    head = '{"name": "big", "description": "d", "entry": "run.sh",\n "timeout_seconds": '
    path = _manifest(root, "big", head + "9" * 5000 + "}")
    caplog.set_level(logging.WARNING, logger=LOADER)
    assert make_host(root).load().registered == 0
    limit = sys.get_int_max_str_digits()
    too_long = f"the number at line 2 column 21 is too long (5000 digits; at most {limit})"
    assert loader_lines(caplog) == [
        f"skill loader: parse {path}: {too_long}"
    ]  # before: "...use sys.set_int_max_str_digits() to increase the limit"


def test_a_null_field_is_said_to_be_null_once(
    make_host: Any, root: Path, caplog: pytest.LogCaptureFixture
) -> None:
    _manifest(root, "nothing", '{"name": "nothing", "description": "d", "entry": null}')
    caplog.set_level(logging.WARNING, logger=LOADER)
    assert make_host(root).load().registered == 0
    assert loader_lines(caplog) == ['skill loader: build "nothing": "entry" must be a string (got null)']


def test_control_characters_in_an_echoed_value_or_path_are_escaped_in_the_log_line(
    make_host: Any, root: Path, caplog: pytest.LogCaptureFixture
) -> None:
    _manifest(root, "nul", '{"name": "nul", "description": "d", "entry": "run\\u0000.sh"}')
    broken = _manifest(root, "two\nlines", '{"name": ')
    caplog.set_level(logging.WARNING, logger=LOADER)
    assert make_host(root).load().registered == 0
    lines = loader_lines(caplog)
    assert lines == [
        f'skill loader: build "nul": entry {root}/nul/run\\x00.sh cannot be resolved: embedded null byte'
        " — the entry path is relative to the folder holding skill.json",
        f"skill loader: parse {root}/two\\x0alines/skill.json: Expecting value: line 1 column 10 (char 9)",
    ]  # before: a raw NUL, and a line break that starts a line of its own
    assert all(char.isprintable() for line in lines for char in line)
    assert broken.exists()


def test_a_path_key_or_message_cannot_forge_a_loader_line_in_any_line(
    make_host: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    forged = 'skill loader: registered subprocess skill "forged" from /etc'
    root = tmp_path / "r"
    make_skill(root, "inj", folder="inj\n" + forged)  # the registered line's path
    make_skill(root, "inj", folder="inj2\x1b[2J")  # the already-registered line's path
    unknown = (
        '{"name": "unk", "description": "x", "entry": "run.sh", "evil\\n'
        + forged.replace('"', '\\"')
        + '": 1}'
    )
    _manifest(root, "unk\x1b[31m", unknown)  # the warning line: its path and its message
    missing = tmp_path / ("gone\n" + forged)
    caplog.set_level(logging.DEBUG, logger=LOADER)
    host = SkillHost(settings=isolated_settings(tmp_path, root, missing))
    host.load()
    lines = loader_lines(caplog)
    assert {"inj", "unk"} <= {s.name for s in host.skills()}
    assert not any(line.startswith(forged) for text in lines for line in text.splitlines()[1:])
    assert all(char.isprintable() for line in lines for char in line), lines
    assert any(line.startswith('skill loader: registered subprocess skill "inj" from ') for line in lines)
    assert any("inj\\x0askill loader: registered" in line for line in lines)
    assert any("already registered, skipping" in line and "inj2\\x1b[2J" in line for line in lines)
    assert any('unknown field "evil\\x0askill loader' in line and "unk\\x1b[31m" in line for line in lines)
    assert any(line.startswith("skill loader: root ") and "gone\\x0askill" in line for line in lines)
