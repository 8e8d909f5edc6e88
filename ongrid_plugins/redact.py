"""Secret redaction: blank out argument values the tool's schema marks as secret.

A value is secret when any schema that applies to it says ``"writeOnly": true``,
``"format": "password"`` or ``"x-ongrid-secret": true``. The walk follows the
arguments and, at each level, every schema that can apply: ``properties``,
``patternProperties``, ``additionalProperties``, ``items``/``prefixItems``,
the branches of ``allOf``/``anyOf``/``oneOf``/``if``/``then``/``else`` and
local ``$ref``\\ s (``#/$defs/...``). Being generous is the point: a branch
that *might* apply and marks a value secret is enough to hide it.

A secret object or array is replaced whole. The audit log and the approval
tickets store only redacted arguments.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .safeschema import RegexError, regex_search

__all__ = ["REDACTED", "has_secrets", "redact"]

REDACTED = "[redacted]"
_BRANCHES = ("allOf", "anyOf", "oneOf")
_CONDITIONALS = ("if", "then", "else")
_MAX_DEPTH = 64


def is_secret(schema: Mapping[str, Any]) -> bool:
    """True when this one schema marks its value secret."""
    return (
        schema.get("writeOnly") is True
        or schema.get("format") == "password"
        or schema.get("x-ongrid-secret") is True
    )


def has_secrets(schema: Any, _depth: int = 0) -> bool:
    """True when any schema nested in ``schema`` marks something secret (a cheap pre-check)."""
    if _depth > _MAX_DEPTH:
        return True  # too deep to be sure: walk the arguments to be safe
    if isinstance(schema, Mapping):
        if is_secret(schema):
            return True
        return any(has_secrets(v, _depth + 1) for v in schema.values())
    if isinstance(schema, list):
        return any(has_secrets(v, _depth + 1) for v in schema)
    return False


def redact(schema: Mapping[str, Any], value: Any) -> tuple[Any, list[str]]:
    """A copy of ``value`` with every secret replaced by ``"[redacted]"``, and their JSON paths."""
    paths: list[str] = []
    return _walk(_applicable([schema], schema), value, schema, "$", paths, 0), paths


def _walk(
    schemas: list[Mapping[str, Any]],
    value: Any,
    root: Mapping[str, Any],
    path: str,
    paths: list[str],
    depth: int,
) -> Any:
    if any(is_secret(s) for s in schemas):
        paths.append(path)
        return REDACTED
    if depth > _MAX_DEPTH:
        paths.append(path)
        return REDACTED  # a value nested this deep is not worth the risk of missing a secret
    if isinstance(value, Mapping):
        return {
            key: _walk(
                _applicable(_for_key(schemas, str(key)), root), item, root, f"{path}.{key}", paths, depth + 1
            )
            for key, item in value.items()
        }
    if isinstance(value, list):
        return [
            _walk(_applicable(_for_index(schemas, i), root), item, root, f"{path}[{i}]", paths, depth + 1)
            for i, item in enumerate(value)
        ]
    return value


def _applicable(schemas: list[Any], root: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """Every schema that may apply to the same value: the given ones, their branches and refs."""
    out: list[Mapping[str, Any]] = []
    seen: set[int] = set()
    todo = list(schemas)
    while todo and len(out) < 1000:
        schema = todo.pop()
        if not isinstance(schema, Mapping) or id(schema) in seen:
            continue
        seen.add(id(schema))
        out.append(schema)
        for key in _BRANCHES:
            branches = schema.get(key)
            if isinstance(branches, list):
                todo.extend(branches)
        todo.extend(schema.get(key) for key in _CONDITIONALS)
        ref = schema.get("$ref")
        if isinstance(ref, str):
            todo.append(_resolve(root, ref))
    return out


def _resolve(root: Mapping[str, Any], ref: str) -> Any:
    if ref == "#":
        return root
    if not ref.startswith("#/"):
        return None  # remote refs are not followed (and not allowed by the loaders)
    node: Any = root
    for part in ref[2:].split("/"):
        part = part.replace("~1", "/").replace("~0", "~")
        if isinstance(node, Mapping) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return None
    return node


def _for_key(schemas: list[Mapping[str, Any]], key: str) -> list[Any]:
    children: list[Any] = []
    for schema in schemas:
        properties = schema.get("properties")
        matched = isinstance(properties, Mapping) and key in properties
        if matched:
            children.append(properties[key])  # type: ignore[index]
        patterns = schema.get("patternProperties")
        if isinstance(patterns, Mapping):
            for pattern, sub in patterns.items():
                if _search(pattern, key):
                    matched = True
                    children.append(sub)
        if not matched and isinstance(schema.get("additionalProperties"), Mapping):
            children.append(schema["additionalProperties"])
    return children


def _for_index(schemas: list[Mapping[str, Any]], index: int) -> list[Any]:
    children: list[Any] = []
    for schema in schemas:
        prefix = schema.get("prefixItems")
        items = schema.get("items")
        if isinstance(prefix, list) and index < len(prefix):
            children.append(prefix[index])
        elif isinstance(items, list):  # draft 4-7 tuple form
            if index < len(items):
                children.append(items[index])
            elif isinstance(schema.get("additionalItems"), Mapping):
                children.append(schema["additionalItems"])
        elif isinstance(items, Mapping):
            children.append(items)
    return children


def _search(pattern: str, key: str) -> bool:
    try:
        return regex_search(pattern, key)
    except RegexError:
        return True  # a pattern we cannot read might match: assume it does
