"""The ``tools:`` of a SKILL.md: each entry becomes a callable :class:`~ongrid_plugins.models.Tool`.

An entry has ``name``, ``description``, ``when_to_use``, ``class`` (``read`` /
``write`` / ``destructive`` or ``safe`` / ``mutating`` / ``dangerous``; empty is
safe), an arguments JSON Schema (``schema`` or ``input_schema``), ``confirmation:
required``, ``timeout_seconds``, ``category``, ``sandbox`` (what it needs from its
sandbox; replaces the skill's ``metadata.ongrid.sandbox`` entirely) and ``impl``:

* ``builtin:<key>`` — a Python callable some plugin contributes through
  ``ongrid_native_tools``; bound (or marked unavailable) at load time;
* ``exec:<path>`` — an executable, relative to the skill folder, run with the
  skill.json wire protocol and containment rules (``env_allow`` per tool).

Anything else is an error naming the supported schemes.
"""

from __future__ import annotations

import os
import re
import unicodedata
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..discovery.roots import check_entry, entry_warning, resolve_file
from ..models import SandboxDecl, SkillRoot, Tool, ToolClass
from ..schema import check as schema_check
from ..schema import defaults as schema_defaults
from ..schema import safe
from ..schema.keywords import unknown_keywords
from ._fields import Fields, canon, pointer, show, type_name
from ._sandbox import read_sandbox

if TYPE_CHECKING:
    from ..settings import Settings

__all__ = ["EMPTY_SCHEMA", "MAX_NAME_LENGTH", "build_tools", "normalise_name"]

MAX_NAME_LENGTH = 64
MAX_TIMEOUT = 24 * 60 * 60
EMPTY_SCHEMA: Mapping[str, Any] = {"type": "object", "properties": {}}
KEY_NAME = re.compile(r"[a-z0-9][a-z0-9_]*")
_NOT_KEY = re.compile(r"[^a-z0-9]+")
BUILTIN_KEY = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.:-]*")
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
SCHEMES = "builtin:<key> or exec:<path relative to the skill folder>"
TOOL_NAMES = {
    "name": "name",
    "description": "description",
    "when_to_use": "when_to_use",
    "class": "class",
    "schema": "schema",
    "input_schema": "input_schema",
    "impl": "impl",
    "confirmation": "confirmation",
    "timeout_seconds": "timeout_seconds",
    "env_allow": "env_allow",
    "category": "category",
    "sandbox": "sandbox",
}
_CONFIRM = {
    "required": True,
    "true": True,
    "yes": True,
    "": False,
    "none": False,
    "false": False,
    "no": False,
}


def normalise_name(raw: str) -> str:
    """A lower_snake key from any name: accents dropped, other runs of characters become ``_``.

    ``hello-world`` -> ``hello_world``, ``Ünïcode Tool`` -> ``unicode_tool``; a name
    without any ASCII letter or digit (``技能``) normalises to the empty string.
    """
    if KEY_NAME.fullmatch(raw):
        return raw
    if not raw.isascii():
        decomposed = unicodedata.normalize("NFKD", raw)
        raw = "".join(c for c in decomposed if not unicodedata.combining(c))
    return _NOT_KEY.sub("_", raw.lower()).strip("_")


def build_tools(
    fields: Fields,
    raw: object,
    skill: str,
    skill_description: str,
    path: str,
    root: SkillRoot,
    settings: Settings | None,
    category: str,
    sandbox: SandboxDecl | None = None,
) -> list[Tool]:
    """Check every entry of ``tools:`` and build the tools (errors go to ``fields``).

    ``sandbox`` is the skill's declaration (``metadata.ongrid.sandbox``): a tool
    without a ``sandbox`` of its own gets it; a tool's own replaces it entirely.
    """
    if raw is None:
        return []
    if not isinstance(raw, list):
        fields.error("/tools", "wrong_type", f'"tools" must be a list of tool entries (got {type_name(raw)})')
        return []
    tools: list[Tool] = []
    seen: dict[str, int] = {}
    for index, entry in enumerate(raw):
        where = pointer("tools", index)
        if not isinstance(entry, dict):
            fields.error(where, "wrong_type", f"tools[{index}] must be a mapping (got {type_name(entry)})")
            continue
        tool = _build_tool(
            fields, entry, where, skill, skill_description, path, root, settings, category, sandbox
        )
        if tool is None:
            continue
        if tool.name in seen:
            message = f'tool "{tool.name}" is declared twice (tools[{seen[tool.name]}] and tools[{index}])'
            fields.error(where + "/name", "duplicate_tool", message)
            continue
        seen[tool.name] = index
        tools.append(tool)
    return tools


def _build_tool(
    fields: Fields,
    entry: dict[Any, Any],
    where: str,
    skill: str,
    skill_description: str,
    path: str,
    root: SkillRoot,
    settings: Settings | None,
    category: str,
    skill_sandbox: SandboxDecl | None,
) -> Tool | None:
    known = fields.known(entry, TOOL_NAMES, where)
    name, display = _tool_name(fields, known.get("name"), where)
    description = _description(fields, known, where, skill_description)
    tool_class = _tool_class(fields, known.get("class"), where)
    schema = _schema(fields, known, where, settings)
    kind, impl, entry_path, declared = _impl(fields, known.get("impl"), where, path, root)
    env_allow = _env_allow(fields, known.get("env_allow"), where, kind)
    timeout = _timeout(fields, known.get("timeout_seconds"), where, settings)
    confirm = _confirmation(fields, known.get("confirmation"), where)
    when = (
        fields.text(known["when_to_use"], where + "/when_to_use", "when_to_use")
        if "when_to_use" in known
        else ""
    )
    tool_category = (
        fields.text(known["category"], where + "/category", "category") if "category" in known else ""
    )
    sandbox = skill_sandbox
    if "sandbox" in known:  # the tool's own replaces the skill's whole: no key is merged
        label = f"tools[{where.rpartition('/')[2]}].sandbox"
        raw, at = known["sandbox"], where + "/sandbox"
        sandbox = read_sandbox(fields, raw, at, label, settings, json=False, root=root.real)
    if name is None or kind is None:
        return None
    return Tool(
        name=name,
        description=description,
        schema=schema,
        tool_class=tool_class,
        skill=skill,
        source=path,
        kind=kind,
        category=tool_category or category,
        timeout=timeout,
        entry=entry_path,
        entry_declared=declared,
        cwd=os.path.dirname(path),
        root=root.real,
        env_allow=env_allow,
        impl=impl,
        when_to_use=when or "",
        confirmation_required=confirm,
        provenance=root.label,
        display_name=display,
        extra={str(k): v for k, v in entry.items() if canon(k) not in TOOL_NAMES},
        sandbox=sandbox,
    )


def _tool_name(fields: Fields, raw: object, where: str) -> tuple[str | None, str]:
    if raw is None:
        fields.error(where + "/name", "missing_field", 'a tool needs a "name"')
        return None, ""
    text = fields.text(raw, where + "/name", "name")
    if not text or not text.strip():
        fields.error(where + "/name", "empty_field", 'a tool "name" must be a non-empty string')
        return None, ""
    name = normalise_name(text)
    if not name:
        message = f"tool name {show(text)} has no ASCII letter or digit to build a function name from"
        fields.error(where + "/name", "bad_name", message, "use a lower_snake name such as query_metrics")
        return None, ""
    if len(name) > MAX_NAME_LENGTH:
        message = f'tool name "{name}" is {len(name)} characters; model APIs accept at most {MAX_NAME_LENGTH}'
        fields.error(where + "/name", "name_too_long", message)
        return None, ""
    if name != text:
        message = f'tool name "{text}" was normalised to "{name}" (tool names are lower_snake)'
        fields.warn(where + "/name", "name_normalized", message)
        return name, text
    return name, ""


def _description(fields: Fields, known: Mapping[str, Any], where: str, fallback: str) -> str:
    if "description" in known:
        text = fields.text(known["description"], where + "/description", "description")
        if text and text.strip():
            return text.strip()
    message = "the tool has no description; the skill's description is used"
    fields.warn(where + "/description", "tool_description_missing", message)
    return fallback


def _tool_class(fields: Fields, raw: object, where: str) -> ToolClass:
    try:
        return ToolClass.parse(raw)
    except ValueError as exc:
        fields.error(where + "/class", "bad_class", f'"class" {exc}')
        return ToolClass.SAFE


def _schema(
    fields: Fields, known: Mapping[str, Any], where: str, settings: Settings | None
) -> Mapping[str, Any]:
    key = "schema" if "schema" in known else "input_schema"
    if "schema" in known and "input_schema" in known:
        fields.warn(
            where + "/input_schema", "duplicate_field", 'both "schema" and "input_schema"; "schema" is used'
        )
    if key not in known:
        return EMPTY_SCHEMA
    schema, at = known[key], f"{where}/{key}"
    if not isinstance(schema, dict):
        fields.error(at, "wrong_type", f'"{key}" must be a JSON Schema object (got {type_name(schema)})')
        return EMPTY_SCHEMA
    if schema.get("type", "object") != "object":
        message = f'"{key}" must describe an object (its "type" is {show(schema.get("type"))})'
        fields.error(at, "schema_not_object", message, "arguments are a JSON object: use type: object")
        return EMPTY_SCHEMA
    for sub, message in unknown_keywords(schema):  # said beside any other problem
        fields.warn(at + sub, "unknown_keyword", f'"{key}{sub}": {message}')
    problem = schema_check.check_schema(schema)
    if problem is not None:
        fields.error(at, "invalid_schema", f'"{key}" is not a valid JSON Schema: {problem}')
        return EMPTY_SCHEMA
    unsafe = safe.schema_problems(schema)
    for sub, message in unsafe:
        fields.error(at + sub, "unsafe_schema", f'"{key}{sub}": {message}')
    if unsafe:
        return EMPTY_SCHEMA
    for sub, message in schema_defaults.check_defaults(schema):
        fields.error(at + sub, "bad_default", f'"{key}{sub}" does not validate: {message}')
    return schema if "type" in schema else {"type": "object", **schema}


def _impl(
    fields: Fields, raw: object, where: str, path: str, root: SkillRoot
) -> tuple[str | None, str | None, str | None, str | None]:
    """``(kind, impl, entry, entry_declared)``; kind None when the impl is unusable."""
    at = where + "/impl"
    if not isinstance(raw, str) or ":" not in raw:
        shown = "missing" if raw is None else f"got {show(raw)}"
        fields.error(at, "bad_impl", f'"impl" must be {SCHEMES} ({shown})')
        return None, None, None, None
    scheme, _, target = raw.partition(":")
    target = target.strip()
    if scheme == "builtin" and BUILTIN_KEY.fullmatch(target):
        return "native", f"builtin:{target}", None, None
    if scheme == "exec" and target:
        entry = _exec_entry(fields, target, at, path, root)
        return ("subprocess", raw, entry, target) if entry else (None, None, None, None)
    fields.error(at, "bad_impl", f'"impl" must be {SCHEMES} (got {show(raw)})')
    return None, None, None, None


def _exec_entry(fields: Fields, declared: str, at: str, path: str, root: SkillRoot) -> str | None:
    """The canonical entry, checked like a skill.json entry (inside the root, executable)."""
    candidate = os.path.join(os.path.dirname(path), declared)
    try:
        real, st = resolve_file(candidate)
    except (OSError, ValueError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        message = f"entry {candidate} cannot be resolved: {reason}"
        fields.error(at, "entry_missing", message, "exec: paths are relative to the folder holding SKILL.md")
        return None
    refusal = check_entry(real, st, root)
    if refusal is not None:
        fields.error(at, *refusal)
    else:
        if (warning := entry_warning(real)) is not None:
            fields.warn(at, *warning)
        return real
    return None


def _env_allow(fields: Fields, raw: object, where: str, kind: str | None) -> tuple[str, ...]:
    if raw is None:
        return ()
    names = fields.strings(raw, where + "/env_allow", "env_allow")
    if kind == "native":
        fields.warn(where + "/env_allow", "ignored_field", '"env_allow" only applies to exec: tools; ignored')
        return ()
    for index, name in enumerate(names):
        if not ENV_NAME.fullmatch(name):
            message = f'"env_allow[{index}]" is not a valid variable name (got {show(name)})'
            fields.error(f"{where}/env_allow/{index}", "bad_env_name", message)
    return names


def _timeout(fields: Fields, raw: object, where: str, settings: Settings | None) -> float:
    default = settings.default_timeout if settings is not None else 30.0
    if raw is None:
        return default
    if isinstance(raw, bool) or not isinstance(raw, int | float) or not 0 <= raw <= MAX_TIMEOUT:
        message = f'"timeout_seconds" must be a number of seconds from 0 to {MAX_TIMEOUT} (got {show(raw)})'
        fields.error(where + "/timeout_seconds", "bad_timeout", message, "0 means the default of 30 s")
        return default
    return float(raw) if raw else default


def _confirmation(fields: Fields, raw: object, where: str) -> bool:
    if raw is None:
        return False
    key = str(raw).strip().lower() if isinstance(raw, str | bool) else None
    if key in _CONFIRM:
        return _CONFIRM[key]
    fields.error(
        where + "/confirmation", "bad_confirmation", f'"confirmation" must be "required" (got {show(raw)})'
    )
    return False
