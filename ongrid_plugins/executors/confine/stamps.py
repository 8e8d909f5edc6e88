"""Whether paths still name what they named when a cached grant or cover was made.

Every confined call checks about twenty paths this way, between two spawns: its tool's
cached Landlock grants (:class:`.grants.Static`), the folders the read-everything base
was listed from (:class:`.grants.Base`) and the system secrets covered in its thread
(:class:`.warm.Covers`). There ``os.stat``'s result objects, and the exception an absent
path raises, cost more than the system calls; the compiled
``ongrid_plugins._speedups.same_files`` and ``same_mtimes`` make the calls and compare.
Where the extension was not built, or cannot tell (a path that is not valid UTF-8),
the Python code here gives the same answer.

May import: the standard library and the optional compiled ``ongrid_plugins._speedups``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence

__all__ = ["FileStamp", "same_files", "same_mtimes"]

FileStamp = tuple[str, "int | None", "int | None"]
"""``(path, st_dev, st_ino)`` of what ``os.stat(path)`` showed; ``(path, None, None)``:
nothing was there (``stat`` failed)."""


def _same_files(stamps: Sequence[FileStamp]) -> bool:
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


def _same_mtimes(stamps: Sequence[tuple[str, int]]) -> bool:
    for path, mtime in stamps:
        try:
            if os.stat(path).st_mtime_ns != mtime:
                return False
        except (OSError, ValueError):
            return False
    return True


def _compiled(name: str) -> Callable[[Sequence[object]], bool | None] | None:
    try:
        from ... import _speedups
    except ImportError:
        return None
    return getattr(_speedups, name, None)  # an older build lacks it


_FILES = _compiled("same_files")
_MTIMES = _compiled("same_mtimes")


def same_files(stamps: Sequence[FileStamp]) -> bool:
    """Whether every ``(path, st_dev, st_ino)`` stamp still holds (see :data:`FileStamp`)."""
    if _FILES is not None:
        same = _FILES(stamps)
        if same is not None:
            return same
    return _same_files(stamps)


def same_mtimes(stamps: Sequence[tuple[str, int]]) -> bool:
    """Whether every ``(folder, st_mtime_ns)`` stamp still holds (an absent folder does not)."""
    if _MTIMES is not None:
        same = _MTIMES(stamps)
        if same is not None:
            return same
    return _same_mtimes(stamps)
