"""canonical_json calls the C encoder directly: the same text and the same errors as json.dumps.

The arguments' text (what a skill reads on stdin and a confirmation is bound to) and
every audit row's hash come from it, so a difference in one character is a broken
digest. Each case is checked against the plain ``JSONEncoder`` with the same options.
"""

from __future__ import annotations

import contextlib
import json
import math
import random
import struct
import sys
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

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
        "\t{}",
        "\r\n[1]\r\n",
        "{}\n",
        "\x0b{}",  # not JSON whitespace
        "{}\x0b",
        "\u00a0{}",
        "{} x",
        "1 2",
        "\n",
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


# ---------------------------------------------------------------- the compiled encoder


def compiled_with_spy() -> tuple[Any, list[Any]]:
    """``_speedups``' encoder over this module's Python one, and the values it handed over."""
    handed: list[Any] = []

    def fallback(value: Any) -> str:
        handed.append(value)
        return base._fast_canonical()(value)

    return _speedups.canonical_encoder(fallback), handed


_speedups: Any = None
with contextlib.suppress(ImportError):  # not built: the first test below fails and says so
    from ongrid_plugins import _speedups


def test_the_compiled_encoder_is_built_and_in_use() -> None:
    # pip install (the README's test command) compiles it; a build that failed shows here.
    assert _speedups is not None, "ongrid_plugins/_speedups.c did not build"
    assert type(canonical_json) is type(len)  # a builtin: _speedups' function, not Python's


class Level(int):
    pass


class Ratio(float):
    pass


class Name(str):
    pass


class Ordered(dict):  # type: ignore[type-arg]
    def items(self) -> Any:
        return reversed(list(super().items()))


KNOWN: list[Any] = [
    None,
    True,
    False,
    0,
    -(2**63),
    2**63,
    -(2**64) - 1,
    10**200,
    Level(7),
    1.5,
    -0.0,
    5e-324,
    1e300,
    0.1 + 0.2,
    Ratio(2.5),
    "",
    'quote " backslash \\ slash / \b\f\n\r\t \x00\x01\x1f \x7f',
    "é ü 中文 😀 \u2028\u2029 \ufeff",
    Name("a str subclass"),
    Outcome.OK,
    [],
    (),
    {},
    [1, [2, [3, (4, {"x": ()})]]],
    {"b": 1, "a": 2, "B": 3, "é": 4, "": 5, "a\x00": 6, "😀": 7, "\u2028": 8},
    {"n": {"n": {"n": {}}}},
    {"k" * 5000: ["v" * 5000] * 3},
]


@pytest.mark.parametrize("value", KNOWN, ids=[f"known-{i}" for i in range(len(KNOWN))])
def test_the_compiled_encoder_writes_what_it_knows_as_json_does_without_help(value: Any) -> None:
    encode, handed = compiled_with_spy()
    assert encode(value) == plain(value)
    assert encode([value, {"v": value}]) == plain([value, {"v": value}])
    assert handed == []


UNKNOWN: list[Any] = [
    {1: "int key"},
    {"a": 1, 2: "mixed keys"},
    {None: 1, True: 2},
    {2.5: "float key"},
    {Name("k"): "str subclass key"},
    Ordered(b=1, a=2),
    [1, {"x": Ordered(z=1)}],
    "a lone \ud800 surrogate",
    {"lone": "\udfff"},
    deep(65),
    [object(), 1],
    {"set": {1}},
    math.nan,
    [1, math.inf],
    b"bytes",
    {"x": 1j},
]


def microsecond_floats() -> list[float]:
    """Floats of whole microseconds over the range the encoder writes itself, its edges and
    past them, their neighbours (not whole microseconds), negatives, and random doubles."""
    rnd = random.Random(20261203)
    top = 2**32 * 10**6
    whole = [1, 99, 100, 101, 999_999, 1_000_000, 1_500_000, 10**12, top - 1, top, top + 1, 2**53 - 1]
    whole += [rnd.randrange(1, top) for _ in range(20_000)]
    whole += [rnd.randrange(top, 4 * top) for _ in range(5_000)]  # past the range: dtoa's
    whole += [rnd.randrange(1, 10**6) * 10**e for e in range(0, 10) for _ in range(200)]
    values = [k / 1e6 for k in whole]
    values += [math.nextafter(v, direction) for v in values[:5_000] for direction in (0.0, math.inf)]
    values += [-v for v in values[:5_000]]
    values += [struct.unpack("<d", struct.pack("<Q", rnd.getrandbits(64)))[0] for _ in range(5_000)]
    return [v for v in values if math.isfinite(v)]


def test_a_float_of_whole_microseconds_is_written_as_repr_writes_it() -> None:
    """Times and durations are whole microseconds: the compiled encoder writes those itself."""
    encode, handed = compiled_with_spy()
    values = microsecond_floats()
    assert [encode(v) for v in values] == [repr(v) for v in values]
    assert encode(values[:200]) == plain(values[:200])
    assert handed == []


@pytest.mark.parametrize("value", UNKNOWN, ids=[f"unknown-{i}" for i in range(len(UNKNOWN))])
def test_the_compiled_encoder_hands_what_it_does_not_know_to_the_python_one(value: Any) -> None:
    encode, handed = compiled_with_spy()

    def outcome(fn: Any) -> Any:
        try:
            return ("text", fn(value))
        except (TypeError, ValueError, RecursionError) as exc:
            return (type(exc), str(exc))

    assert outcome(encode) == outcome(plain)
    assert len(handed) == 1 and handed[0] is value  # the whole value, once


@pytest.mark.parametrize(
    "text",
    [
        "".join(map(chr, range(0x80))) + "\u0080\u07ff\u0800\uffff\U00010000\U0010ffff",
        "\x01" * 100_000,  # every byte escaped long: six times the text
        '"\\' * 100_000,  # every byte escaped short
        "é" * 100_000 + "\n",
    ],
    ids=["every-ascii-and-utf8-lengths", "all-long-escapes", "all-short-escapes", "non-ascii"],
)
def test_the_compiled_encoder_escapes_every_character_as_json_does(text: str) -> None:
    encode, handed = compiled_with_spy()
    assert encode(text) == plain(text)
    assert encode({text: [text]}) == plain({text: [text]})
    assert handed == []


def test_a_long_string_takes_about_its_own_size_to_encode_not_six_times_it() -> None:
    # Room for the worst case (every byte a \u00xx escape) would be 60 MB for this 10 MB
    # argument; the encoder counts the escapes first and takes what the text needs: its
    # buffer, then the str made from it.
    import tracemalloc

    text = "x" * 10_000_000
    encode, _handed = compiled_with_spy()
    tracemalloc.start()
    try:
        encoded = encode(text)
        _now, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(encoded) == len(text) + 2
    assert peak < 2.5 * len(text)


def test_the_compiled_encoder_nests_to_its_depth_then_hands_over() -> None:
    encode, handed = compiled_with_spy()
    assert encode(deep(64)) == plain(deep(64))  # 64 lists around an empty one: depth 64
    assert handed == []
    assert encode(deep(65)) == plain(deep(65))
    assert len(handed) == 1


def test_an_int_too_long_to_print_fails_as_json_dumps_fails() -> None:
    huge = 10 ** (sys.get_int_max_str_digits() + 1)
    with pytest.raises(ValueError, match="Exceeds the limit"):
        plain([huge])
    with pytest.raises(ValueError, match="Exceeds the limit"):
        canonical_json([huge])


def test_canonical_encoder_refuses_a_fallback_it_cannot_call() -> None:
    with pytest.raises(TypeError, match="fallback must be callable"):
        _speedups.canonical_encoder("not callable")


# Values as JSON can hold them, and some it cannot: both encoders must agree with json.
_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(),
    st.sampled_from([Outcome.OK, Level(3), Ratio(0.5), Name("n"), object(), b"x"]),
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

    expected = outcome(plain)
    assert outcome(canonical_json) == expected
    assert outcome(base._fast_canonical()) == expected
