"""Whether a process still runs, as tests of killing see it."""

from __future__ import annotations

import time
from pathlib import Path


def dead(pid: int, wait: float = 2.0) -> bool:
    """Gone, or a zombie waiting for init (PID 1 here may not reap orphans), within ``wait``
    seconds (0: now, as the call that should have killed it returns)."""
    end = time.monotonic() + wait
    while True:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except (FileNotFoundError, ProcessLookupError):
            return True
        if stat.rsplit(")", 1)[1].split()[0] in ("Z", "X"):
            return True
        if time.monotonic() >= end:
            return False
        time.sleep(0.01)
