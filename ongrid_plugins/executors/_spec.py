"""The runner's values: what to run (:class:`ProcessSpec`) and how it ended (:class:`ProcessOutcome`).

Plain values, imported by :mod:`._process` (which re-exports them) and by the
subprocess executor when it builds a call.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any

import attrs

__all__ = ["ProcessOutcome", "ProcessSpec", "StderrCallback"]

StderrCallback = Callable[[str], None]


@attrs.frozen
class ProcessSpec:
    """What to run and within which limits (checked once, in ``__attrs_post_init__``)."""

    argv: tuple[str, ...]
    """``argv[0]`` is the absolute, canonical path of the executable."""
    cwd: str
    """Working directory of the child."""
    env: Mapping[str, str]
    """The child's complete environment: empty means no environment at all."""
    stdin: bytes
    """Written to the child's stdin, which is then closed."""
    timeout: float
    """Seconds before the group gets SIGTERM."""
    stdout_cap: int = 16 * 1024 * 1024
    kill_grace: float = 2.0
    """Seconds between SIGTERM and SIGKILL."""
    stderr_tail_lines: int = 50
    stderr_tail_bytes: int = 16384
    max_line_bytes: int = 8192
    """Longer stderr lines are split into chunks of this size."""
    exec_fd: int | None = None
    """Execute this descriptor (the entry as checked) rather than the path ``argv[0]``."""
    confine: Any = None
    """A :class:`~.confine.plan.Plan` (``apply``, ``started``, ``kill_all``) or None."""

    def __attrs_post_init__(self) -> None:
        # One hook rather than a validator per field: specs are built once per call.
        argv = self.argv
        if not argv or not (argv[0].startswith("/") if type(argv[0]) is str else os.path.isabs(argv[0])):
            message = f"argv[0] must be an absolute path (got {self.argv!r})"
            raise ValueError(message)
        limits = (self.timeout, self.stdout_cap, self.kill_grace)
        tail = (self.stderr_tail_lines, self.stderr_tail_bytes)
        nan = self.timeout != self.timeout or self.kill_grace != self.kill_grace
        if nan or min(*limits, *tail) < 0 or self.max_line_bytes <= 0:
            message = f"limits must be >= 0 and not NaN, and max_line_bytes > 0: {self!r}"
            raise ValueError(message)


@attrs.frozen
class ProcessOutcome:
    """How the child ended and what it printed."""

    stdout: bytes
    """At most ``stdout_cap`` bytes."""
    exit_code: int | None
    """None when killed by a signal or never started."""
    signal: int | None
    """The signal that ended the child, if any."""
    timed_out: bool
    stdout_overflow: bool
    """stdout went past the cap and the child was killed."""
    stderr_tail: tuple[str, ...]
    """The last stderr lines, without their newline."""
    duration: float
    """Seconds from spawn to reaping, to the microsecond."""
    spawn_error: str | None = None
    """Set when no process ran (exec failure): a readable message."""

    @classmethod
    def never_ran(cls, message: str, duration: float) -> ProcessOutcome:
        """No process ran: ``message`` says why."""
        return cls(
            stdout=b"",
            exit_code=None,
            signal=None,
            timed_out=False,
            stdout_overflow=False,
            stderr_tail=(),
            duration=duration,
            spawn_error=message,
        )
