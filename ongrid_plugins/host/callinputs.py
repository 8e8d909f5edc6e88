"""What a caller of ``host.call`` passes besides the arguments, checked before anything runs.

A value of the wrong type must be refused here, with a :class:`~ongrid_plugins.errors.ConfigError`
that says which parameter and what it takes: past this point it reaches the audit row,
and a ``caller`` that SQLite cannot bind (a list, bytes) used to stop the audit writer
for every call after it, in every process sharing the state folder.

:func:`no_duplicates` refuses a JSON object naming a member twice, for every surface
that reads arguments as JSON text (the CLI, REST).

Core value module: imports only :mod:`ongrid_plugins.errors` and :mod:`ongrid_plugins.core.echo`.
"""

from __future__ import annotations

import math
from typing import Any

from ..core.echo import echo
from ..errors import ConfigError

__all__ = ["DuplicateMember", "check_caller", "check_ticket", "check_timeout", "no_duplicates"]


class DuplicateMember(ValueError):
    """A JSON object names a member twice (see :func:`no_duplicates`)."""


def no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """An object's members (``json.loads``'s ``object_pairs_hook``), refusing a name given twice:
    which of ``{"params": {...}, "params": {...}}`` the sender meant is a guess (manifests
    refuse them too). Raises :class:`DuplicateMember`, a ValueError as a parse error is."""
    out = dict(pairs)
    if len(out) != len(pairs):
        seen: set[str] = set()
        twice = next(key for key, _ in pairs if key in seen or seen.add(key))  # type: ignore[func-returns-value]
        raise DuplicateMember(f"the member {echo(twice)} is given twice in one object")
    return out


def check_timeout(timeout: float | None) -> float | None:
    """``timeout`` as a float: a positive, finite number of seconds (or None: the tool's)."""
    if timeout is None:
        return None
    if isinstance(timeout, bool) or not isinstance(timeout, int | float):
        raise ConfigError(f"timeout must be a positive number of seconds, got {timeout!r}")
    try:
        seconds = float(timeout)
    except OverflowError:  # an int past a float's range: 10**400
        seconds = math.inf
    shown = repr(timeout) if len(repr(timeout)) <= 40 else f"{repr(timeout)[:37]}..."
    if not seconds > 0:  # NaN too
        raise ConfigError(f"timeout must be a positive number of seconds, got {shown}")
    if seconds == math.inf:
        raise ConfigError(f"timeout must be a finite number of seconds, got {shown}")
    return seconds


def check_caller(caller: object) -> str | None:
    """``caller``: an identity (a string), or None for the OS user."""
    if caller is None or type(caller) is str:
        return caller
    raise ConfigError(f"caller must be a string (an identity) or None, got {type(caller).__name__}")


def check_ticket(ticket: object) -> str | None:
    """``ticket``: a ticket id (a string), or None."""
    if ticket is None or type(ticket) is str:
        return ticket
    raise ConfigError(f"ticket must be a ticket id (a string) or None, got {type(ticket).__name__}")
