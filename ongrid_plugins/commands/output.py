"""How the command line prints: tables with a header row, JSON, and colour on a terminal.

Colour is used only when the stream is a terminal, ``NO_COLOR`` is unset or empty
(https://no-color.org) and ``TERM`` is not ``dumb``; ``FORCE_COLOR`` turns it on
for a stream that is not a terminal. Only the header row and the status words
(``ERROR``, ``WARNING``, ``ok``, ``UNAVAILABLE``) are coloured, so piping the output
through ``grep`` or ``cut`` reads the same text as the screen.

Text a skill wrote (a manifest's fields, the lines a running skill writes on stderr)
goes through :func:`printable` before it reaches a terminal: control characters are
shown as escapes (``\\x1b``, ``\\r``), so no skill can set the terminal's title, clear
the screen or forge a line of our output. JSON output escapes them the JSON way.

Imports the standard library and :mod:`ongrid_plugins.core.echo` (the code points to escape).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import Sequence
from typing import Any, TextIO

from ..core.echo import UNSAFE_CODES

__all__ = [
    "colour",
    "first_line",
    "for_terminal",
    "print_field",
    "print_json",
    "print_table",
    "printable",
    "uses_colour",
]

_CODES = {"bold": "1", "red": "31", "green": "32", "yellow": "33", "dim": "2"}

#: C0, DEL, C1 and the bidirectional controls: what a terminal may read as a command, or
#: a reader as other text (:data:`ongrid_plugins.core.echo.UNSAFE_CODES`, one list for both).
_CONTROLS = UNSAFE_CODES
_SHORT = {0x09: "\\t", 0x0A: "\\n", 0x0D: "\\r"}
_ESCAPES = {c: _SHORT.get(c, f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}") for c in _CONTROLS}
#: C1 and DEL survive json.dumps(ensure_ascii=False); inside a JSON string their \u
#: escapes read back as the same value.
_JSON_ESCAPES = {c: f"\\u{c:04x}" for c in _CONTROLS if c >= 0x7F}


def printable(text: str, keep: str = "") -> str:
    """``text`` with every control character but those in ``keep`` written as an escape."""
    if text.isprintable():  # no control character (nor any other unprintable one): as it is
        return text
    table = {c: e for c, e in _ESCAPES.items() if chr(c) not in keep} if keep else _ESCAPES
    return text.translate(table)


def for_terminal(text: str, stream: TextIO) -> str:
    """A skill's file for ``stream``: as it is when piped or redirected (``show --file x >
    copy`` keeps its bytes, as ``cat`` does), its control characters escaped on a terminal
    (line breaks and tabs kept), so a file cannot clear the screen or retitle it."""
    isatty = getattr(stream, "isatty", None)
    return printable(text, keep="\n\t") if isatty and isatty() else text


def uses_colour(stream: TextIO) -> bool:
    """Whether text for ``stream`` gets ANSI colour (see the module docstring for the rule)."""
    if os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("FORCE_COLOR"):
        return True
    if os.environ.get("TERM") == "dumb":
        return False
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


def colour(text: str, style: str, stream: TextIO | None = None) -> str:
    """``text`` in ``style`` (bold, red, green, yellow, dim) when ``stream`` (stdout) takes colour."""
    if not text or not uses_colour(stream or sys.stdout):
        return text
    return f"\033[{_CODES[style]}m{text}\033[0m"


def first_line(text: str, limit: int = 100) -> str:
    """The first line of ``text``, cut to ``limit`` characters with an ellipsis."""
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= limit else line[: limit - 1] + "…"


def print_json(data: Any) -> None:
    """Print ``data`` as indented JSON (never coloured: it is for programs; no raw control
    character, as :func:`printable`)."""
    print(json.dumps(data, indent=2, ensure_ascii=False).translate(_JSON_ESCAPES))


def print_field(key: str, value: object, width: int = 17) -> None:
    """``key:`` and ``value`` in two columns, the first ``width`` wide (``show``'s); the value's
    control characters escaped, and a multi-line value kept in its column."""
    text = printable(str(value), keep="\n").replace("\n", "\n" + " " * (width + 1))
    print(f"{key + ':':{width}} {text}")


def print_table(header: tuple[str, ...], rows: Sequence[tuple[str, ...]]) -> None:
    """Print a header row and the rows, columns aligned, the last one cut to the terminal's width."""
    tty = sys.stdout.isatty()
    width = shutil.get_terminal_size((120, 24)).columns if tty else 10_000
    rows = [tuple(printable(cell) for cell in row) for row in rows]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header) - 1)]
    for index, row in enumerate([header, *rows]):
        line = "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=False)) + "  " + row[-1]
        line = line[:width] if len(line) > width else line
        if index == 0:
            line = colour(line, "bold")
        elif row[-1].startswith("UNAVAILABLE"):
            line = colour(line, "dim")
        print(line)
