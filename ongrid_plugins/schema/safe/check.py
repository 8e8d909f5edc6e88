"""The load-time check: every regex compiles in RE2, every reference stays in the document."""

from __future__ import annotations

from typing import Any, Final

from ..subschemas import (
    LEGACY_SUBSCHEMA_KEYWORDS,
    SUBSCHEMA_ARRAY_KEYWORDS,
    SUBSCHEMA_KEYWORDS,
    SUBSCHEMA_MAP_KEYWORDS,
)
from .refs import dialect_problem, enter, ref_problem, root_resolver
from .regex import pattern_problem

__all__ = ["schema_problems"]

# Where subschemas sit: the one table (..subschemas), plus draft 2019-09's additionalItems,
# which jsonschema still evaluates, so a pattern or $ref inside it must be checked too.
_ONE: Final = SUBSCHEMA_KEYWORDS | LEGACY_SUBSCHEMA_KEYWORDS
_MAP: Final = SUBSCHEMA_MAP_KEYWORDS
_ARRAY: Final = SUBSCHEMA_ARRAY_KEYWORDS
_REFS: Final = ("$ref", "$dynamicRef")
_MAX_NODES: Final = 100_000


def schema_problems(schema: object) -> list[tuple[str, str]]:
    """``(json_pointer, message)`` for every regex RE2 refuses and every reference that
    leaves the document (or points to nothing), in document order.  Never raises.

    Meant for a schema that already passed the metaschema check
    (:func:`ongrid_plugins.schema.check.check_schema`), whose limits bound this walk.
    """
    problems: list[tuple[str, str]] = []
    try:
        nodes = _nodes(schema)
        resolvers: dict[int, Any] = {}
        if any(isinstance(node, dict) and any(k in node for k in _REFS) for _, node, _ in nodes):
            resolvers[id(schema)] = root_resolver(schema)
        for path, node, parent in nodes:
            if isinstance(node, dict):
                problems.extend(_node_problems(path, node, parent, resolvers))
    except Exception as error:  # hostile objects: refuse rather than guess
        problems.append(("", f"schema could not be checked: {type(error).__name__}"))
    return problems


def _nodes(schema: object) -> list[tuple[tuple[object, ...], object, object]]:
    """(path, subschema, parent subschema) for every subschema, in document order."""
    found: list[tuple[tuple[object, ...], object, object]] = []
    stack: list[tuple[tuple[object, ...], object, object]] = [((), schema, None)]
    while stack:
        if len(found) > _MAX_NODES:
            raise ValueError("too many subschemas")
        path, node, parent = stack.pop()
        found.append((path, node, parent))
        if not isinstance(node, dict):
            continue
        children: list[tuple[tuple[object, ...], object, object]] = []
        for key, value in node.items():
            if key in _ONE:
                children.append(((*path, key), value, node))
            elif key in _ARRAY and isinstance(value, list):
                children.extend(((*path, key, i), sub, node) for i, sub in enumerate(value))
            elif (key in _MAP or key == "dependencies") and isinstance(value, dict):
                children.extend(
                    ((*path, key, name), sub, node)
                    for name, sub in value.items()
                    if not isinstance(sub, list)
                )
        stack.extend(reversed(children))
    return found


def _node_problems(
    path: tuple[object, ...], node: dict[str, Any], parent: object, resolvers: dict[int, Any]
) -> list[tuple[str, str]]:
    problems: list[tuple[str, str]] = []
    if "pattern" in node and isinstance(node["pattern"], str):
        problem = pattern_problem(node["pattern"])
        if problem:
            problems.append((pointer((*path, "pattern")), problem))
    patterns = node.get("patternProperties")
    if isinstance(patterns, dict):
        for key in patterns:
            problem = pattern_problem(key)
            if problem:
                problems.append((pointer((*path, "patternProperties", key)), problem))
    if "$schema" in node:
        problem = dialect_problem(node["$schema"])
        if problem:
            problems.append((pointer((*path, "$schema")), problem))
    if resolvers:
        resolver = resolvers[id(node)] if parent is None else enter(resolvers[id(parent)], node)
        resolvers[id(node)] = resolver
        for keyword in _REFS:
            if keyword in node:
                problem = ref_problem(resolver, node[keyword])
                if problem:
                    problems.append((pointer((*path, keyword)), problem))
    return problems


def pointer(path: tuple[object, ...]) -> str:
    """RFC 6901 JSON pointer for a path of keys and indexes."""
    return "".join("/" + str(part).replace("~", "~0").replace("/", "~1") for part in path)
