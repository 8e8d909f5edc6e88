"""stderr of a running child: split into lines as it arrives, each reported, a bounded tail kept."""

from __future__ import annotations

import collections
import logging
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ._spec import ProcessSpec, StderrCallback

__all__ = ["StderrLines"]

# The runner's logger (one name for everything the runner reports).
logger = logging.getLogger("ongrid_plugins.executors._process")


class StderrLines:
    """Splits stderr into lines, reports each one and keeps a bounded tail."""

    def __init__(self, spec: ProcessSpec, callback: StderrCallback | None) -> None:
        self._max_line = spec.max_line_bytes
        self._max_lines = spec.stderr_tail_lines
        self._max_bytes = spec.stderr_tail_bytes
        self._callback = callback
        self._partial = bytearray()
        self._tail: collections.deque[tuple[str, int]] = collections.deque()
        self._tail_bytes = 0
        self._callback_failed = False

    @property
    def tail(self) -> tuple[str, ...]:
        return tuple(line for line, _ in self._tail)

    def feed(self, data: bytes) -> None:
        buf = self._partial
        buf += data
        start = 0
        while (newline := buf.find(b"\n", start)) >= 0:
            self._emit_long(bytes(buf[start:newline]))
            start = newline + 1
        del buf[:start]
        # Keep at most max_line bytes pending: the next byte may be the newline.
        while len(buf) > self._max_line:
            cut = _utf8_cut(buf, self._max_line)
            self._emit(bytes(buf[:cut]))
            del buf[:cut]

    def flush(self) -> None:
        """EOF: the last line had no newline."""
        if self._partial:
            self._emit_long(bytes(self._partial))
            self._partial.clear()

    def _emit_long(self, line: bytes) -> None:
        while len(line) > self._max_line:
            cut = _utf8_cut(line, self._max_line)
            self._emit(line[:cut])
            line = line[cut:]
        self._emit(line)

    def _emit(self, raw: bytes) -> None:
        line = raw.decode("utf-8", errors="replace")
        self._tail.append((line, len(raw)))
        self._tail_bytes += len(raw)
        while self._tail and (len(self._tail) > self._max_lines or self._tail_bytes > self._max_bytes):
            self._tail_bytes -= self._tail.popleft()[1]
        if self._callback is None:
            return
        try:
            self._callback(line)
        except Exception:
            # A broken log sink must not break the call; say so once, not per line.
            if not self._callback_failed:
                self._callback_failed = True
                logger.exception("on_stderr callback failed; further failures not logged")


def _utf8_cut(buf: bytes | bytearray, limit: int) -> int:
    """Where to cut ``buf`` (longer than ``limit``) at most ``limit`` bytes in, without
    splitting a UTF-8 sequence when one straddles the limit."""
    for back in range(4):
        if limit - back > 0 and buf[limit - back] & 0xC0 != 0x80:
            return limit - back
    return limit
