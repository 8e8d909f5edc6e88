"""The fast check of a schema against the draft 2020-12 metaschema, keyword by keyword.

A hand-written rule per metaschema keyword, including the ``format: regex`` assertion
that ``check_schema`` switches on, and one iterative walk (:func:`_fast_walk`) that
returns the worst verdict over every subschema. The verdicts are VALID, DEFER and
INVALID; only VALID is taken at face value (see :mod:`.check`, which asks jsonschema
for the rest). VALID is only claimed for plain JSON values under keywords whose rules
are encoded here.

It may import the standard library and :mod:`.subschemas`.
"""

from __future__ import annotations

import functools
import re
import sys
from collections.abc import Callable
from typing import Final

from .subschemas import (
    _TOO_BIG,
    _TOO_DEEP,
    MAX_DEPTH,
    MAX_SUBSCHEMAS,
    SUBSCHEMA_ARRAY_KEYWORDS,
    SUBSCHEMA_KEYWORDS,
    SUBSCHEMA_MAP_KEYWORDS,
    _LimitExceeded,
    _Stack,
)

# Plain ints on the hot path: module globals are cheaper to read than enum members.
_VALID: Final = 0
_DEFER: Final = 1
_INVALID: Final = 2

_JSON_TYPES: Final = frozenset({dict, list, str, int, float, bool, type(None)})
_SIMPLE_TYPES: Final = frozenset({"array", "boolean", "integer", "null", "number", "object", "string"})
# The two patterns of the core vocabulary metaschema ($id and the anchor keywords).
_ID_PATTERN: Final = re.compile(r"^[^#]*#?$")
_ANCHOR_PATTERN: Final = re.compile(r"^[A-Za-z_][-A-Za-z0-9._]*$")

_Rule = Callable[[object, int, _Stack], int]


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


_BASE_RULES: Final[dict[str, _Rule]] = {
    # applicator, unevaluated, content, core and legacy keywords holding subschemas
    **dict.fromkeys(SUBSCHEMA_KEYWORDS, _subschema),
    **dict.fromkeys(SUBSCHEMA_MAP_KEYWORDS, _subschema_map),
    **dict.fromkeys(SUBSCHEMA_ARRAY_KEYWORDS, _subschema_array),
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


def _fast_walk(
    schema: object, rules: dict[str, _Rule], defaults: list[dict[str, object]] | None = None
) -> int:
    """Worst verdict over every subschema; raises _LimitExceeded.  Iterative, no recursion.

    Every dict subschema holding ``"default"`` is appended to ``defaults`` (if given): when
    the verdict is VALID, the nodes :func:`.subschemas._nodes_with_default` finds.
    """
    verdict = _VALID
    budget = MAX_SUBSCHEMAS
    stack: _Stack = [(schema, 0)]
    push = stack.append
    while stack:
        node, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise _LimitExceeded(_TOO_DEEP)
        if type(node) is dict:
            before = len(stack)
            if defaults is not None and "default" in node:
                defaults.append(node)
            for key, value in node.items():
                rule = rules.get(key)
                if rule is None:
                    continue
                # The commonest rules inlined (a call costs more than the check): each
                # exactly its rule's VALID case; anything else calls the rule.
                if rule is _string and type(value) is str:
                    continue
                if rule is _type and type(value) is str and value in _SIMPLE_TYPES:
                    continue
                if rule is _count and type(value) is int and value >= 0:
                    continue
                if rule is _subschema_map:
                    if type(value) is dict:
                        child = depth + 2
                        for sub in value.values():
                            push((sub, child))
                        continue
                elif rule is _subschema:
                    push((value, depth + 1))
                    continue
                elif rule is _number:
                    if type(value) is int or type(value) is float:
                        continue
                elif rule is _array and type(value) is list:
                    continue
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
