"""Check skill argument schemas fast, and let jsonschema decide anything we cannot vouch for.

Why a fast path
---------------
Every ``skill.json`` carries a ``schema``: a JSON Schema (draft 2020-12) for the tool's
arguments.  The loader rejects a manifest whose schema is not a valid schema, or whose
``default`` values do not satisfy their own subschema.  jsonschema answers both, but
``Draft202012Validator.check_schema`` costs one to two milliseconds per schema (the 2020-12
metaschema is eight documents linked by ``$dynamicRef``) and ``import jsonschema`` costs
70-90 ms, while the whole per-manifest load budget is about 40 µs.  So this module carries
a hand-written checker of the 2020-12 metaschema, including the ``format: regex``
assertion that ``check_schema`` switches on, and a small evaluator for the keywords that
usually sit next to a ``default``.

Why it is safe
--------------
The fast path is trusted in one direction only.  :func:`fast_verdict` answers VALID,
INVALID or DEFER, and only VALID is taken at face value: INVALID and DEFER both go to
jsonschema, which has the last word and writes the error message.  A wrong INVALID costs
time, never a wrong rejection.  VALID is only claimed for plain JSON values (exact
``dict``/``list``/``str``/``int``/``float``/``bool``/``None``) under keywords whose
metaschema rules are encoded below; for anything else the fast path defers.  The default
evaluator likewise may only say "valid".  tests/test_schemacheck.py checks both against
jsonschema differentially with hypothesis.

Two deliberate departures from "jsonschema decides": a schema nested deeper than
:data:`MAX_DEPTH` containers or with more than :data:`MAX_SUBSCHEMAS` subschemas is
rejected outright, because jsonschema (and ``json``) would hit the recursion limit or run
for ever on it (a cyclic dict, or a few dozen levels of ``{"allOf": [x, x]}``).

Verdict cache
-------------
What the fast path cannot vouch for costs a jsonschema run.  :class:`VerdictCache` keeps,
across processes, a hash of every schema jsonschema declared valid, keyed by the canonical
JSON text and a tag naming this module's rules, the Python version (``re`` syntax changes
between versions) and the installed jsonschema, metaschema and format-checker packages.
Only "valid" is ever cached, so a stale or missing cache only costs time.
"""

from __future__ import annotations

import atexit
import contextlib
import enum
import functools
import hashlib
import json
import logging
import math
import os
import re
import stat
import sys
import threading
from collections.abc import Callable, Sized
from typing import Any, Final, cast

__all__ = [
    "CACHE_FILENAME",
    "CACHE_VERSION",
    "MAX_DEPTH",
    "MAX_SUBSCHEMAS",
    "FastVerdict",
    "VerdictCache",
    "check_defaults",
    "check_schema",
    "content_key",
    "fast_verdict",
    "verdict_cache",
]

logger = logging.getLogger(__name__)

#: Deepest allowed nesting of JSON containers from the root to a subschema.  jsonschema
#: spends roughly eight Python frames per level, so 64 stays well inside the default
#: recursion limit of 1000 even when the loader itself is deep in the stack.
MAX_DEPTH: Final = 64
#: Most subschemas one schema may hold; bounds the work on shared-reference "bombs".
MAX_SUBSCHEMAS: Final = 10_000
#: Bump whenever this module's idea of validity changes: it is part of every cache key.
CACHE_VERSION: Final = 2
CACHE_FILENAME: Final = "schema-verdicts-v1.bin"


class FastVerdict(enum.IntEnum):
    """Fast-path answer; ordered so that the worst verdict of a walk is the maximum."""

    VALID = 0
    DEFER = 1
    INVALID = 2


# Plain ints on the hot path: module globals are cheaper to read than enum members.
_VALID: Final = 0
_DEFER: Final = 1
_INVALID: Final = 2

_JSON_TYPES: Final = frozenset({dict, list, str, int, float, bool, type(None)})
_SIMPLE_TYPES: Final = frozenset({"array", "boolean", "integer", "null", "number", "object", "string"})
# The two patterns of the core vocabulary metaschema ($id and the anchor keywords).
_ID_PATTERN: Final = re.compile(r"^[^#]*#?$")
_ANCHOR_PATTERN: Final = re.compile(r"^[A-Za-z_][-A-Za-z0-9._]*$")

_Stack = list[tuple[object, int]]
_Rule = Callable[[object, int, _Stack], int]


class _LimitExceeded(Exception):
    """The schema breaks MAX_DEPTH or MAX_SUBSCHEMAS; ``path`` locates the culprit."""

    def __init__(self, message: str, path: tuple[object, ...] = ()) -> None:
        super().__init__(message)
        self.message = message
        self.path = path


_TOO_DEEP: Final = f"schema nests deeper than {MAX_DEPTH} levels"
_TOO_BIG: Final = f"schema has more than {MAX_SUBSCHEMAS} subschemas"


# --------------------------------------------------------------------------- keyword rules
# Each rule gets a keyword's value, the depth of the schema holding it and the walk stack
# (onto which applicators push their subschemas) and returns a verdict for the value.


def _unjudged(value: object) -> int:
    """Verdict for a value of the wrong shape.

    A plain JSON value of the wrong shape is INVALID (jsonschema will say so too); any
    other Python object (tuple, Decimal, str subclass...) is DEFER, since only jsonschema
    knows how its type checks treat it.
    """
    return _INVALID if type(value) in _JSON_TYPES else _DEFER


def _string(value: object, depth: int, stack: _Stack) -> int:
    return _VALID if type(value) is str else _unjudged(value)


def _boolean(value: object, depth: int, stack: _Stack) -> int:
    return _VALID if value is True or value is False else _unjudged(value)


def _number(value: object, depth: int, stack: _Stack) -> int:
    # jsonschema's "number" excludes bool but admits NaN and infinities: so do we.
    return _VALID if type(value) is int or type(value) is float else _unjudged(value)


def _multiple_of(value: object, depth: int, stack: _Stack) -> int:
    if type(value) is int or type(value) is float:
        # The metaschema says exclusiveMinimum 0, checked as "fail if value <= 0";
        # NaN therefore passes, in jsonschema and here alike.
        return _INVALID if value <= 0 else _VALID
    return _unjudged(value)


def _count(value: object, depth: int, stack: _Stack) -> int:
    """nonNegativeInteger: jsonschema's "integer" also admits integral floats like 1.0."""
    if type(value) is int:
        return _VALID if value >= 0 else _INVALID
    if type(value) is float:
        return _VALID if value.is_integer() and value >= 0 else _INVALID
    return _unjudged(value)


def _array(value: object, depth: int, stack: _Stack) -> int:
    return _VALID if type(value) is list else _unjudged(value)


def _string_array_verdict(value: object) -> int:
    """The metaschema's stringArray: a list of unique strings (may be empty)."""
    if type(value) is not list:
        return _unjudged(value)
    for item in value:
        if type(item) is not str:
            return _unjudged(item)
    return _VALID if len(set(value)) == len(value) else _INVALID


def _string_array(value: object, depth: int, stack: _Stack) -> int:
    return _string_array_verdict(value)


def _type(value: object, depth: int, stack: _Stack) -> int:
    if type(value) is str:
        return _VALID if value in _SIMPLE_TYPES else _INVALID
    if type(value) is not list:
        return _unjudged(value)
    if not value:
        return _INVALID
    for item in value:
        if type(item) is not str:
            return _unjudged(item)
        if item not in _SIMPLE_TYPES:
            return _INVALID
    return _VALID if len(set(value)) == len(value) else _INVALID


def _regex_verdict(value: object) -> int:
    """``format: regex`` as jsonschema's is_regex checks it: ``re.compile`` must succeed."""
    if type(value) is not str:
        return _unjudged(value)
    try:
        re.compile(value)
    except re.error:
        return _INVALID
    except Exception:  # e.g. RecursionError, or a warning turned error: jsonschema decides
        return _DEFER
    return _VALID


def _pattern(value: object, depth: int, stack: _Stack) -> int:
    return _regex_verdict(value)


def _anchor(value: object, depth: int, stack: _Stack) -> int:
    # No format here, just a pattern; re.search like jsonschema, so "a\n" passes as there.
    if type(value) is not str:
        return _unjudged(value)
    return _VALID if _ANCHOR_PATTERN.search(value) else _INVALID


def _id(value: object, depth: int, stack: _Stack) -> int:
    """$id when uri-reference is not asserted: a string without a non-empty fragment."""
    if type(value) is not str:
        return _unjudged(value)
    return _VALID if _ID_PATTERN.search(value) else _INVALID


def _vocabulary(value: object, depth: int, stack: _Stack) -> int:
    """$vocabulary when uri is not asserted: an object of booleans with string keys."""
    if type(value) is not dict:
        return _unjudged(value)
    for key, flag in value.items():
        if type(key) is not str:
            return _DEFER
        if flag is not True and flag is not False:
            return _unjudged(flag)
    return _VALID


def _defer(value: object, depth: int, stack: _Stack) -> int:
    return _DEFER


def _subschema(value: object, depth: int, stack: _Stack) -> int:
    stack.append((value, depth + 1))  # its type is judged when it is popped
    return _VALID


def _subschema_map(value: object, depth: int, stack: _Stack) -> int:
    if type(value) is not dict:
        return _unjudged(value)
    child = depth + 2
    for sub in value.values():
        stack.append((sub, child))
    return _VALID


def _pattern_properties(value: object, depth: int, stack: _Stack) -> int:
    if type(value) is not dict:
        return _unjudged(value)
    verdict = _VALID
    child = depth + 2
    for key, sub in value.items():
        # is_regex passes non-strings, but only jsonschema knows what else a key meets.
        found = _regex_verdict(key) if type(key) is str else _DEFER
        verdict = max(verdict, found)
        stack.append((sub, child))
    return verdict


def _pattern_properties_unchecked(value: object, depth: int, stack: _Stack) -> int:
    # Someone replaced jsonschema's regex format checker: still walk, but let it judge.
    _subschema_map(value, depth, stack)
    return _DEFER


def _subschema_array(value: object, depth: int, stack: _Stack) -> int:
    if type(value) is not list:
        return _unjudged(value)
    if not value:
        return _INVALID
    child = depth + 2
    for sub in value:
        stack.append((sub, child))
    return _VALID


def _dependencies(value: object, depth: int, stack: _Stack) -> int:
    """Legacy "dependencies": each value is a schema or a stringArray."""
    if type(value) is not dict:
        return _unjudged(value)
    verdict = _VALID
    child = depth + 2
    for sub in value.values():
        if type(sub) is list:
            verdict = max(verdict, _string_array_verdict(sub))
        else:
            stack.append((sub, child))
    return verdict


def _dependent_required(value: object, depth: int, stack: _Stack) -> int:
    if type(value) is not dict:
        return _unjudged(value)
    verdict = _VALID
    for sub in value.values():
        verdict = max(verdict, _string_array_verdict(sub))
    return verdict


# Where subschemas live (shared by the fast walker and the path-keeping walker below).
_SUBSCHEMA_KEYWORDS: Final = frozenset(
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
_SUBSCHEMA_MAP_KEYWORDS: Final = frozenset(
    {
        "properties",
        "patternProperties",
        "dependentSchemas",
        "$defs",
        "definitions",
    }
)
_SUBSCHEMA_ARRAY_KEYWORDS: Final = frozenset({"prefixItems", "allOf", "anyOf", "oneOf"})

_BASE_RULES: Final[dict[str, _Rule]] = {
    # applicator, unevaluated, content, core and legacy keywords holding subschemas
    **dict.fromkeys(_SUBSCHEMA_KEYWORDS, _subschema),
    **dict.fromkeys(_SUBSCHEMA_MAP_KEYWORDS, _subschema_map),
    **dict.fromkeys(_SUBSCHEMA_ARRAY_KEYWORDS, _subschema_array),
    "patternProperties": _pattern_properties,
    "dependencies": _dependencies,
    # validation vocabulary
    "type": _type,
    "enum": _array,
    "multipleOf": _multiple_of,
    **dict.fromkeys(("maximum", "exclusiveMaximum", "minimum", "exclusiveMinimum"), _number),
    **dict.fromkeys(
        (
            "maxLength",
            "minLength",
            "maxItems",
            "minItems",
            "maxContains",
            "minContains",
            "maxProperties",
            "minProperties",
        ),
        _count,
    ),
    "pattern": _pattern,
    "uniqueItems": _boolean,
    "required": _string_array,
    "dependentRequired": _dependent_required,
    # meta-data, format-annotation and content vocabularies ("default"/"const": anything)
    **dict.fromkeys(
        ("title", "description", "format", "contentEncoding", "contentMediaType", "$comment"),
        _string,
    ),
    **dict.fromkeys(("deprecated", "readOnly", "writeOnly"), _boolean),
    "examples": _array,
    # core: anchors are plain patterns; URI-valued keywords depend on the format checker
    **dict.fromkeys(("$anchor", "$dynamicAnchor", "$recursiveAnchor"), _anchor),
}
_URI_KEYWORDS: Final = ("$schema", "$ref", "$dynamicRef", "$recursiveRef", "$id", "$vocabulary")


@functools.cache
def _rules(regex_is_stock: bool, uri_asserted: bool) -> dict[str, _Rule]:
    """Keyword table for the format checker check_schema will use in this process."""
    rules = dict(_BASE_RULES)
    if not regex_is_stock:
        rules["pattern"] = _defer
        rules["patternProperties"] = _pattern_properties_unchecked
    if uri_asserted:
        # rfc3987 or rfc3986-validator is installed: only jsonschema knows its URI rules.
        rules.update(dict.fromkeys(_URI_KEYWORDS, _defer))
    else:
        rules.update(dict.fromkeys(("$schema", "$ref", "$dynamicRef", "$recursiveRef"), _string))
        rules["$id"] = _id
        rules["$vocabulary"] = _vocabulary
    return rules


@functools.cache
def _uri_packages_importable() -> bool:
    """Would jsonschema register the ``uri``/``uri-reference`` format checkers?

    It does so iff it can import rfc3987 or rfc3986_validator (see jsonschema._format).
    find_spec costs microseconds; importing jsonschema to ask would cost 70-90 ms.
    """
    import importlib.util

    for name in ("rfc3987", "rfc3986_validator"):
        try:
            if importlib.util.find_spec(name) is not None:
                return True
        except (ImportError, ValueError):
            return True  # cannot tell: assume asserted, i.e. defer
    return False


def _format_environment() -> tuple[bool, bool]:
    """(regex checker is jsonschema's own, uri formats are asserted) for check_schema.

    Once jsonschema is imported, read its live format checker: a program may have
    registered stricter checkers, which must turn our verdicts for them into DEFER.
    """
    formats = sys.modules.get("jsonschema._format")
    validators = sys.modules.get("jsonschema.validators")
    if formats is None or validators is None:
        return True, _uri_packages_importable()
    try:
        checkers = validators.Draft202012Validator.FORMAT_CHECKER.checkers
        regex = checkers.get("regex")
        stock = regex is None or regex[0] is formats.is_regex
        return stock, "uri" in checkers or "uri-reference" in checkers
    except Exception:  # a half-imported or patched jsonschema: trust nothing
        return False, True


# ----------------------------------------------------------------------------- the walkers


def _fast_walk(schema: object, rules: dict[str, _Rule]) -> int:
    """Worst verdict over every subschema; raises _LimitExceeded.  Iterative, no recursion."""
    verdict = _VALID
    budget = MAX_SUBSCHEMAS
    stack: _Stack = [(schema, 0)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise _LimitExceeded(_TOO_DEEP)
        if type(node) is dict:
            before = len(stack)
            for key, value in node.items():
                rule = rules.get(key)
                if rule is not None:
                    found = rule(value, depth, stack)
                    if found > verdict:
                        verdict = found
            # Counting pushes (not pops) bounds the work even when one node is shared
            # by a huge allOf: the walk stops after the first such node.
            budget -= len(stack) - before
            if budget < 0:
                raise _LimitExceeded(_TOO_BIG)
        elif node is not True and node is not False:
            found = _unjudged(node)
            if found > verdict:
                verdict = found
    return verdict


_Path = tuple[object, ...]


# How each subschema-holding keyword stores its subschemas (for the walkers below).
_ONE, _MAP, _ARRAY, _DEPENDENCIES = 1, 2, 3, 4
_CHILD_KIND: Final[dict[str, int]] = {
    **dict.fromkeys(_SUBSCHEMA_KEYWORDS, _ONE),
    **dict.fromkeys(_SUBSCHEMA_MAP_KEYWORDS, _MAP),
    **dict.fromkeys(_SUBSCHEMA_ARRAY_KEYWORDS, _ARRAY),
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


def _limit_message(schema: object) -> str:
    return _limit_problem(schema)[1]


def _describe(schema: object, error: Any) -> str:
    from jsonschema.exceptions import best_match

    try:
        best = best_match(_metaschema_validator().iter_errors(schema)) or error
    except Exception:  # best_match is a nicety; check_schema's own error will do
        best = error
    return f"at {_where(tuple(best.absolute_path))}: {_clip(best.message)}"


@functools.cache
def _metaschema_validator() -> Any:
    from jsonschema import Draft202012Validator

    return Draft202012Validator(
        Draft202012Validator.META_SCHEMA, format_checker=Draft202012Validator.FORMAT_CHECKER
    )


# ---------------------------------------------------------------------------- public API


def fast_verdict(schema: object) -> FastVerdict:
    """The fast path alone (no jsonschema): only VALID is a trustworthy answer."""
    try:
        return FastVerdict(_fast_walk(schema, _rules(*_format_environment())))
    except _LimitExceeded:
        return FastVerdict.INVALID
    except Exception:  # hostile objects, e.g. keys whose __eq__ raises
        return FastVerdict.DEFER


def check_schema(schema: object, *, cache: VerdictCache | None = None) -> str | None:
    """None if `schema` is a valid Draft 2020-12 JSON Schema, else a message with a pointer.

    Valid means what ``jsonschema.Draft202012Validator.check_schema`` (with its format
    checker) accepts, except that schemas beyond MAX_DEPTH / MAX_SUBSCHEMAS are refused.
    Never raises.  ``cache`` remembers jsonschema's "valid" verdicts across processes.
    """
    try:
        verdict = _fast_walk(schema, _rules(*_format_environment()))
    except _LimitExceeded:
        return _limit_message(schema)
    except Exception:
        verdict = _DEFER
    if verdict == _VALID:
        return None
    return _confirm(schema, cache)


def _confirm(schema: object, cache: VerdictCache | None) -> str | None:
    """Ask the cache, then jsonschema; INVALID from the fast path is only a hint."""
    key = None if cache is None else _cache_key(schema)
    if cache is not None and key is not None and key in cache:
        return None
    try:
        from jsonschema import Draft202012Validator
        from jsonschema.exceptions import SchemaError

        Draft202012Validator.check_schema(schema)
    except SchemaError as error:
        return _describe(schema, error)
    except Exception as error:  # RecursionError, hostile __eq__, ...: not a valid schema
        return f"schema could not be checked: {type(error).__name__}: {_clip(str(error))}"
    if cache is not None and key is not None:
        cache.add(key)
    return None


def check_defaults(schema: object) -> list[tuple[str, str]]:
    """For every subschema node (at any depth) carrying a "default", check that the default
    validates against that node (ignoring the "default" keyword itself).

    Returns (json_pointer, message) pairs; the pointer leads to the default, or into it
    when the problem is inside an object or array default.  Never raises.
    """
    try:
        candidates = _nodes_with_default(schema)
    except _LimitExceeded:
        return [_limit_problem(schema)]
    except Exception as error:
        return [("", f"schema could not be walked: {type(error).__name__}")]
    doubtful: set[int] = set()
    for node in candidates:
        try:
            accepted = _simple_accepts(node, node["default"])
        except Exception:
            accepted = False
        if not accepted:
            doubtful.add(id(node))  # the nodes stay alive in `schema`, so ids are stable
    if not doubtful:
        return []
    return _judge_defaults(schema, doubtful)


def _limit_problem(schema: object) -> tuple[str, str]:
    try:
        _subschemas(schema)
    except _LimitExceeded as exceeded:
        return _pointer(exceeded.path), f"{exceeded.message} (at {_where(exceeded.path)})"
    except Exception:
        pass
    return "", _TOO_DEEP + " or has too many subschemas"


def _judge_defaults(schema: object, doubtful: set[int]) -> list[tuple[str, str]]:
    """Let jsonschema judge the defaults the fast path could not vouch for."""
    judge = _JsonschemaDefaults(schema)
    problems: list[tuple[str, str]] = []
    try:
        nodes = _subschemas(schema)
    except Exception as error:  # cannot happen after _nodes_with_default, but never raise
        return [("", f"schema could not be walked: {type(error).__name__}")]
    for path, node in nodes:
        if id(node) in doubtful and type(node) is dict:
            problems.extend(judge.problems(path, node, node["default"]))
    return problems


# ------------------------------------------------------------------ defaults, fast path
# A rule gets the keyword's value and the instance (the default, or an item of it) and
# returns True only when jsonschema would certainly find no error for that keyword.
# False means "ask jsonschema": it may be a real error or just something we don't model.

_DefaultRule = Callable[[object, object], bool]


def _is_int(value: object) -> bool:
    return type(value) is int or (type(value) is float and value.is_integer())


_TYPE_TESTS: Final[dict[str, Callable[[object], bool]]] = {
    "string": lambda value: type(value) is str,
    "integer": _is_int,  # jsonschema: 1.0 is an integer, True is not
    "number": lambda value: type(value) is int or type(value) is float,
    "boolean": lambda value: type(value) is bool,
    "null": lambda value: value is None,
    "array": lambda value: type(value) is list,
    "object": lambda value: type(value) is dict,
}


def _accept_type(value: object, instance: object) -> bool:
    names: object = [value] if type(value) is str else value
    if type(names) is not list:
        return False
    for name in names:  # in order: jsonschema raises on an unknown name it reaches
        test = _TYPE_TESTS.get(name) if type(name) is str else None
        if test is None:
            return False
        if test(instance):
            return True
    return False


class _Unmodelled(Exception):
    """A value whose equality semantics only jsonschema's `equal` knows."""


def _scalar_key(value: object) -> object:
    """A key equal for two scalars iff jsonschema's ``equal`` says they are equal.

    bool never equals a number (unbool), 1 equals 1.0, str compares as str.  Containers
    map to a key equal to nothing scalar; NaN and non-JSON objects raise _Unmodelled.
    """
    kind = type(value)
    if kind is str or kind is int:
        return value
    if kind is float:
        if value != value:  # NaN: equal only by identity in jsonschema
            raise _Unmodelled
        return value
    if kind is bool or value is None:
        return (kind, value)
    if kind is list or kind is dict:
        return _CONTAINER
    raise _Unmodelled


_CONTAINER: Final = object()


def _accept_enum(value: object, instance: object) -> bool:
    if type(value) is not list:
        return False
    try:
        key = _scalar_key(instance)
        if key is _CONTAINER:
            return False
        return any(_scalar_key(each) == key for each in value)
    except _Unmodelled:
        return False


def _accept_const(value: object, instance: object) -> bool:
    return _accept_enum([value], instance)


def _accept_unique(value: object, instance: object) -> bool:
    if value is False or type(instance) is not list:
        return value is True or value is False
    if value is not True:
        return False
    seen: set[object] = set()
    try:
        for item in instance:
            key = _scalar_key(item)
            if key is _CONTAINER or key in seen:
                return False
            seen.add(key)
    except _Unmodelled:
        return False
    return True


def _bound(compare: Callable[[Any, Any], bool]) -> _DefaultRule:
    """minimum & co: ``compare(instance, limit)`` must hold for numbers."""

    def accept(value: object, instance: object) -> bool:
        if type(value) is not int and type(value) is not float:
            return False
        if type(instance) is not int and type(instance) is not float:
            return True
        return compare(instance, value)

    return accept


def _size(kind: type, compare: Callable[[int, Any], bool]) -> _DefaultRule:
    """minLength & co: len() of a str counts code points, as in jsonschema."""

    def accept(value: object, instance: object) -> bool:
        if type(value) is not int and type(value) is not float:
            return False
        return type(instance) is not kind or compare(len(cast("Sized", instance)), value)

    return accept


def _accept_multiple_of(value: object, instance: object) -> bool:
    if type(value) is not int and type(value) is not float:
        return False
    if type(instance) is not int and type(instance) is not float:
        return True
    try:
        if type(value) is float:  # jsonschema's float rule, including its rounding
            quotient = instance / value
            return int(quotient) == quotient
        return not instance % value
    except Exception:  # overflow (jsonschema then uses Fraction), zero, NaN: ask it
        return False


def _accept_pattern(value: object, instance: object) -> bool:
    if type(value) is not str:
        return False
    if type(instance) is not str:
        return True
    from .schema.safe import regex_search

    try:
        return regex_search(value, instance)  # RE2, as the argument check at call time
    except Exception:
        return False


def _accept_items(value: object, instance: object) -> bool:
    if type(instance) is not list:
        return True  # jsonschema skips "items" for non-arrays without looking at it
    if value is True or (value is False and not instance):
        return True
    if type(value) is not dict:
        return False
    return all(_simple_accepts(value, item) for item in instance)


def _accept_anything(value: object, instance: object) -> bool:
    return True


_DEFAULT_RULES: Final[dict[str, _DefaultRule]] = {
    "type": _accept_type,
    "enum": _accept_enum,
    "const": _accept_const,
    "minimum": _bound(lambda instance, limit: not instance < limit),
    "maximum": _bound(lambda instance, limit: not instance > limit),
    "exclusiveMinimum": _bound(lambda instance, limit: not instance <= limit),
    "exclusiveMaximum": _bound(lambda instance, limit: not instance >= limit),
    "multipleOf": _accept_multiple_of,
    "minLength": _size(str, lambda length, limit: not length < limit),
    "maxLength": _size(str, lambda length, limit: not length > limit),
    "minItems": _size(list, lambda length, limit: not length < limit),
    "maxItems": _size(list, lambda length, limit: not length > limit),
    "pattern": _accept_pattern,
    "uniqueItems": _accept_unique,
    "items": _accept_items,
    # annotations: jsonschema has no validator for them
    **dict.fromkeys(
        ("description", "title", "default", "examples", "deprecated", "readOnly", "writeOnly", "$comment"),
        _accept_anything,
    ),
}


def _simple_accepts(node: object, instance: object) -> bool:
    """True only if every keyword of `node` is modelled and accepts `instance`."""
    if node is True:
        return True
    if type(node) is not dict or type(instance) not in _JSON_TYPES:
        return False
    for key, value in node.items():
        rule = _DEFAULT_RULES.get(key)
        if rule is None or not rule(value, instance):
            return False
    return True


class _JsonschemaDefaults:
    """Slow path for defaults: one jsonschema validator over the whole schema, so that
    a ``$ref`` next to a default resolves against the document it lives in."""

    def __init__(self, root: object) -> None:
        self._root = root
        self._validator: Any = None

    def problems(self, path: _Path, node: object, default: object) -> list[tuple[str, str]]:
        where = (*path, "default")
        try:
            from jsonschema.exceptions import best_match

            from .schema.safe import safe_validator

            if self._validator is None:  # RE2 regexes, refs never fetched
                self._validator = safe_validator(self._root)  # type: ignore[arg-type]
            # "default" is an annotation (no jsonschema validator), so the node can be
            # used as it is, without copying it minus its default.
            error = best_match(self._validator.evolve(schema=node).iter_errors(default))
            if error is None:
                return []
            return [(_pointer((*where, *error.absolute_path)), _clip(error.message))]
        except Exception as error:  # broken schema, RecursionError on a cyclic default...
            message = f"default could not be checked: {type(error).__name__}: {error}"
            return [(_pointer(where), _clip(message))]


# ------------------------------------------------------------------------- verdict cache

_CANONICAL_MAX_DEPTH: Final = 200  # json.dumps recurses in C; stay far from the limit
_CANONICAL_MAX_NODES: Final = 1_000_000
_SCALAR_TYPES: Final = frozenset({str, int, bool, type(None)})


def _is_plain_json(value: object) -> bool:
    """Only exact JSON types may be cached: json.dumps would write a tuple as a list and
    a key 1 as "1", colliding with a plain schema jsonschema may judge differently."""
    budget = _CANONICAL_MAX_NODES
    stack: list[tuple[object, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        budget -= 1
        if budget < 0 or depth > _CANONICAL_MAX_DEPTH:
            return False
        if type(item) is dict:
            for key, sub in item.items():
                if type(key) is not str:
                    return False
                stack.append((sub, depth + 1))
        elif type(item) is list:
            stack.extend((sub, depth + 1) for sub in item)
        elif type(item) is float:
            if not math.isfinite(item):
                return False
        elif type(item) not in _SCALAR_TYPES:
            return False
    return True


def _cache_key(schema: object) -> bytes | None:
    """16-byte blake2b of tag + canonical JSON, or None if the schema is not cacheable."""
    fingerprint = _environment_fingerprint()
    if fingerprint is None or not _is_plain_json(schema):
        return None
    try:
        text = json.dumps(schema, sort_keys=True, separators=(",", ":"), allow_nan=False)
    except (ValueError, TypeError, RecursionError):  # e.g. ints beyond the str() limit
        return None
    tag = f"ongrid-schemacheck/{CACHE_VERSION}/{fingerprint}".encode()
    digest = hashlib.blake2b(len(tag).to_bytes(4, "big"), digest_size=16)
    digest.update(tag)
    digest.update(text.encode())
    return digest.digest()


def content_key(domain: bytes, payload: bytes) -> bytes | None:
    """A 16-byte cache key for ``payload`` under ``domain`` and this module's tag.

    For callers that cache verdicts about whole documents (the skill.json loader
    keys "this manifest's schema and defaults are valid" by the manifest's raw
    bytes). None when caching is off (jsonschema cannot be located).
    """
    base = _content_base(domain)
    if base is None:
        return None
    digest = base.copy()
    digest.update(payload)
    key: bytes = digest.digest()
    return key


@functools.lru_cache(maxsize=16)
def _content_base(domain: bytes) -> Any:
    """The hash of :func:`content_key`'s prefix for ``domain``, to copy (one per load, not per file)."""
    fingerprint = _environment_fingerprint()
    if fingerprint is None:
        return None
    tag = f"ongrid-schemacheck/{CACHE_VERSION}/{fingerprint}/".encode() + domain
    digest = hashlib.blake2b(len(tag).to_bytes(4, "big"), digest_size=16)
    digest.update(tag)
    return digest


@functools.cache
def _environment_fingerprint() -> str | None:
    """Python version plus version and file stamp of every package that shapes
    check_schema's verdict; None (no caching) if jsonschema cannot be located.

    Read from the filesystem: importlib.metadata alone costs ~30 ms of imports and
    importing jsonschema 70-90 ms, which is what a cache hit is meant to save.
    """
    import importlib.util

    parts = [sys.implementation.name, "{}.{}".format(*sys.version_info[:2])]
    modules = (
        "jsonschema",
        "jsonschema_specifications",
        "referencing",
        "rfc3987",
        "rfc3986_validator",
        "re2",
    )
    for module in modules:
        try:
            spec = importlib.util.find_spec(module)
            stamp = None if spec is None or not spec.origin else _package_stamp(spec.origin)
        except (ImportError, ValueError, OSError):
            stamp = None
        if stamp is None and module == "jsonschema":
            return None
        parts.append(f"{module}={stamp or 'absent'}")
    return ";".join(parts)


def _package_stamp(origin: str) -> str:
    """ "<dist-info versions>@<mtime_ns>:<size>" of a module's file (a reinstall touches it)."""
    info = os.stat(origin)
    base = os.path.basename(origin)
    module = os.path.splitext(base)[0]
    if module == "__init__":
        module = os.path.basename(os.path.dirname(origin))
        site = os.path.dirname(os.path.dirname(origin))
    else:
        site = os.path.dirname(origin)
    prefix = module.lower() + "-"
    versions = sorted(
        entry[len(prefix) : -len(".dist-info")]
        for entry in _listdir(site)
        if entry.lower().startswith(prefix) and entry.endswith(".dist-info")
    )
    return f"{'+'.join(versions) or '?'}@{info.st_mtime_ns}:{info.st_size}"


@functools.cache
def _listdir(directory: str) -> tuple[str, ...]:
    return tuple(os.listdir(directory))


_MAGIC: Final = b"ongrid-verdict-1"  # 16 bytes, so records stay 16-byte aligned
_RECORD: Final = 16
_MAX_RECORDS: Final = 1 << 18  # 4 MiB: plenty for tens of thousands of skills


class VerdictCache:
    """Persistent set of content hashes of schemas jsonschema already declared valid.

    The file (``CACHE_FILENAME`` in `directory`) is a 16-byte magic followed by 16-byte
    records.  It is read lazily on first use; an unreadable, corrupt, foreign-owned or
    group/world-writable file counts as empty (a planted record would let an invalid
    schema through).  Nothing here raises on I/O trouble: it is logged at DEBUG.
    """

    def __init__(self, directory: str | os.PathLike[str] | None) -> None:
        self._directory = None if directory is None else os.fspath(directory)
        self._known: set[bytes] | None = None
        self._added: set[bytes] = set()
        self._lock = threading.Lock()

    @property
    def path(self) -> str | None:
        """The cache file, or None for an in-memory cache."""
        if self._directory is None:
            return None
        return os.path.join(self._directory, CACHE_FILENAME)

    def __contains__(self, key: object) -> bool:
        return key in self._added or key in self._loaded()

    def __len__(self) -> int:
        return len(self._loaded() | self._added)

    def add(self, key: bytes) -> None:
        if type(key) is not bytes or len(key) != _RECORD:
            raise ValueError(f"cache keys are {_RECORD} bytes")
        if key not in self._loaded():
            with self._lock:
                self._added.add(key)

    def flush(self) -> None:
        """Write the file atomically (tempfile + os.replace), only if something was added."""
        path = self.path
        with self._lock:
            if not self._added or path is None:
                return
            added = set(self._added)
            # Merge what other processes wrote meanwhile; newest verdicts win the cap.
            older = (self._read() | (self._known or set())) - added
            records = [*added, *older][:_MAX_RECORDS]
            try:
                self._write(path, records)
            except OSError as error:
                logger.debug("cannot write schema verdict cache %s: %s", path, error)
                return
            self._known = set(records)
            self._added -= added

    def _loaded(self) -> set[bytes]:
        known = self._known
        if known is None:
            with self._lock:
                if self._known is None:
                    self._known = self._read()
                known = self._known
        return known

    def _read(self) -> set[bytes]:
        path = self.path
        if path is None:
            return set()
        try:
            with open(path, "rb") as handle:
                info = os.fstat(handle.fileno())
                if not _trustworthy(info):
                    logger.debug("ignoring schema verdict cache %s: unsafe owner/mode", path)
                    return set()
                data = handle.read(len(_MAGIC) + _MAX_RECORDS * _RECORD + 1)
        except FileNotFoundError:
            return set()
        except OSError as error:
            logger.debug("cannot read schema verdict cache %s: %s", path, error)
            return set()
        body = len(data) - len(_MAGIC)
        if not data.startswith(_MAGIC) or body % _RECORD or body > _MAX_RECORDS * _RECORD:
            logger.debug("ignoring corrupt schema verdict cache %s", path)
            return set()
        return {data[i : i + _RECORD] for i in range(len(_MAGIC), len(data), _RECORD)}

    def _write(self, path: str, records: list[bytes]) -> None:
        import tempfile

        directory = os.path.dirname(path)
        os.makedirs(directory, mode=0o700, exist_ok=True)
        fd, temporary = tempfile.mkstemp(dir=directory, prefix=".schema-verdicts-")
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(_MAGIC + b"".join(records))
            os.replace(temporary, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
            raise


def _trustworthy(info: os.stat_result) -> bool:
    return (
        stat.S_ISREG(info.st_mode)
        and info.st_uid == os.geteuid()
        and not info.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
    )


_SHARED_CACHES: dict[str, VerdictCache] = {}
_SHARED_LOCK = threading.Lock()


def verdict_cache(directory: str | os.PathLike[str]) -> VerdictCache:
    """The process-wide :class:`VerdictCache` for `directory`, flushed at interpreter exit.

    Loaders check one schema per manifest; sharing one instance per directory means the
    file is read once per process and written at most once more.
    """
    path = os.path.abspath(os.fspath(directory))
    with _SHARED_LOCK:
        cache = _SHARED_CACHES.get(path)
        if cache is None:
            cache = _SHARED_CACHES[path] = VerdictCache(path)
            atexit.register(cache.flush)
    return cache
