"""The compiled metaschema walk and duplicate-key hook give what their Python code gives.

``_speedups.schema_walker`` is ``schema.metaschema._python_fast_walk`` in C, and
``_speedups.unique_object`` is ``loaders.skill_json_parse._python_unique_object``: each
case runs both and compares verdicts, the nodes found (by identity, in order), the
objects built and the errors raised, over generated schemas and hostile inputs.
"""

from __future__ import annotations

import gc
import json
import sys
from typing import Any, ClassVar

import pytest
from hypothesis import given
from hypothesis import strategies as st
from test_schemacheck import DIFFERENTIAL, JUNK, SCHEMAS

from ongrid_plugins.loaders import skill_json_parse
from ongrid_plugins.schema import metaschema
from ongrid_plugins.schema.subschemas import MAX_DEPTH, MAX_SUBSCHEMAS, _LimitExceeded

_speedups = pytest.importorskip("ongrid_plugins._speedups", reason="the compiled helpers are not built")
pytestmark = pytest.mark.filterwarnings("ignore:Possible nested set:FutureWarning")

COMPILED = metaschema._compiled_walk()
PYTHON = metaschema._python_fast_walk
RULE_TABLES = [metaschema._rules(stock, uri) for stock in (True, False) for uri in (True, False)]


def outcome(walk: Any, schema: object, rules: dict[str, Any], collect: bool) -> tuple[Any, ...]:
    """(verdict or error, ids of the nodes found in order) of one walk."""
    found: list[Any] | None = [] if collect else None
    try:
        answer: Any = walk(schema, rules, found) if collect else walk(schema, rules)
    except _LimitExceeded as exc:
        answer = ("limit", exc.message)
    except Exception as exc:
        answer = ("error", type(exc).__name__)
    return answer, None if found is None else [id(node) for node in found]


def test_the_checks_use_the_compiled_walk_where_it_is_built() -> None:
    assert COMPILED is not None
    assert metaschema._fast_walk is not PYTHON
    assert type(metaschema._fast_walk).__name__ == "builtin_function_or_method"


@DIFFERENTIAL
@given(SCHEMAS, st.sampled_from(range(len(RULE_TABLES))), st.booleans())
def test_the_compiled_walk_agrees_with_the_python_walk(schema: object, table: int, collect: bool) -> None:
    rules = RULE_TABLES[table]
    assert outcome(COMPILED, schema, rules, collect) == outcome(PYTHON, schema, rules, collect)


@given(JUNK)
def test_any_json_value_gets_the_same_verdict(value: object) -> None:
    for rules in RULE_TABLES:
        assert outcome(COMPILED, value, rules, True) == outcome(PYTHON, value, rules, True)


class Odd:
    """Not a JSON type: the walk defers on it rather than judge it."""


HOSTILE = [
    ("a tuple where a list goes", {"type": ("string",), "required": ("a",), "enum": (1, 2)}),
    ("a non-JSON object as a subschema", {"properties": {"a": Odd()}, "items": Odd()}),
    (
        "an int subclass as a count",
        {"minLength": True, "maxItems": -1, "minItems": 2**70, "maxLength": -(2**70)},
    ),
    ("a str subclass as a keyword value", {"title": type("S", (str,), {})("x")}),
    ("non-str keys", {1: {"type": "x"}, None: 5, ("type",): "string", "type": "string"}),
    ("NaN and infinities", {"minimum": float("nan"), "multipleOf": float("inf"), "maximum": -float("inf")}),
    ("a float count", {"minLength": 3.0, "maxLength": 2.5, "minItems": float("nan")}),
    ("deep but allowed", {"items": {"items": {"items": {"type": "string", "default": "x"}}}, "default": 1}),
]


@pytest.mark.parametrize(("schema",), [(schema,) for _name, schema in HOSTILE], ids=[n for n, _s in HOSTILE])
def test_odd_values_get_the_same_verdict_and_nodes(schema: object) -> None:
    for rules in RULE_TABLES:
        for collect in (True, False):
            assert outcome(COMPILED, schema, rules, collect) == outcome(PYTHON, schema, rules, collect)


#: A keyword for each rule the compiled walk checks itself, and values of every shape.
INLINED = ["title", "type", "minLength", "properties", "items", "minimum", "enum", "required"]
SHAPES = [
    *("x", "string", "strin", -1, 0, 2**70, -(2**70), 1.5, 3.0, True, None, {}, {"a": 1}, Odd()),
    *([], ["string"], ["a", "b", "a"], ["a", 1], [f"p{i}" for i in range(40)], [*"abcdefghijklmnop", "a"]),
    ["a", type("S", (str,), {})("b")],
]


@pytest.mark.parametrize("keyword", INLINED)
def test_every_shape_under_every_inlined_rule_gets_the_same_verdict(keyword: str) -> None:
    for value in SHAPES:
        for rules in RULE_TABLES:
            schema = {keyword: value}
            assert outcome(COMPILED, schema, rules, True) == outcome(PYTHON, schema, rules, True), value


def nested(levels: int) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(levels):
        schema = {"items": schema}
    return schema


@pytest.mark.parametrize("levels", [MAX_DEPTH - 1, MAX_DEPTH, MAX_DEPTH + 1, 5 * MAX_DEPTH])
def test_the_depth_limit_is_the_same(levels: int) -> None:
    rules = RULE_TABLES[0]
    assert outcome(COMPILED, nested(levels), rules, True) == outcome(PYTHON, nested(levels), rules, True)


@pytest.mark.parametrize("count", [MAX_SUBSCHEMAS - 1, MAX_SUBSCHEMAS, MAX_SUBSCHEMAS + 1])
def test_the_size_limit_is_the_same(count: int) -> None:
    rules = RULE_TABLES[0]
    wide = {"properties": {f"p{i}": {"type": "string"} for i in range(count)}}
    listed = {"allOf": [{"default": i} for i in range(count)]}  # pushed by a rule called from C
    for schema in (wide, listed):
        assert outcome(COMPILED, schema, rules, True) == outcome(PYTHON, schema, rules, True)
    too_big = ("limit", f"schema has more than {MAX_SUBSCHEMAS} subschemas")
    assert outcome(COMPILED, wide, rules, False)[0] == (0 if count <= MAX_SUBSCHEMAS else too_big)


def test_one_node_shared_by_a_huge_allof_stops_at_the_limit() -> None:
    shared: dict[str, Any] = {"type": "string"}
    for _ in range(4):
        shared = {"allOf": [shared] * 50}
    assert outcome(COMPILED, shared, RULE_TABLES[0], False) == (
        ("limit", f"schema has more than {MAX_SUBSCHEMAS} subschemas"),
        None,
    )


class Mutating(str):
    """A key whose comparison empties the schema being walked."""

    target: ClassVar[dict[Any, Any]] = {}

    def __hash__(self) -> int:
        return hash("type")

    def __eq__(self, other: object) -> bool:
        Mutating.target.clear()
        return False


class Swapping(str):
    """A key whose comparison swaps a key met already for a new one: the size stays."""

    target: ClassVar[dict[Any, Any]] = {}

    def __hash__(self) -> int:
        return hash("type")

    def __eq__(self, other: object) -> bool:
        if "properties" in Swapping.target:
            del Swapping.target["properties"]
            Swapping.target["minLength"] = -1  # Python's iteration refuses the changed keys
        return False


def walk_fresh(walk: Any, make: Any, holder: Any) -> tuple[Any, int]:
    """(verdict or error, how many nodes found) of ``walk`` over a fresh schema from ``make``."""
    schema = holder.target = make()
    verdict, nodes = outcome(walk, schema, RULE_TABLES[0], True)
    return verdict, len(nodes or [])


def test_a_key_that_changes_the_schema_under_the_walk_is_met_as_python_meets_it() -> None:
    # A key that is not exactly a str hands the schema to the Python walk from the start.
    def mutating() -> dict[Any, Any]:
        return {Mutating("k"): 1, "properties": {"a": {"type": "string", "default": ""}}, "title": "x"}

    def swapping() -> dict[Any, Any]:
        return {"properties": {}, Swapping("k"): 1, "title": "x", "default": {}}

    for make, holder in ((mutating, Mutating), (swapping, Swapping)):
        assert walk_fresh(COMPILED, make, holder) == walk_fresh(PYTHON, make, holder)
        assert walk_fresh(COMPILED, make, holder)[0] == ("error", "RuntimeError")


def test_nodes_found_before_a_foreign_key_are_not_reported_twice() -> None:
    odd = type("S", (str,), {})
    schema = {
        "properties": {"a": {"type": "integer", "default": 1}},
        "allOf": [{odd("x"): 1, "default": 2}, {"items": {"default": 3}}],
        "default": {},
    }
    for rules in RULE_TABLES:
        compiled, python = outcome(COMPILED, schema, rules, True), outcome(PYTHON, schema, rules, True)
        assert compiled == python
        assert python[1] is not None and len(python[1]) == 4


def test_a_rule_that_raises_raises_out_of_the_walk() -> None:
    def broken(value: object, depth: int, stack: list[Any]) -> int:
        raise ZeroDivisionError("rule")

    rules = {**RULE_TABLES[0], "pattern": broken}
    with pytest.raises(ZeroDivisionError):
        COMPILED({"properties": {"a": {"pattern": "x"}}}, rules)


def test_the_walk_refuses_wrong_arguments() -> None:
    with pytest.raises(TypeError, match="rules a dict"):
        COMPILED({}, [])
    with pytest.raises(TypeError, match="defaults a list"):
        COMPILED({}, RULE_TABLES[0], ())
    with pytest.raises(TypeError, match="config is"):
        _speedups.schema_walker((1, 2))


def test_the_walk_keeps_no_reference() -> None:
    rules = RULE_TABLES[1]
    schemas = [
        {"properties": {"a": {"type": "string", "default": "x"}}, "allOf": [{"pattern": "a"}], "title": 5},
        nested(MAX_DEPTH + 3),
        {"patternProperties": {"(": {}}},
    ]
    for schema in schemas:  # warm up: caches, interned names
        outcome(COMPILED, schema, rules, True)
    gc.collect()
    before = sys.gettotalrefcount() if hasattr(sys, "gettotalrefcount") else None
    counts = [sys.getrefcount(schema) for schema in schemas]
    for _ in range(200):
        for schema in schemas:
            outcome(COMPILED, schema, rules, True)
    assert [sys.getrefcount(schema) for schema in schemas] == counts
    if before is not None:  # a debug build counts every reference
        gc.collect()
        assert sys.gettotalrefcount() - before < 50


# ------------------------------------------------------------------ the duplicate-key hook

UNIQUE = _speedups.unique_object
PY_UNIQUE = skill_json_parse._python_unique_object


def hook_outcome(hook: Any, pairs: list[tuple[Any, Any]]) -> object:
    try:
        return hook(pairs)
    except ValueError as exc:
        return ("ValueError", str(exc))


def test_manifests_are_parsed_with_the_compiled_hook() -> None:
    assert skill_json_parse._unique_object is UNIQUE


@given(st.lists(st.tuples(st.sampled_from(["a", "b", "é", "", "a b", '"q"']), JUNK), max_size=6))
def test_the_compiled_hook_builds_the_same_object_or_names_the_same_key(pairs: list[tuple[str, Any]]) -> None:
    compiled = hook_outcome(UNIQUE, pairs)
    assert compiled == hook_outcome(PY_UNIQUE, pairs)
    assert type(compiled) in (dict, tuple)


def test_a_repeated_key_in_a_manifest_is_named() -> None:
    text = '{"name": "a", "nested": {"x": 1, "y": 2, "x": 3}}'
    with pytest.raises(skill_json_parse.ManifestParseError, match=r'duplicate key "x" \(two parsers'):
        skill_json_parse.parse_manifest(text.encode(), "/skills/a/skill.json")
    assert skill_json_parse.parse_manifest(b'{"a": {"b": [1, {"c": null}]}}', "p") == json.loads(
        '{"a": {"b": [1, {"c": null}]}}'
    )


def test_the_first_key_repeated_is_the_one_named() -> None:
    pairs = [("a", 1), ("b", 2), ("c", 3), ("b", 4), ("a", 5)]
    assert hook_outcome(UNIQUE, pairs) == hook_outcome(PY_UNIQUE, pairs)
    assert hook_outcome(UNIQUE, pairs) == (
        "ValueError",
        'duplicate key "b" (two parsers could read two different manifests)',
    )


def test_the_hook_refuses_what_is_not_a_list_of_pairs() -> None:
    with pytest.raises(TypeError):
        UNIQUE(5)
    with pytest.raises((TypeError, ValueError)):
        UNIQUE([("a", 1, 2)])
