"""The one jsonschema validator for tool schemas: draft 2020-12, RE2 regexes, no retrieval.

jsonschema calls ``re.search`` in four keywords (``pattern``, ``patternProperties``,
``additionalProperties`` and ``unevaluatedProperties``, the last two to tell which
properties a ``patternProperties`` covers) and ``re.compile`` in ``format: regex``.  Each
is replaced here by the same logic over :func:`.regex.regex_search`; everything else is
jsonschema's own.  A pattern RE2 refuses never matches here (the loaders refuse such a
schema before any call), so nothing falls back to a backtracking engine.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Mapping
from typing import Any

from .refs import refusing_registry
from .regex import RegexError, compile_regex, regex_search

__all__ = ["safe_validator"]


def safe_validator(schema: Mapping[str, Any] | bool, *, formats: bool = True) -> Any:
    """A validator for ``schema`` (always draft 2020-12), with format checks on (``formats``)."""
    cls = _validator_class()
    return cls(schema, registry=refusing_registry(), format_checker=cls.FORMAT_CHECKER if formats else None)


def _matches(pattern: object, text: str) -> bool:
    if not isinstance(pattern, str):
        return False
    try:
        return regex_search(pattern, text)
    except RegexError:
        return False


def _pattern(validator: Any, pattern: Any, instance: Any, schema: Any) -> Iterator[Any]:
    from jsonschema.exceptions import ValidationError

    if validator.is_type(instance, "string") and not _matches(pattern, instance):
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


def _pattern_properties(validator: Any, patterns: Any, instance: Any, schema: Any) -> Iterator[Any]:
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in patterns.items():
        for key, value in instance.items():
            if _matches(pattern, key):
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


def _additional(instance: Mapping[str, Any], schema: Mapping[str, Any]) -> Iterator[str]:
    properties = schema.get("properties", {})
    patterns = schema.get("patternProperties", {})
    for key in instance:
        if key not in properties and not any(_matches(p, key) for p in patterns):
            yield key


def _additional_properties(validator: Any, additional: Any, instance: Any, schema: Any) -> Iterator[Any]:
    from jsonschema.exceptions import ValidationError

    if not validator.is_type(instance, "object"):
        return
    extras = set(_additional(instance, schema))
    if validator.is_type(additional, "object"):
        for extra in extras:
            yield from validator.descend(instance[extra], additional, path=extra)
    elif not additional and extras:
        if "patternProperties" in schema:
            verb = "does" if len(extras) == 1 else "do"
            joined = ", ".join(repr(each) for each in sorted(extras))
            patterns = ", ".join(repr(each) for each in sorted(schema["patternProperties"]))
            yield ValidationError(f"{joined} {verb} not match any of the regexes: {patterns}")
        else:
            error = "Additional properties are not allowed (%s %s unexpected)"
            yield ValidationError(error % extras_msg(sorted(extras, key=str)))


def _unevaluated_properties(validator: Any, unevaluated: Any, instance: Any, schema: Any) -> Iterator[Any]:
    from jsonschema.exceptions import ValidationError

    if not validator.is_type(instance, "object"):
        return
    evaluated = _evaluated_keys(validator, instance, schema)
    failed = [
        key
        for key in instance
        if key not in evaluated
        and next(validator.descend(instance[key], unevaluated, path=key, schema_path=key), None) is not None
    ]
    if not failed:
        return
    if unevaluated is False:
        error = "Unevaluated properties are not allowed (%s %s unexpected)"
        yield ValidationError(error % extras_msg(sorted(failed, key=str)))
    else:
        error = "Unevaluated properties are not valid under the given schema (%s %s unevaluated and invalid)"
        yield ValidationError(error % extras_msg(failed))


def extras_msg(extras: Any) -> tuple[str, str]:
    """The names of unexpected properties and the verb, as jsonschema's own messages word them."""
    shown = [repr(extra) for extra in extras]
    return ", ".join(shown), "was" if len(shown) == 1 else "were"


def _valid(errors: Iterator[Any]) -> bool:
    return next(errors, None) is None


def _evaluated_keys(validator: Any, instance: Mapping[str, Any], schema: Any) -> list[str]:
    """jsonschema's find_evaluated_property_keys_by_schema, with RE2 for patternProperties."""
    if validator.is_type(schema, "boolean"):
        return []
    keys: list[str] = []
    for keyword in ("$ref", "$dynamicRef"):
        ref = schema.get(keyword)
        if ref is not None:
            resolved = validator._resolver.lookup(ref)
            inner = validator.evolve(schema=resolved.contents, _resolver=resolved.resolver)
            keys.extend(_evaluated_keys(inner, instance, resolved.contents))
    properties = schema.get("properties")
    if validator.is_type(properties, "object"):
        keys += properties.keys() & instance.keys()
    for keyword in ("additionalProperties", "unevaluatedProperties"):
        subschema = schema.get(keyword)
        if subschema is not None:
            keys += (key for key, value in instance.items() if _valid(validator.descend(value, subschema)))
    patterns = schema.get("patternProperties")
    if patterns:
        keys += (key for key in instance for pattern in patterns if _matches(pattern, key))
    for key, subschema in schema.get("dependentSchemas", {}).items():
        if key in instance:
            keys += _evaluated_keys(validator, instance, subschema)
    for keyword in ("allOf", "oneOf", "anyOf"):
        for subschema in schema.get(keyword, []):
            if _valid(validator.descend(instance, subschema)):
                keys += _evaluated_keys(validator, instance, subschema)
    if "if" in schema:
        if validator.evolve(schema=schema["if"]).is_valid(instance):
            keys += _evaluated_keys(validator, instance, schema["if"])
            if "then" in schema:
                keys += _evaluated_keys(validator, instance, schema["then"])
        elif "else" in schema:
            keys += _evaluated_keys(validator, instance, schema["else"])
    return keys


def _is_regex(instance: object) -> bool:
    """``format: regex`` for argument values: RE2 must compile it (as every pattern here)."""
    if not isinstance(instance, str):
        return True
    compile_regex(instance)
    return True


@functools.cache
def _validator_class() -> Any:
    from jsonschema import Draft202012Validator, FormatChecker
    from jsonschema.validators import extend

    checker = FormatChecker(formats=())
    checker.checkers = dict(Draft202012Validator.FORMAT_CHECKER.checkers)
    checker.checks("regex", raises=RegexError)(_is_regex)
    keywords = {
        "pattern": _pattern,
        "patternProperties": _pattern_properties,
        "additionalProperties": _additional_properties,
        "unevaluatedProperties": _unevaluated_properties,
    }
    return extend(Draft202012Validator, validators=keywords, format_checker=checker)
