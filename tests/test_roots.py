"""The rule "every file a skill runs stays under its root", decided in one place (discovery/roots.py).

The same functions decide at load time (both loaders, symlinked manifests) and at
call time (the executor, before it opens the entry beneath the root by descriptor).
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import Any

import pytest

from ongrid_plugins.discovery.roots import (
    EntryRefusal,
    check_entry,
    escapes,
    is_within,
    open_beneath,
    resolve_file,
)
from ongrid_plugins.models import SkillRoot
from ongrid_plugins.testing import make_skill


def _root(path: Path, source: str = "settings") -> SkillRoot:
    return SkillRoot(str(path), source=source, real=os.path.realpath(path))


def _script(path: Path, mode: int = 0o755) -> Path:
    path.write_text("#!/bin/sh\necho hi\n")
    path.chmod(mode)
    return path


def _check(path: Path, root: SkillRoot) -> EntryRefusal | None:
    real, st = resolve_file(str(path))
    return check_entry(real, st, root)


@pytest.mark.parametrize(
    ("path", "root", "inside"),
    [
        ("/srv/skills/a/run.sh", "/srv/skills", True),
        ("/srv/skills", "/srv/skills", True),
        ("/srv/skills-evil/run.sh", "/srv/skills", False),  # a prefix is not a parent
        ("/srv/run.sh", "/srv/skills", False),
        ("/anything", "/", True),
    ],
)
def test_is_within_compares_whole_components(path: str, root: str, inside: bool) -> None:
    assert is_within(path, root) is inside
    assert (escapes("entry", path, root) is None) is inside


def test_the_escape_message_is_the_specifications_log_line() -> None:
    assert escapes("entry", "/tmp/escape.sh", "/etc/ongrid/skills") == (
        "entry /tmp/escape.sh escapes allowlist root /etc/ongrid/skills"
    )
    assert escapes("manifest", "/x/skill.json", "/r") == "manifest /x/skill.json escapes allowlist root /r"


def test_an_executable_file_inside_the_root_may_run(tmp_path: Path) -> None:
    assert _check(_script(tmp_path / "run.sh"), _root(tmp_path)) is None


def test_a_symlink_out_of_the_root_is_refused_by_its_target(tmp_path: Path) -> None:
    root, outside = tmp_path / "root", tmp_path / "outside"
    root.mkdir(), outside.mkdir()
    target = _script(outside / "evil.sh")
    (root / "run.sh").symlink_to(target)
    refusal = _check(root / "run.sh", _root(root))
    assert refusal == EntryRefusal("entry_escapes_root", f"entry {target} escapes allowlist root {root}")


def test_a_dot_dot_path_out_of_the_root_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "skill").mkdir(parents=True)
    outside = _script(tmp_path / "evil.sh")
    refusal = _check(root / "skill" / ".." / ".." / "evil.sh", _root(root))
    assert refusal is not None and refusal.code == "entry_escapes_root" and str(outside) in refusal.message


@pytest.mark.parametrize(
    ("make", "code"),
    [
        (lambda p: p.mkdir(), "entry_not_file"),
        (lambda p: _script(p, 0o644), "entry_not_executable"),
        (lambda p: _script(p, 0o755 | stat.S_ISUID), "entry_unsafe"),
        (lambda p: _script(p, 0o755 | stat.S_ISGID), "entry_unsafe"),
    ],
    ids=["folder", "no-exec-bit", "setuid", "setgid"],
)
def test_an_entry_that_is_not_a_plain_executable_file_is_refused(
    tmp_path: Path, make: object, code: str
) -> None:
    entry = tmp_path / "run.sh"
    make(entry)  # type: ignore[operator]
    refusal = _check(entry, _root(tmp_path))
    assert refusal is not None and refusal.code == code


def test_not_executable_says_how_to_fix_it(tmp_path: Path) -> None:
    entry = _script(tmp_path / "run.sh", 0o644)
    refusal = _check(entry, _root(tmp_path))
    assert refusal is not None and refusal.hint == f"chmod +x {entry}"


def test_a_hard_linked_entry_is_refused_outside_installed_roots(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    outside = _script(tmp_path / "elsewhere.sh")
    os.link(outside, root / "run.sh")
    refusal = _check(root / "run.sh", _root(root))
    assert refusal is not None and refusal.code == "entry_unsafe" and "2 hard links" in refusal.message
    # Installers hard-link from their cache: a pack's or the built-in root's link count says nothing.
    assert _check(root / "run.sh", _root(root, source="pack")) is None


def test_open_beneath_refuses_a_symlinked_component_and_dot_dot(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "real").mkdir(parents=True)
    _script(root / "real" / "run.sh")
    (root / "link").symlink_to(root / "real")
    dirfd = os.open(root, os.O_PATH | os.O_DIRECTORY)
    try:
        fd = open_beneath(dirfd, "real/run.sh")
        os.close(fd)
        with pytest.raises(OSError) as symlinked:
            open_beneath(dirfd, "link/run.sh")
        assert symlinked.value.errno == errno.ELOOP
        with pytest.raises(OSError) as up:
            open_beneath(dirfd, "../root/real/run.sh")
        assert up.value.errno == errno.EXDEV
        with pytest.raises(OSError) as absolute:
            open_beneath(dirfd, str(root / "real" / "run.sh"))
        assert absolute.value.errno == errno.EXDEV
    finally:
        os.close(dirfd)


def test_load_and_call_time_refuse_the_same_escape_with_the_same_words(make_host: Any, root: Path) -> None:
    """An entry swapped for an escaping symlink after load is refused at call time as at load."""
    folder = make_skill(root, "swapped")
    outside = _script(root.parent / "evil.sh")
    host = make_host(root)
    host.load()
    (folder / "run.sh").unlink()
    (folder / "run.sh").symlink_to(outside)
    expected = escapes("entry", str(outside.resolve()), os.path.realpath(root))
    result = host.call("swapped")
    assert not result.ok and result.error == expected
    fresh = make_host(root)
    report = fresh.load()
    assert report.registered == 0
    assert [event.message for event in report.events if event.skill == "swapped"] == [expected]


def test_the_builtin_skills_folder_is_the_one_importlib_resources_names(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import sys
    from importlib import resources

    from ongrid_plugins.discovery.roots import builtin_skills_dir

    expected = str(resources.files("ongrid_plugins") / "skills")
    assert builtin_skills_dir() == expected
    assert os.path.isdir(expected)
    # a package not read by the standard file loaders (a zip, a custom finder): resources decides
    spec = sys.modules["ongrid_plugins"].__spec__
    monkeypatch.setattr(spec, "loader", type("OtherLoader", (), {})(), raising=True)
    monkeypatch.setattr(resources, "files", lambda package: Path("/elsewhere") / package)
    assert builtin_skills_dir() == "/elsewhere/ongrid_plugins/skills"
