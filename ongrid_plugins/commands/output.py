"""How the command line prints: tables with a header row, JSON, and colour on a terminal.

Colour is used only when the stream is a terminal, ``NO_COLOR`` is unset or empty
(https://no-color.org) and ``TERM`` is not ``dumb``; ``FORCE_COLOR`` turns it on
for a stream that is not a terminal. Only the header row and the status words
(``ERROR``, ``WARNING``, ``ok``, ``UNAVAILABLE``) are coloured, so piping the output
through ``grep`` or ``cut`` reads the same text as the screen.

Imports only the standard library.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import Sequence
from typing import Any, TextIO

__all__ = ["colour", "first_line", "print_json", "print_table", "uses_colour"]

_CODES = {"bold": "1", "red": "31", "green": "32", "yellow": "33", "dim": "2"}


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
    """Print ``data`` as indented JSON (never coloured: it is for programs)."""
    print(json.dumps(data, indent=2, ensure_ascii=False))


def print_table(header: tuple[str, ...], rows: Sequence[tuple[str, ...]]) -> None:
    """Print a header row and the rows, columns aligned, the last one cut to the terminal's width."""
    tty = sys.stdout.isatty()
    width = shutil.get_terminal_size((120, 24)).columns if tty else 10_000
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header) - 1)]
    for index, row in enumerate([header, *rows]):
        line = "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=False)) + "  " + row[-1]
        line = line[:width] if len(line) > width else line
        if index == 0:
            line = colour(line, "bold")
        elif row[-1].startswith("UNAVAILABLE"):
            line = colour(line, "dim")
        print(line)
