"""Where subschemas sit in a JSON Schema, and the bounded walks over them.

One table says which keywords hold one subschema, a map of them or an array of them
(draft 2020-12, plus the legacy ``definitions`` and ``dependencies``); the metaschema
check, the default check and the RE2/``$ref`` check (:mod:`.safe.check`) all read it.
The walks are iterative and refuse a schema nested deeper than :data:`MAX_DEPTH` or
holding more than :data:`MAX_SUBSCHEMAS` subschemas (:class:`_LimitExceeded` locates
the culprit), because jsonschema and ``json`` would hit the recursion limit or run for
ever on it.

It may import the standard library only.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

__all__ = [
    "LEGACY_SUBSCHEMA_KEYWORDS",
    "MAX_DEPTH",
    "MAX_SUBSCHEMAS",
    "SUBSCHEMA_ARRAY_KEYWORDS",
    "SUBSCHEMA_KEYWORDS",
    "SUBSCHEMA_MAP_KEYWORDS",
    "pointed",
]

#: Deepest allowed nesting of JSON containers from the root to a subschema.  jsonschema
#: spends roughly eight Python frames per level, so 64 stays well inside the default
#: recursion limit of 1000 even when the loader itself is deep in the stack.
MAX_DEPTH: Final = 64
#: Most subschemas one schema may hold; bounds the work on shared-reference "bombs".
MAX_SUBSCHEMAS: Final = 10_000

#: Keywords whose value is one subschema (draft 2020-12).
SUBSCHEMA_KEYWORDS: Final = frozenset(
    {
        "items",
        "contains",
        "additionalProperties",
        "propertyNames",
        "if",
        "then",
        "else",
        "not",
        "unevaluatedItems",
        "unevaluatedProperties",
        "contentSchema",
    }
)
SUBSCHEMA_MAP_KEYWORDS: Final = frozenset(
    {
        "properties",
        "patternProperties",
        "dependentSchemas",
        "$defs",
        "definitions",
    }
)
SUBSCHEMA_ARRAY_KEYWORDS: Final = frozenset({"prefixItems", "allOf", "anyOf", "oneOf"})
#: Draft 7 / 2019-09 ``additionalItems``: not a 2020-12 keyword, so the metaschema and
#: default checks do not walk into it; the RE2 and ``$ref`` check (:mod:`.safe.check`) does.
LEGACY_SUBSCHEMA_KEYWORDS: Final = frozenset({"additionalItems"})

_Stack = list[tuple[object, int]]
_Path = tuple[object, ...]


class _LimitExceeded(Exception):
    """The schema breaks MAX_DEPTH or MAX_SUBSCHEMAS; ``path`` locates the culprit."""

    def __init__(self, message: str, path: tuple[object, ...] = ()) -> None:
        super().__init__(message)
        self.message = message
        self.path = path


_TOO_DEEP: Final = f"schema nests deeper than {MAX_DEPTH} levels"
_TOO_BIG: Final = f"schema has more than {MAX_SUBSCHEMAS} subschemas"


# How each subschema-holding keyword stores its subschemas (for the walkers below).
_ONE, _MAP, _ARRAY, _DEPENDENCIES = 1, 2, 3, 4
_CHILD_KIND: Final[dict[str, int]] = {
    **dict.fromkeys(SUBSCHEMA_KEYWORDS, _ONE),
    **dict.fromkeys(SUBSCHEMA_MAP_KEYWORDS, _MAP),
    **dict.fromkeys(SUBSCHEMA_ARRAY_KEYWORDS, _ARRAY),
    "dependencies": _DEPENDENCIES,
}


def _children(node: dict[Any, Any]) -> list[tuple[_Path, object, int]]:
    """(path segments, subschema, depth step): exactly what the fast walker pushes."""
    found: list[tuple[_Path, object, int]] = []
    for key, value in node.items():
        kind = _CHILD_KIND.get(key)
        if kind == _ONE:
            found.append(((key,), value, 1))
        elif kind == _ARRAY:
            if type(value) is list:
                found.extend(((key, index), sub, 2) for index, sub in enumerate(value))
        elif kind is not None and type(value) is dict:
            found.extend(
                ((key, name), sub, 2)
                for name, sub in value.items()
                if kind == _MAP or type(sub) is not list  # dependencies: arrays are not schemas
            )
    return found


def _nodes_with_default(schema: object) -> list[dict[Any, Any]]:
    """Subschemas carrying "default", found without building paths (the common case has
    nothing to report, so paths are only worked out for defaults that fail)."""
    found: list[dict[Any, Any]] = []
    budget = MAX_SUBSCHEMAS
    stack: _Stack = [(schema, 0)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise _LimitExceeded(_TOO_DEEP)
        if type(node) is not dict:
            continue
        if "default" in node:
            found.append(node)
        before = len(stack)
        for key, value in node.items():
            kind = _CHILD_KIND.get(key)
            if kind == _ONE:
                stack.append((value, depth + 1))
            elif kind == _ARRAY:
                if type(value) is list:
                    stack.extend([(sub, depth + 2) for sub in value])
            elif kind is not None and type(value) is dict:
                stack.extend(
                    [(sub, depth + 2) for sub in value.values() if kind == _MAP or type(sub) is not list]
                )
        budget -= len(stack) - before
        if budget < 0:
            raise _LimitExceeded(_TOO_BIG)
    return found


def _subschemas(schema: object) -> list[tuple[_Path, object]]:
    """Every subschema with its path, in document order, under the same limits."""
    found: list[tuple[_Path, object]] = []
    budget = MAX_SUBSCHEMAS
    stack: list[tuple[_Path, object, int]] = [((), schema, 0)]
    while stack:
        path, node, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise _LimitExceeded(_TOO_DEEP, path)
        found.append((path, node))
        if type(node) is dict:
            children = _children(node)
            budget -= len(children)
            if budget < 0:
                raise _LimitExceeded(_TOO_BIG, path)
            for segments, child, step in reversed(children):
                stack.append((path + segments, child, depth + step))
    return found


# ------------------------------------------------------------------------------ messages


def _pointer(path: _Path) -> str:
    """RFC 6901 JSON pointer for a path of keys and indexes."""
    return "".join("/" + str(part).replace("~", "~0").replace("/", "~1") for part in path)


def _clip(text: str, limit: int = 300) -> str:
    # jsonschema messages embed reprs of the offending value, which may be huge.
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _where(path: _Path) -> str:
    return _clip(_pointer(path), 160) or "the root"


def _limit_problem(schema: object) -> tuple[str, str]:
    try:
        _subschemas(schema)
    except _LimitExceeded as exceeded:
        return _pointer(exceeded.path), f"{exceeded.message} (at {_where(exceeded.path)})"
    except Exception:
        pass
    return "", _TOO_DEEP + " or has too many subschemas"


def pointed(node: Any, pointer: str, missing: Any = None) -> Any:
    """What the JSON pointer ``pointer`` (``/a/b``, escapes ``~0`` ``~1`` decoded) names
    in ``node``; ``missing`` when it names nothing."""
    for part in pointer[1:].split("/") if pointer != "/" else [""]:
        part = part.replace("~1", "/").replace("~0", "~")
        if isinstance(node, Mapping) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return missing
    return node
