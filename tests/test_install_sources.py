"""``ongrid-skills install`` refuses at once a source that could never finish, and leaves no
staging folder behind when it is killed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from ongrid_plugins.testing import make_skill

#: Seconds an install may take before it counts as hung.
HANG = 30


def _env(user_dir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ONGRID_")}
    env["ONGRID_USER_SKILLS_DIR"] = str(user_dir)
    return env


def _install(source: str, user_dir: Path, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "ongrid_plugins", "--no-defaults", "install", "--yes", source]
    return subprocess.run(command, capture_output=True, text=True, env=_env(user_dir), cwd=cwd, timeout=HANG)


def _leftovers(user_dir: Path) -> list[str]:
    return sorted(p.name for p in user_dir.glob(".ongrid-*") if p.name != ".ongrid-install.lock")


def test_an_empty_path_is_refused(tmp_path: Path) -> None:
    user_dir = tmp_path / "home" / ".local" / "share" / "skills"
    result = _install("", user_dir, cwd=tmp_path)
    assert result.returncode == 2
    assert "ERROR: the pack path is empty: give a pack folder, a .tar.gz or a .zip" in result.stderr
    assert not user_dir.exists()


def test_a_folder_that_contains_the_user_skills_dir_is_refused(tmp_path: Path) -> None:
    """`cd ~ && ongrid-skills install .` copied ~ into ~/.../skills until File name too long."""
    home = tmp_path / "home"
    user_dir = home / ".local" / "share" / "skills"
    make_skill(home / "tools", "hello")
    result = _install(".", user_dir, cwd=home)
    assert result.returncode == 2, result.stderr
    assert f"{home} contains the user skills dir {user_dir}" in result.stderr
    assert "would copy the folder into itself" in result.stderr
    assert not user_dir.exists()
    user_dir.mkdir(parents=True)
    same = _install(str(user_dir), user_dir)
    assert same.returncode == 2 and "contains the user skills dir" in same.stderr


def test_a_device_or_a_fifo_is_refused_without_being_opened(tmp_path: Path) -> None:
    """/dev/zero spun at 100% CPU and a FIFO named x.tar.gz blocked, both forever."""
    user_dir = tmp_path / "skills"
    fifo = tmp_path / "x.tar.gz"
    os.mkfifo(fifo)
    for source, kind in (("/dev/zero", "a device"), (str(fifo), "a FIFO")):
        result = _install(source, user_dir)
        assert result.returncode == 2, result.stderr
        assert f"{source} is not a folder, a tar archive or a .zip (it is {kind})" in result.stderr
    assert not user_dir.exists()  # refused before anything was created


def test_sigterm_during_an_install_leaves_no_staging_folder(tmp_path: Path) -> None:
    pack = tmp_path / "big"
    make_skill(pack, "hello")
    data = pack / "data"
    data.mkdir()
    for n in range(3000):  # long enough to be caught while copying
        (data / f"f{n}.txt").write_bytes(b"x" * 4096)
    user_dir = tmp_path / "skills"
    command = [sys.executable, "-m", "ongrid_plugins", "--no-defaults", "install", "--yes", str(pack)]
    proc = subprocess.Popen(command, env=_env(user_dir), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + HANG
        while not (user_dir.exists() and any(user_dir.glob(".ongrid-staging-*"))):
            assert proc.poll() is None, "the install ended before it could be interrupted"
            assert time.monotonic() < deadline
            time.sleep(0.005)
        proc.send_signal(signal.SIGTERM)
        _out, err = proc.communicate(timeout=HANG)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, err
    assert b"interrupted" in err
    assert _leftovers(user_dir) == []
    assert not (user_dir / "big").exists()


def test_staging_folders_of_a_killed_install_are_removed_by_the_next(tmp_path: Path) -> None:
    """SIGKILL cannot be caught: what it left is removed under the install lock."""
    user_dir = tmp_path / "skills"
    (user_dir / ".ongrid-staging-dead1234" / "unpacked").mkdir(parents=True)
    (user_dir / ".ongrid-trash-dead5678").mkdir()
    pack = tmp_path / "tools"
    make_skill(pack, "hello")
    result = _install(str(pack), user_dir)
    assert result.returncode == 0, result.stderr
    assert _leftovers(user_dir) == []
    assert (user_dir / "tools" / "hello" / "skill.json").is_file()


def test_a_deep_archive_is_refused_and_a_deep_leftover_does_not_stop_later_installs(
    deep_tmp_path: Path,
) -> None:
    """A tree a thousand levels deep made shutil.rmtree raise RecursionError on every install."""
    import tarfile

    user_dir = deep_tmp_path / "skills"
    archive = deep_tmp_path / "deep.tar.gz"
    with tarfile.open(archive, "w:gz") as tf:
        for i in range(1, 1400):
            info = tarfile.TarInfo("/".join(["d"] * i))
            info.type, info.mode = tarfile.DIRTYPE, 0o755
            tf.addfile(info)
    result = _install(str(archive), user_dir)
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
    assert "lies 65 levels deep; the limit is 64" in result.stderr
    assert _leftovers(user_dir) == []
    # A leftover as deep as an old version could leave (killed while unpacking).
    folder = user_dir / ".ongrid-staging-dead"
    for _ in range(1400):  # os.makedirs recurses once per level
        folder /= "d"
        folder.mkdir(parents=True)
    pack = deep_tmp_path / "tools"
    make_skill(pack, "hello")
    result = _install(str(pack), user_dir)
    assert result.returncode == 0, result.stderr
    assert _leftovers(user_dir) == []
