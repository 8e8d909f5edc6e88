"""Helpers for testing skills and plugins (an opt-in pytest plugin).

Enable it in a ``conftest.py``::

    pytest_plugins = ["ongrid_plugins.testing"]

and use the fixtures and helpers::

    from ongrid_plugins.testing import make_skill

    def test_my_skill(tmp_path, make_host):
        make_skill(tmp_path / "skills", "greet", script=GREET_SH)
        host = make_host(tmp_path / "skills")
        assert host.call("greet", {"who": "ada"}).value == {"hello": "ada"}

Every helper uses real files, real processes and a real plugin manager; there
are no mocks in here.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from .host import SkillHost
from .models import CallResult, Event
from .settings import Settings

__all__ = [
    "ECHO_SH",
    "EventRecorder",
    "isolated_settings",
    "make_host",
    "make_skill",
    "make_skill_md",
    "write_executable",
]

#: An entry that prints its arguments back: shell built-ins only, so it works
#: with an empty environment (no PATH).
ECHO_SH = """#!/bin/sh
input=""
while IFS= read -r line || [ -n "$line" ]; do input="$input$line"; done
printf '%s\\n' "$input"
"""


def write_executable(path: Path | str, text: str, mode: int = 0o755) -> Path:
    """Write ``text`` to ``path`` (parents created) and chmod it."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    path.chmod(mode)
    return path


def make_skill(
    root: Path | str,
    name: str,
    *,
    script: str | None = ECHO_SH,
    folder: str | None = None,
    entry: str = "run.sh",
    manifest: Mapping[str, Any] | None = None,
    raw: str | bytes | None = None,
    **fields: Any,
) -> Path:
    """Create ``root/<folder or name>/skill.json`` and its entry; return the folder.

    ``fields`` override manifest fields (``class_`` for ``class``); pass
    ``manifest`` to replace the generated manifest entirely, or ``raw`` to write
    the file's bytes verbatim (for broken-manifest tests). ``script=None``
    writes no entry.
    """
    skill_dir = Path(root) / (folder or name)
    skill_dir.mkdir(parents=True, exist_ok=True)
    if manifest is None:
        data: dict[str, Any] = {"name": name, "description": f"Test skill {name}.", "entry": entry}
        data.update({("class" if k == "class_" else k): v for k, v in fields.items()})
    else:
        data = dict(manifest)
    target = skill_dir / "skill.json"
    if raw is not None:
        target.write_bytes(raw.encode("utf-8") if isinstance(raw, str) else raw)
    else:
        target.write_text(json.dumps(data, indent=2), encoding="utf-8")
    if script is not None and not os.path.isabs(entry):
        write_executable(skill_dir / entry, script)
    return skill_dir


def make_skill_md(
    root: Path | str,
    name: str | None,
    *,
    folder: str | None = None,
    description: str | None = None,
    body: str | None = None,
    tools: list[Mapping[str, Any]] | None = None,
    files: Mapping[str, str | bytes] | None = None,
    front: Mapping[str, Any] | None = None,
    raw: str | bytes | None = None,
    filename: str = "SKILL.md",
    **fields: Any,
) -> Path:
    """Create ``root/<folder or name>/SKILL.md`` (and ``files``); return the skill folder.

    The front matter holds ``name`` (left out when None), ``description`` (default
    ``Test skill <name>.``), ``tools`` and every keyword in ``fields``, written as YAML;
    pass ``front`` to replace it entirely, or ``raw`` for the file's exact bytes.
    ``files`` maps paths relative to the skill folder to their content; those starting
    with ``#!`` are made executable.
    """
    import yaml

    skill_dir = Path(root) / (folder or name or "skill")
    skill_dir.mkdir(parents=True, exist_ok=True)
    target = skill_dir / filename
    if raw is not None:
        target.write_bytes(raw.encode("utf-8") if isinstance(raw, str) else raw)
    else:
        if front is None:
            data: dict[str, Any] = {} if name is None else {"name": name}
            data["description"] = description if description is not None else f"Test skill {name}."
            if tools is not None:
                data["tools"] = [dict(t) for t in tools]
            data.update(fields)
        else:
            data = dict(front)
        text = yaml.safe_dump(data, sort_keys=False, allow_unicode=True)
        heading = f"# {name}\n"
        target.write_text(f"---\n{text}---\n\n{heading if body is None else body}", encoding="utf-8")
    for relative, content in (files or {}).items():
        path = skill_dir / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        elif content.startswith("#!"):
            write_executable(path, content)
        else:
            path.write_text(content, encoding="utf-8")
    return skill_dir


def isolated_settings(tmp_path: Path | str, *roots: Path | str, **overrides: Any) -> Settings:
    """Settings that read nothing from the user's machine: only ``roots``, state under ``tmp_path``."""
    base = Path(tmp_path)
    values: dict[str, Any] = {
        "skill_dirs": tuple(str(r) for r in roots),
        "include_defaults": False,
        "load_entry_points": False,
        "cache_dir": str(base / ".ongrid-cache"),
        "state_dir": str(base / ".ongrid-state"),
        "config_dir": str(base / ".ongrid-config"),
        "user_skills_dir": str(base / ".ongrid-user-skills"),
        "system_skills_dir": str(base / ".ongrid-system-skills"),
    }
    values.update(overrides)
    return Settings(**values)


class EventRecorder:
    """An ``on_event`` callback that keeps every event, for assertions."""

    def __init__(self) -> None:
        self.events: list[Event] = []

    def __call__(self, event: Event) -> None:
        self.events.append(event)

    def kinds(self) -> list[str]:
        """The kinds of the events received, in order."""
        return [e.kind for e in self.events]

    def stderr(self) -> list[str]:
        """The stderr lines received, in order."""
        return [str(e.data) for e in self.events if e.kind == "stderr"]


def assert_ok(result: CallResult) -> Any:
    """Assert the call succeeded and return its value (with the error in the message if not)."""
    assert result.ok, f"{result.tool} failed: {result.error} (stderr: {list(result.stderr_tail)})"
    return result.value


@pytest.fixture
def make_host(tmp_path: Path) -> Iterator[Callable[..., SkillHost]]:
    """A factory of isolated hosts: ``make_host(root, ..., plugins=[...], **settings)``."""

    def factory(*roots: Path | str, plugins: tuple[object, ...] = (), **overrides: Any) -> SkillHost:
        return SkillHost(isolated_settings(tmp_path, *roots, **overrides), plugins=plugins)

    yield factory
