"""Types of the compiled helpers built from ``_speedups.c`` (optional: import it guarded)."""

from collections.abc import Callable
from typing import Any

def canonical_encoder(fallback: Callable[[Any], str], /) -> Callable[[Any], str]: ...
def write_all(fd: int, data: bytes | bytearray | memoryview, /) -> None: ...
