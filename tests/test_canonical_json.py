"""canonical_json calls the C encoder directly: the same text and the same errors as json.dumps.

The arguments' text (what a skill reads on stdin and a confirmation is bound to) and
every audit row's hash come from it, so a difference in one character is a broken
digest. Each case is checked against the plain ``JSONEncoder`` with the same options.
"""

from __future__ import annotations

import json
import math
import sys
from typing import Any

import pytest

from ongrid_plugins.models import Outcome, base, canonical_json


def plain(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


class Weird:
    pass


def deep(levels: int) -> Any:
    value: Any = []
    for _ in range(levels):
        value = [value]
    return value


def test_the_fast_encoder_is_the_one_in_use() -> None:
    assert canonical_json is not base._plain


@pytest.mark.parametrize(
    "value",
    [
        {"b": 1, "a": [1.5, -0.0, 2**70, None, True, False], "é": '\u2028\n"\\', "": {}},
        "a lone \ud800 surrogate",
        [1e308, 5e-324, 0.1, -1, 0],
        {"1": "x", "10": "y", "2": "z"},
        {"out": Outcome.OK, "list": (1, 2)},
        [[[[]]]],
        {"k" * 10_000: "v" * 100_000},
    ],
)
def test_the_text_is_json_dumps_text(value: Any) -> None:
    assert canonical_json(value) == plain(value)


@pytest.mark.parametrize(
    ("value", "error", "message"),
    [
        ({"x": math.nan}, ValueError, "Out of range float values are not JSON compliant"),
        ([math.inf], ValueError, "Out of range float values are not JSON compliant"),
        ({"x": Weird()}, TypeError, "Object of type Weird is not JSON serializable"),
        ({"x": {1, 2}}, TypeError, "Object of type set is not JSON serializable"),
        ({1: "a", "b": 2}, TypeError, "not supported between instances"),
    ],
)
def test_what_is_not_json_fails_as_json_dumps_fails(value: Any, error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=message):
        plain(value)
    with pytest.raises(error, match=message):
        canonical_json(value)


def test_a_cycle_is_a_circular_reference_not_a_recursion_error() -> None:
    cycle: dict[str, Any] = {"a": 1}
    cycle["self"] = [cycle]
    with pytest.raises(ValueError, match="Circular reference detected"):
        canonical_json(cycle)


def test_nesting_deeper_than_the_recursion_limit_fails_as_json_dumps_does() -> None:
    value = deep(sys.getrecursionlimit() + 100)
    with pytest.raises(RecursionError):
        plain(value)
    with pytest.raises(RecursionError):
        canonical_json(value)
    shallow = deep(200)
    assert canonical_json(shallow) == plain(shallow)


def test_a_failed_encoding_leaves_nothing_behind_for_the_next_one() -> None:
    shared = {"n": 1}
    with pytest.raises(TypeError):
        canonical_json([shared, Weird()])
    assert canonical_json([shared, shared]) == '[{"n":1},{"n":1}]'  # not taken for a cycle


@pytest.mark.parametrize(
    "text",
    [
        '{"a": [1, 2.5, null, true], "b": {"c": "\\u00e9"}}',
        "  {}  ",
        "\n[1]\t",
        "",
        "   ",
        '{"a": 1} {"b": 2}',
        '{"a": 1',
        "NaN",
        "[1, 2,]",
        '"just a string"',
        "12 ",
    ],
)
def test_decode_json_gives_what_the_decoder_gives_value_and_error(text: str) -> None:
    decoder = json.JSONDecoder()

    def outcome(parse: Any) -> Any:
        try:
            return ("value", parse(text))
        except json.JSONDecodeError as exc:
            return ("error", str(exc), exc.pos)

    assert outcome(lambda t: base.decode_json(decoder.scan_once, t)) == outcome(decoder.decode)  # type: ignore[attr-defined]
