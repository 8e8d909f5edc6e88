"""Strict-mode schemas: what is rewritten, what is refused, and that nothing valid is lost."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from hypothesis import HealthCheck, assume, given, note, settings
from hypothesis import strategies as st

from ongrid_plugins.schema.strict import drop_strict_nulls, make_strict

SCHEMAS = Path(__file__).parent / "provider_schemas"
OPENAI_STRICT = json.loads((SCHEMAS / "openai_strict_schema.json").read_text())
ANTHROPIC_STRICT = json.loads((SCHEMAS / "anthropic_strict_schema.json").read_text())


def all_required(schema: Any) -> bool:
    """OpenAI strict: every object lists every property as required (JSON Schema cannot say this)."""
    if isinstance(schema, dict):
        if "properties" in schema and sorted(schema.get("required", [])) != sorted(schema["properties"]):
            return False
        return all(all_required(v) for v in schema.values())
    if isinstance(schema, list):
        return all(all_required(v) for v in schema)
    return True


def assert_strict(schema: dict[str, Any], profile: str) -> None:
    jsonschema.validate(schema, OPENAI_STRICT if profile == "openai" else ANTHROPIC_STRICT)
    jsonschema.Draft202012Validator.check_schema(schema)
    if profile == "openai":
        assert all_required(schema), json.dumps(schema)


ORDERS = {
    "type": "object",
    "properties": {
        "table": {"type": "string", "enum": ["orders", "users"], "description": "Which table."},
        "limit": {"type": "integer", "minimum": 1, "maximum": 100, "default": 10},
        "name": {"type": "string", "minLength": 1, "maxLength": 40},
        "tags": {"type": "array", "items": {"type": "string"}, "minItems": 2, "uniqueItems": True},
        "when": {"type": "string", "format": "date-time"},
        "site": {"type": "string", "format": "uri"},
        "filter": {"$ref": "#/$defs/filter"},
        "value": {"oneOf": [{"type": "string"}, {"type": "number"}]},
        "secret": {"type": "string", "writeOnly": True, "x-ongrid-secret": True, "title": "Secret"},
    },
    "required": ["table"],
    "$defs": {
        "filter": {
            "type": "object",
            "properties": {"column": {"type": "string"}, "op": {"enum": ["=", "<", ">"]}},
            "required": ["column"],
        }
    },
}


@pytest.mark.parametrize("profile", ["openai", "anthropic"])
def test_a_realistic_schema_is_made_strict(profile: str) -> None:
    result = make_strict(ORDERS, profile)
    assert result.ok, result.problems
    assert_strict(result.schema, profile)
    props = result.schema["properties"]
    assert result.schema["additionalProperties"] is False
    assert "default 10" in props["limit"]["description"].lower()
    assert "minimum length 1" in props["name"]["description"].lower()
    assert "items must be unique" in props["tags"]["description"].lower()
    assert "anyOf" in props["value"] and "oneOf" not in json.dumps(result.schema)
    assert "writeOnly" not in props["secret"] and "x-ongrid-secret" not in props["secret"]
    assert result.schema["$defs"]["filter"]["additionalProperties"] is False
    assert ORDERS["properties"]["limit"] == {"type": "integer", "minimum": 1, "maximum": 100, "default": 10}


def test_openai_makes_optional_properties_nullable_and_required() -> None:
    props = make_strict(ORDERS, "openai").schema["properties"]
    assert props["table"] == {"type": "string", "enum": ["orders", "users"], "description": "Which table."}
    assert props["limit"]["type"] == ["integer", "null"]
    assert props["filter"] == {"anyOf": [{"$ref": "#/$defs/filter"}, {"type": "null"}]}
    assert props["value"]["anyOf"][-1] == {"type": "null"}
    assert props["limit"]["minimum"] == 1  # OpenAI enforces it while decoding: kept
    assert "format" not in props["site"] and "format uri" in props["site"]["description"]
    assert props["when"]["format"] == "date-time"


def test_anthropic_keeps_optional_properties_and_folds_numeric_limits() -> None:
    result = make_strict(ORDERS, "anthropic")
    props = result.schema["properties"]
    assert result.schema["required"] == ["table"]
    assert "minimum" not in props["limit"] and "at least 1" in props["limit"]["description"].lower()
    assert props["site"]["format"] == "uri"
    assert "minItems" not in props["tags"]
    assert result.optional == 9  # eight optional at the top, one in the definition


@pytest.mark.parametrize(
    ("schema", "fragment"),
    [
        ({"type": "object", "additionalProperties": {"type": "string"}}, "$: an open map"),
        (
            {"type": "object", "additionalProperties": True, "properties": {"a": {"type": "string"}}},
            "open map",
        ),
        ({"type": "object", "patternProperties": {"^x": {"type": "string"}}}, "patternProperties"),
        ({"type": "object", "properties": {"a": {}}}, "$.a: accepts any JSON value"),
        ({"type": "object", "properties": {"a": True}}, "$.a: a boolean schema"),
        ({"type": "object", "properties": {"a": {"not": {"type": "string"}}}}, "$.a: negation"),
        (
            {"type": "object", "properties": {"a": {"type": "array", "prefixItems": [{"type": "string"}]}}},
            "tuple",
        ),
        ({"type": "object", "properties": {"a": {"type": "array", "items": [{"type": "string"}]}}}, "tuple"),
        ({"type": "object", "if": {"required": ["a"]}, "then": {"required": ["b"]}}, "conditionals"),
        ({"type": "object", "properties": {"a": {"$ref": "https://example.com/s.json"}}}, "local references"),
        (
            {"type": "object", "properties": {"a": {"type": "string", "contentEncoding": "base64"}}},
            "contentEncoding",
        ),
        ({"anyOf": [{"type": "object"}, {"type": "object"}]}, "may not be a union"),
        ({"type": "object", "properties": {"a": {"allOf": [{"type": "string"}, {"minLength": 2}]}}}, "allOf"),
    ],
)
def test_what_cannot_be_strict_is_named_with_its_path(schema: dict[str, Any], fragment: str) -> None:
    result = make_strict(schema, "openai")
    assert not result.ok
    assert any(fragment in problem for problem in result.problems), result.problems


def test_limits_are_checked() -> None:
    deep: dict[str, Any] = {"type": "string"}
    for _ in range(11):
        deep = {"type": "object", "properties": {"x": deep}, "required": ["x"]}
    assert any("nested more than 10" in p for p in make_strict(deep, "openai").problems)
    wide = {"type": "object", "properties": {f"p{i}": {"type": "string"} for i in range(5001)}}
    assert any("5001 properties" in p for p in make_strict(wide, "openai").problems)
    many = {"type": "object", "properties": {"e": {"enum": list(range(1001))}}}
    assert any("1001 enum values" in p for p in make_strict(many, "openai").problems)


def test_recursion_is_openai_only() -> None:
    tree = {
        "type": "object",
        "properties": {"root": {"$ref": "#/$defs/node"}},
        "required": ["root"],
        "$defs": {
            "node": {
                "type": "object",
                "properties": {"kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
                "required": ["kids"],
            }
        },
    }
    assert make_strict(tree, "openai").ok
    assert any("recursive" in p for p in make_strict(tree, "anthropic").problems)


def test_a_single_allof_is_merged_for_openai_and_kept_for_anthropic() -> None:
    schema = {"type": "object", "properties": {"a": {"allOf": [{"type": "string", "pattern": "^a"}]}}}
    assert make_strict(schema, "openai").schema["properties"]["a"]["pattern"] == "^a"
    assert "allOf" in make_strict(schema, "anthropic").schema["properties"]["a"]


def test_anthropic_refuses_object_enums_and_keeps_minitems_one() -> None:
    bad = {"type": "object", "properties": {"a": {"enum": [{"x": 1}]}}}
    assert any("enum values must be" in p for p in make_strict(bad, "anthropic").problems)
    ok = {
        "type": "object",
        "properties": {"a": {"type": "array", "items": {"type": "string"}, "minItems": 1}},
    }
    assert make_strict(ok, "anthropic").schema["properties"]["a"]["minItems"] == 1


def test_drop_strict_nulls_keeps_real_nulls() -> None:
    schema = {
        "type": "object",
        "properties": {
            "a": {"type": "string"},
            "b": {"type": ["string", "null"]},
            "c": {"type": "string"},
            "o": {"$ref": "#/$defs/o"},
            "l": {"type": "array", "items": {"$ref": "#/$defs/o"}},
        },
        "required": ["c"],
        "$defs": {"o": {"type": "object", "properties": {"x": {"type": "integer"}}}},
    }
    args = {"a": None, "b": None, "c": None, "o": {"x": None}, "l": [{"x": None}, {"x": 1}]}
    assert drop_strict_nulls(schema, args) == {"b": None, "c": None, "o": {}, "l": [{}, {"x": 1}]}


# ---------------------------------------------------------------------- the property


NAMES = st.from_regex(r"[a-z]{1,5}", fullmatch=True)
SCALARS = st.one_of(
    st.fixed_dictionaries(
        {"type": st.just("string")},
        optional={
            "minLength": st.integers(0, 3),
            "maxLength": st.integers(3, 8),
            "pattern": st.just("^[a-z]*$"),
            "format": st.sampled_from(["date", "email", "uri", "ipv4"]),
            "description": st.just("a string"),
        },
    ),
    st.fixed_dictionaries(
        {"type": st.sampled_from(["integer", "number"])},
        optional={"minimum": st.integers(-5, 0), "maximum": st.integers(1, 9), "default": st.just(1)},
    ),
    st.just({"type": "boolean"}),
    st.lists(st.sampled_from(["a", "b", "c", "d"]), min_size=1, max_size=3, unique=True).map(
        lambda e: {"enum": e}
    ),
)


def _object(children: st.SearchStrategy[dict[str, Any]]) -> st.SearchStrategy[dict[str, Any]]:
    def build(props: dict[str, Any]) -> st.SearchStrategy[dict[str, Any]]:
        required = st.lists(st.sampled_from(sorted(props)), unique=True) if props else st.just([])
        return required.map(lambda req: {"type": "object", "properties": props, "required": req})

    return st.dictionaries(NAMES, children, max_size=4).flatmap(build)


def _array(children: st.SearchStrategy[dict[str, Any]]) -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries(
        {"type": st.just("array"), "items": children},
        optional={"minItems": st.integers(0, 2), "maxItems": st.integers(2, 3)},
    )


def _union(children: st.SearchStrategy[dict[str, Any]]) -> st.SearchStrategy[dict[str, Any]]:
    return st.tuples(st.sampled_from(["anyOf", "oneOf"]), st.lists(children, min_size=2, max_size=2)).map(
        lambda pair: {pair[0]: pair[1]}
    )


NODES = st.recursive(SCALARS, lambda c: st.one_of(_object(c), _array(c), _union(c)), max_leaves=6)
ROOTS = _object(NODES)


def instances(schema: dict[str, Any]) -> st.SearchStrategy[Any]:
    """Values of the schemas ``NODES`` makes (``format`` is an annotation; strings are [a-z])."""
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    for key in ("anyOf", "oneOf"):
        if key in schema:
            return st.one_of([instances(branch) for branch in schema[key]])
    kind = schema["type"]
    if kind == "string":
        return st.text("abcxyz", min_size=schema.get("minLength", 0), max_size=schema.get("maxLength", 8))
    if kind in ("integer", "number"):
        return st.integers(schema.get("minimum", -5), schema.get("maximum", 9))
    if kind == "boolean":
        return st.booleans()
    if kind == "array":
        items = instances(schema["items"])
        return st.lists(items, min_size=schema.get("minItems", 0), max_size=schema.get("maxItems", 3))
    props = schema["properties"]
    required = {name: instances(props[name]) for name in schema["required"]}
    optional = {name: instances(sub) for name, sub in props.items() if name not in schema["required"]}
    return st.fixed_dictionaries(required, optional=optional)


def _fits_strictly(schema: dict[str, Any], value: Any) -> bool:
    """Valid, and representable once every object is closed (a strict model can write it)."""
    if not jsonschema.Draft202012Validator(schema).is_valid(value):
        return False
    for key in ("anyOf", "oneOf"):
        if key in schema:
            return any(_fits_strictly(branch, value) for branch in schema[key])
    if isinstance(value, dict):
        props = schema.get("properties", {})
        return set(value) <= set(props) and all(_fits_strictly(props[k], v) for k, v in value.items())
    if isinstance(value, list) and "items" in schema:
        return all(_fits_strictly(schema["items"], item) for item in value)
    return True


def encode(schema: dict[str, Any], value: Any) -> Any:
    """How an OpenAI strict-mode model writes ``value``: every optional property present, as null."""
    for key in ("anyOf", "oneOf"):
        if key in schema:  # the branch a strict model uses: the value fits it with no extra keys
            branch = next(b for b in schema[key] if _fits_strictly(b, value))
            return encode(branch, value)
    if isinstance(value, dict) and "properties" in schema:
        return {
            name: encode(sub, value[name]) if name in value else None
            for name, sub in schema["properties"].items()
        }
    if isinstance(value, list) and "items" in schema:
        return [encode(schema["items"], item) for item in value]
    return value


def test_a_badly_formatted_string_does_not_send_the_nulls_down_another_branch() -> None:
    """Found by the round trip below: the branch a strict model wrote was chosen with formats
    asserted, so an optional property's null stayed when a string broke its format, and the host
    then named the null instead of the string (branch 2 takes any object)."""
    schema = {
        "type": "object",
        "properties": {
            "a": {
                "anyOf": [
                    {
                        "type": "object",
                        "properties": {"b": {"type": "string", "format": "date"}, "a": {"type": "string"}},
                        "required": [],
                    },
                    {"type": "object", "properties": {}, "required": []},
                ]
            }
        },
        "required": [],
    }
    for b in ("", "2024-01-31"):
        assert drop_strict_nulls(schema, {"a": {"b": b, "a": None}}) == {"a": {"b": b}}


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
@given(schema=ROOTS, data=st.data())
def test_every_valid_call_survives_the_strict_round_trip(schema: dict[str, Any], data: st.DataObject) -> None:
    """Strict rewriting never refuses these schemas, is accepted by the provider rules, and loses no
    valid call: what a strict model writes for a valid instance passes the strict schema, and
    dropping its nulls gives back the instance, valid under the original schema."""
    note(f"schema: {json.dumps(schema)}")
    instance = data.draw(instances(schema), label="instance")
    assume(_fits_strictly(schema, instance))  # oneOf branches may overlap; strict objects are closed
    for profile in ("openai", "anthropic"):
        result = make_strict(schema, profile)
        assert result.ok, result.problems
        assert_strict(result.schema, profile)
    strict = make_strict(schema, "openai").schema
    written = encode(schema, instance)
    jsonschema.validate(written, strict)
    restored = drop_strict_nulls(schema, written)
    assert restored == instance
    jsonschema.validate(restored, schema)
    jsonschema.validate(instance, make_strict(schema, "anthropic").schema)
