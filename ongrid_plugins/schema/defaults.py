"""Check that every ``default`` in a schema satisfies the subschema that carries it.

A small evaluator for the keywords that usually sit next to a ``default`` may only say
"valid"; anything it cannot vouch for goes to jsonschema (with RE2 as the regex engine
and references never fetched, as arguments are checked at call time), which has the last
word and writes the message.  tests/test_schemacheck.py checks the evaluator against
jsonschema differentially with hypothesis.

It may import the standard library, :mod:`.subschemas`, :mod:`.metaschema`,
:mod:`.safe`, and ``jsonschema`` lazily.
"""

from __future__ import annotations

from collections.abc import Callable, Sized
from typing import Any, Final, cast

from .bounds import NUMBER_BOUNDS, SIZE_BOUNDS
from .metaschema import _JSON_TYPES
from .subschemas import (
    _clip,
    _limit_problem,
    _LimitExceeded,
    _nodes_with_default,
    _Path,
    _pointer,
    _subschemas,
)

__all__ = ["check_defaults"]


def check_defaults(schema: object, candidates: list[dict[Any, Any]] | None = None) -> list[tuple[str, str]]:
    """For every subschema node (at any depth) carrying a "default", check that the default
    validates against that node (ignoring the "default" keyword itself).

    Returns (json_pointer, message) pairs; the pointer leads to the default, or into it
    when the problem is inside an object or array default.  Never raises.
    ``candidates`` are those nodes when a walk already found them
    (:func:`.check.check_schema_finding_defaults`); None walks the schema here.
    """
    if candidates is None:
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
    from .safe import regex_search

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
    **{keyword: _bound(compare) for keyword, compare in NUMBER_BOUNDS.items()},
    "multipleOf": _accept_multiple_of,
    **{keyword: _size(kind, compare) for keyword, (kind, compare) in SIZE_BOUNDS.items()},
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

            from .safe import safe_validator

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
