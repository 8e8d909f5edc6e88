"""Warnings about the machine's state, said once per change instead of on every command.

A pack shadowed by another root, a broken manifest, a reserved persona file: the
loader warns about each whenever a command loads, so a user who has read the
warning sees it again on every ``list`` and ``run``. The command line remembers,
in ``<cache dir>/cli-warnings.json``, the warnings its last load printed; the next
command prints only the ones that are new (and says how many it left out), until
the set changes. ``-v`` prints them all, and without a cache dir
(``ONGRID_CACHE_DIR=off``) nothing is held back. Only the load-time loggers
below are filtered: errors, and warnings about a call (the audit log), always show.

Imports only the standard library.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import tempfile

__all__ = ["RepeatFilter"]

#: The loggers whose warnings describe the machine's state, repeated by every load.
STATE_LOGGERS = (
    "ongrid_plugins.loader",
    "ongrid_plugins.loaders",
    "ongrid_plugins.packs",
    "ongrid_plugins.personas",
    "ongrid_plugins.plugins",
    "ongrid_plugins.availability",
)
FILE_NAME = "cli-warnings.json"


class RepeatFilter(logging.Filter):
    """Drops a state warning the previous load already printed; remembers this run's."""

    def __init__(self, cache_dir: str | None) -> None:
        super().__init__()
        self.path = os.path.join(cache_dir, FILE_NAME) if cache_dir else None
        self.shown_before = self._read()
        self.seen: set[str] = set()
        self.hidden = 0

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno != logging.WARNING or not record.name.startswith(STATE_LOGGERS):
            return True
        key = hashlib.sha256(record.getMessage().encode("utf-8", "replace")).hexdigest()[:20]
        self.seen.add(key)
        if self.path is not None and key in self.shown_before:
            self.hidden += 1
            return False
        return True

    def save(self) -> None:
        """Remember this load's warnings (call only after a load: a command without one says nothing)."""
        if self.path is None:
            return
        folder = os.path.dirname(self.path)
        with contextlib.suppress(OSError):
            os.makedirs(folder, mode=0o700, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=folder, prefix=".cli-warnings.")
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(sorted(self.seen), f)
            os.replace(tmp, self.path)

    def _read(self) -> frozenset[str]:
        if self.path is None:
            return frozenset()
        try:
            with open(self.path, encoding="utf-8") as f:
                data = json.load(f)
        except (OSError, ValueError):
            return frozenset()
        return frozenset(k for k in data if isinstance(k, str)) if isinstance(data, list) else frozenset()
