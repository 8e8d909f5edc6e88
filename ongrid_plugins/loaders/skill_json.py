"""Built-in plugin ``skill_json``: ``skill.json`` manifests become subprocess skills.

Every field rule of the specification is enforced here, plus the ones a
careful operator expects (types, sizes, encodings, variable names, a schema
that really is a JSON Schema). Problems are collected, not raised one by one,
so a manifest with three mistakes gets one log line naming all three.
"""

from __future__ import annotations

import difflib
import functools
import json
import marshal
import os
import re
import stat
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..discovery.roots import check_entry, resolve_file
from ..errors import ManifestBuildError, ManifestParseError
from ..hookspecs import hookimpl
from ..models import Problem, SandboxDecl, Skill, SkillRoot, Tool, ToolClass
from ..schema import check as schema_check
from ..schema import defaults as schema_defaults
from ..schema import safe, verdicts
from ._fields import Fields, type_name
from ._fields import show as _show
from ._sandbox import read_sandbox

if TYPE_CHECKING:
    from ..settings import Settings

__all__ = [
    "MANIFEST_NAME",
    "MAX_MANIFEST_BYTES",
    "SkillRecord",
    "build_skill",
    "read_manifest",
    "skill_from_record",
    "skill_record",
]

MANIFEST_NAME = "skill.json"
MAX_MANIFEST_BYTES = 1024 * 1024
MAX_NAME_LENGTH = 64
MAX_TIMEOUT = 24 * 60 * 60
NAME_RE = re.compile(r"[a-z0-9_]+")
ENV_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
CLASSES = {
    "": ToolClass.SAFE,
    "safe": ToolClass.SAFE,
    "mutating": ToolClass.MUTATING,
    "dangerous": ToolClass.DANGEROUS,
}
KNOWN_FIELDS = (
    "name",
    "description",
    "schema",
    "entry",
    "env_allow",
    "timeout_seconds",
    "class",
    "category",
    "sandbox",
    "$schema",
)
_KNOWN_SET = frozenset(KNOWN_FIELDS)


def empty_schema() -> dict[str, Any]:
    """The schema of a manifest without one: any object (a fresh dict every time)."""
    return {"type": "object", "properties": {}}


def _reject_constant(name: str) -> None:
    message = f"{name} is not valid JSON"
    raise ValueError(message)


def _unique_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        keys = [key for key, _value in pairs]
        dup = next(key for index, key in enumerate(keys) if key in keys[:index])
        message = f'duplicate key "{dup}" (two parsers could read two different manifests)'
        raise ValueError(message)
    return obj


_DECODER = json.JSONDecoder(object_pairs_hook=_unique_object, parse_constant=_reject_constant)


def read_manifest(path: str, limit: int = MAX_MANIFEST_BYTES) -> dict[str, Any]:
    """Read and parse a manifest; raise :class:`ManifestParseError` saying why not.

    Refuses anything but a regular file of at most ``limit`` bytes of UTF-8
    holding one JSON object without duplicate keys or NaN/Infinity.
    """
    return parse_manifest(_read_bounded(path, limit), path)


def parse_manifest(raw: bytes, path: str) -> dict[str, Any]:
    """Parse the bytes of a manifest (see :func:`read_manifest`)."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        message = f"invalid UTF-8 at byte {exc.start}: {exc.reason}"
        raise ManifestParseError(path, message) from None
    if text.startswith("\ufeff"):
        text = text[1:]
    try:
        data = _DECODER.decode(text)
    except ValueError as exc:
        raise ManifestParseError(path, str(exc)) from None
    if not isinstance(data, dict):
        message = f"the manifest must be a JSON object, got {_json_type(data)}"
        raise ManifestParseError(path, message)
    return data


def _read_bounded(path: str, limit: int) -> bytes:
    # The walker only offers regular files (symlinked manifests are resolved and
    # checked first), so one read of limit+1 bytes tells the size without an
    # fstat; O_NONBLOCK still keeps a FIFO swapped in meanwhile from hanging boot.
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError as exc:
        raise ManifestParseError(path, f"cannot open: {exc.strerror}") from None
    try:
        raw = _read_upto(fd, limit + 1)
    except OSError as exc:
        raise ManifestParseError(path, f"cannot read: {exc.strerror}") from None
    finally:
        os.close(fd)
    if len(raw) > limit:
        message = f"manifest is larger than the limit of {limit} bytes"
        raise ManifestParseError(path, message)
    return raw


def _read_upto(fd: int, count: int) -> bytes:
    # Asking os.read for a whole MiB allocates a MiB per manifest; manifests are
    # small, so read a page-sized chunk first and only loop for big files.
    chunk = os.read(fd, min(count, _CHUNK))
    if len(chunk) < _CHUNK:
        return chunk
    chunks = [chunk]
    size = len(chunk)
    while size < count and (chunk := os.read(fd, min(count - size, 1024 * 1024))):
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)


_CHUNK = 64 * 1024


def _json_type(value: object) -> str:
    return type_name(value, json=True)


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
        if field not in self.data:
            if required:
                self.error(field, "missing_field", f'missing required field "{field}"')
            return default
        value = self.data[field]
        if not isinstance(value, str):
            message = f'"{field}" must be a string (got {_json_type(value)} {_show(value)})'
            self.error(field, "wrong_type", message)
            return default
        if required and not value.strip():
            self.error(field, "empty_field", f'"{field}" must not be empty')
        return value


def build_skill(
    data: dict[str, Any],
    path: str,
    root: SkillRoot,
    settings: Settings | None = None,
    *,
    schema_verified: bool = False,
    raw: bytes | None = None,
) -> Skill:
    """Check every field of a parsed manifest and build the skill.

    Raises :class:`ManifestBuildError` listing every error; warnings (unknown
    fields) are kept on the skill. ``schema_verified`` skips re-checking a
    schema (and its defaults) already found valid in these exact bytes.
    ``raw``, the bytes ``data`` was parsed from, lets checks that look for
    keywords the text does not hold be skipped.
    """
    check = _Checker(path, data)
    name = _check_name(check)
    description = check.string("description", required=True)
    schema = _check_schema(check, settings, schema_verified, raw)
    entry = _check_entry(check, root)
    env_allow = _check_env_allow(check)
    timeout = _check_timeout(check, settings)
    tool_class = _check_class(check)
    category = check.string("category", required=False, default="external") or "external"
    sandbox = _check_sandbox(check, settings, root)
    extra = _check_unknown(check)
    if check.problems:
        errors = [p for p in check.problems if p.level == "error"]
        if errors:
            shown = name if isinstance(name, str) else ""
            raise ManifestBuildError(
                path, shown, "; ".join(p.message for p in errors), check.problems, entry=_verdict_entry(data)
            )
    return _make_skill(
        path, root, name, description, schema, tool_class, category, timeout, entry, data["entry"],
        env_allow, extra, sandbox, check.problems,
    )  # fmt: skip


def _verdict_entry(data: dict[str, Any]) -> str | None:
    """The one file besides the manifest a verdict rests on (see ``ManifestBuildError.entry``)."""
    if "sandbox" in data:  # declared paths are resolved: their symlinks count too
        return None
    declared = data.get("entry")
    return declared if isinstance(declared, str) and declared.strip() else ""


def _make_skill(
    path: str,
    root: SkillRoot,
    name: str,
    description: str,
    schema: Mapping[str, Any],
    tool_class: ToolClass,
    category: str,
    timeout: float,
    entry: str,
    declared: str,
    env_allow: tuple[str, ...],
    extra: dict[str, Any],
    sandbox: SandboxDecl | None,
    warnings: list[Problem] | tuple[Problem, ...],
    tool_type: type[Tool] = Tool,
) -> Skill:
    """The skill of a checked manifest: the one constructor of a built and of a cached one."""
    tool = tool_type(
        name=name,
        description=description,
        schema=schema,
        tool_class=tool_class,
        skill=name,
        source=path,
        kind="subprocess",
        category=category,
        timeout=timeout,
        entry=entry,
        cwd=path.rpartition("/")[0],
        root=root.real,
        env_allow=env_allow,
        entry_declared=declared,
        provenance=root.label,
        extra=extra,
        sandbox=sandbox,
    )
    return Skill(
        name=name,
        description=description,
        format=MANIFEST_NAME,
        path=path,
        root=root,
        tools=(tool,),
        category=category,
        warnings=warnings,
        extra=extra,
    )


#: What the load cache keeps of a built skill: plain values only (``marshal``-able).
SkillRecord = tuple[
    str, str, bytes, str, str, float, str, str, tuple[str, ...], "bytes | None", tuple[Any, ...]
]


def skill_record(skill: Skill, warnings: tuple[Problem, ...] | None = None) -> SkillRecord | None:
    """The skill as plain values for the load cache; None when it must be built every time.

    Only what this loader built from the manifest's bytes and its entry alone: a
    skill with a ``sandbox`` declaration (whose paths are resolved), notices or
    anything another plugin added is never recorded. ``warnings`` are the
    skill's as the loader made them (default: its own now).
    """
    if skill.format != MANIFEST_NAME or skill.notices or len(skill.tools) != 1:
        return None
    tool = skill.tools[0]
    declared = tool.entry_declared
    if tool.sandbox is not None or tool.native is not None or tool.kind != "subprocess":
        return None
    if not isinstance(declared, str) or not tool.entry or tool.unavailable or skill.unavailable:
        return None
    schema, extra = tool.schema, skill.extra
    if type(schema) is not dict or type(extra) is not dict or tool.extra is not extra:
        return None
    shown = skill.warnings if warnings is None else warnings
    problems = tuple((w.level, w.code, w.message, w.path, w.pointer, w.hint) for w in shown)
    return (
        skill.name,
        skill.description,
        marshal.dumps(schema, 4),
        tool.tool_class.value,
        skill.category,
        tool.timeout,
        tool.entry,
        declared,
        tool.env_allow,
        marshal.dumps(extra, 4) if extra else None,
        problems,
    )


def skill_from_record(record: SkillRecord, path: str, root: SkillRoot) -> Skill:
    """The skill :func:`skill_record` recorded, built as :func:`build_skill` builds it.

    Its tool's schema is decoded when first read (most loads never read most
    schemas). Raises ``TypeError``, ``ValueError`` or ``KeyError`` for a record of
    the wrong shape (a cache of another version): the caller loads cold then.
    """
    name, description, schema, tool_class, category, timeout, entry, declared, env_allow, extra, warnings = (
        record
    )
    if type(schema) is not bytes or type(name) is not str or type(env_allow) is not tuple:
        raise TypeError("not a skill record")
    skill = _make_skill(
        path, root, name, description, _UNREAD, CLASSES[tool_class], category, timeout, entry, declared,
        env_allow, marshal.loads(extra) if extra is not None else {},
        None, tuple(Problem(*w) for w in warnings), RecordedTool,
    )  # fmt: skip
    tool = skill.tools[0]
    _SCHEMA.__delete__(tool)
    _BLOB.__set__(tool, schema)
    return skill


_UNREAD: Mapping[str, Any] = {}
_SCHEMA: Any = Tool.__dict__["schema"]  # the slot behind Tool.schema


class RecordedTool(Tool):
    """A :class:`~ongrid_plugins.models.Tool` rebuilt from the load cache.

    The same value in every field; ``schema`` is kept as the ``marshal`` bytes of
    the checked schema until it is first read, then decoded once (a fresh dict
    per tool, as a parse makes). Everything else is the Tool's own.
    """

    __slots__ = ("_schema_bytes",)
    _schema_bytes: bytes

    @property
    def schema(self) -> Mapping[str, Any]:
        """JSON Schema of the arguments object (decoded from the cache on first read)."""
        try:
            value: Mapping[str, Any] = _SCHEMA.__get__(self)
        except AttributeError:
            value = marshal.loads(self._schema_bytes)
            _SCHEMA.__set__(self, value)
        return value

    @schema.setter
    def schema(self, value: Mapping[str, Any]) -> None:
        _SCHEMA.__set__(self, value)


_BLOB: Any = RecordedTool.__dict__["_schema_bytes"]


def _check_name(check: _Checker) -> str:
    name = check.string("name", required=True)
    if not name:
        return name
    if not NAME_RE.fullmatch(name):
        suggestion = re.sub(r"[^a-z0-9_]+", "_", name.lower()).strip("_")
        hint = f'use lower_snake, e.g. "{suggestion}"' if suggestion else "use lower_snake"
        check.error("name", "bad_name", f'"name" must match [a-z0-9_]+ (got {_show(name)})', hint)
    elif len(name) > MAX_NAME_LENGTH:
        message = f'"name" is {len(name)} characters; model APIs accept at most {MAX_NAME_LENGTH}'
        check.error("name", "name_too_long", message)
    return name


def _may_hold(raw: bytes | None, *keys: bytes) -> bool:
    """False only when no object key of the JSON text ``raw`` can start with one of ``keys``.

    A key is in the text as written unless a character of it is a ``\\u``
    escape: text with an escape, or no text, may hold anything.
    """
    return raw is None or b"\\u" in raw or any(key in raw for key in keys)


def _check_schema(
    check: _Checker, settings: Settings | None, verified: bool = False, raw: bytes | None = None
) -> Mapping[str, Any]:
    if "schema" not in check.data:
        return empty_schema()
    schema = check.data["schema"]
    if not isinstance(schema, dict):
        message = f'"schema" must be a JSON object schema (got {_json_type(schema)} {_show(schema)})'
        check.error("schema", "wrong_type", message)
        return empty_schema()
    kind = schema.get("type", "object")
    if kind != "object":
        message = f'"schema" must describe an object (its "type" is {_show(kind)})'
        check.error(
            "schema", "schema_not_object", message, 'arguments are a JSON object: use "type": "object"'
        )
        return empty_schema()
    if verified:
        return schema if "type" in schema else {"type": "object", **schema}
    problem = schema_check.check_schema(schema, cache=_verdicts(settings))
    if problem is not None:
        check.error("schema", "invalid_schema", f'"schema" is not a valid JSON Schema: {problem}')
        return empty_schema()
    # The RE2 and $ref checks look at "pattern", "patternProperties", "$schema",
    # "$ref" and "$dynamicRef" only; the defaults check at "default" only.
    unsafe = safe.schema_problems(schema) if _may_hold(raw, b'"pattern', b'"$') else []
    for pointer, message in unsafe:
        check.error("schema" + pointer, "unsafe_schema", f'"schema{pointer}": {message}')
    if unsafe:
        return empty_schema()
    defaults = schema_defaults.check_defaults(schema) if _may_hold(raw, b'"default"') else []
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


def _verdicts(settings: Settings | None) -> verdicts.VerdictCache | None:
    if settings is None or not settings.cache_dir:
        return None
    return _shared_cache(settings.cache_dir)


@functools.lru_cache(maxsize=8)
def _shared_cache(directory: str) -> verdicts.VerdictCache:
    return verdicts.verdict_cache(directory)


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
            f"entry {candidate} cannot be resolved: {reason}",
            "the entry path is relative to the folder holding skill.json",
        )
        return ""
    refusal = check_entry(real, st, root)
    if refusal is not None:
        check.error("entry", *refusal)
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
        message = f'"env_allow" must be an array of variable names (got {_json_type(value)} {_show(value)})'
        check.error("env_allow", "wrong_type", message)
        return ()
    names: list[str] = []
    for index, item in enumerate(value):
        if not isinstance(item, str) or not ENV_NAME_RE.fullmatch(item):
            message = f'"env_allow[{index}]" is not a valid variable name (got {_show(item)})'
            check.error(f"env_allow/{index}", "bad_env_name", message, "names look like PATH or API_TOKEN")
        elif item not in names:
            names.append(item)
    return tuple(names)


def _check_timeout(check: _Checker, settings: Settings | None) -> float:
    default = settings.default_timeout if settings is not None else 30.0
    if "timeout_seconds" not in check.data:
        return default
    value = check.data["timeout_seconds"]
    if type(value) is not int:
        message = (
            f'"timeout_seconds" must be a whole number of seconds (got {_json_type(value)} {_show(value)})'
        )
        check.error("timeout_seconds", "wrong_type", message, "0 means the default of 30 s")
        return default
    if not 0 <= value <= MAX_TIMEOUT:
        message = f'"timeout_seconds" must be between 0 and {MAX_TIMEOUT} (got {value})'
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
def ongrid_load_manifest(path: str, root: SkillRoot, settings: Settings) -> Skill | None:
    """Parse and build a ``skill.json``; leave every other file to other loaders.

    Manifests whose exact bytes loaded before (with the same library versions)
    are known to parse cleanly and to carry a valid schema, so they skip the
    duplicate-key parser and the schema checks: together, most of a load.
    """
    if os.path.basename(path) != MANIFEST_NAME:
        return None
    raw = _read_bounded(path, MAX_MANIFEST_BYTES)
    cache = _verdicts(settings)
    key = verdicts.content_key(b"skill.json", raw) if cache is not None else None
    if key is not None and cache is not None and key in cache:
        data = json.loads(raw)
        return build_skill(data, path, root, settings, schema_verified=True)
    skill = build_skill(parse_manifest(raw, path), path, root, settings, raw=raw)
    if key is not None and cache is not None:
        cache.add(key)  # parse_manifest and build_skill raise on anything wrong
    return skill
