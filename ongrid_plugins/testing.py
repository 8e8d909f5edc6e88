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

import contextlib
import json
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
import pytest

from .host.facade import SkillHost
from .models import CallResult, Event
from .settings import Settings

if TYPE_CHECKING:
    import pluggy

__all__ = [
    "ECHO_SH",
    "EventRecorder",
    "HookCall",
    "HookRecorder",
    "assert_failed",
    "assert_ok",
    "hook_recorder",
    "isolated_settings",
    "make_host",
    "make_skill",
    "make_skill_md",
    "pack_host",
    "plugin_registered",
    "register_plugin",
    "run_skill",
    "trust_packs",
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


# -------------------------------------------------------------------------
# Installed packs, plugins for one test, hook calls, running a skill
# -------------------------------------------------------------------------


def pack_host(tmp_path: Path | str, distribution: str | None = None, **overrides: Any) -> SkillHost:
    """A host that loads installed distributions (packs and plugins) the way production does.

    Entry points and the built-in skills are on; the system and user skill
    folders, cache and state live under ``tmp_path``. With ``distribution``,
    fails at once (naming the cause) unless every pack and plugin of that
    distribution loaded — a pack author's test then tests the installed copy.
    """
    values: dict[str, Any] = {"include_defaults": True, "load_entry_points": True, **overrides}
    settings = isolated_settings(tmp_path, **values)
    if distribution is not None:  # the author's own pack: the test consents to it, as a user would
        trust_packs(settings, distribution)
    host = SkillHost(settings)
    if distribution is not None:
        mine = [i for i in host.plugins() if _same_dist(i.distribution, distribution)]
        assert mine, f"no plugin or pack of distribution {distribution!r} is installed here"
        broken = [f"{i.kind} {i.name}: {i.status} {i.error}".strip() for i in mine if i.status != "active"]
        assert not broken, f"{distribution}: " + "; ".join(broken)
    return host


def trust_packs(settings: Settings, distribution: str | None = None) -> list[str]:
    """Consent to every pip pack (of ``distribution`` only, if given) not consented yet, as
    ``ongrid-skills trust PACK --yes`` would; return their entry point names.

    Pip packs are not loaded until consented (docs/trust.md); a test of what a pack does
    consents first, like its user.
    """
    from .packs.pipconsent import vet
    from .packs.trusted import trust_pack

    host = SkillHost(settings)
    roots = vet(host.pm, settings)
    names = [
        i.name
        for i in (roots.packs if roots is not None else [])
        if i.status == "unconsented" and (distribution is None or _same_dist(i.distribution, distribution))
    ]
    for name in names:
        trust_pack(host, name, lambda review: True)
    return names


def _same_dist(a: str, b: str) -> bool:
    return a.replace("_", "-").lower() == b.replace("_", "-").lower()


def run_skill(
    host: SkillHost, name: str, args: object = None, **call: Any
) -> tuple[CallResult, EventRecorder]:
    """Call tool ``name`` and record its events: ``result, events = run_skill(host, "greet", {...})``.

    Keyword arguments go to :meth:`SkillHost.call` (``persona``, ``confirm``, ``timeout``...).
    """
    events = EventRecorder()
    return host.call(name, args, on_event=events, **call), events


def assert_failed(result: CallResult, match: str = "", *, status: str | None = None) -> str:
    """Assert the call failed (with ``match`` in its error, and ``status`` if given); return the error."""
    assert not result.ok, f"{result.tool} unexpectedly succeeded with {result.value!r}"
    error = result.error or ""
    assert match in error, f"{result.tool} failed with {error!r}, not with {match!r}"
    if status is not None:
        assert result.outcome == status, f"{result.tool}: outcome {result.outcome!r}, expected {status!r}"
    return error


@contextlib.contextmanager
def plugin_registered(host: SkillHost, plugin: object, name: str | None = None) -> Iterator[object]:
    """Register ``plugin`` on ``host`` for the ``with`` block, then unregister it; reloads both times.

    The host's registry is rebuilt on entry and exit, so a plugin contributing
    roots, loaders or validation takes effect (and stops) at once.
    """
    pm = host.pm
    label = name or f"{getattr(plugin, '__name__', type(plugin).__name__)}@test"
    pm.add_plugin(plugin, label)
    host.reload()
    try:
        yield plugin
    finally:
        pm.unregister(plugin)
        pm.plugin_infos[:] = [i for i in pm.plugin_infos if i.name != label]
        host.reload()


@pytest.fixture
def register_plugin() -> Iterator[Callable[..., object]]:
    """``register_plugin(host, plugin)``: the plugin stays registered until the test ends."""
    with contextlib.ExitStack() as stack:

        def register(host: SkillHost, plugin: object, name: str | None = None) -> object:
            return stack.enter_context(plugin_registered(host, plugin, name))

        yield register


@attrs.frozen
class HookCall:
    """One call of a hook, as :class:`HookRecorder` saw it."""

    name: str
    kwargs: Mapping[str, Any]
    plugins: tuple[str, ...]
    """The plugins whose implementations were called, in call order."""
    result: Any = None
    error: BaseException | None = None


class HookRecorder:
    """Records every hook call of a plugin manager: ``with HookRecorder(host.pm) as rec: ...``.

    Hooks the host skips because nobody implements them are not called, so not
    recorded. The hooks that name each plugin's answer make one call while recorded.
    """

    def __init__(self, pm: pluggy.PluginManager) -> None:
        self.calls: list[HookCall] = []
        self._pending: list[tuple[str, Mapping[str, Any], tuple[str, ...]]] = []
        self._undo = pm.add_hookcall_monitoring(self._before, self._after)

    def _before(self, name: str, impls: Sequence[Any], kwargs: Mapping[str, Any]) -> None:
        self._pending.append((name, dict(kwargs), tuple(i.plugin_name for i in reversed(impls))))

    def _after(self, outcome: Any, name: str, impls: Sequence[Any], kwargs: Mapping[str, Any]) -> None:
        hook, args, plugins = self._pending.pop()
        error = outcome.exception
        result = None if error is not None else outcome.get_result()
        self.calls.append(HookCall(hook, args, plugins, result, error))

    def names(self) -> list[str]:
        """The names of the hooks called, in order."""
        return [c.name for c in self.calls]

    def calls_of(self, name: str) -> list[HookCall]:
        """The calls of hook ``name``, in order."""
        return [c for c in self.calls if c.name == name]

    def stop(self) -> None:
        """Stop recording (the calls recorded so far stay)."""
        self._undo()

    def __enter__(self) -> HookRecorder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


@pytest.fixture
def hook_recorder() -> Iterator[Callable[[SkillHost], HookRecorder]]:
    """``rec = hook_recorder(host)``: records ``host``'s hook calls until the test ends."""
    recorders: list[HookRecorder] = []

    def start(host: SkillHost) -> HookRecorder:
        recorders.append(HookRecorder(host.pm))
        return recorders[-1]

    yield start
    for recorder in recorders:
        recorder.stop()
