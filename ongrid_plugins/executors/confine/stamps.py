"""Whether paths still name what they named when a cached grant or cover was made.

Every confined call checks about twenty paths this way, between two spawns: its tool's
cached Landlock grants (:class:`.grants.Static`), the folders the read-everything base
was listed from (:class:`.grants.Base`) and the system secrets covered in its thread
(:class:`.warm.Covers`).

May import: the standard library.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

__all__ = ["FileStamp", "same_files", "same_mtimes"]

FileStamp = tuple[str, "int | None", "int | None"]
"""``(path, st_dev, st_ino)`` of what ``os.stat(path)`` showed; ``(path, None, None)``:
nothing was there (``stat`` failed)."""


def same_files(stamps: Sequence[FileStamp]) -> bool:
    """Whether every ``(path, st_dev, st_ino)`` stamp still holds (see :data:`FileStamp`)."""
    for path, dev, ino in stamps:
        try:
            st = os.stat(path)
        except (OSError, ValueError):  # ValueError: a NUL in the path
            if dev is not None:
                return False
            continue
        if dev is None or st.st_dev != dev or st.st_ino != ino:
            return False
    return True


def same_mtimes(stamps: Sequence[tuple[str, int]]) -> bool:
    """Whether every ``(folder, st_mtime_ns)`` stamp still holds (an absent folder does not)."""
    for path, mtime in stamps:
        try:
            if os.stat(path).st_mtime_ns != mtime:
                return False
        except (OSError, ValueError):
            return False
    return True
