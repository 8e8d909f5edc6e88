"""What a caller of ``host.call`` passes besides the arguments, checked before anything runs.

A value of the wrong type must be refused here, with a :class:`~ongrid_plugins.errors.ConfigError`
that says which parameter and what it takes: past this point it reaches the audit row,
and a ``caller`` that SQLite cannot bind (a list, bytes) used to stop the audit writer
for every call after it, in every process sharing the state folder.

Core value module: imports only :mod:`ongrid_plugins.errors`.
"""

from __future__ import annotations

import math

from .errors import ConfigError

__all__ = ["check_caller", "check_ticket", "check_timeout"]


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
