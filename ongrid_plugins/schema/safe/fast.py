"""A compiled "certainly valid" check for the common subset of argument schemas.

A call's arguments are checked against the tool's schema on every call, and
jsonschema's ``is_valid`` walks its keyword table for each subschema (tens of
microseconds between two spawns). :func:`compile_accepts` turns a schema into nested
closures once per tool; the predicate answers ``True`` only when the jsonschema
validator of :mod:`.validator` (draft 2020-12, RE2 patterns, format checks on) would
find no error. ``False`` means "ask jsonschema": it decides, and writes the messages.
So a wrong ``False`` costs time, never a wrong answer; only ``True`` must be exact,
which tests/test_fastschema.py checks against jsonschema over many schemas and values.

Modelled: boolean schemas, ``type``, ``enum``/``const`` over scalars, the numeric
bounds and ``multipleOf``, ``minLength``/``maxLength``/``pattern``, ``items`` (without
``prefixItems``), ``minItems``/``maxItems``/``uniqueItems`` over scalars,
``properties``, ``required``, ``additionalProperties`` (without
``patternProperties``), ``minProperties``/``maxProperties``, ``format: regex``, and the
annotations. A subschema with any other keyword (``$ref``, other formats, ``allOf``...)
always answers ``False``. Instances are plain JSON (what ``json.loads`` makes): anything else gets
``False`` as well.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, Final

from ..bounds import NUMBER_BOUNDS, SIZE_BOUNDS
from .regex import RegexError, compile_regex, regex_search

__all__ = ["compile_accepts"]

Accepts = Callable[[object], bool]

_MAX_DEPTH: Final = 64  # deeper schemas are left to jsonschema
_ANNOTATIONS: Final = frozenset(
    {"title", "description", "default", "examples", "deprecated", "readOnly", "writeOnly", "$comment"}
)


class _Unsupported(Exception):
    """A keyword or value this module does not model: the subschema answers False."""


def compile_accepts(schema: object) -> Accepts:
    """The predicate for ``schema``: True only where jsonschema certainly says valid."""
    return _compile(schema, 0)


def _never(instance: object) -> bool:
    return False


def _always(instance: object) -> bool:
    return True


def _compile(schema: object, depth: int) -> Accepts:
    if schema is True:
        return _always
    if schema is False or type(schema) is not dict or depth > _MAX_DEPTH:
        return _never
    try:
        checks = _checks(schema, depth)
    except _Unsupported:
        return _never
    if not checks:
        return _always
    if len(checks) == 1:
        return checks[0]
    if len(checks) == 2:
        first, second = checks
        return lambda instance: first(instance) and second(instance)
    every = tuple(checks)
    return lambda instance: all(check(instance) for check in every)


def _checks(schema: dict[Any, Any], depth: int) -> list[Accepts]:
    checks: list[Accepts] = []
    object_keys = False
    for key, value in schema.items():
        if key in _ANNOTATIONS:
            continue
        builder = _BUILDERS.get(key) if type(key) is str else None
        if builder is None:
            if key not in _OBJECT_KEYWORDS:
                raise _Unsupported(key)
            object_keys = True
            continue
        checks.append(builder(value, depth))
    if object_keys:
        checks.append(_object(schema, depth))
    if "type" not in schema:
        # Without "type", a non-JSON instance (a tuple, a set) could reach a keyword
        # jsonschema skips and we would accept: refuse what json.loads cannot make.
        checks.insert(0, _plain)
    return checks


def _plain(instance: object) -> bool:
    return type(instance) in _JSON_TYPES


_JSON_TYPES: Final = frozenset({dict, list, str, int, float, bool, type(None)})


# ------------------------------------------------------------------ scalars


def _is_number(value: object) -> bool:
    kind = type(value)
    return kind is int or kind is float


def _is_integer(value: object) -> bool:
    kind = type(value)
    return kind is int or (kind is float and value.is_integer())  # type: ignore[attr-defined]


_TYPE_TESTS: Final[dict[str, Accepts]] = {
    "string": lambda value: type(value) is str,
    "integer": _is_integer,  # jsonschema: 1.0 is an integer, True is not
    "number": _is_number,
    "boolean": lambda value: type(value) is bool,
    "null": lambda value: value is None,
    "array": lambda value: type(value) is list,
    "object": lambda value: type(value) is dict,
}


def _type(value: object, depth: int) -> Accepts:
    names = [value] if type(value) is str else value
    if type(names) is not list or not names:
        raise _Unsupported("type")
    tests = []
    for name in names:
        test = _TYPE_TESTS.get(name) if type(name) is str else None
        if test is None:
            raise _Unsupported("type")  # jsonschema raises on an unknown type name
        tests.append(test)
    if len(tests) == 1:
        return tests[0]
    every = tuple(tests)
    return lambda instance: any(test(instance) for test in every)


def _scalar_key(value: object) -> object:
    """A key equal for two scalars iff jsonschema's ``equal`` says they are equal
    (bool never equals a number, 1 equals 1.0); containers and NaN are unsupported."""
    kind = type(value)
    if kind is str or kind is int:
        return value
    if kind is float:
        if value != value:
            raise _Unsupported("NaN")
        return value
    if kind is bool or value is None:
        return (kind, value)
    raise _Unsupported("container")


def _instance_key(instance: object) -> object:
    try:
        return _scalar_key(instance)
    except _Unsupported:
        return _NOTHING


_NOTHING: Final = object()


def _enum(value: object, depth: int) -> Accepts:
    if type(value) is not list:
        raise _Unsupported("enum")
    keys = []
    for each in value:
        try:
            keys.append(_scalar_key(each))
        except _Unsupported:
            continue  # a container member matches no scalar; a container instance is asked
    allowed = frozenset(keys)
    return lambda instance: _instance_key(instance) in allowed


def _const(value: object, depth: int) -> Accepts:
    return _enum([value], depth)


def _limit(value: object) -> int | float:
    if type(value) is not int and type(value) is not float:
        raise _Unsupported("limit")
    if type(value) is float and not math.isfinite(value):
        raise _Unsupported("limit")
    return value


def _bound(compare: Callable[[Any, Any], bool]) -> Callable[[object, int], Accepts]:
    def build(value: object, depth: int) -> Accepts:
        limit = _limit(value)
        return lambda instance: not _is_number(instance) or compare(instance, limit)

    return build


def _multiple_of(value: object, depth: int) -> Accepts:
    limit = _limit(value)
    if not limit > 0:
        raise _Unsupported("multipleOf")

    def accepts(instance: object) -> bool:
        if not _is_number(instance):
            return True
        try:
            if type(limit) is float:  # jsonschema's float rule, including its rounding
                quotient = instance / limit  # type: ignore[operator]
                return bool(int(quotient) == quotient)
            return not instance % limit  # type: ignore[operator]
        except Exception:  # overflow (jsonschema then uses Fraction): ask it
            return False

    return accepts


def _size(kind: type, compare: Callable[[int, Any], bool]) -> Callable[[object, int], Accepts]:
    """minLength & co: len() of a str counts code points, as in jsonschema."""

    def build(value: object, depth: int) -> Accepts:
        limit = _limit(value)
        return lambda instance: type(instance) is not kind or compare(len(instance), limit)  # type: ignore[arg-type]

    return build


def _pattern(value: object, depth: int) -> Accepts:
    if type(value) is not str:
        raise _Unsupported("pattern")

    def accepts(instance: object) -> bool:
        if type(instance) is not str:
            return True
        try:
            return regex_search(value, instance)
        except RegexError:
            return False

    return accepts


def _unique(value: object, depth: int) -> Accepts:
    if value is False:
        return _always
    if value is not True:
        raise _Unsupported("uniqueItems")

    def accepts(instance: object) -> bool:
        if type(instance) is not list:
            return True
        seen: set[object] = set()
        for item in instance:
            key = _instance_key(item)
            if key is _NOTHING or key in seen:
                return False
            seen.add(key)
        return True

    return accepts


def _format(value: object, depth: int) -> Accepts:
    """Only ``regex`` (as :mod:`.validator` checks it: RE2 must compile the string)."""
    if value != "regex" or type(value) is not str:
        raise _Unsupported("format")

    def accepts(instance: object) -> bool:
        if type(instance) is not str:
            return True
        try:
            compile_regex(instance)
        except Exception:
            return False
        return True

    return accepts


# ------------------------------------------------------------------ containers


def _items(value: object, depth: int) -> Accepts:
    if value is True:
        return _always
    if value is False:
        return lambda instance: type(instance) is not list or not instance
    item = _compile(value, depth + 1)
    return lambda instance: type(instance) is not list or all(item(each) for each in instance)


_OBJECT_KEYWORDS: Final = frozenset(
    {"properties", "required", "additionalProperties", "minProperties", "maxProperties"}
)


def _object(schema: dict[Any, Any], depth: int) -> Accepts:
    """properties, required, additionalProperties and the property counts, in one pass."""
    if "patternProperties" in schema:
        raise _Unsupported("patternProperties")
    properties = schema.get("properties", {})
    if type(properties) is not dict or any(type(key) is not str for key in properties):
        raise _Unsupported("properties")
    subs = {key: _compile(sub, depth + 1) for key, sub in properties.items()}
    required = schema.get("required", [])
    if type(required) is not list or any(type(key) is not str for key in required):
        raise _Unsupported("required")
    needed = frozenset(required)  # dict.keys() >= needed: every required key, in one C call
    low = _limit(schema.get("minProperties", 0))
    high = _limit(schema.get("maxProperties", math.inf)) if "maxProperties" in schema else math.inf
    additional = schema.get("additionalProperties", True)
    extra: Accepts | None = None if additional is True else _compile(additional, depth + 1)

    if not subs and extra is None:  # no value to check (a tool without arguments): keys and count only

        def counts(instance: object) -> bool:
            return type(instance) is not dict or (instance.keys() >= needed and low <= len(instance) <= high)

        return counts

    def accepts(instance: object) -> bool:
        if type(instance) is not dict:
            return True
        if not (instance.keys() >= needed and low <= len(instance) <= high):
            return False
        for key, value in instance.items():
            check = subs.get(key)
            if check is not None:
                if not check(value):
                    return False
            elif extra is not None and not extra(value):
                return False
        return True

    return accepts


_BUILDERS: Final[dict[str, Callable[[Any, int], Accepts]]] = {
    "type": _type,
    "enum": _enum,
    "const": _const,
    **{keyword: _bound(compare) for keyword, compare in NUMBER_BOUNDS.items()},
    "multipleOf": _multiple_of,
    **{keyword: _size(kind, compare) for keyword, (kind, compare) in SIZE_BOUNDS.items()},
    "pattern": _pattern,
    "uniqueItems": _unique,
    "items": _items,
    "format": _format,
}
