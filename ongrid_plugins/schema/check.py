"""Check skill argument schemas fast, and let jsonschema decide anything we cannot vouch for.

Why a fast path
---------------
Every ``skill.json`` carries a ``schema``: a JSON Schema (draft 2020-12) for the tool's
arguments.  The loader rejects a manifest whose schema is not a valid schema, or whose
``default`` values do not satisfy their own subschema.  jsonschema answers both, but
``Draft202012Validator.check_schema`` costs one to two milliseconds per schema (the 2020-12
metaschema is eight documents linked by ``$dynamicRef``) and ``import jsonschema`` costs
70-90 ms, while the whole per-manifest load budget is about 40 µs.  So this package carries
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
metaschema rules are encoded in :mod:`.metaschema`; for anything else the fast path defers.  The default
evaluator likewise may only say "valid".  tests/test_schemacheck.py checks both against
jsonschema differentially with hypothesis.

Two deliberate departures from "jsonschema decides": a schema nested deeper than
:data:`.subschemas.MAX_DEPTH` containers or with more than
:data:`.subschemas.MAX_SUBSCHEMAS` subschemas is rejected outright, because jsonschema
(and ``json``) would hit the recursion limit or run for ever on it (a cyclic dict, or a
few dozen levels of ``{"allOf": [x, x]}``).

Where each part lives
---------------------
This module is the entry point (:func:`check_schema`, :func:`fast_verdict`;
:func:`check_schema_finding_defaults` also hands the default check the nodes it needs).  The keyword
rules are in :mod:`.metaschema`, the bounded walks in :mod:`.subschemas`, the ``default``
evaluator in :mod:`.defaults`.

It may import the standard library, those modules, and ``jsonschema`` lazily.
"""

from __future__ import annotations

import difflib
import enum
import functools
from typing import Any

from .metaschema import _DEFER, _VALID, _fast_walk, _format_environment, _rules
from .subschemas import _clip, _limit_problem, _LimitExceeded, _where

__all__ = ["FastVerdict", "check_schema", "check_schema_finding_defaults", "fast_verdict"]


class FastVerdict(enum.IntEnum):
    """Fast-path answer; ordered so that the worst verdict of a walk is the maximum."""

    VALID = 0
    DEFER = 1
    INVALID = 2


def _limit_message(schema: object) -> str:
    return _limit_problem(schema)[1]


def _describe(schema: object, error: Any) -> str:
    """Every problem jsonschema finds in ``schema``, one per place, joined by ``; ``.

    ``error`` (check_schema's first) stands in when the errors cannot be listed.
    """
    try:
        found = sorted(
            _metaschema_validator().iter_errors(schema), key=lambda e: list(map(str, e.absolute_path))
        )
    except Exception:  # iter_errors is a nicety; check_schema's own error will do
        found = []
    lines: list[str] = []
    for one in _leaves(found) or [error]:
        line = f"at {_where(tuple(one.absolute_path))}: {_message(one)}"
        if line not in lines:
            lines.append(line)
    return "; ".join(lines)


def _leaves(errors: list[Any]) -> list[Any]:
    """One error per place: jsonschema's best match among the errors at that place."""
    from jsonschema.exceptions import best_match

    by_place: dict[tuple[Any, ...], list[Any]] = {}
    for error in errors:
        by_place.setdefault(tuple(error.absolute_path), []).append(error)
    return [best_match(group) for group in by_place.values()]


#: The names ``type`` accepts (draft 2020-12).
TYPE_NAMES = ("array", "boolean", "integer", "null", "number", "object", "string")


def _message(error: Any) -> str:
    """jsonschema's message, or for a bad ``type`` name the valid names with the closest one."""
    path, bad = error.absolute_path, error.instance
    in_list = len(path) >= 2 and path[-2] == "type" and error.validator == "enum"
    if (path and path[-1] == "type" and error.validator == "anyOf") or in_list:
        if isinstance(bad, str):
            close = difflib.get_close_matches(bad, TYPE_NAMES, n=1, cutoff=0.5)
            hint = f' — did you mean "{close[0]}"?' if close else ""
            return f"{_clip(repr(bad))} is not a type{hint} (valid: {', '.join(TYPE_NAMES)})"
        return f"{_clip(error.message)} (valid types: {', '.join(TYPE_NAMES)}, or a list of them)"
    return _clip(error.message)


@functools.cache
def _metaschema_validator() -> Any:
    from jsonschema import Draft202012Validator

    return Draft202012Validator(
        Draft202012Validator.META_SCHEMA, format_checker=Draft202012Validator.FORMAT_CHECKER
    )


def fast_verdict(schema: object) -> FastVerdict:
    """The fast path alone (no jsonschema): only VALID is a trustworthy answer."""
    try:
        return FastVerdict(_fast_walk(schema, _rules(*_format_environment())))
    except _LimitExceeded:
        return FastVerdict.INVALID
    except Exception:  # hostile objects, e.g. keys whose __eq__ raises
        return FastVerdict.DEFER


def check_schema(schema: object) -> str | None:
    """None if `schema` is a valid Draft 2020-12 JSON Schema, else a message with a pointer.

    Valid means what ``jsonschema.Draft202012Validator.check_schema`` (with its format
    checker) accepts, except that schemas beyond MAX_DEPTH / MAX_SUBSCHEMAS are refused.
    Never raises.
    """
    try:
        verdict = _fast_walk(schema, _rules(*_format_environment()))
    except _LimitExceeded:
        return _limit_message(schema)
    except Exception:
        verdict = _DEFER
    if verdict == _VALID:
        return None
    return _confirm(schema)


def check_schema_finding_defaults(schema: object) -> tuple[str | None, list[dict[str, Any]] | None]:
    """:func:`check_schema`, and the subschemas carrying a ``"default"`` that its walk met.

    The nodes are the ones :func:`.defaults.check_defaults` would look for (pass them
    as its ``candidates``: one walk instead of two). They are None when the fast path
    did not vouch for the schema itself (jsonschema decided): then nothing is known.
    """
    nodes: list[dict[str, Any]] = []
    try:
        verdict = _fast_walk(schema, _rules(*_format_environment()), nodes)
    except _LimitExceeded:
        return _limit_message(schema), None
    except Exception:
        verdict = _DEFER
    if verdict == _VALID:
        return None, nodes
    return _confirm(schema), None


def _confirm(schema: object) -> str | None:
    """Ask jsonschema; INVALID from the fast path is only a hint."""
    try:
        from jsonschema import Draft202012Validator
        from jsonschema.exceptions import SchemaError

        Draft202012Validator.check_schema(schema)
    except SchemaError as error:
        return _describe(schema, error)
    except Exception as error:  # RecursionError, hostile __eq__, ...: not a valid schema
        return f"schema could not be checked: {type(error).__name__}: {_clip(str(error))}"
    return None
