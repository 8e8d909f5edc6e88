"""Argument types checked while the command line is parsed, and the output file of ``-o``.

A value argparse refuses is a usage error (exit 2, the sub-command's usage line)
before anything is read, bound or printed: a count below 1 or past what SQLite can
hold, a port outside 0-65535, an empty name or path where an empty one would be
silently taken for "the default".

Imports only the standard library (and :mod:`ongrid_plugins.core.echo`).
"""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import Callable, Iterator
from typing import Any, Protocol, TextIO

from ..core.echo import echo, printable
from ..errors import ConfigError

__all__ = [
    "MAX_COUNT",
    "Subcommands",
    "count",
    "limit",
    "non_empty",
    "output_file",
    "port",
    "row_number",
    "seconds",
]


class Subcommands(Protocol):
    """What ``ArgumentParser.add_subparsers()`` returns, as each command's ``register`` uses it.

    argparse documents the method, not the class of what it returns (``_SubParsersAction``).
    """

    def add_parser(self, name: str, **kwargs: Any) -> argparse.ArgumentParser:
        """A sub-command's parser, registered under ``name``."""
        ...


#: The largest row number or count: SQLite's largest integer (2**63 - 1).
MAX_COUNT = 2**63 - 1


def _integer(text: str, low: int, high: int, what: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = None
    if value is None or not low <= value <= high:
        message = f"must be {what} from {low} to {high} (got {echo(text)})"
        raise argparse.ArgumentTypeError(message)
    return value


def count(text: str) -> int:
    """A number of rows: a whole number from 1 to :data:`MAX_COUNT`."""
    return _integer(text, 1, MAX_COUNT, "a whole number")


def row_number(text: str) -> int:
    """A row number to start after: a whole number from 0 to :data:`MAX_COUNT`."""
    return _integer(text, 0, MAX_COUNT, "a row number")


def limit(text: str) -> int:
    """A server limit (calls, connections, bytes): a whole number from 1 to 2**31 - 1."""
    return _integer(text, 1, 2**31 - 1, "a whole number")


def seconds(text: str) -> float:
    """A time-out in seconds: a finite number above 0 (at most a day)."""
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 < value <= 86_400:
        raise argparse.ArgumentTypeError(
            f"must be a number of seconds above 0, at most 86400 (got {echo(text)})"
        )
    return value


def port(text: str) -> int:
    """A TCP port: 0 (pick a free one) to 65535."""
    return _integer(text, 0, 65535, "a port number")


def non_empty(what: str) -> Callable[[str], str]:
    """A string type refusing an empty (or blank) value; ``what`` says what to give instead."""

    def check(text: str) -> str:
        if not text.strip():
            raise argparse.ArgumentTypeError(f"must not be empty: {what}")
        return text

    return check


@contextlib.contextmanager
def output_file(path: str, flag: str = "-o") -> Iterator[TextIO]:
    """``path`` opened for writing text; failing to open or write it is a :class:`ConfigError`.

    A folder, a missing folder, a full disk: the message names the file, the reason, and
    what to do, in place of a traceback. Keep only the writing inside the ``with``.
    """
    try:
        with open(path, "w", encoding="utf-8") as out:
            yield out
    except OSError as exc:
        reason = exc.strerror or str(exc)
        message = f"cannot write {printable(path, 200)} ({flag}): {reason}"
        message += f"; give {flag} a file in a folder you can write to, on a disk with room"
        raise ConfigError(message) from None
