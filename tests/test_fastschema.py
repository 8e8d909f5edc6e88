"""ongrid_plugins.schema.safe.fast: the compiled check never says "valid" where jsonschema does not.

The oracle is the validator every call uses (:func:`safe_validator`: draft 2020-12, RE2
patterns, format checks on). Random schemas and values (hypothesis), every schema of the
repository's manifests and docs and of the benchmark tree generator, and hand-picked
edge cases are all compared; the compiled check must also say "valid" for the common
valid arguments, or it would be no faster.
"""

from __future__ import annotations

import ast
import json
import random
import re
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from ongrid_plugins.schema.arguments import COMPILED, check_arguments
from ongrid_plugins.schema.safe import fast, safe_validator
from ongrid_plugins.schema.safe.fast import compile_accepts

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "benchmarks" / "baselines"))

import gen_tree  # noqa: E402


def _literal(text: str, start: int) -> Any:
    """The Python dict literal starting at ``start`` (braces balanced, outside strings), or None."""
    if not text.startswith("{", start):
        return None
    depth, quote, i = 0, "", start
    while i < len(text):
        char = text[i]
        if quote:
            if char == "\\":
                i += 1
            elif char == quote:
                quote = ""
        elif char in "\"'":
            quote = char
        elif char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
            if depth == 0:
                try:
                    return ast.literal_eval(text[start : i + 1])
                except (ValueError, SyntaxError, RecursionError):
                    return None
        i += 1
    return None


def jsonschema_valid(schema: object, instance: object) -> bool:
    try:
        return bool(safe_validator(schema).is_valid(instance))  # type: ignore[arg-type]
    except Exception:  # a schema jsonschema cannot apply: never valid for the call path
        return False


def agrees(schema: object, instance: object) -> bool:
    """Checks the one direction that matters and returns the compiled verdict."""
    vouched = compile_accepts(schema)(instance)
    if vouched:
        assert jsonschema_valid(schema, instance), (schema, instance)
    return vouched


# ------------------------------------------------------------------ random schemas

NAMES = st.sampled_from(["a", "b", "type", ""])
SCALARS = st.sampled_from([0, 1, 1.0, -0.0, 2.5, -1, True, False, None, "", "a", "1", "ab😀", 10**20, 1e300])
NUMBERS = st.integers(-3, 10) | st.sampled_from([0.0, 1.0, 2.5, -1.5, 1e300, 0.1, 10**20, True, "1"])
COUNTS = st.integers(0, 4) | st.sampled_from([0.0, 2.0, 1.5, -1, True, None])
VALUES = st.recursive(
    SCALARS | st.floats(allow_nan=False) | st.integers() | st.text(alphabet="ab1😀\n\u0301(", max_size=4),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(NAMES, inner, max_size=3),
    max_leaves=6,
)
TYPES = ["array", "boolean", "integer", "null", "number", "object", "string"]


def keywords(children: st.SearchStrategy[Any]) -> dict[str, st.SearchStrategy[Any]]:
    return {
        "type": st.sampled_from([*TYPES, "foo"]) | st.lists(st.sampled_from([*TYPES, "foo"]), max_size=3),
        "enum": st.lists(SCALARS | st.lists(SCALARS, max_size=1) | st.just(float("nan")), max_size=4),
        "const": SCALARS | st.lists(SCALARS, max_size=2),
        "minimum": NUMBERS,
        "maximum": NUMBERS,
        "exclusiveMinimum": NUMBERS,
        "exclusiveMaximum": NUMBERS,
        "multipleOf": st.sampled_from([1, 2, 3, 0.5, 0.1, 0.01, 1e-300, 7.5, 1e308, 0, -1, True]),
        "minLength": COUNTS,
        "maxLength": COUNTS,
        "minItems": COUNTS,
        "maxItems": COUNTS,
        "minProperties": COUNTS,
        "maxProperties": COUNTS,
        "pattern": st.sampled_from(["a", "^a$", "1", "^$", "😀", "\\d", "[", "b|^$", "(?=a)", 5]),
        "format": st.sampled_from(["regex", "email", "ipv4", "date", "unknown", 5]),
        "uniqueItems": st.booleans() | st.just(1),
        "items": children,
        "prefixItems": st.lists(children, min_size=1, max_size=2),
        "properties": st.dictionaries(NAMES, children, max_size=3),
        "patternProperties": st.dictionaries(st.sampled_from(["^a", "b"]), children, max_size=1),
        "additionalProperties": children,
        "required": st.lists(NAMES, max_size=3) | st.sampled_from(["a", [1], {}]),
        "description": st.text(max_size=3),
        "default": SCALARS,
        "title": st.just("t"),
        "not": children,
        "allOf": st.lists(children, min_size=1, max_size=2),
        "$ref": st.just("#/$defs/x"),
        "x-vendor": SCALARS,
    }


UNMODELLED = ("prefixItems", "patternProperties", "not", "allOf", "$ref", "x-vendor")


def nodes(children: st.SearchStrategy[Any], only_modelled: bool = False) -> st.SearchStrategy[dict[str, Any]]:
    table = keywords(children)
    if only_modelled:
        table = {key: value for key, value in table.items() if key not in UNMODELLED}

    @st.composite
    def node(draw: st.DrawFn) -> dict[str, Any]:
        keys = draw(st.lists(st.sampled_from(sorted(table)), max_size=4, unique=True))
        return {key: draw(table[key]) for key in keys}

    return node()


SCHEMAS = st.recursive(st.booleans() | nodes(st.just(True)), nodes, max_leaves=4)
DIFFERENTIAL = settings(
    max_examples=3000, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)


MODELLED_SCHEMAS = st.recursive(
    st.booleans() | nodes(st.just(True), True), lambda inner: nodes(inner, True), max_leaves=4
)


@DIFFERENTIAL
@given(schema=MODELLED_SCHEMAS, instance=VALUES)
def test_the_compiled_check_agrees_on_the_keywords_it_models(schema: Any, instance: Any) -> None:
    event(f"vouched: {agrees(schema, instance)}")


@DIFFERENTIAL
@given(schema=SCHEMAS, instance=VALUES)
def test_the_compiled_check_never_vouches_for_what_jsonschema_rejects(schema: Any, instance: Any) -> None:
    schema = {"$defs": {"x": {"type": "integer"}}, **schema} if isinstance(schema, dict) else schema
    event(f"vouched: {agrees(schema, instance)}")


# ------------------------------------------------------------------ real schemas


def repository_schemas() -> list[tuple[str, Any]]:
    """Every skill.json schema in the repository, and every ``"schema": {...}`` written
    as JSON text in the docs, the README and the tests."""
    found: list[tuple[str, Any]] = []
    for path in sorted(REPO.glob("**/skill.json")):
        if ".venv" in path.parts:
            continue
        schema = json.loads(path.read_text(encoding="utf-8")).get("schema")
        if schema is not None:
            found.append((str(path.relative_to(REPO)), schema))
    decoder = json.JSONDecoder()
    texts = [
        REPO / "README.md",
        *sorted((REPO / "docs").glob("*.md")),
        *sorted((REPO / "tests").glob("test_*.py")),
    ]
    for path in texts:
        text = path.read_text(encoding="utf-8")
        for match in re.finditer(r'(?:"schema":|\bschema=|SCHEMA = )\s*', text):
            try:
                schema, _end = decoder.raw_decode(text, match.end())
            except ValueError:  # Python, not JSON: a dict literal, if it is one
                schema = _literal(text, match.end())
            if isinstance(schema, dict) and schema:
                found.append((f"{path.name}@{match.start()}", schema))
    return found


def generated_schemas() -> list[tuple[str, Any]]:
    rng = random.Random(14)
    return [
        (f"gen_tree#{i}", gen_tree.make_manifest(rng, "probe_port", "network")["schema"]) for i in range(40)
    ]


def candidate_values(schema: dict[str, Any], rng: random.Random) -> list[Any]:
    """Valid-looking arguments built from the schema, then each mutated a little."""
    properties = schema.get("properties", {}) if isinstance(schema, dict) else {}
    samples = {
        "string": ["x", "", "a" * 300, "(", "^[a-z]+$", "😀"],
        "integer": [0, 1, 3, 2000, 65535, 70000, -1, 1.0, 2.5],
        "number": [0, 0.5, -1.0, 10**20],
        "boolean": [True, False, 0],
        "array": [[], ["a"], ["a"] * 40, [1]],
        "object": [{}, {"k": "v"}, {"k": 1}],
    }
    values: list[Any] = [{}, None, [], "x"]
    for _ in range(60):
        args: dict[str, Any] = {}
        for key, sub in properties.items():
            kind = sub.get("type") if isinstance(sub, dict) else None
            pool = samples.get(kind, [None]) if isinstance(kind, str) else [None, 1, "x"]
            pool = [*pool, *sub.get("enum", []), *([sub["default"]] if "default" in sub else [])]
            if rng.random() < 0.8:
                args[key] = rng.choice(pool)
        if rng.random() < 0.1:
            args["unexpected"] = 1
        values.append(args)
    return values


REAL = repository_schemas() + generated_schemas()


@pytest.mark.parametrize(("where", "schema"), REAL, ids=[where for where, _ in REAL])
def test_real_schemas_agree_with_jsonschema_and_are_fast_for_valid_arguments(where: str, schema: Any) -> None:
    rng = random.Random(where)
    vouched = valid = 0
    for value in candidate_values(schema, rng):
        fast = agrees(schema, value)
        vouched += fast
        valid += jsonschema_valid(schema, value)
    if modelled(schema):
        assert vouched == valid, (
            f"{where}: the compiled check left {valid - vouched} valid values to jsonschema"
        )


def modelled(schema: Any) -> bool:
    """Whether every keyword of ``schema`` is one the compiled check models."""
    if isinstance(schema, bool):
        return True
    if not isinstance(schema, dict) or "patternProperties" in schema or "prefixItems" in schema:
        return False
    known = {*fast._BUILDERS, *fast._OBJECT_KEYWORDS, *fast._ANNOTATIONS}
    if any(key not in known for key in schema) or schema.get("format", "regex") != "regex":
        return False
    children = [*schema.get("properties", {}).values(), schema.get("items", True)]
    children.append(schema.get("additionalProperties", True))
    return all(modelled(child) for child in children)


def test_there_are_real_schemas_to_compare() -> None:
    assert len(repository_schemas()) >= 30
    assert sum(modelled(schema) for _where, schema in REAL) >= 60
    assert len(REAL) >= 40


# ------------------------------------------------------------------ edge cases

EDGES: list[tuple[Any, Any, bool]] = [
    # (schema, instance, what jsonschema says)
    ({"type": "integer"}, 1.0, True),
    ({"type": "integer"}, True, False),
    ({"type": "number"}, False, False),
    ({"enum": [1]}, True, False),
    ({"enum": [1]}, 1.0, True),
    ({"enum": [[1]]}, [1], True),
    ({"const": False}, 0, False),
    ({"minimum": 1}, "0", True),
    ({"maximum": 1}, True, True),
    ({"minLength": 2}, "😀😀", True),
    ({"maxLength": 1}, "e\u0301", False),
    ({"uniqueItems": True}, [1, 1.0], False),
    ({"uniqueItems": True}, [1, True], True),
    ({"multipleOf": 0.1}, 0.3, False),
    ({"multipleOf": 0.01}, 0.07, False),
    ({"multipleOf": 2}, 4.0, True),
    ({"required": ["a"]}, [], True),
    ({"properties": {"a": False}}, {"b": 1}, True),
    ({"properties": {"a": False}}, {"a": 1}, False),
    ({"additionalProperties": False, "properties": {"a": True}}, {"a": 1, "b": 2}, False),
    ({"additionalProperties": {"type": "string"}}, {"a": "x"}, True),
    ({"format": "regex"}, "(", False),
    ({"format": "regex"}, "(?=a)", False),
    ({"format": "regex"}, "a+", True),
    ({"pattern": "^\\d+$"}, "12", True),
    ({"pattern": "^\\d+$"}, "١٢", False),  # RE2's \d is ASCII, as ECMA-262's
    ({"items": False}, [], True),
    ({"items": {"type": "string"}}, ["a", 1], False),
    ({"maxProperties": 1}, {"a": 1, "b": 2}, False),
    (True, {"anything": 1}, True),
    (False, {}, False),
]


@pytest.mark.parametrize(("schema", "instance", "expected"), EDGES)
def test_edge_cases_match_jsonschema(schema: Any, instance: Any, expected: bool) -> None:
    assert jsonschema_valid(schema, instance) is expected
    assert agrees(schema, instance) in ((True, False) if expected else (False,))


@pytest.mark.parametrize(
    "schema",
    [
        {"$ref": "#/$defs/a", "$defs": {"a": {"type": "string"}}},
        {"type": "object", "properties": {"when": {"type": "string", "format": "date"}}},
        {"allOf": [{"type": "string"}]},
        {"type": "object", "patternProperties": {"^a": {"type": "string"}}},
        {"type": "array", "prefixItems": [{"type": "string"}]},
        {"type": "string", "x-unknown": 1},
    ],
)
def test_what_is_not_modelled_goes_to_jsonschema(schema: Any) -> None:
    value = {"when": "not a date"} if "properties" in schema else "x"
    assert compile_accepts(schema)(value) is False


def test_the_call_path_uses_the_compiled_check_and_keeps_jsonschema_messages() -> None:
    from ongrid_plugins.models import Tool, ToolClass

    schema = {
        "type": "object",
        "properties": dict(gen_tree.PROP_POOL[:2]),
        "required": ["target"],
        "additionalProperties": False,
    }
    tool = Tool(
        name="probe",
        description="probe a port",
        schema=schema,
        tool_class=ToolClass.SAFE,
        skill="probe",
        source="test",
        kind="subprocess",
    )
    data, text, errors = check_arguments(tool, {"target": "example.com", "port": 22})
    assert errors == [] and text == '{"port":22,"target":"example.com"}'
    compiled = COMPILED.get(id(tool))
    assert compiled is not None and compiled.accepts(data) is True
    _data, _text, errors = check_arguments(tool, {"port": 0, "extra": 1})
    assert errors == [
        ("$", "'target' is a required property"),
        ("$", "Additional properties are not allowed ('extra' was unexpected)"),
        ("$.port", "0 is less than the minimum of 1"),
    ]
