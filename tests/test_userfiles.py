"""Files a user names (config.toml, persona files, key and token files, skills.lock) are
never blocked on: a FIFO, a device or a folder in their place is reported and skipped."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ongrid_plugins.core.userfiles import NotRegularFile, read_regular, read_regular_text
from ongrid_plugins.testing import make_skill

#: Seconds a command may take before it counts as hung.
HANG = 30


def _cli(*argv: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("ONGRID_")}
    full_env.update(env)
    return subprocess.run(
        [sys.executable, "-m", "ongrid_plugins", "--no-defaults", *argv],
        capture_output=True,
        text=True,
        env=full_env,
        timeout=HANG,
        stdin=subprocess.DEVNULL,
    )


@pytest.mark.timeout(HANG)
@pytest.mark.parametrize("kind", ["fifo", "device", "folder"])
def test_read_regular_refuses_what_is_not_a_regular_file_without_blocking(tmp_path: Path, kind: str) -> None:
    if kind == "fifo":
        path = str(tmp_path / "x.toml")
        os.mkfifo(path)
        words = "it is a FIFO"
    elif kind == "device":
        path, words = "/dev/zero", "it is a device"
    else:
        path, words = str(tmp_path), "it is a folder"
    with pytest.raises(NotRegularFile) as caught:
        read_regular(path)
    assert str(caught.value) == f"not a regular file ({words})"
    assert caught.value.filename == path
    assert isinstance(caught.value, OSError)


def test_read_regular_reads_a_file_and_caps_it(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"\xef\xbb\xbfhello")
    assert read_regular_text(str(path)) == "hello"
    assert read_regular(str(path), limit=3) == b"\xef\xbb\xbfh"  # limit + 1: the caller sees "too big"
    with pytest.raises(OSError, match="over the limit of 3 bytes"):
        read_regular_text(str(path), limit=3)


def test_a_fifo_as_config_toml_does_not_hang_list(tmp_path: Path) -> None:
    config = tmp_path / "config"
    config.mkdir()
    os.mkfifo(config / "config.toml")
    result = _cli("list", env={"ONGRID_CONFIG_DIR": str(config)})
    assert result.returncode == 0, result.stderr
    assert f"cannot read {config / 'config.toml'}" in result.stderr
    assert "not a regular file (it is a FIFO)" in result.stderr


def test_a_fifo_among_persona_files_is_skipped_with_its_name(tmp_path: Path) -> None:
    config = tmp_path / "config"
    (config / "personas").mkdir(parents=True)
    os.mkfifo(config / "personas" / "fifo.md")
    root = tmp_path / "skills"
    make_skill(root, "good_one")
    env = {"ONGRID_CONFIG_DIR": str(config), "ONGRID_SKILLS_EXTERNAL_DIRS": str(root)}
    listed = _cli("personas", env=env)
    assert listed.returncode == 0, listed.stderr
    fifo = config / "personas" / "fifo.md"
    assert f"parse {fifo}: cannot read the persona file: not a regular file (it is a FIFO)" in listed.stderr
    ran = _cli("run", "good_one", "{}", "--persona", "operator", env=env)
    assert ran.returncode == 0, ran.stderr
    assert json.loads(ran.stdout) == {}


def test_a_fifo_as_the_audit_key_file_is_an_unusable_key(tmp_path: Path) -> None:
    key = tmp_path / "audit.key"
    os.mkfifo(key)
    root = tmp_path / "skills"
    make_skill(root, "good_one")
    env = {
        "ONGRID_AUDIT_KEY_FILE": str(key),
        "ONGRID_SKILLS_EXTERNAL_DIRS": str(root),
        "ONGRID_STATE_DIR": str(tmp_path / "state"),
    }
    result = _cli("run", "good_one", "{}", env=env)
    assert f"ONGRID_AUDIT_KEY_FILE {key}: cannot read the audit key: not a regular file (it is a FIFO)" in (
        result.stderr
    )


@pytest.mark.timeout(HANG)
def test_a_fifo_as_token_file_or_skills_lock_is_refused(tmp_path: Path) -> None:
    from ongrid_plugins.catalog.lock import read_lock
    from ongrid_plugins.errors import ConfigError
    from ongrid_plugins.gate.approvals_client import read_token

    token = tmp_path / "token"
    os.mkfifo(token)
    with pytest.raises(ConfigError, match=r"cannot read it: not a regular file \(it is a FIFO\)"):
        read_token(str(token))
    os.mkfifo(tmp_path / "skills.lock")
    with pytest.raises(ConfigError, match=r"skills.lock: not a readable skills.lock \(not a regular file"):
        read_lock(str(tmp_path))


def test_a_fifo_named_as_the_token_file_is_refused_not_blocked_on(tmp_path: Path) -> None:
    """`serve --tokens FIFO` (or --list-tokens) must say what the path is, at once."""
    from ongrid_plugins.errors import ConfigError
    from ongrid_plugins.server.tokens import TokenStore, list_tokens

    fifo = tmp_path / "tokens.json"
    os.mkfifo(fifo)
    for read in (TokenStore.from_file, list_tokens):
        with pytest.raises(ConfigError, match="not a regular file"):
            read(str(fifo))
