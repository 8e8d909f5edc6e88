"""RE2 for schema regexes: time linear in the input, whatever the pattern.

JSON Schema says patterns are ECMA-262 regexes; jsonschema runs them with Python's
``re``.  Both backtrack, so ``^(a+)+$`` against ``"a" * 30 + "!"`` runs for ever.  RE2
never backtracks: it refuses the constructs that need it (backreferences, lookaround,
possessive and atomic groups) and matches the rest in time linear in the input.

Two spellings common in schemas that RE2 lacks are rewritten, with the same meaning:
``\\uXXXX`` becomes ``\\x{XXXX}`` and ``\\Z`` (end of text) becomes ``\\z``.  What
differs from Python's ``re`` is deliberate and documented in ``docs/security.md``:
``$`` matches only at the very end (as in ECMA-262, not before a final newline), and
``\\d``, ``\\w``, ``\\s`` and ``\\b`` are ASCII (as in ECMA-262 for the first three).
"""

from __future__ import annotations

import functools
from typing import Any, Final

__all__ = ["RegexError", "compile_regex", "pattern_problem", "regex_search"]

#: Longest pattern accepted (characters); RE2's own memory budget bounds the program.
MAX_PATTERN: Final = 10_000
_HEX: Final = frozenset("0123456789abcdefABCDEF")


class RegexError(ValueError):
    """A pattern RE2 cannot compile; the message says why."""


@functools.cache
def _engine() -> tuple[Any, Any]:
    """The ``re2`` module and its options, imported on first use (2-3 ms)."""
    import re2

    options = re2.Options()
    options.log_errors = False  # RE2 would print every refused pattern on stderr
    options.never_capture = True  # only "does it match" is ever asked
    return re2, options


def translate(pattern: str) -> str:
    """``pattern`` with ``\\uXXXX`` and ``\\Z`` in RE2 spelling; everything else as is."""
    if "\\" not in pattern:
        return pattern
    out: list[str] = []
    i, size = 0, len(pattern)
    while i < size:
        char = pattern[i]
        if char != "\\" or i + 1 >= size:
            out.append(char)
            i += 1
            continue
        escaped = pattern[i + 1]
        if escaped == "u" and i + 6 <= size and all(c in _HEX for c in pattern[i + 2 : i + 6]):
            out.append("\\x{" + pattern[i + 2 : i + 6] + "}")
            i += 6
        elif escaped == "Z":
            out.append("\\z")
            i += 2
        else:
            out.append(pattern[i : i + 2])
            i += 2
    return "".join(out)


def compile_regex(pattern: str) -> Any:
    """The compiled RE2 program for ``pattern``; raises :class:`RegexError`."""
    if len(pattern) > MAX_PATTERN:
        raise RegexError(f"pattern is {len(pattern)} characters long (at most {MAX_PATTERN})")
    re2, options = _engine()
    try:
        return re2.compile(translate(pattern), options=options)
    except re2.error as error:
        reason = error.args[0] if error.args else error
        if isinstance(reason, bytes):
            reason = reason.decode("utf-8", "replace")
        raise RegexError(str(reason)) from None
    except (TypeError, UnicodeError) as error:  # a lone surrogate in the pattern
        raise RegexError(f"pattern is not valid Unicode text: {error}") from None


def pattern_problem(pattern: object) -> str | None:
    """None if RE2 compiles ``pattern``, else why not (a sentence naming the pattern)."""
    if not isinstance(pattern, str):
        return f"pattern must be a string, got {type(pattern).__name__}"
    try:
        compile_regex(pattern)
    except RegexError as error:
        return f"pattern {_show(pattern)} is not supported: {error} (linear-time RE2 syntax is required)"
    return None


def regex_search(pattern: str, text: str) -> bool:
    """True if ``pattern`` matches somewhere in ``text`` (``re.search`` semantics, RE2 time).

    Raises :class:`RegexError` for a pattern RE2 cannot compile.  A lone surrogate in
    ``text`` (not encodable as UTF-8) is matched as U+FFFD.
    """
    program = compile_regex(pattern)
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError:
        data = text.encode("utf-8", "surrogatepass").decode("utf-8", "replace").encode("utf-8")
    return program.search(data.decode("utf-8")) is not None


def _show(pattern: str) -> str:
    shown = repr(pattern)
    return shown if len(shown) <= 80 else shown[:77] + "..."
