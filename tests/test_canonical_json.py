"""canonical_json: the stdlib encoder with fixed options, and the exact bytes digests cover.

The arguments' text (what a skill reads on stdin and a confirmation is bound to) and
every audit row's hash come from it, so a difference in one character is a broken
digest. The pinned encodings below were taken from the implementation before it was
reduced to the stdlib encoder: they must never change without a migration note.
"""

from __future__ import annotations

import hashlib
import json
import math
import sys
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ongrid_plugins.models import Outcome, args_digest, canonical_json, sha256_hex


def plain(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


class Weird:
    pass


def deep(levels: int) -> Any:
    value: Any = []
    for _ in range(levels):
        value = [value]
    return value


PINNED: list[tuple[Any, bytes]] = [
    (
        {"b": 1, "a": [1.5, -0.0, 2**70, None, True, False], "\u00e9": '\u2028\n"\\', "": {}},
        b'{"":{},"a":[1.5,-0.0,1180591620717411303424,null,true,false],"b":1,'
        b'"\xc3\xa9":"\xe2\x80\xa8\\n\\"\\\\"}',
    ),
    (
        "caf\u00e9 \u2603 \U0001f600 \x01\x1f\x7f",
        b'"caf\xc3\xa9 \xe2\x98\x83 \xf0\x9f\x98\x80 \\u0001\\u001f\x7f"',
    ),
    (
        [1e308, 5e-324, 0.1, -1, 0, 1e16, 123456789.125, 1.0, 1700000000.123456],
        b"[1e+308,5e-324,0.1,-1,0,1e+16,123456789.125,1.0,1700000000.123456]",
    ),
    (
        {"1": "x", "10": "y", "2": "z", "B": 0, "a": 0, "\u00e9": 0, "z": 0},
        b'{"1":"x","10":"y","2":"z","B":0,"a":0,"z":0,"\xc3\xa9":0}',
    ),
    (
        {"out": Outcome.OK, "list": (1, 2), "nested": {"x": [{"y": {"z": []}}]}},
        b'{"list":[1,2],"nested":{"x":[{"y":{"z":[]}}]},"out":"ok"}',
    ),
    (
        [2**64, -(2**63), 10**40],
        b"[18446744073709551616,-9223372036854775808,10000000000000000000000000000000000000000]",
    ),
]


@pytest.mark.parametrize(("value", "expected"), PINNED, ids=[f"pinned-{i}" for i in range(len(PINNED))])
def test_the_canonical_bytes_are_the_ones_every_digest_was_made_over(value: Any, expected: bytes) -> None:
    assert canonical_json(value).encode("utf-8") == expected


def test_argument_digests_are_the_ones_recorded_before() -> None:
    assert args_digest("disk_usage", {"path": "/tmp", "depth": 2}) == (
        "a17c271735a2a2bd9e93811ac0de5abc0230af5ae2bb938f5a5326e79d8109af"
    )
    assert args_digest("x", {}) == "4719339d5da5568413ffdcbcd9872ceca7a573f3004764cffe947a728997be3d"


def test_digests_are_hashlibs_sha256_of_the_utf8_text() -> None:
    for data in ("", "abc", "caf\u00e9 \u2603" * 9):
        assert sha256_hex(data) == hashlib.sha256(data.encode("utf-8")).hexdigest()
    assert sha256_hex(bytes(range(256))) == hashlib.sha256(bytes(range(256))).hexdigest()


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


# Values as JSON can hold them, and some it cannot: the text or the error json.dumps gives.
_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(),
    st.sampled_from([Outcome.OK, object(), b"x"]),
)
_values = st.recursive(
    _scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=5),
        st.lists(inner, max_size=5).map(tuple),
        st.dictionaries(st.text(max_size=8), inner, max_size=5),
        st.dictionaries(st.one_of(st.integers(), st.text(max_size=3)), inner, max_size=3),
    ),
    max_leaves=30,
)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_values)
def test_any_value_gets_json_dumps_text_or_its_error(value: Any) -> None:
    def outcome(fn: Any) -> Any:
        try:
            return ("text", fn(value))
        except (TypeError, ValueError) as exc:
            return (type(exc), str(exc))

    assert outcome(canonical_json) == outcome(plain)


def test_an_int_too_long_to_print_fails_as_json_dumps_fails() -> None:
    huge = 10 ** (sys.get_int_max_str_digits() + 1)
    with pytest.raises(ValueError, match="Exceeds the limit"):
        plain([huge])
    with pytest.raises(ValueError, match="Exceeds the limit"):
        canonical_json([huge])
