"""The ``sandbox`` declaration of a manifest, read the same way by both loaders.

A declaration says what a skill needs from its sandbox::

    {"network": false, "read": ["/var/log"], "write": ["~/.cache/myapp"],
     "limits": {"processes": 32, "memory_mb": 256, "cpu_seconds": 10,
                "file_size_mb": 64, "open_files": 256}}

Every key is optional. It asks for more than the class alone grants, so it is read
strictly in both formats — a value of the wrong type is an error, never coerced —
and a broken declaration rejects its skill (only that skill):

* ``network`` is a boolean;
* ``read`` and ``write`` are lists of absolute paths or ``~/`` paths (expanded
  against the home folder of the user running the host), normalised, without a NUL
  byte or a ``..`` component, and never equal to, inside or above the host's own
  state, config or cache folder (those stay hidden from every skill); a ``write``
  path does not touch a skill root either (configured, built-in, system, user, or
  the skill's own), so that no skill can plant or rewrite skills;
* each of ``limits`` is a positive whole number no larger than the operator's cap
  (``Settings.sandbox_caps``, lowered with ``ONGRID_SANDBOX_LIMITS``).

Unknown keys are warned about with the closest known one and ignored. The reader
knows nothing of files: it reports to a :class:`~._fields.Fields` with JSON pointers.
Imports core values only (models, settings, roots).
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Mapping
from typing import Any

import attrs

from ..discovery.roots import builtin_skills_dir
from ..models import LIMIT_NAMES, SandboxDecl, SandboxLimits
from ..settings import MAX_SANDBOX_LIMITS, Settings
from ._fields import Fields, pointer, show, type_name

__all__ = [
    "MAX_PATHS",
    "MAX_PATH_DEPTH",
    "MAX_PATH_LENGTH",
    "MAX_UNKNOWN_WARNINGS",
    "SANDBOX_KEYS",
    "read_sandbox",
]

SANDBOX_KEYS = ("network", "read", "write", "limits")
"""The keys of a declaration, in the order they are documented."""
MAX_PATHS = 64
"""At most this many paths in ``read`` and in ``write`` each."""
MAX_PATH_LENGTH = 4096
"""The longest path accepted (Linux ``PATH_MAX``)."""
MAX_PATH_DEPTH = 64
"""The most components a path may have (each costs a system call when it is resolved)."""
MAX_UNKNOWN_WARNINGS = 16
"""Unknown keys warned about one by one in a mapping; the rest are counted in one warning."""
_PATH_HINT = 'write an absolute path such as "/var/cache/myapp", or "~/..." for a folder of the home folder'
_HIDDEN = (("state_dir", "state"), ("config_dir", "config"), ("cache_dir", "cache"))


def read_sandbox(
    fields: Fields,
    raw: object,
    where: str,
    label: str,
    settings: Settings | None,
    *,
    json: bool,
    root: str = "",
) -> SandboxDecl | None:
    """The declaration ``raw`` found at ``where``, or None when it is unusable.

    ``label`` names it in messages (``sandbox``, ``tools[0].sandbox``); ``json``
    names types the JSON way (skill.json) rather than the YAML way (SKILL.md).
    Keys are spelled exactly in both formats, as the published schemas say: a
    ``memory-mb`` is an unknown key (warned, "did you mean memory_mb"). ``root``
    is the canonical root the skill was found under: like every configured skill
    root, it may not be written.
    """
    errors_before = len(fields.errors)
    if not isinstance(raw, dict):
        message = f'"{label}" must be {_kind("mapping", json)} of what the skill needs'
        message += f" (got {_got(raw, json)})"
        fields.error(where, "wrong_type", message, "use {} to declare that it needs nothing beyond its class")
        return None
    known = _known(fields, raw, SANDBOX_KEYS, where, label)
    network = _network(fields, known, where, label, json=json)
    hidden = _hidden_dirs(settings) if "read" in known or "write" in known else ()
    read = _paths(fields, known, "read", where, label, hidden, json=json)
    if "write" in known:
        hidden += _skill_roots(settings, root)
    write = _paths(fields, known, "write", where, label, hidden, json=json)
    limits = _limits(fields, known, where + "/limits", label + ".limits", settings, json)
    if len(fields.errors) > errors_before:
        return None
    return SandboxDecl(network=network, read=read, write=write, limits=limits)


def _got(value: object, json: bool) -> str:
    kind = type_name(value, json=json)
    return kind if value is None else f"{kind} {show(value)}"


def _kind(name: str, json: bool) -> str:
    return {"mapping": "an object", "list": "an array"}[name] if json else f"a {name}"


def _known(
    fields: Fields,
    data: Mapping[Any, Any],
    names: tuple[str, ...],
    where: str,
    label: str,
) -> dict[str, Any]:
    found: dict[str, Any] = {}
    unknown = 0
    for key, value in data.items():
        name = str(key)
        if name in names:
            found[name] = value
            continue
        unknown += 1
        if unknown > MAX_UNKNOWN_WARNINGS:
            continue  # a manifest of a million unknown keys gets one more line, not a million
        at = where + pointer(key)
        close = difflib.get_close_matches(name, names, n=1, cutoff=0.6)
        hint = f' — did you mean "{close[0]}"?' if close else ""
        message = f'unknown field "{key}" in "{label}" is ignored{hint}'
        fields.warn(at, "unknown_field", message, f"known fields: {', '.join(names)}")
    if unknown > MAX_UNKNOWN_WARNINGS:
        message = f'"{label}" has {unknown - MAX_UNKNOWN_WARNINGS} more unknown fields; all are ignored'
        fields.warn(where, "unknown_field", message, f"known fields: {', '.join(names)}")
    return found


def _network(fields: Fields, known: Mapping[str, Any], where: str, label: str, *, json: bool) -> bool | None:
    if "network" not in known:
        return None
    value = known["network"]
    if isinstance(value, bool):
        return value
    message = f'"{label}.network" must be true or false (got {_got(value, json)})'
    fields.error(where + "/network", "wrong_type", message, "write true or false without quotes")
    return None


def _paths(
    fields: Fields,
    known: Mapping[str, Any],
    key: str,
    where: str,
    label: str,
    guarded: tuple[_Guarded, ...],
    *,
    json: bool,
) -> tuple[str, ...]:
    if key not in known:
        return ()
    value, at, name = known[key], f"{where}/{key}", f"{label}.{key}"
    if not isinstance(value, list):
        message = f'"{name}" must be {_kind("list", json)} of paths (got {_got(value, json)})'
        example = f'["{value}"]' if isinstance(value, str) and len(value) < 60 else '["/var/cache/myapp"]'
        fields.error(at, "wrong_type", message, f"write a list, even of one path: {example}")
        return ()
    if len(value) > MAX_PATHS:
        message = f'"{name}" lists {len(value)} paths; at most {MAX_PATHS} are accepted'
        fields.error(at, "too_many_paths", message, "declare the folders that hold them instead")
        return ()
    paths: list[str] = []
    for index, item in enumerate(value):
        path = _path(fields, item, f"{at}/{index}", f"{name}[{index}]", guarded, json=json)
        if path is not None and path not in paths:
            paths.append(path)
    return tuple(paths)


def _path(
    fields: Fields, item: object, at: str, name: str, guarded: tuple[_Guarded, ...], *, json: bool
) -> str | None:
    if not isinstance(item, str):
        message = f'"{name}" must be a path string (got {_got(item, json)})'
        fields.error(at, "wrong_type", message, _PATH_HINT)
        return None
    problem = _path_problem(item)
    if problem:
        fields.error(at, "bad_sandbox_path", f'"{name}" {problem} (got {show(item)})', _PATH_HINT)
        return None
    expanded = os.path.expanduser(item) if item.startswith("~/") else item
    if not expanded.startswith("/"):
        message = f'"{name}" cannot be expanded: the user running the host has no home folder'
        fields.error(at, "bad_sandbox_path", message, "set HOME, or write an absolute path")
        return None
    path = _normal(expanded)
    clash = _overlap(path, guarded)
    if clash is not None:
        why, guard = clash
        fields.error(at, guard.code, f'"{name}" {why}: {guard.reason}', guard.hint)
        return None
    return path


def _path_problem(item: str) -> str:
    if not item:
        return "is empty"
    if "\0" in item:
        return "holds a NUL byte"
    if len(item) > MAX_PATH_LENGTH:
        return f"is longer than {MAX_PATH_LENGTH} characters"
    if not (item.startswith("/") or item.startswith("~/")):
        return "must be an absolute path or start with ~/"
    parts = item.split("/")
    if ".." in parts:
        return "must not hold a .. component"
    if len(parts) > MAX_PATH_DEPTH + 1:
        return f"has more than {MAX_PATH_DEPTH} components"
    return ""


def _normal(path: str) -> str:
    path = os.path.normpath(path)
    return "/" + path.lstrip("/")  # normpath keeps a leading "//"; on Linux it is "/"


def _overlap(path: str, guarded: tuple[_Guarded, ...]) -> tuple[str, _Guarded] | None:
    """How ``path`` touches a guarded folder (inside it or holding it), and which one."""
    real = os.path.realpath(path)
    for guard in guarded:
        for candidate in dict.fromkeys((path, real)):
            if _within(candidate, guard.folder):
                return f"({_shown(path, real, candidate)}) is inside {guard.what} {guard.folder}", guard
            # A folder that holds the host's state, config or cache is granted without it
            # (docs/sandbox.md): `~/.cache` is fine though the host's cache is inside.
            if guard.code != "sandbox_path_hidden" and _within(guard.folder, candidate):
                return f"({_shown(path, real, candidate)}) holds {guard.what} {guard.folder}", guard
    return None


def _shown(path: str, real: str, candidate: str) -> str:
    return path if candidate == path else f"{path}, really {real}"


def _within(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


@attrs.frozen
class _Guarded:
    """A folder no declared path may touch, and what to say when one does."""

    folder: str
    what: str
    code: str
    reason: str
    hint: str


def _hidden_dirs(settings: Settings | None) -> tuple[_Guarded, ...]:
    """The host's state, config, cache and persona folders: never declared, read or write."""
    settings = settings if settings is not None else _default_settings()
    reason = "no skill may see the host's own folders"
    hint = "declare a folder of the skill's own instead"
    folders = [(getattr(settings, attribute) or "", kind) for attribute, kind in _HIDDEN]
    folders += [(folder, "persona") for folder in settings.persona_dirs]
    return tuple(
        _Guarded(variant, f"the host's {kind} folder", "sandbox_path_hidden", reason, hint)
        for folder, kind in folders
        for variant in _variants(folder)
    )


def _skill_roots(settings: Settings | None, root: str) -> tuple[_Guarded, ...]:
    """Every folder skills are loaded from: a skill that wrote there could plant or change skills."""
    settings = settings if settings is not None else _default_settings()
    roots = [*settings.skill_dirs, *settings.env_dirs, settings.system_skills_dir, settings.user_skills_dir]
    roots += [builtin_skills_dir(), root]
    reason = "no skill may write where skills are loaded from (its own folder included)"
    hint = "declare a folder outside every skill root"
    found = dict.fromkeys(variant for folder in roots for variant in _variants(folder))
    return tuple(
        _Guarded(folder, "the skill root", "sandbox_path_skill_root", reason, hint) for folder in found
    )


def _variants(folder: str) -> tuple[str, ...]:
    # Resolved at every load, not memoised: a folder may appear (or become a symlink)
    # between two loads, and the environment the defaults come from may change.
    if not folder:
        return ()
    absolute = _normal(os.path.abspath(os.path.expanduser(folder)))
    return tuple(dict.fromkeys((absolute, os.path.realpath(absolute))))


def _default_settings() -> Settings:
    return Settings()  # for callers that pass no settings: the default folders (platformdirs)


def _limits(
    fields: Fields,
    known: Mapping[str, Any],
    where: str,
    label: str,
    settings: Settings | None,
    json: bool,
) -> SandboxLimits:
    if "limits" not in known:
        return SandboxLimits()
    raw = known["limits"]
    if not isinstance(raw, dict):
        message = f'"{label}" must be {_kind("mapping", json)} of limit names to numbers'
        fields.error(where, "wrong_type", message + f" (got {_got(raw, json)})")
        return SandboxLimits()
    caps = settings.sandbox_caps if settings is not None else MAX_SANDBOX_LIMITS
    given = _known(fields, raw, LIMIT_NAMES, where, label)
    values: dict[str, int] = {}
    for name, value in given.items():
        at, shown = f"{where}/{name}", f"{label}.{name}"
        cap = caps.get(name, MAX_SANDBOX_LIMITS[name])
        if type(value) is not int:
            message = f'"{shown}" must be a whole number (got {_got(value, json)})'
            fields.error(at, "wrong_type", message, f"write a number from 1 to {cap} without quotes")
        elif value < 1:
            message = f'"{shown}" must be at least 1 (got {value})'
            fields.error(at, "limit_out_of_range", message, "leave it out for the operator's default")
        elif value > cap:
            message = f'"{shown}" is {value}, above the operator\'s cap of {cap} (ONGRID_SANDBOX_LIMITS)'
            hint = f"ask for at most {cap}"
            if value <= MAX_SANDBOX_LIMITS[name]:
                hint += f", or have the operator raise the cap: ONGRID_SANDBOX_LIMITS={name}={value}"
            fields.error(at, "limit_above_cap", message, hint)
        else:
            values[name] = value
    return SandboxLimits(**values)
