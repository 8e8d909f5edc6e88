"""ongrid_plugins.schema.check and .defaults: the fast path never disagrees with jsonschema.

The hand-written tables pin every keyword of the 2020-12 metaschema; the hypothesis tests
compare random (often broken) schemas and defaults against jsonschema itself.
"""

from __future__ import annotations

import math
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from ongrid_plugins.schema import check, defaults
from ongrid_plugins.schema.check import FastVerdict, check_schema, fast_verdict
from ongrid_plugins.schema.defaults import check_defaults
from ongrid_plugins.schema.safe.validator import _validator_class
from ongrid_plugins.schema.subschemas import MAX_DEPTH, _nodes_with_default

REPO = Path(__file__).resolve().parent.parent
FORMATS = Draft202012Validator.FORMAT_CHECKER
# Defaults are judged as arguments are at call time: jsonschema's validator with RE2 as the
# regex engine (ongrid_plugins.schema.safe); tests/test_safeschema.py pins the differences.
DefaultsValidator = _validator_class()


def jsonschema_accepts(schema: object) -> bool:
    try:
        Draft202012Validator.check_schema(schema)
    except Exception:  # SchemaError, or a crash on hostile input: not accepted either way
        return False
    return True


def jsonschema_default_ok(root: object, node: dict[str, Any]) -> bool:
    """The oracle: validate node["default"] against node, in the context of root."""
    try:
        validator = DefaultsValidator(root, format_checker=DefaultsValidator.FORMAT_CHECKER)
        return bool(validator.evolve(schema=node).is_valid(node["default"]))
    except Exception:
        return False


def short_id(value: object) -> str:
    try:
        text = repr(value)
    except ValueError:  # ints beyond sys.get_int_max_str_digits()
        text = f"<{type(value).__name__}>"
    return text if len(text) <= 60 else text[:57] + "..."


def nested(key: str, levels: int, leaf: object = None) -> dict[str, Any]:
    """{key: {key: ... leaf}} built without recursion."""
    schema: dict[str, Any] = {} if leaf is None else leaf  # type: ignore[assignment]
    for _ in range(levels):
        schema = {key: schema}
    return schema


TYPICAL = {
    "type": "object",
    "properties": {
        "target": {"type": "string", "description": "Host or path.", "minLength": 1, "maxLength": 253},
        "port": {"type": "integer", "minimum": 1, "maximum": 65535},
        "timeout_ms": {"type": "integer", "minimum": 10, "maximum": 60000, "default": 2000},
        "verbose": {"type": "boolean", "default": False},
        "mode": {"type": "string", "enum": ["fast", "full", "dry_run"], "default": "fast"},
        "paths": {"type": "array", "items": {"type": "string"}, "maxItems": 32, "default": ["/tmp"]},
        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
        "pattern": {"type": "string", "format": "regex"},
        "threshold": {"type": "number", "minimum": 0, "default": 0.5},
    },
    "required": ["target"],
    "additionalProperties": False,
}

# ------------------------------------------------------------------ check_schema tables

VALID_SCHEMAS: list[object] = [
    True,
    False,
    {},
    TYPICAL,
    {"type": "string"},
    {"type": ["string", "null"]},
    {"type": list(sorted(["array", "boolean", "integer", "null", "number", "object", "string"]))},
    {"minimum": 1.5, "maximum": -2, "exclusiveMinimum": 0, "exclusiveMaximum": 1e308},
    {"minLength": 0},
    {"minLength": 1.0},
    {"maxLength": 10**30},
    {"minItems": 3.0},
    {"maxItems": -0.0},
    {"minProperties": 0, "maxProperties": 2, "minContains": 0, "maxContains": 1},
    {"multipleOf": 0.01},
    {"multipleOf": 1e-300},
    {"multipleOf": 7},
    {"enum": []},
    {"enum": [1, "a", None, [1], {"a": 1}, True]},
    {"const": {"x": [1]}},
    {"required": []},
    {"required": ["a", "b"]},
    {"dependentRequired": {"a": ["b"], "c": []}},
    {"uniqueItems": True},
    {"pattern": "^[a-z]+$"},
    {"pattern": "a*+"},
    {"pattern": "(?P<name>x)\\1?"},
    {"patternProperties": {"^x-": {"type": "string"}, "": True}},
    {"items": {"type": "string"}},
    {"items": False},
    {"prefixItems": [{"type": "string"}, True]},
    {"contains": {"const": 1}},
    {"allOf": [True]},
    {"anyOf": [{}, {"type": "null"}]},
    {"oneOf": [False]},
    {"not": {}},
    {"if": {}, "then": False, "else": True},
    {"properties": {"default": {"type": "string"}, "$ref": {}, "type": True}},
    {"additionalProperties": False},
    {"propertyNames": {"maxLength": 3}},
    {"unevaluatedProperties": False},
    {"unevaluatedItems": {"type": "integer"}},
    {"dependentSchemas": {"a": {"required": ["b"]}}},
    {"$defs": {"x": {"type": "string"}}},
    {"definitions": {"x": True}},
    {"dependencies": {"a": ["b"], "c": {"type": "object"}, "d": []}},
    {
        "title": "t",
        "description": "d",
        "default": [1, 2],
        "examples": [1],
        "deprecated": True,
        "readOnly": False,
        "writeOnly": True,
        "$comment": "c",
    },
    {"format": "email"},
    {"format": "not-a-known-format"},
    {
        "contentEncoding": "base64",
        "contentMediaType": "application/json",
        "contentSchema": {"type": "object"},
    },
    {"$schema": "https://json-schema.org/draft/2020-12/schema"},
    {"$id": "https://example.com/s"},
    {"$id": "x#"},
    {"$id": ""},
    {"$ref": "#/$defs/x", "$defs": {"x": {}}},
    {"$anchor": "a-b.c_d"},
    {"$anchor": "a\n"},  # the pattern ends in "$", and re.search lets "$" match before "\n"
    {"$dynamicAnchor": "meta"},
    {"$dynamicRef": "#meta"},
    {"$recursiveRef": "#"},
    {"$recursiveAnchor": "x"},
    {"$vocabulary": {"https://example.com/v": True}},
    {"x-vendor": {"items": []}},
    {"additionalItems": 5},
    {"$unknown": 5},
    {"properties": {"a": {"items": {"anyOf": [{"minLength": 2}, {"not": {"const": 3}}]}}}},
]

INVALID_SCHEMAS: list[tuple[object, str]] = [
    (5, ""),
    (None, ""),
    ("string", ""),
    ([], ""),
    ({"type": "foo"}, "/type"),
    ({"type": []}, "/type"),
    ({"type": ["string", "string"]}, "/type"),
    ({"type": ["strin"]}, "/type/0"),
    ({"type": 5}, "/type"),
    ({"type": [1]}, "/type/0"),
    ({"minLength": -1}, "/minLength"),
    ({"minLength": 1.5}, "/minLength"),
    ({"minLength": True}, "/minLength"),
    ({"minLength": "1"}, "/minLength"),
    ({"maxItems": -1.0}, "/maxItems"),
    ({"minProperties": None}, "/minProperties"),
    ({"maxContains": 1.5}, "/maxContains"),
    ({"minContains": -1}, "/minContains"),
    ({"multipleOf": 0}, "/multipleOf"),
    ({"multipleOf": -2}, "/multipleOf"),
    ({"multipleOf": True}, "/multipleOf"),
    ({"minimum": "1"}, "/minimum"),
    ({"maximum": True}, "/maximum"),
    ({"exclusiveMaximum": None}, "/exclusiveMaximum"),
    ({"enum": 5}, "/enum"),
    ({"enum": {"a": 1}}, "/enum"),
    ({"required": ["a", "a"]}, "/required"),
    ({"required": "a"}, "/required"),
    ({"required": [1]}, "/required/0"),
    ({"dependentRequired": {"a": "b"}}, "/dependentRequired/a"),
    ({"dependentRequired": {"a": ["b", "b"]}}, "/dependentRequired/a"),
    ({"pattern": "("}, "/pattern"),
    ({"pattern": 5}, "/pattern"),
    ({"pattern": "\\p{L}"}, "/pattern"),
    ({"patternProperties": {"(": {}}}, "/patternProperties"),
    ({"patternProperties": {"a": 5}}, "/patternProperties/a"),
    ({"patternProperties": []}, "/patternProperties"),
    ({"items": []}, "/items"),
    ({"items": [{}]}, "/items"),
    ({"items": 5}, "/items"),
    ({"prefixItems": []}, "/prefixItems"),
    ({"prefixItems": {}}, "/prefixItems"),
    ({"prefixItems": [5]}, "/prefixItems/0"),
    ({"allOf": []}, "/allOf"),
    ({"anyOf": {}}, "/anyOf"),
    ({"oneOf": [5]}, "/oneOf/0"),
    ({"not": None}, "/not"),
    ({"if": "x"}, "/if"),
    ({"contains": []}, "/contains"),
    ({"properties": []}, "/properties"),
    ({"properties": {"a": 5}}, "/properties/a"),
    ({"properties": {"a": {"type": "foo"}}}, "/properties/a/type"),
    ({"additionalProperties": "no"}, "/additionalProperties"),
    ({"$defs": []}, "/$defs"),
    ({"$defs": {"x": 1}}, "/$defs/x"),
    ({"definitions": {"x": []}}, "/definitions/x"),
    ({"dependencies": {"a": 5}}, "/dependencies/a"),
    ({"dependencies": {"a": ["b", "b"]}}, "/dependencies/a"),
    ({"dependencies": {"a": [1]}}, "/dependencies/a/0"),
    ({"title": 5}, "/title"),
    ({"description": None}, "/description"),
    ({"deprecated": "yes"}, "/deprecated"),
    ({"readOnly": 1}, "/readOnly"),
    ({"writeOnly": None}, "/writeOnly"),
    ({"examples": {}}, "/examples"),
    ({"format": 5}, "/format"),
    ({"contentEncoding": 5}, "/contentEncoding"),
    ({"contentMediaType": []}, "/contentMediaType"),
    ({"contentSchema": []}, "/contentSchema"),
    ({"uniqueItems": 1}, "/uniqueItems"),
    ({"$comment": 5}, "/$comment"),
    ({"$anchor": "1a"}, "/$anchor"),
    ({"$anchor": ""}, "/$anchor"),
    ({"$dynamicAnchor": 5}, "/$dynamicAnchor"),
    ({"$recursiveAnchor": True}, "/$recursiveAnchor"),
    ({"$id": "a#b"}, "/$id"),
    ({"$ref": 5}, "/$ref"),
    ({"$schema": 5}, "/$schema"),
    ({"$dynamicRef": None}, "/$dynamicRef"),
    ({"$recursiveRef": []}, "/$recursiveRef"),
    ({"$vocabulary": {"x": 1}}, "/$vocabulary/x"),
    ({"$vocabulary": []}, "/$vocabulary"),
    ({"unevaluatedItems": []}, "/unevaluatedItems"),
    ({"propertyNames": 1}, "/propertyNames"),
    ({"unevaluatedProperties": "x"}, "/unevaluatedProperties"),
    ({"dependentSchemas": {"a": 1}}, "/dependentSchemas/a"),
    (
        {"properties": {"a": {"items": {"anyOf": [{"minLength": -1}]}}}},
        "/properties/a/items/anyOf/0/minLength",
    ),
]


@pytest.mark.parametrize("schema", VALID_SCHEMAS, ids=short_id)
def test_valid_schema(schema: object) -> None:
    assert jsonschema_accepts(schema)
    assert fast_verdict(schema) is FastVerdict.VALID  # decided without jsonschema
    assert check_schema(schema) is None


@pytest.mark.parametrize(("schema", "pointer"), INVALID_SCHEMAS, ids=short_id)
def test_invalid_schema(schema: object, pointer: str) -> None:
    assert not jsonschema_accepts(schema)
    assert fast_verdict(schema) is FastVerdict.INVALID
    message = check_schema(schema)
    assert message is not None
    assert message.startswith(f"at {pointer or 'the root'}: "), message


def test_message_is_jsonschemas_best_match_with_a_pointer() -> None:
    schema = {"properties": {"a/b~c": {"minimum": "x"}}}
    assert check_schema(schema) == "at /properties/a~1b~0c/minimum: 'x' is not of type 'number'"


def test_fast_invalid_is_only_a_hint(monkeypatch: pytest.MonkeyPatch) -> None:
    """If the fast path wrongly said INVALID, jsonschema's acceptance would win."""
    monkeypatch.setattr(check, "_fast_walk", lambda schema, rules: 2)
    assert check_schema({"type": "string"}) is None


def test_uri_keywords_defer_when_uri_formats_are_asserted(monkeypatch: pytest.MonkeyPatch) -> None:
    # As if rfc3987 were installed: jsonschema would then check $ref & co as URIs.
    monkeypatch.setitem(FORMATS.checkers, "uri-reference", (lambda value: True, ValueError))
    for schema in ({"$ref": "#"}, {"$id": "x"}, {"$schema": "x"}, {"$vocabulary": {}}):
        assert fast_verdict(schema) is FastVerdict.DEFER
        assert check_schema(schema) is None
    assert fast_verdict({"$anchor": "a"}) is FastVerdict.VALID  # a pattern, not a format


def test_a_replaced_regex_checker_makes_patterns_defer(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_lookbehind(value: object) -> bool:
        return not (isinstance(value, str) and "(?<" in value)

    monkeypatch.setitem(FORMATS.checkers, "regex", (no_lookbehind, re.error))
    schema = {"pattern": "(?<=a)b", "patternProperties": {"(?<=a)b": {}}}
    assert fast_verdict(schema) is FastVerdict.DEFER
    assert check_schema(schema) is not None


# ---------------------------------------------------------------- check_defaults tables

DEFAULT_CASES: list[tuple[dict[str, Any], bool]] = [
    ({"type": "integer", "default": 1.0}, True),  # jsonschema: 1.0 is an integer
    ({"type": "integer", "default": True}, False),  # ... and True is not
    ({"type": "number", "default": False}, False),
    ({"type": ["null", "string"], "default": None}, True),
    ({"type": "string", "minLength": 1, "maxLength": 1, "default": "😀"}, True),  # code points
    ({"type": "string", "maxLength": 1, "default": "e\u0301"}, False),
    ({"pattern": "b", "default": "abc"}, True),  # re.search, not fullmatch
    ({"pattern": "^b", "default": "abc"}, False),
    ({"pattern": "^a$", "default": "a\n"}, False),  # RE2, as ECMA-262: "$" only at the very end
    ({"multipleOf": 0.1, "default": 0.3}, False),  # jsonschema's float rule
    ({"multipleOf": 0.5, "default": 1.5}, True),
    ({"multipleOf": 3, "default": 7.5}, False),
    ({"multipleOf": 0.1, "default": 10**400}, False),  # int too large for a float: it raises
    ({"minimum": 1, "default": True}, True),  # booleans are not numbers: bounds ignore them
    ({"exclusiveMaximum": 1, "default": 1.0}, False),
    ({"enum": [1], "default": True}, False),
    ({"enum": [1.0], "default": 1}, True),
    ({"enum": ["1", [1]], "default": 1}, False),
    ({"const": False, "default": 0}, False),
    ({"const": None, "default": None}, True),
    ({"uniqueItems": True, "default": [1, True]}, True),
    ({"uniqueItems": True, "default": [1, 1.0]}, False),
    ({"uniqueItems": True, "default": [[1], [True]]}, True),
    ({"items": {"type": "integer", "minimum": 0}, "default": [0, 2.0]}, True),
    ({"items": {"type": "integer"}, "default": [0, "x"]}, False),
    ({"items": False, "default": []}, True),
    ({"format": "ipv4", "default": "1.2.3"}, False),  # format present: jsonschema decides
    ({"format": "regex", "default": "("}, False),
    ({"type": "object", "properties": {"a": {"type": "string"}}, "default": {"a": 1}}, False),
    ({"$ref": "#/$defs/port", "default": 80}, True),  # resolved in the whole document
    ({"$ref": "#/$defs/port", "default": 0}, False),
]


@pytest.mark.parametrize(("node", "expected"), DEFAULT_CASES, ids=short_id)
def test_default_against_its_node(node: dict[str, Any], expected: bool) -> None:
    schema = {"$defs": {"port": {"type": "integer", "minimum": 1}}, "properties": {"p": node}}
    assert jsonschema_default_ok(schema, node) is expected
    problems = check_defaults(schema)
    assert (problems == []) is expected, problems
    if not expected:
        assert problems[0][0].startswith("/properties/p/default")


def test_default_problem_points_into_the_default() -> None:
    schema = {"items": {"type": "object", "properties": {"c": {"type": "string"}}, "default": {"c": 1}}}
    assert check_defaults(schema) == [("/items/default/c", "1 is not of type 'string'")]


def test_only_defaults_in_schema_positions_count() -> None:
    assert check_defaults({"properties": {"default": {"type": "string"}}}) == []
    assert check_defaults({"enum": [{"type": "integer", "default": "x"}]}) == []
    assert check_defaults({"const": {"type": "integer", "default": "x"}}) == []
    assert check_defaults({"x-vendor": {"type": "integer", "default": "x"}}) == []
    found = check_defaults({"properties": {"default": {"type": "string", "default": 5}}})
    assert [pointer for pointer, _ in found] == ["/properties/default/default"]
    deep = {"allOf": [{"not": {"dependentSchemas": {"a": {"type": "null", "default": 0}}}}]}
    assert [p for p, _ in check_defaults(deep)] == ["/allOf/0/not/dependentSchemas/a/default"]


def test_typical_defaults_need_no_jsonschema(monkeypatch: pytest.MonkeyPatch) -> None:
    def fail(schema: object, doubtful: set[int]) -> list[tuple[str, str]]:
        raise AssertionError("the fast path should have vouched for these defaults")

    monkeypatch.setattr(defaults, "_judge_defaults", fail)
    assert check_defaults(TYPICAL) == []


def test_typical_schema_does_not_import_jsonschema() -> None:
    code = (
        "import sys\n"
        "import ongrid_plugins.schema.check as s, ongrid_plugins.schema.defaults as d\n"
        "after_import = 'jsonschema' in sys.modules\n"
        f"assert s.check_schema({TYPICAL!r}) is None\n"
        f"assert d.check_defaults({TYPICAL!r}) == []\n"
        "print(after_import, 'jsonschema' in sys.modules)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    imported_by_package, imported_after_checks = result.stdout.split()
    assert imported_by_package == "False", "importing ongrid_plugins pulls in jsonschema"
    assert imported_after_checks == "False", "the schema check imported jsonschema"


# ------------------------------------------------------------------ differential tests

NAMES = st.sampled_from(["a", "b", "default", "type", "a/b", "~t", ""])
REGEXES = st.sampled_from(
    [
        "^a",
        "[a-z]+$",
        "\\d{2,3}",
        "(",
        "[",
        "a{2,1}",
        "*",
        "(?P<n>x)",
        "a*+",
        "\\p{L}",
        "(?<=a)b",
        "x\n",
        "(?i)a",
        "a(?i)",
        "\\",
        "[[:alpha:]]",
        "",
    ]
)
JUNK = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-3, 3)
    | st.sampled_from([0.0, -1.5, 2.0, 1e300])
    | st.text(max_size=3),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(NAMES, inner, max_size=3),
    max_leaves=4,
)
# anything but a bool or an object (drawn directly: a filter would waste examples)
BAD_SCHEMAS = (
    st.none() | st.integers(-3, 3) | st.sampled_from([0.0, 1.5, "", "x"]) | st.lists(JUNK, max_size=2)
)
TYPES = ["array", "boolean", "integer", "null", "number", "object", "string"]
NUMBERS = st.integers(-3, 10) | st.sampled_from([0.0, -0.0, 1.0, 2.5, -1.5, 1e300, 0.1, 10**20])
COUNTS = st.integers(0, 5) | st.sampled_from([0.0, 3.0, 10**20])
BAD_COUNTS = st.sampled_from([-1, -1.0, 1.5, True, False, "1", None, [], {}])
BAD_NUMBERS = st.sampled_from([True, False, "1", None, [], {}])
TEXT = st.text(max_size=4)
BAD_TEXT = st.sampled_from([5, None, True, [], {}, 1.5])
BOOLS = st.booleans()
BAD_BOOLS = st.sampled_from([0, 1, "true", None, [], {}])
GOOD_REQUIRED = st.lists(NAMES, max_size=3, unique=True)
BAD_REQUIRED = st.lists(NAMES, min_size=2, max_size=3) | st.sampled_from(["a", [1], {}, 5])
ANCHORS = st.sampled_from(["a", "A_b-c.d", "_x", "meta", "a\n"])
BAD_ANCHORS = st.sampled_from(["1a", "", "a b", "#a", 5, True])
URIS = st.sampled_from(["#", "#/$defs/a", "http://x/y", "urn:a", "", "not a uri"])


def keyword_strategies(children: st.SearchStrategy[Any]) -> dict[str, tuple[Any, Any]]:
    """keyword -> (well-formed values, mutated values)."""
    schema_map = st.dictionaries(NAMES, children, max_size=3)
    schema_array = st.lists(children, min_size=1, max_size=3)
    bad_schema = BAD_SCHEMAS
    table: dict[str, tuple[Any, Any]] = {
        "type": (
            st.sampled_from(TYPES) | st.lists(st.sampled_from(TYPES), min_size=1, max_size=3, unique=True),
            st.sampled_from(["foo", [], ["string", "string"], 5, ["strin"], [1], None]),
        ),
        "enum": (st.lists(JUNK, max_size=3), JUNK),
        "const": (JUNK, JUNK),
        "default": (JUNK, JUNK),
        "multipleOf": (
            st.sampled_from([1, 2, 0.5, 0.01, 1e-300, 7.5, 2.0]),
            st.sampled_from([0, -1, -0.5, 0.0, True, "2", None]),
        ),
        "pattern": (REGEXES, REGEXES | BAD_TEXT),
        "patternProperties": (
            st.dictionaries(REGEXES, children, max_size=3),
            st.dictionaries(REGEXES, JUNK, max_size=2) | JUNK,
        ),
        "required": (GOOD_REQUIRED, BAD_REQUIRED),
        "dependentRequired": (
            st.dictionaries(NAMES, GOOD_REQUIRED, max_size=2),
            st.dictionaries(NAMES, BAD_REQUIRED, min_size=1, max_size=2),
        ),
        "dependencies": (
            st.dictionaries(NAMES, children | GOOD_REQUIRED, max_size=2),
            st.dictionaries(NAMES, BAD_REQUIRED | bad_schema, min_size=1, max_size=2),
        ),
        "examples": (st.lists(JUNK, max_size=2), JUNK),
        "$id": (
            st.sampled_from(["http://x/y", "x#", "#", "", "urn:a"]),
            st.sampled_from(["a#b", "#foo", 5, None]),
        ),
        "$vocabulary": (
            st.dictionaries(URIS, BOOLS, max_size=2),
            st.dictionaries(URIS, BAD_BOOLS, min_size=1, max_size=2) | JUNK,
        ),
        "x-vendor": (JUNK, JUNK),
        "additionalItems": (JUNK, JUNK),
    }
    for key in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
        table[key] = (NUMBERS, BAD_NUMBERS)
    for key in (
        "minLength",
        "maxLength",
        "minItems",
        "maxItems",
        "minContains",
        "maxContains",
        "minProperties",
        "maxProperties",
    ):
        table[key] = (COUNTS, BAD_COUNTS)
    for key in ("title", "description", "format", "contentEncoding", "contentMediaType", "$comment"):
        table[key] = (TEXT, BAD_TEXT)
    for key in ("uniqueItems", "deprecated", "readOnly", "writeOnly"):
        table[key] = (BOOLS, BAD_BOOLS)
    for key in ("$anchor", "$dynamicAnchor", "$recursiveAnchor"):
        table[key] = (ANCHORS, BAD_ANCHORS)
    for key in ("$schema", "$ref", "$dynamicRef", "$recursiveRef"):
        table[key] = (URIS, BAD_TEXT)
    for key in (
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
    ):
        table[key] = (children, bad_schema)
    for key in ("properties", "dependentSchemas", "$defs", "definitions"):
        table[key] = (schema_map, st.dictionaries(NAMES, bad_schema, min_size=1, max_size=2) | bad_schema)
    for key in ("prefixItems", "allOf", "anyOf", "oneOf"):
        table[key] = (schema_array, st.just([]) | st.lists(bad_schema, min_size=1, max_size=2) | bad_schema)
    return table


KEYWORDS = sorted(keyword_strategies(st.just(True)))


def schema_nodes(children: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    table = keyword_strategies(children)

    @st.composite
    def node(draw: st.DrawFn) -> dict[str, Any]:
        keys = draw(st.lists(st.sampled_from(KEYWORDS), max_size=4, unique=True))
        result: dict[str, Any] = {}
        for key in keys:
            good, bad = table[key]
            mutate = draw(st.integers(0, 9)) == 0  # one keyword in ten gets a broken value
            result[key] = draw(bad if mutate else good)
        return result

    return node()


SCHEMAS = st.recursive(
    st.booleans() | schema_nodes(st.booleans() | st.just({})),
    lambda children: st.booleans() | schema_nodes(children),
    max_leaves=8,
)

DIFFERENTIAL = settings(
    max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)


@DIFFERENTIAL
@pytest.mark.filterwarnings("ignore:Possible nested set:FutureWarning")
@given(SCHEMAS)
def test_check_schema_agrees_with_jsonschema(schema: object) -> None:
    accepted = jsonschema_accepts(schema)
    verdict = fast_verdict(schema)
    event(f"fast path: {verdict.name}")
    # Required: VALID is never wrong.  Also pinned: on plain JSON the fast path is exact
    # (in this environment, with no URI format checker installed, it never needs to defer).
    assert verdict is (FastVerdict.VALID if accepted else FastVerdict.INVALID)
    assert (check_schema(schema) is None) is accepted


@DIFFERENTIAL
@pytest.mark.filterwarnings("ignore:Possible nested set:FutureWarning")
@given(SCHEMAS)
def test_the_metaschema_walk_finds_the_nodes_the_default_check_walks_to(schema: object) -> None:
    # The loader hands the default check the nodes the metaschema walk met (one walk, not
    # two): when the fast path vouches for a schema they must be exactly the ones its own
    # walk finds; otherwise none are handed over and the default check walks by itself.
    problem, found = check.check_schema_finding_defaults(schema)
    assert problem == check_schema(schema)
    if fast_verdict(schema) is not FastVerdict.VALID:
        assert found is None
        return
    assert found is not None
    assert sorted(map(id, found)) == sorted(map(id, _nodes_with_default(schema)))
    assert check_defaults(schema, found) == check_defaults(schema)


def test_defaults_found_by_the_metaschema_walk_are_judged_like_a_walk_of_their_own() -> None:
    schema = {
        "properties": {"n": {"type": "integer", "default": "x"}, "m": {"type": "string", "default": "ok"}},
        "items": {"allOf": [{"type": "null", "default": 0}]},
        "enum": [{"type": "integer", "default": "ignored: not a schema position"}],
    }
    problem, found = check.check_schema_finding_defaults(schema)
    assert problem is None and found is not None
    assert sorted(repr(node["default"]) for node in found) == ["'ok'", "'x'", "0"]
    assert (
        check_defaults(schema, found)
        == check_defaults(schema)
        == [
            ("/properties/n/default", "'x' is not of type 'integer'"),
            ("/items/allOf/0/default", "0 is not of type 'null'"),
        ]
    )


def test_no_nodes_are_handed_over_when_jsonschema_decided() -> None:
    assert check.check_schema_finding_defaults({"type": "nope", "default": 1})[1] is None
    too_deep: dict[str, Any] = {}
    for _ in range(MAX_DEPTH + 2):
        too_deep = {"not": too_deep}
    problem, found = check.check_schema_finding_defaults(too_deep)
    assert problem is not None and "deeper" in problem and found is None


SCALARS = st.sampled_from([0, 1, 1.0, -0.0, True, False, None, "a", "1", "", 0.5, 2, 10**20])
DEFAULT_VALUES = (
    SCALARS
    | st.integers()
    | st.floats()
    | st.text(alphabet="ab1😀\n\u0301", max_size=4)
    | st.lists(SCALARS | st.lists(SCALARS, max_size=2), max_size=3)
    | st.dictionaries(st.sampled_from(["a", "b"]), SCALARS, max_size=2)
)


def default_keywords(children: st.SearchStrategy[Any]) -> dict[str, Any]:
    return {
        "type": st.sampled_from([*TYPES, "foo"]) | st.lists(st.sampled_from(TYPES), max_size=3),
        "enum": st.lists(SCALARS | st.lists(SCALARS, max_size=1), max_size=4),
        "const": SCALARS | st.lists(SCALARS, max_size=2),
        "minimum": NUMBERS,
        "maximum": NUMBERS,
        "exclusiveMinimum": NUMBERS,
        "exclusiveMaximum": NUMBERS,
        "multipleOf": st.sampled_from([1, 2, 3, 0.5, 0.1, 0.01, 1e-300, 7.5, 1e308]),
        "minLength": COUNTS,
        "maxLength": COUNTS,
        "minItems": COUNTS,
        "maxItems": COUNTS,
        "pattern": st.sampled_from(["a", "^a$", "1", "^$", "😀", "\\d", "[", "b|^$"]),
        "uniqueItems": BOOLS,
        "items": children,
        "description": TEXT,
        "examples": st.just([1]),
        "readOnly": BOOLS,
        # outside the fast path's simple set: these must go to jsonschema
        "format": st.sampled_from(["regex", "email", "ipv4", "date", "uuid", "unknown"]),
        "required": GOOD_REQUIRED,
        "properties": st.dictionaries(st.sampled_from(["a", "b"]), children, max_size=2),
        "additionalProperties": children,
        "prefixItems": st.lists(children, min_size=1, max_size=2),
        "not": children,
        "$ref": st.just("#/$defs/port"),
    }


def default_nodes(children: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    table = default_keywords(children)

    @st.composite
    def node(draw: st.DrawFn) -> dict[str, Any]:
        keys = draw(st.lists(st.sampled_from(sorted(table)), max_size=3, unique=True))
        return {key: draw(table[key]) for key in keys}

    return node()


DEFAULT_SUBSCHEMAS = st.recursive(st.booleans() | default_nodes(st.just(True)), default_nodes, max_leaves=3)


@DIFFERENTIAL
@given(
    node=default_nodes(DEFAULT_SUBSCHEMAS),
    default=DEFAULT_VALUES,
    position=st.sampled_from(["/properties/p", "/items", "/$defs/d", ""]),
)
def test_check_defaults_agrees_with_jsonschema(node: dict[str, Any], default: object, position: str) -> None:
    node = {**node, "default": default}
    root: dict[str, Any] = {"$defs": {"port": {"type": "integer", "minimum": 1}}}
    if position == "/properties/p":
        root["properties"] = {"p": node}
    elif position == "/items":
        root["items"] = node
    elif position == "/$defs/d":
        root["$defs"]["d"] = node
    else:
        root.update(node)
        node = root
    expected = jsonschema_default_ok(root, node)
    if "$ref" not in repr(node):  # the brief's oracle: a validator for the node alone
        alone = {key: value for key, value in node.items() if key != "default"}
        try:
            standalone = DefaultsValidator(alone, format_checker=DefaultsValidator.FORMAT_CHECKER).is_valid(
                default
            )
        except Exception:
            standalone = False
        assert standalone is expected
    vouched = defaults._simple_accepts(node, default)
    event(f"fast path vouched: {vouched}, jsonschema accepts: {expected}")
    if vouched:
        assert expected, "the fast path vouched for a default jsonschema rejects"
    mine = [
        problem
        for problem in check_defaults(root)
        if problem[0] == f"{position}/default" or problem[0].startswith(f"{position}/default/")
    ]
    assert (not mine) is expected, mine


# ------------------------------------------------------------------------ hostile input


def test_deep_nesting_is_refused_with_a_clear_message() -> None:
    for schema in (nested("items", 10_000), nested("not", 10_000), nested("properties", 5_000)):
        message = check_schema(schema)
        assert message is not None
        assert f"nests deeper than {MAX_DEPTH} levels" in message
        [(pointer, problem)] = check_defaults(schema)
        assert f"nests deeper than {MAX_DEPTH} levels" in problem
        assert pointer.startswith("/")


def test_depth_limit_is_exact() -> None:
    assert check_schema(nested("items", MAX_DEPTH)) is None
    assert jsonschema_accepts(nested("items", MAX_DEPTH))
    assert check_schema(nested("items", MAX_DEPTH + 1)) is not None


def test_cycles_are_refused() -> None:
    loop: dict[str, Any] = {"type": "object"}
    loop["items"] = loop
    via_properties: dict[str, Any] = {}
    via_properties["properties"] = {"a": via_properties}
    members: list[Any] = []
    via_list = {"allOf": members}
    members.append(via_list)
    for schema in (loop, via_properties, via_list):
        assert "deeper than" in (check_schema(schema) or "")
        assert "deeper than" in check_defaults(schema)[0][1]
        assert fast_verdict(schema) is FastVerdict.INVALID


def test_shared_subschema_bomb_is_refused_quickly() -> None:
    bomb: dict[str, Any] = {}
    for _ in range(30):
        bomb = {"allOf": [bomb, bomb]}  # 2**30 paths, 31 objects
    started = time.perf_counter()
    assert "more than" in (check_schema(bomb) or "")
    assert "more than" in check_defaults(bomb)[0][1]
    assert "more than" in (check_schema({"anyOf": [{}] * 20_000}) or "")
    assert time.perf_counter() - started < 2


def test_huge_arrays() -> None:
    started = time.perf_counter()
    assert check_schema({"enum": list(range(200_000))}) is None
    assert check_schema({"required": [str(i) for i in range(100_000)]}) is None
    assert check_defaults({"type": "array", "default": list(range(100_000))}) == []
    assert time.perf_counter() - started < 2


def test_cyclic_and_deep_values_outside_schema_positions() -> None:
    cyclic: list[Any] = []
    cyclic.append(cyclic)
    deep: list[Any] = []
    for _ in range(10_000):
        deep = [deep]
    other: list[Any] = []
    for _ in range(10_000):
        other = [other]
    for schema in ({"enum": [cyclic]}, {"const": deep}, {"default": deep, "x-y": cyclic}):
        assert check_schema(schema) is None  # jsonschema never looks inside these
        assert jsonschema_accepts(schema)
    assert check_defaults({"type": "array", "default": deep}) == []
    assert check_defaults({"type": "array", "default": cyclic}) == []
    for node in (
        {"const": [1], "default": deep},
        {"enum": [other], "default": deep},
        {"uniqueItems": True, "default": [cyclic, cyclic]},
        {"const": cyclic, "default": [cyclic]},
    ):
        problems = check_defaults(node)  # must not raise, whatever jsonschema does
        assert all(pointer.startswith("/default") for pointer, _ in problems)


@pytest.mark.parametrize(
    "schema",
    [
        {"minimum": math.nan},
        {"maximum": math.inf},
        {"multipleOf": math.nan},
        {"multipleOf": -math.inf},
        {"minLength": math.inf},
        {"maxItems": math.nan},
        {"enum": [math.nan]},
        {"minimum": 10**5000},
        {1: "x"},
        {"properties": {1: {"type": "string"}}},
        {"patternProperties": {1: {}}},
        {("a",): 1},
        {"$vocabulary": {1: True}},
        {"enum": (1, 2)},
        {"required": {"a"}},
        {"required": ("a",)},
        {"type": ("string",)},
        {"allOf": ({},)},
        {"properties": {"a": frozenset()}},
        {"items": object()},
        {"minLength": 2**64},
        {"type": "string", "default": b"bytes"},
    ],
    ids=short_id,
)
def test_non_json_values_match_jsonschema(schema: object) -> None:
    assert (check_schema(schema) is None) is jsonschema_accepts(schema)
    assert isinstance(check_defaults(schema), list)


def test_hostile_keys_do_not_raise() -> None:
    class Evil:
        def __hash__(self) -> int:
            return hash("type")

        def __eq__(self, other: object) -> bool:
            raise RuntimeError("no comparing me")

    schema = {Evil(): 1}
    assert isinstance(check_schema(schema), (str, type(None)))
    assert isinstance(check_defaults(schema), list)
    assert fast_verdict(schema) in FastVerdict


def test_nan_and_bytes_defaults() -> None:
    assert check_defaults({"type": "number", "default": math.nan}) == []
    # jsonschema's equal() compares NaN by identity only
    assert check_defaults({"enum": [math.nan], "default": math.nan}) == []
    assert check_defaults({"enum": [float("nan")], "default": float("nan")}) != []
    assert check_defaults({"type": "string", "default": b"x"}) != []
    assert check_defaults(True) == []
    assert check_defaults([{"default": 1, "type": "string"}]) == []  # not a schema position


def test_jsonschema_exceptions_are_reported_not_raised() -> None:
    # multipleOf with a float and an int beyond float range: jsonschema itself overflows
    problems = check_defaults({"multipleOf": 0.5, "default": 10**400})
    assert len(problems) == 1
    assert problems[0][0] == "/default"


def test_the_exit_flush_never_recreates_a_folder_the_embedder_removed(tmp_path: Path) -> None:
    """A host over a temporary folder, removed before exit: nothing is written back into it."""
    work = tmp_path / "work"
    script = f"""
import shutil
from ongrid_plugins import SkillHost
from ongrid_plugins.testing import isolated_settings, make_skill
schema = {{"type": "object", "properties": {{"n": {{"type": "integer"}}}}}}
make_skill({str(work / "skills")!r}, "greet", args_schema=schema)
host = SkillHost(isolated_settings({str(work)!r}, {str(work / "skills")!r}))
host.load()
shutil.rmtree({str(work)!r})
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert not work.exists(), sorted(str(p) for p in work.rglob("*"))
