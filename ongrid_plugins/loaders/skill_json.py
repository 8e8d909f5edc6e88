"""Built-in plugin ``skill_json``: ``skill.json`` manifests become subprocess skills.

Every field rule of the specification is enforced here, plus the ones a
careful operator expects (types, sizes, encodings, variable names, a schema
that really is a JSON Schema). Problems are collected, not raised one by one,
so a manifest with three mistakes gets one log line naming all three.

Reading the bytes into a dict is :mod:`.skill_json_parse`; its public names are
re-exported here.
"""

from __future__ import annotations

import difflib
import json
import os
import re
import stat
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..core.echo import printable
from ..discovery.roots import check_entry, entry_warning, resolve_file
from ..errors import ManifestBuildError
from ..hookspecs import hookimpl
from ..models import Problem, SandboxDecl, Skill, SkillRoot, Tool, ToolClass
from ..schema import check as schema_check
from ..schema import defaults as schema_defaults
from ..schema import safe
from ..schema.keywords import unknown_keywords
from ._fields import Fields
from ._fields import show as _show
from ._sandbox import read_sandbox
from .skill_json_parse import MANIFEST_NAME, MAX_MANIFEST_BYTES, parse_manifest, read_manifest
from .skill_json_parse import got as _got
from .skill_json_parse import read_bounded as _read_bounded

if TYPE_CHECKING:
    from ..settings import Settings

__all__ = [
    "CLASSES",
    "MANIFEST_NAME",
    "MAX_MANIFEST_BYTES",
    "build_skill",
    "parse_manifest",
    "read_manifest",
]

#: The published schema of a manifest (``ongrid_plugins/schemas/skill.schema.json``): the
#: one home of every field rule a schema can say (names, types, patterns, bounds, the
#: classes). The checks below read their limits from it and word each error themselves;
#: what no schema can say (the entry on disk, a visible description, a valid argument
#: schema, distinct ``env_allow`` names) is code only.
SCHEMA_FILE = os.path.join(os.path.dirname(os.path.dirname(__file__)), "schemas", "skill.schema.json")
with open(SCHEMA_FILE, "rb") as _file:
    _FIELDS: dict[str, Any] = json.load(_file)["properties"]

MAX_NAME_LENGTH: int = _FIELDS["name"]["maxLength"]
MAX_TIMEOUT: int = _FIELDS["timeout_seconds"]["maximum"]
#: The schema's anchored patterns, matched with ``fullmatch`` (shown without the anchors).
NAME_RE = re.compile(_FIELDS["name"]["pattern"].strip("^$"))
ENV_NAME_RE = re.compile(_FIELDS["env_allow"]["items"]["pattern"].strip("^$"))
#: The most distinct names ``env_allow`` may list: far more than a skill reads, and a
#: bound on what one manifest makes every call copy from the host's environment.
MAX_ENV_ALLOW = 1024
KNOWN_FIELDS = tuple(_FIELDS)
_KNOWN_SET = frozenset(KNOWN_FIELDS)
#: The schema's ``class`` values; ``""`` (as a missing class) is ``safe``.
CLASSES = {value: ToolClass(value or "safe") for value in _FIELDS["class"]["enum"]}


_MISSING: Any = object()


def empty_schema() -> dict[str, Any]:
    """The schema of a manifest without one: any object (a fresh dict every time)."""
    return {"type": "object", "properties": {}}


class _Checker:
    """Collects the problems of one manifest while reading its fields."""

    def __init__(self, path: str, data: dict[str, Any]) -> None:
        self.path = path
        self.data = data
        self.problems: list[Problem] = []

    def error(self, field: str, code: str, message: str, hint: str = "") -> None:
        self.problems.append(Problem("error", code, message, self.path, f"/{field}" if field else "", hint))

    def warn(self, field: str, code: str, message: str, hint: str = "") -> None:
        self.problems.append(Problem("warning", code, message, self.path, f"/{field}", hint))

    def string(self, field: str, *, required: bool, default: str = "") -> str:
        value = self.data.get(field, _MISSING)
        if value is _MISSING:
            if required:
                self.error(field, "missing_field", f'missing required field "{field}"')
            return default
        if not isinstance(value, str):
            message = f'"{field}" must be a string (got {_got(value)})'
            self.error(field, "wrong_type", message)
            return default
        if required and not value.strip():
            self.error(field, "empty_field", f'"{field}" must not be empty')
        elif field == "description" and not visible(value):
            shown = json.dumps(value)  # ASCII: the invisible characters written as escapes
            message = f'"description" has no visible character (got {shown}); say what the skill does'
            self.error(field, "empty_field", message)
        return value


def visible(text: str) -> bool:
    """Whether ``text`` has a character a reader sees: not whitespace, and printable (a
    zero-width space U+200B or another format character is neither blank to str.strip
    nor anything a model could read)."""
    return any(char.isprintable() and not char.isspace() for char in text)


def build_skill(
    data: dict[str, Any],
    path: str,
    root: SkillRoot,
    settings: Settings | None = None,
) -> Skill:
    """Check every field of a parsed manifest and build the skill.

    Raises :class:`ManifestBuildError` listing every error; warnings (unknown
    fields) are kept on the skill.
    """
    check = _Checker(path, data)
    name = _check_name(check)
    description = check.string("description", required=True)
    schema = _check_schema(check)
    entry = _check_entry(check, root)
    env_allow = _check_env_allow(check)
    timeout = _check_timeout(check, settings)
    tool_class = _check_class(check)
    category = check.string("category", required=False, default="external") or "external"
    sandbox = _check_sandbox(check, settings, root)
    extra = _check_unknown(check)
    if check.problems:
        _refuse(check, name)
    tool = Tool(
        name=name, description=description, schema=schema, tool_class=tool_class, skill=name, source=path,
        kind="subprocess", category=category, timeout=timeout, entry=entry, entry_declared=data["entry"],
        cwd=path.rpartition("/")[0], root=root.real, env_allow=env_allow, provenance=root.label, extra=extra,
        sandbox=sandbox,
    )  # fmt: skip
    return Skill(
        name=name, description=description, format=MANIFEST_NAME, path=path, root=root, tools=(tool,),
        category=category, warnings=check.problems, extra=extra,
    )  # fmt: skip


def _refuse(check: _Checker, name: object) -> None:
    """Raise the :class:`ManifestBuildError` of the manifest's errors (none: return)."""
    errors = [p for p in check.problems if p.level == "error"]
    if errors:
        shown = name if isinstance(name, str) else ""
        message = "; ".join(p.said for p in errors)
        raise ManifestBuildError(check.path, shown, message, check.problems)


def _check_name(check: _Checker) -> str:
    name = check.string("name", required=True)
    if not name:
        return name
    if not NAME_RE.fullmatch(name):
        suggestion = re.sub(r"[^a-z0-9_]+", "_", name.lower()).strip("_")
        hint = f'use lower_snake, e.g. "{suggestion}"' if suggestion else "use lower_snake"
        check.error("name", "bad_name", f'"name" must match {NAME_RE.pattern} (got {_show(name)})', hint)
    elif len(name) > MAX_NAME_LENGTH:
        message = f'"name" is {len(name)} characters; model APIs accept at most {MAX_NAME_LENGTH}'
        check.error("name", "name_too_long", message)
    return name


def _check_schema(check: _Checker) -> Mapping[str, Any]:
    if "schema" not in check.data:
        return empty_schema()
    schema = check.data["schema"]
    if not isinstance(schema, dict):
        message = f'"schema" must be a JSON object schema (got {_got(schema)})'
        check.error("schema", "wrong_type", message)
        return empty_schema()
    kind = schema.get("type", "object")
    if kind != "object":
        message = f'"schema" must describe an object (its "type" is {_show(kind)})'
        check.error(
            "schema", "schema_not_object", message, 'arguments are a JSON object: use "type": "object"'
        )
        return empty_schema()
    for pointer, message in unknown_keywords(schema):  # said beside any other problem
        check.warn("schema" + pointer, "unknown_keyword", f'"schema{pointer}": {message}')
    problem, with_default = schema_check.check_schema_finding_defaults(schema)
    if problem is not None:
        check.error("schema", "invalid_schema", f'"schema" is not a valid JSON Schema: {problem}')
        return empty_schema()
    unsafe = safe.schema_problems(schema)
    for pointer, message in unsafe:
        check.error("schema" + pointer, "unsafe_schema", f'"schema{pointer}": {message}')
    if unsafe:
        return empty_schema()
    if with_default is None:  # jsonschema vouched for the schema: walk it for defaults here
        defaults = schema_defaults.check_defaults(schema)
    else:
        defaults = schema_defaults.check_defaults(schema, with_default) if with_default else []
    for pointer, message in defaults:
        check.error(
            "schema" + pointer,
            "bad_default",
            f'"schema{pointer}" does not validate: {message}',
            "a default must be a valid value of its own property",
        )
    if "type" not in schema:
        schema = {"type": "object", **schema}
    return schema


def _check_entry(check: _Checker, root: SkillRoot) -> str:
    declared = check.string("entry", required=True)
    if not declared.strip():
        return ""
    folder = check.path.rpartition("/")[0]
    candidate = declared if declared.startswith("/") else f"{folder}/{declared}"
    try:
        real, st = _resolve_entry(candidate, declared)
    except (OSError, ValueError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        check.error(
            "entry",
            "entry_missing",
            f"entry {printable(candidate, 200)} cannot be resolved: {reason}",
            "the entry path is relative to the folder holding skill.json",
        )
        return ""
    refusal = check_entry(real, st, root)
    if refusal is not None:
        check.error("entry", *refusal)
    elif (warning := entry_warning(real)) is not None:
        check.warn("entry", *warning)
    return real


def _resolve_entry(candidate: str, declared: str) -> tuple[str, os.stat_result]:
    """Canonical path and stat of the entry.

    The manifest's folder is canonical already (the walker never follows a
    symlinked folder and resolves symlinked manifests), so a plain file name
    that is not itself a symlink is canonical after one ``lstat``; anything
    else (sub-paths, ``..``, symlinks, absolute paths) is fully resolved.
    """
    if "/" not in declared and declared not in (".", ".."):
        st = os.lstat(candidate)
        if not stat.S_ISLNK(st.st_mode):
            return candidate, st
    return resolve_file(candidate)


def _check_env_allow(check: _Checker) -> tuple[str, ...]:
    if "env_allow" not in check.data:
        return ()
    value = check.data["env_allow"]
    if not isinstance(value, list):
        message = f'"env_allow" must be an array of variable names (got {_got(value)})'
        check.error("env_allow", "wrong_type", message)
        return ()
    names: dict[str, None] = {}  # a dict: each name once, in order, found in one step
    for index, item in enumerate(value):
        if not isinstance(item, str) or not ENV_NAME_RE.fullmatch(item):
            message = f'"env_allow[{index}]" is not a valid variable name (got {_show(item)})'
            check.error(f"env_allow/{index}", "bad_env_name", message, "names look like PATH or API_TOKEN")
        else:
            names[item] = None
    if len(names) > MAX_ENV_ALLOW:
        message = f'"env_allow" lists {len(names)} names; at most {MAX_ENV_ALLOW} are allowed'
        check.error("env_allow", "too_many", message, "list only the variables the skill reads")
        return ()
    return tuple(names)


def _check_timeout(check: _Checker, settings: Settings | None) -> float:
    default = settings.default_timeout if settings is not None else 30.0
    if "timeout_seconds" not in check.data:
        return default
    value = check.data["timeout_seconds"]
    if type(value) is not int:
        message = f'"timeout_seconds" must be a whole number of seconds (got {_got(value)})'
        check.error("timeout_seconds", "wrong_type", message, "0 means the default of 30 s")
        return default
    if not 0 <= value <= MAX_TIMEOUT:
        message = f'"timeout_seconds" must be between 0 and {MAX_TIMEOUT} (got {_show(value)})'
        check.error("timeout_seconds", "out_of_range", message, "0 means the default of 30 s")
        return default
    return float(value) if value else default


def _check_class(check: _Checker) -> ToolClass:
    value = check.data.get("class", "")
    if isinstance(value, str) and value in CLASSES:
        return CLASSES[value]
    message = f'"class" must be safe, mutating or dangerous (got {_show(value)})'
    check.error("class", "bad_class", message)
    return ToolClass.SAFE


def _check_sandbox(check: _Checker, settings: Settings | None, root: SkillRoot) -> SandboxDecl | None:
    if "sandbox" not in check.data:
        return None
    fields = Fields(check.path)
    raw = check.data["sandbox"]
    decl = read_sandbox(fields, raw, "/sandbox", "sandbox", settings, json=True, root=root.real)
    check.problems.extend(fields.problems)
    return decl


def _check_unknown(check: _Checker) -> dict[str, Any]:
    if check.data.keys() <= _KNOWN_SET:
        return {}
    extra = {k: v for k, v in check.data.items() if k not in _KNOWN_SET}
    for key in extra:
        close = difflib.get_close_matches(key, KNOWN_FIELDS, n=1, cutoff=0.6)
        hint = f' — did you mean "{close[0]}"?' if close else ""
        check.warn(key.replace("~", "~0").replace("/", "~1"), "unknown_field", f'unknown field "{key}"{hint}')
    return extra


@hookimpl
def ongrid_manifest_names() -> list[str]:
    """This loader claims files named exactly ``skill.json``."""
    return [MANIFEST_NAME]


@hookimpl
def ongrid_load_manifest(path: str, root: SkillRoot, settings: Settings, manifest_name: str) -> Skill | None:
    """Parse and build a ``skill.json`` (found under that name; ``path`` may be a symlink's
    target, named otherwise); leave every other file to other loaders."""
    if manifest_name != MANIFEST_NAME:
        return None
    raw = _read_bounded(path, MAX_MANIFEST_BYTES)
    return build_skill(parse_manifest(raw, path), path, root, settings)
