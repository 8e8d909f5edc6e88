"""Arguments: fill in defaults, check against the tool's schema, report every error.

Validators are compiled once per tool (on its first call) and kept beside the
tool (:data:`COMPILED`, a side table: the tool stays a frozen value): jsonschema
checks every call and writes the error messages. ``jsonschema`` is imported on the
first call, not at start-up. Every validator is
:func:`~ongrid_plugins.schema.safe.safe_validator`: regexes run on RE2 (linear time)
and no ``$ref`` is ever fetched.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from typing import Any

import attrs

from ..core.echo import utf8_encodable
from ..models import Tool, canonical_json
from ..models.sidetable import SideTable
from .safe import safe_validator

__all__ = [
    "COMPILED",
    "NOT_UTF8",
    "Compiled",
    "check_arguments",
    "fill_defaults",
    "is_light",
    "surrogate_path",
    "utf8_encodable",
]

_MAX_MESSAGE = 300
#: The C scanner of a plain ``json.JSONDecoder``: ``json.loads`` of a text our own encoder
#: wrote, without ``loads``' and ``decode``'s checks for what that text never holds.
_PARSE: Any = json.JSONDecoder().scan_once  # type: ignore[attr-defined]  # set by JSONDecoder.__init__
#: A call is "light" (checked where it arrives, even on an event loop) when its arguments
#: hold at most this many characters and nodes and its schema at most _LIGHT_SCHEMA
#: subschemas: with RE2 the check is then linear in both, a few microseconds. Anything
#: bigger is checked in a worker thread (SkillHost.acall), so no request can hold a loop.
_LIGHT_ARGS = 4096
_LIGHT_SCHEMA = 256
#: The error message for arguments holding a lone surrogate (REST answers it with 400).
NOT_UTF8 = "arguments contain a lone surrogate (not UTF-8 text)"


@attrs.frozen
class Compiled:
    """A tool's schema, compiled on its first call."""

    validator: Any
    """jsonschema's validator (:func:`~ongrid_plugins.schema.safe.safe_validator`)."""
    light_schema: bool
    """At most ``_LIGHT_SCHEMA`` subschemas: a call with light arguments is checked inline."""


#: Each tool's :class:`Compiled` schema, by tool identity (a new snapshot's tools compile anew).
COMPILED: SideTable[Compiled] = SideTable()


def fill_defaults(schema: Mapping[str, Any], args: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of ``args`` with the schema's top-level property defaults filled in."""
    data = dict(args)
    properties = schema.get("properties")
    if type(properties) is dict or isinstance(properties, Mapping):
        for key, sub in properties.items():
            if key not in data and isinstance(sub, Mapping) and "default" in sub:
                default = sub["default"]
                data[key] = copy.deepcopy(default) if isinstance(default, dict | list) else default
    return data


def check_arguments(tool: Tool, args: object) -> tuple[dict[str, Any], str, list[tuple[str, str]]]:
    """Defaults filled, canonical JSON text, and every ``(json_path, message)`` error.

    ``args`` of ``None`` means ``{}``. The canonical text is what the child
    reads on stdin and what confirmations and approvals are bound to; the
    returned dict is parsed back from it, so every executor sees plain JSON
    values (tuples become lists, non-string keys become strings) and never an
    object the caller still holds.
    """
    if args is None:
        args = {}
    if type(args) is not dict and not isinstance(args, Mapping):  # dict first: an ABC check is slow
        return {}, "", [("$", f"arguments must be a JSON object, got {type(args).__name__}")]
    data = fill_defaults(tool.schema, args)
    try:
        text = canonical_json(data)
        data = _PARSE(text, 0)[0]  # our own encoder's text: one value, no whitespace around it
    except (TypeError, ValueError, RecursionError) as exc:
        return data, "", [("$", f"arguments are not valid JSON: {_short(str(exc))}")]
    if not text.isascii() and not utf8_encodable(text):  # isascii: a flag, no copy
        # A lone surrogate ("\ud800") is valid JSON text but no UTF-8: nothing downstream
        # (digest, child stdin, audit, HTTP body) could carry it. Refuse, naming where.
        clean = json.loads(text.encode("utf-8", "surrogatepass").decode("utf-8", "replace"))
        return clean, "", [(surrogate_path(data), NOT_UTF8)]
    return data, text, _validate(tool, data)


def surrogate_path(value: Any, path: str = "$") -> str:
    """JSON path (ASCII, surrogates escaped) of the first string holding a lone surrogate."""
    if isinstance(value, dict):
        for key, item in value.items():
            step = f"{path}.{ascii(key)[1:-1]}"
            if not utf8_encodable(key):
                return step
            found = surrogate_path(item, step)
            if found:
                return found
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found = surrogate_path(item, f"{path}[{index}]")
            if found:
                return found
    elif isinstance(value, str) and not utf8_encodable(value):
        return path
    return "" if path != "$" else "$"


def is_light(tool: Tool, args: object) -> bool:
    """Whether checking ``args`` against ``tool``'s schema is certainly cheap (see _LIGHT_ARGS).

    Costs at most ``_LIGHT_ARGS`` steps. False until the tool's validator was built once
    (its first check always runs in a worker thread under ``acall``).
    """
    compiled = COMPILED.get(id(tool))
    if compiled is None or not compiled.light_schema:
        return False
    return _walk_is_light(args)


def _walk_is_light(args: object) -> bool:
    """:func:`is_light`'s walk over any value: at most ``_LIGHT_ARGS`` steps."""
    budget = _LIGHT_ARGS
    stack = [args]
    while stack:
        value = stack.pop()
        budget -= 1
        if isinstance(value, str):
            budget -= len(value)
        elif type(value) in _ATOMS:  # before the Mapping check: an ABC check is slow
            pass
        elif type(value) is dict or isinstance(value, Mapping):
            for key, item in value.items():
                budget -= len(key) if isinstance(key, str) else 1
                stack.append(item)
        elif isinstance(value, list | tuple):
            stack.extend(value)
        if budget < 0:
            return False
    return True


_ATOMS = frozenset((int, float, bool, type(None)))


def _schema_nodes(schema: object, limit: int) -> int:
    """Containers in ``schema``, counting up to ``limit + 1``."""
    count, stack = 0, [schema]
    while stack and count <= limit:
        value = stack.pop()
        if isinstance(value, Mapping):
            count += 1
            stack.extend(value.values())
        elif isinstance(value, list):
            count += 1
            stack.extend(value)
    return count


def _validate(tool: Tool, data: dict[str, Any]) -> list[tuple[str, str]]:
    compiled = COMPILED.get(id(tool))
    if compiled is None:
        light = _schema_nodes(tool.schema, _LIGHT_SCHEMA) <= _LIGHT_SCHEMA
        compiled = Compiled(safe_validator(tool.schema), light)
        COMPILED.put(tool, compiled)
    validator = compiled.validator
    try:
        if validator.is_valid(data):
            return []
        errors = sorted(validator.iter_errors(data), key=lambda e: [str(p) for p in e.absolute_path])
    except RecursionError:
        return [("$", "arguments are nested too deeply")]
    except Exception as exc:  # a $ref the loaders let through but that does not resolve
        return [("$", f"the tool's schema cannot be applied: {_short(str(exc))}")]
    return [(error.json_path, _short(error.message)) for error in errors]


def _short(text: str) -> str:
    return text if len(text) <= _MAX_MESSAGE else text[: _MAX_MESSAGE - 3] + "..."
