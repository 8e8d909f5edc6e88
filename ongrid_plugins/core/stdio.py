"""Keep stdout for our own output while third-party code runs: :func:`stdout_to_stderr`.

``ongrid-skills list --json``, ``export`` and the MCP stdio server write to stdout for
programs that parse it. A plugin that prints when it is imported (``print()``,
``sys.stdout.write``, or ``os.write(1, ...)`` below Python) would corrupt that stream;
while it is imported, both go to stderr instead, where a person still sees them.

It may import the standard library only.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from typing import Any

__all__ = ["stdout_to_stderr"]


@contextlib.contextmanager
def stdout_to_stderr() -> Iterator[None]:
    """Send what is printed meanwhile to stderr: ``sys.stdout`` and file descriptor 1 both.

    Both are restored on the way out, whatever happened; a descriptor that cannot be
    duplicated (closed) is left alone. It is process-wide: another thread printing
    meanwhile is redirected too, so call it before serving, not while.
    """
    saved_stdout = sys.stdout
    _flush(saved_stdout)
    saved_fd = _point_fd(1, 2)
    sys.stdout = sys.stderr
    try:
        yield
    finally:
        _flush(sys.stdout)  # what the code printed, before fd 1 points back at stdout
        _flush(sys.stderr)
        sys.stdout = saved_stdout
        if saved_fd is not None:
            os.dup2(saved_fd, 1)
            os.close(saved_fd)


def _point_fd(fd: int, to: int) -> int | None:
    """Point ``fd`` at what ``to`` is open on; return a copy of the old ``fd`` (None: left alone)."""
    try:
        saved = os.dup(fd)  # not inheritable: a child process started meanwhile does not get it
    except OSError:
        return None
    try:
        os.dup2(to, fd)
    except OSError:
        os.close(saved)
        return None
    return saved


def _flush(stream: Any) -> None:
    # None (no console), a closed stream, or an object without flush: nothing to flush.
    with contextlib.suppress(AttributeError, OSError, ValueError):
        stream.flush()
