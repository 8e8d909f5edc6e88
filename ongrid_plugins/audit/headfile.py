"""The head :meth:`~.log.AuditLog.record_head` keeps next to the log (``audit-head.json``).

The state folder may be shared by a group (:mod:`ongrid_plugins.commands.statedir`), so any member
can plant a link or a FIFO in it. The file is written to a temporary file made with
``mkstemp`` (``O_CREAT|O_EXCL|O_NOFOLLOW``, an unpredictable name) and renamed over the
head (a rename replaces a link, it does not follow it); it is read with ``O_NONBLOCK`` and
checked to be a regular file, never more than :data:`MAX_BYTES`.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from typing import Any

from ..core._sqlite import file_mode
from ..core.userfiles import read_regular
from ..errors import AuditError

__all__ = ["MAX_BYTES", "read_head", "write_head"]

MAX_BYTES = 64 * 1024
_UNREADABLE = {"seq": "?", "hash": "(unreadable head file)", "time": 0}


def write_head(path: str, data: dict[str, Any]) -> None:
    """Replace the head file ``path`` with ``data``, atomically.

    :raises AuditError: it cannot be written (read-only folder, no space...): which file, why.
    """
    folder = os.path.dirname(path) or "."
    temporary = ""
    try:
        fd, temporary = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=".tmp", dir=folder)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            os.fchmod(f.fileno(), file_mode(folder))  # 0600, or 0660 in a group-shared folder
            json.dump(data, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(temporary, path)
    except OSError as exc:
        if temporary:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
        message = (
            f"cannot record the audit log's head in {path} ({exc.strerror or exc}); "
            "the log itself is unchanged: make its folder writable (or free space) and run `audit head` again"
        )
        raise AuditError(message) from None


def read_head(path: str) -> dict[str, Any] | None:
    """The head in ``path`` (``seq``, ``hash``, ``time``), None when there is none, and a
    placeholder that matches no row when it cannot be read (so ``verify`` fails, saying so)."""
    try:
        raw = read_regular(path, MAX_BYTES)
    except FileNotFoundError:
        return None
    except OSError:  # a FIFO, a device, a folder, or no permission
        return dict(_UNREADABLE)
    try:
        data = json.loads(raw) if len(raw) <= MAX_BYTES else None
    except ValueError:
        data = None
    if not isinstance(data, dict) or not isinstance(data.get("hash"), str):
        return dict(_UNREADABLE)
    return data
