"""Persona files: Markdown with YAML front matter, like agent persona files.

::

    ---
    name: oncall
    description: Night shift. Restarts things, never deletes them.
    permission_mode: mutating-with-confirm
    tools: ["service_*", "disk_usage"]
    disallowed_tools: ["service_delete"]
    ---
    You are the on-call assistant...

Persona files are looked for, in this order, in every folder of
``ONGRID_PERSONAS_DIRS`` (``Settings.persona_dirs``) and in
``<config_dir>/personas``; every ``*.md`` file directly in those folders
(``README.md`` excepted) is a persona file. The first file of a name wins; a
later one is logged and skipped, and so is a broken file: a bad persona file
never stops the host.

The three built-in personas (``viewer``, ``operator``, ``admin``) are
reserved names. A file that redefines one is logged and skipped: callers,
token mappings and audit readers rely on ``viewer`` meaning read-only, and a
file dropped into a config folder must not be able to quietly turn it into
something else. Give a tailored persona its own name (``viewer-ops``).

``yaml`` is imported only when a persona file is read.
"""

from __future__ import annotations

import datetime
import difflib
import json
import logging
import os
from collections.abc import Iterable, Mapping
from typing import Any

import attrs

from ..core.echo import printable
from ..core.userfiles import read_regular
from ..errors import ConfigError
from ..models import PermissionMode, Persona
from ..settings import Settings
from .decision import BUILTIN_PERSONAS

__all__ = [
    "MAX_PERSONA_BYTES",
    "PersonaCatalog",
    "PersonaFileError",
    "discover",
    "looks_like_path",
    "persona_dirs",
    "read_persona",
]

logger = logging.getLogger("ongrid_plugins.personas")

MAX_PERSONA_BYTES = 256 * 1024
_KNOWN_KEYS = ("name", "description", "permission_mode", "tools", "disallowed_tools")
_validator: Any = None


def _strs(value: Iterable[str]) -> tuple[str, ...]:
    return tuple(value)


class PersonaFileError(ConfigError):
    """A persona file cannot be used; ``path`` says which, ``message`` what is wrong with it."""

    def __init__(self, path: str, message: str) -> None:
        self.path = path
        self.message = message
        super().__init__(f"persona file {path}: {message}")


@attrs.frozen
class PersonaCatalog:
    """The persona files found on disk, by name, in search order (built-ins not included)."""

    personas: Mapping[str, Persona]
    problems: tuple[str, ...] = attrs.field(default=(), converter=_strs)
    """One line per file that was skipped, and why."""
    broken: Mapping[str, str] = attrs.field(factory=dict)
    """What is wrong with each file that failed to load, by its name without ``.md``
    (``persona file /x/weird.md: ...``): asking for ``weird`` then says why it is missing."""

    def names(self) -> list[str]:
        """Every persona name, the built-ins included, sorted."""
        return sorted({*BUILTIN_PERSONAS, *self.personas})


def persona_dirs(settings: Settings) -> list[str]:
    """The folders searched for persona files, in order."""
    return [*settings.persona_dirs, os.path.join(settings.config_dir, "personas")]


def looks_like_path(value: str) -> bool:
    """True when ``value`` names a file rather than a persona (names have no ``/`` and no ``.md``)."""
    return "/" in value or value.endswith(".md") or value.startswith("~")


def discover(settings: Settings) -> PersonaCatalog:
    """Read every persona file of every persona folder; log and skip the broken ones.

    A host reads the folders again when asked for the list of personas, so one
    command may discover several times: each problem is logged once per process
    until its file changes (:func:`_warn_once`), and always kept in ``problems``.
    """
    found: dict[str, Persona] = {}
    problems: list[str] = []
    broken: dict[str, str] = {}
    for folder in persona_dirs(settings):
        for path in _persona_files(folder, problems):
            problem = _add(found, path, broken)
            if problem:
                _warn_once(path, problem)
                problems.append(problem)
    return PersonaCatalog(found, problems, broken)


_warned: set[tuple[str, int, int, str]] = set()


def _warn_once(path: str, message: str) -> None:
    """Log ``message`` about ``path`` unless it was logged already for the file as it is now."""
    try:
        st = os.stat(path)
        key = (path, st.st_mtime_ns, st.st_size, message)
    except OSError:
        key = (path, 0, 0, message)
    if key in _warned:
        logger.debug("persona loader: %s", printable(message))
        return
    _warned.add(key)
    logger.warning("persona loader: %s", printable(message))  # a path or key may hold a newline


def _add(found: dict[str, Persona], path: str, broken: dict[str, str]) -> str:
    try:
        persona = read_persona(path)
    except PersonaFileError as exc:
        broken.setdefault(os.path.basename(path).removesuffix(".md"), str(exc))
        return f"parse {path}: {exc.message}"
    if persona.name in found:
        return f'persona "{persona.name}" already defined by {found[persona.name].path}, skipping {path}'
    found[persona.name] = persona
    logger.info('persona loader: registered persona "%s" from %s', persona.name, printable(path))
    return ""


def _persona_files(folder: str, problems: list[str]) -> list[str]:
    if not os.path.isabs(folder):
        problem = f"persona folder {folder!r} is not an absolute path, skipping it"
        logger.warning("persona loader: %s", printable(problem))
        problems.append(problem)
        return []
    try:
        names = sorted(os.listdir(folder))
    except FileNotFoundError:
        return []
    except OSError as exc:
        problem = f"cannot read persona folder {folder}: {exc.strerror or exc}"
        logger.warning("persona loader: %s", printable(problem))
        problems.append(problem)
        return []
    return [
        os.path.join(folder, name)
        for name in names
        if name.endswith(".md") and name.lower() != "readme.md" and not name.startswith(".")
    ]


def read_persona(path: str | os.PathLike[str]) -> Persona:
    """Read one persona file; raise :class:`PersonaFileError` saying what is wrong with it."""
    where = os.path.abspath(os.path.expanduser(os.fspath(path)))
    text = _read_text(where)
    front, body = _split_front_matter(text, where)
    data = _parse_yaml(front, where)
    _check(data, where)
    _warn_unknown_keys(data, where)
    name = data["name"]
    if name in BUILTIN_PERSONAS:
        message = (
            f"{name!r} is a built-in persona and built-in names are reserved; "
            f"give this persona its own name (e.g. {name}-custom)"
        )
        raise PersonaFileError(where, message)
    return Persona(
        name=name,
        permission_mode=PermissionMode(data.get("permission_mode", PermissionMode.READ_ONLY.value)),
        description=str(data.get("description", "")).strip(),
        tools=_globs(data.get("tools", ["*"])),
        disallowed_tools=_globs(data.get("disallowed_tools", [])),
        path=where,
        extra={k: _jsonable(v) for k, v in data.items() if k not in _KNOWN_KEYS},
        instructions=body.strip(),
    )


def _warn_unknown_keys(data: Mapping[str, Any], path: str) -> None:
    """Warn about an unknown key that looks like a misspelt known one, naming the known key.

    ``permision_mode: dual-sign-required`` would otherwise load a read-only persona
    without a word. Other unknown keys (``model``, ``color`` of agent persona files)
    are kept in ``Persona.extra`` as documented, said at INFO level only.
    """
    for key in data:
        if key in _KNOWN_KEYS:
            continue
        close = difflib.get_close_matches(str(key), _KNOWN_KEYS, n=1, cutoff=0.6)
        if not close:
            logger.info(
                'persona loader: %s: unknown key "%s" kept in Persona.extra',
                printable(path),
                printable(str(key)),
            )
            continue
        unset = f" (without it the persona is {PermissionMode.READ_ONLY.value})"
        default = unset if close[0] == "permission_mode" and close[0] not in data else ""
        _warn_once(path, f'persona file {path}: unknown key "{key}" — did you mean "{close[0]}"?{default}')


def _read_text(path: str) -> str:
    try:
        raw = read_regular(path, MAX_PERSONA_BYTES)
    except OSError as exc:
        message = f"cannot read the persona file: {exc.strerror or exc}"
        raise PersonaFileError(path, message) from None
    if len(raw) > MAX_PERSONA_BYTES:
        message = f"a persona file may be at most {MAX_PERSONA_BYTES} bytes"
        raise PersonaFileError(path, message)
    try:
        return raw.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as exc:
        message = f"not UTF-8 (invalid byte at offset {exc.start})"
        raise PersonaFileError(path, message) from None


def _split_front_matter(text: str, path: str) -> tuple[str, str]:
    lines = text.splitlines(keepends=True)
    if not lines or lines[0].strip() != "---":
        message = "a persona file starts with a '---' line and YAML front matter"
        raise PersonaFileError(path, message)
    for index, line in enumerate(lines[1:], start=1):
        if line.rstrip("\r\n") in ("---", "..."):
            return "".join(lines[1:index]), "".join(lines[index + 1 :])
    message = "the front matter is not closed by a '---' line"
    raise PersonaFileError(path, message)


def _parse_yaml(front: str, path: str) -> dict[str, Any]:
    from ..loaders.frontmatter import FrontMatterError, load_yaml

    try:  # the SKILL.md guards: an alias bomb is refused without being expanded
        data = load_yaml(front, first_line=2)
    except FrontMatterError as exc:
        message = str(exc).replace("invalid YAML front matter", "the front matter is not valid YAML", 1)
        raise PersonaFileError(path, message) from None
    if not isinstance(data, dict):
        message = "the front matter must be a mapping of keys to values"
        raise PersonaFileError(path, message)
    return data


def _check(data: Mapping[str, Any], path: str) -> None:
    global _validator
    if _validator is None:
        from importlib import resources

        from jsonschema import Draft202012Validator

        text = resources.files("ongrid_plugins").joinpath("schemas/persona.schema.json").read_text("utf-8")
        _validator = Draft202012Validator(json.loads(text))
    errors = sorted(_validator.iter_errors(data), key=lambda e: [str(p) for p in e.absolute_path])
    if errors:
        message = "; ".join(f"{_field(e)}: {_short(e.message)}" for e in errors)
        raise PersonaFileError(path, message)


def _field(error: Any) -> str:
    return "/".join(str(p) for p in error.absolute_path) or "front matter"


def _short(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _globs(value: str | Iterable[str]) -> tuple[str, ...]:
    parts = value.split(",") if isinstance(value, str) else list(value)
    return tuple(p.strip() for p in parts if p.strip())


def _jsonable(value: Any) -> Any:
    """YAML can say things JSON cannot (dates, sets, non-string keys): keep them as text."""
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [_jsonable(v) for v in value]
    if isinstance(value, datetime.date | datetime.time):
        return value.isoformat()
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return str(value)
