"""Swap loops: a thread that swaps a path between what it is and a symlink to somewhere else.

The attacks of issue 9 on "checked by path, then used by path": while calls run, a file
or a folder inside an allowed place keeps turning into a symlink to an outside one and
back. A defence holds when no call ever reads or lists what is outside.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path


class Swapper:
    """Swaps ``path`` (a file or a folder) with a symlink to ``outside`` until the ``with`` ends."""

    def __init__(self, path: Path, outside: Path) -> None:
        self.path = path
        self.away = path.with_name(path.name + ".real")
        self.link = path.with_name(path.name + ".link")
        self.link.symlink_to(outside)
        self.swaps = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            os.rename(self.path, self.away)
            os.rename(self.link, self.path)  # now a symlink to the outside
            os.rename(self.path, self.link)
            os.rename(self.away, self.path)  # the real one again
            self.swaps += 1

    def __enter__(self) -> Swapper:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        self._thread.join(10)
