"""User values echoed back in messages and log lines: short, and unable to forge text.

A name, a path or a number given by a user (or read from a manifest) ends up in an
error or a log line. Echoed whole, a 100,000-character name buries the message, and
a NUL or a newline in a path writes a raw control character into the log (or a line
that looks like another one). Every echo goes through one of these two functions.

Imports only the standard library.
"""

from __future__ import annotations

import re
import sys

__all__ = ["MAX_ECHO", "UNSAFE_CODES", "echo", "number_too_long", "printable", "utf8_encodable"]

#: How many characters of a user value a message shows before it says how long the value was.
MAX_ECHO = 80

#: What a terminal or a log reader may take for something other than text: C0 and C1
#: controls and DEL (commands to a terminal), the line and paragraph separators, and the
#: bidirectional controls (which make a line read differently from what it holds).
#: :func:`~ongrid_plugins.commands.output.printable` escapes the same code points.
UNSAFE_CODES: tuple[int, ...] = (
    *range(0x20), *range(0x7F, 0xA0), 0x061C, 0x200E, 0x200F, 0x2028, 0x2029,
    *range(0x202A, 0x202F), *range(0x2066, 0x206A),
)  # fmt: skip
_UNPRINTABLE = re.compile("[" + "".join(re.escape(chr(c)) for c in UNSAFE_CODES) + "]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def _clipped(text: str, limit: int) -> tuple[str, str]:
    """The first ``limit`` characters, and the suffix saying how long the whole was (or "")."""
    if len(text) <= limit:
        return text, ""
    return text[:limit], f"…({len(text)} characters)"


def echo(value: str, limit: int = MAX_ECHO) -> str:
    """``value`` quoted as ``repr`` quotes it (controls escaped), cut after ``limit`` characters.

    ``echo("a" * 100000)`` is ``'aaa…a'…(100000 characters)`` with 80 ``a``; a short value
    is exactly ``repr(value)``, so messages read as they did for sane input.
    """
    head, tail = _clipped(value, limit)
    return repr(head) + tail


def printable(text: str, limit: int | None = None) -> str:
    """``text`` with control characters written as ``\\xNN`` / ``\\uNNNN``, not quoted.

    For paths and messages in log lines whose format is fixed (the loader's lines):
    ordinary text is unchanged. With ``limit``, cut as :func:`echo` cuts.
    """
    tail = ""
    if limit is not None:
        text, tail = _clipped(text, limit)
    if _UNPRINTABLE.search(text) is not None:
        text = _UNPRINTABLE.sub(_escape, text)
    return text + tail


def number_too_long(text: str, first_line: int = 1) -> str:
    """Python's refusal of a huge integer in ``text``, said the way its author can act on
    ("" if ``text`` holds no such number).

    ``int()`` refuses more than ``sys.get_int_max_str_digits()`` digits with advice to raise
    that limit, which is no advice for a manifest: name the number's place and length
    instead. ``first_line`` is the file line of ``text``'s first line.
    """
    limit = sys.get_int_max_str_digits()
    found = re.search(rf"\d{{{limit + 1},}}", text) if limit else None
    if found is None:
        return ""
    line = first_line + text.count("\n", 0, found.start())
    column = found.start() - text.rfind("\n", 0, found.start())
    digits = len(found.group())
    return f"the number at line {line} column {column} is too long ({digits} digits; at most {limit})"


def utf8_encodable(text: str) -> bool:
    """Whether ``text`` is UTF-8 text: no lone surrogate (a ``"\\ud800"`` escape, or bytes
    that were no UTF-8 decoded with ``surrogateescape``)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
