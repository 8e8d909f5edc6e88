"""Arguments: fill in defaults, check against the tool's schema, report every error.

Validators are compiled once per tool (on its first call) and kept on the
tool. ``jsonschema`` is imported on the first call, not at start-up.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from typing import Any

from .models import Tool, canonical_json

__all__ = ["check_arguments", "fill_defaults"]

_MAX_MESSAGE = 300


def fill_defaults(schema: Mapping[str, Any], args: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of ``args`` with the schema's top-level property defaults filled in."""
    data = dict(args)
    properties = schema.get("properties")
    if isinstance(properties, Mapping):
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
    if not isinstance(args, Mapping):
        return {}, "", [("$", f"arguments must be a JSON object, got {type(args).__name__}")]
    data = fill_defaults(tool.schema, args)
    try:
        text = canonical_json(data)
        data = json.loads(text)
    except (TypeError, ValueError, RecursionError) as exc:
        return data, "", [("$", f"arguments are not valid JSON: {_short(str(exc))}")]
    return data, text, _validate(tool, data)


def _validate(tool: Tool, data: dict[str, Any]) -> list[tuple[str, str]]:
    validator = tool.cache.get("validator")
    if validator is None:
        validator = tool.cache["validator"] = _compile(tool.schema)
    try:
        if validator.is_valid(data):
            return []
        errors = sorted(validator.iter_errors(data), key=lambda e: [str(p) for p in e.absolute_path])
    except RecursionError:
        return [("$", "arguments are nested too deeply")]
    return [(error.json_path, _short(error.message)) for error in errors]


def _compile(schema: Mapping[str, Any]) -> Any:
    from jsonschema import Draft202012Validator
    from jsonschema.validators import validator_for

    cls = validator_for(schema, default=Draft202012Validator)
    return cls(schema, format_checker=cls.FORMAT_CHECKER)


def _short(text: str) -> str:
    return text if len(text) <= _MAX_MESSAGE else text[: _MAX_MESSAGE - 3] + "..."
