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
#: Keywords that apply a subschema to the same value (not to a member or an item): a
#: cycle of these and $refs checks the same value again and again, forever.
_IN_PLACE_ONE: Final = frozenset({"not", "if", "then", "else"})
_IN_PLACE_ARRAY: Final = frozenset({"allOf", "anyOf", "oneOf"})


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
        if resolvers and not problems:
            problems.extend(_ref_cycles(nodes, resolvers))
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


def _ref_cycles(
    nodes: list[tuple[tuple[object, ...], object, object]], resolvers: dict[int, Any]
) -> list[tuple[str, str]]:
    """The first cycle of $refs and in-place applicators (``allOf``, ``not``...): checking a
    value against it never reaches a keyword that settles anything, nor a member or item
    of the value, so jsonschema recursed until any call's arguments were "nested too deeply".
    """
    paths = {id(node): path for path, node, _ in nodes if isinstance(node, dict)}
    edges: dict[int, list[object]] = {key: [] for key in paths}
    for _path, node, _parent in nodes:
        if not isinstance(node, dict):
            continue
        targets = edges[id(node)]
        targets.extend(node[k] for k in _IN_PLACE_ONE if k in node)
        targets.extend(sub for k in _IN_PLACE_ARRAY if isinstance(node.get(k), list) for sub in node[k])
        if isinstance(node.get("dependentSchemas"), dict):
            targets.extend(node["dependentSchemas"].values())
        if isinstance(node.get("$ref"), str):
            targets.append(resolvers[id(node)].lookup(node["$ref"]).contents)
    state: dict[int, int] = {}  # 1: on the current path, 2: done
    for start in paths:
        cycle = _cycle_from(start, edges, state)
        if cycle:
            shown = " -> ".join(pointer(paths[key]) or "(the root)" for key in cycle)
            message = (
                f"$ref refers back to itself without reaching a value: {shown}; checking any value would"
                " recurse forever (give the cycle a schema that does not refer back, or remove the $ref)"
            )
            return [(pointer(paths[cycle[0]]), message)]
    return []


def _cycle_from(start: int, edges: dict[int, list[object]], state: dict[int, int]) -> list[int]:
    """A cycle reachable from ``start`` (its nodes, the first repeated at the end), or []."""
    if state.get(start):
        return []
    path: list[int] = [start]
    stack = [iter(edges[start])]
    state[start] = 1
    while stack:
        child = next(stack[-1], None)
        if child is None:
            state[path.pop()] = 2
            stack.pop()
            continue
        key = id(child)
        if key not in edges or state.get(key) == 2:
            continue  # `true`/`false`, or already explored without a cycle
        if state.get(key) == 1:
            return [*path[path.index(key) :], key]
        state[key] = 1
        path.append(key)
        stack.append(iter(edges[key]))
    return []


def pointer(path: tuple[object, ...]) -> str:
    """RFC 6901 JSON pointer for a path of keys and indexes."""
    return "".join("/" + str(part).replace("~", "~0").replace("/", "~1") for part in path)
