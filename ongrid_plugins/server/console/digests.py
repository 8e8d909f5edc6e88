"""What the console's files look like now: stat fingerprints, and entry-file digests.

The console shows each subprocess tool's entry-file sha256 on its page, hashed by the
catalog's :func:`~ongrid_plugins.catalog.digest.file_sha256` (the call-time entry check
uses it too): an entry file changed in place -- even with its modification time set
back, which moves the change time -- never shows a stale digest.
"""

from __future__ import annotations

import os
from typing import Any

from ...catalog.digest import file_sha256
from ...models import Tool

__all__ = ["MAX_HASHED", "entry_digest", "fingerprint"]

#: Larger entry files are not hashed for the page (it says "not known").
MAX_HASHED = 64 * 1024 * 1024


def fingerprint(paths: list[str]) -> tuple[Any, ...]:
    """The (inode, size, mtime) of each of ``paths``, None for a missing one: it changes when a file does."""
    out: list[Any] = []
    for path in paths:
        try:
            st = os.stat(path)
        except OSError:
            out.append(None)
        else:
            out.append((st.st_ino, st.st_size, st.st_mtime_ns))
    return tuple(out)


def entry_digest(tool: Tool) -> str:
    """``sha256:<hex> (entry file)`` for a subprocess tool's entry; empty when unknown or too large."""
    if not tool.entry:
        return ""
    try:
        if os.stat(tool.entry).st_size > MAX_HASHED:
            return ""
        return f"sha256:{file_sha256(tool.entry)} (entry file)"
    except OSError:
        return ""
