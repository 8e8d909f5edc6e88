"""User values echoed in messages are cut to a readable length and cannot write control characters."""

from __future__ import annotations

import pytest

from ongrid_plugins.core.echo import MAX_ECHO, echo, printable


def test_a_short_value_is_echoed_exactly_as_repr_quotes_it() -> None:
    assert echo("greet") == "'greet'"
    assert echo("it's") == '"it\'s"'
    assert echo("a" * MAX_ECHO) == repr("a" * MAX_ECHO)


def test_a_long_value_is_cut_and_says_how_long_it_was() -> None:
    assert echo("a" * 100_000) == "'" + "a" * 80 + "'…(100000 characters)"
    assert echo("b" * 81) == "'" + "b" * 80 + "'…(81 characters)"
    assert echo("abcdef", limit=3) == "'abc'…(6 characters)"


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("run\x00.sh", "run\\x00.sh"),
        ("a\nb\rc\td", "a\\x0ab\\x0dc\\x09d"),
        ("del\x7f c1\x85", "del\\x7f c1\\x85"),
        ("line\u2028sep\u2029", "line\\u2028sep\\u2029"),
        ("bidi\u202eexe.txt\u2066", "bidi\\u202eexe.txt\\u2066"),
        ("/plain/path é ü 日本", "/plain/path é ü 日本"),
    ],
)
def test_printable_escapes_control_characters_and_keeps_the_rest(raw: str, shown: str) -> None:
    assert printable(raw) == shown


def test_printable_cuts_before_escaping_when_given_a_limit() -> None:
    assert printable("x" * 10, limit=4) == "xxxx…(10 characters)"
    assert printable("\x00" * 3, limit=2) == "\\x00\\x00…(3 characters)"
    assert printable("short", limit=80) == "short"
