"""Run an attack in a child process, so that a regression fails the test instead of hanging it."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from typing import Any

#: Patterns that make a backtracking engine take exponential time, and inputs that trigger it.
CATASTROPHIC: list[tuple[str, str]] = [
    ("^(a+)+$", "a" * 34 + "!"),
    ("^(a|aa)+$", "a" * 60 + "!"),
    ("^(a|a?)+$", "a" * 34 + "!"),
    ("(x+x+)+y", "x" * 40),
    ("^(\\w+\\s?)*$", "word " * 12 + "!"),
    (
        "^([a-zA-Z0-9])(([\\-.]|[_]+)?([a-zA-Z0-9]+))*(@){1}[a-z0-9]+[.]{1}(([a-z]{2,3})|([a-z]{2,3}[.]{1}[a-z]{2,3}))$",
        "a" * 40 + "!",
    ),
]


def bounded(script: str, *, kill_after: float = 60.0) -> dict[str, Any]:
    """Run ``script`` (Python) in a child; it prints one JSON object as its last line.

    The child measures its own attack (interpreter start-up is not part of the bound);
    ``kill_after`` only stops a regression from hanging the suite.
    """
    try:
        done = subprocess.run(
            [sys.executable, "-c", textwrap.dedent(script)],
            capture_output=True,
            text=True,
            timeout=kill_after,
        )
    except subprocess.TimeoutExpired as exc:
        raise AssertionError(f"the attack still ran after {kill_after} s: it hangs") from exc
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))
