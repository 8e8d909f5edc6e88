"""What the console's files look like now: stat fingerprints, and the memo of entry-file digests.

The console shows each subprocess tool's entry-file sha256 on its page. Hashing on
every page view would read the whole file each time, so :class:`EntryDigests` keeps
the digest per entry path together with the file's fingerprint (device, inode, size,
modification and change times) at hashing time: a reloaded tool with another entry, or
an entry file changed in place -- even with its modification time set back, which
moves the change time -- never reuses a stale digest. The memo belongs to one console
(never to the :class:`~ongrid_plugins.models.Tool` value) and holds at most
:data:`MAX_DIGESTS` entries, the oldest dropped first.
"""

from __future__ import annotations

import hashlib
import os
from typing import Any

from ...models import Tool

__all__ = ["MAX_DIGESTS", "MAX_HASHED", "EntryDigests", "fingerprint"]

#: Entry files the memo remembers (one per tool is the usual need).
MAX_DIGESTS = 4096
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


class EntryDigests:
    """The sha256 of each tool's entry file, remembered while the file is unchanged."""

    def __init__(self, limit: int = MAX_DIGESTS) -> None:
        self._limit = limit
        self._memo: dict[str, tuple[tuple[int, ...], str]] = {}

    def __repr__(self) -> str:
        return f"<EntryDigests {len(self._memo)} of {self._limit}>"

    def __len__(self) -> int:
        return len(self._memo)

    def digest(self, tool: Tool) -> str:
        """``sha256:<hex> (entry file)`` for a subprocess tool's entry; empty when unknown or too large."""
        if not tool.entry:
            return ""
        try:
            st = os.stat(tool.entry)
            key = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
            cached = self._memo.get(tool.entry)
            if cached is not None and cached[0] == key:
                return cached[1]
            if st.st_size > MAX_HASHED:
                return ""
            h = hashlib.sha256()
            with open(tool.entry, "rb") as f:
                for block in iter(lambda: f.read(1 << 20), b""):
                    h.update(block)
        except OSError:
            return ""
        text = f"sha256:{h.hexdigest()} (entry file)"
        self._memo.pop(tool.entry, None)  # re-inserted last: the oldest entry goes first
        self._memo[tool.entry] = (key, text)
        while len(self._memo) > self._limit:
            del self._memo[next(iter(self._memo))]
        return text
