"""Read a file a user or operator named (config.toml, persona files, key and token files, skills.lock).

Such a path may be anything: a FIFO nobody writes to, ``/dev/zero``, a folder. A plain
``open()`` then blocks forever on the FIFO, or reads the device without end. Every
read here opens with ``O_NONBLOCK`` (a FIFO's open returns at once), checks with
``fstat`` on that same descriptor that it is a regular file, and reads at most
``limit`` bytes. Anything else raises :class:`NotRegularFile`, an :class:`OSError`
whose ``strerror`` says what the path is, so callers that already report an
unreadable file (``cannot read X: <strerror>``) say "not a regular file" as they are.
"""

from __future__ import annotations

import errno
import os
import stat

__all__ = ["NotRegularFile", "file_kind", "read_regular", "read_regular_text"]

#: Bigger than any configuration or key file we read; a cap, not a format limit.
DEFAULT_LIMIT = 16 * 1024 * 1024
_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC


class NotRegularFile(OSError):
    """The path is a FIFO, a device, a socket or a folder: it was not read."""

    def __init__(self, path: str, kind: str) -> None:
        self.kind = kind
        super().__init__(errno.EINVAL, f"not a regular file (it is {kind})", path)

    def __str__(self) -> str:
        return str(self.strerror)


def file_kind(mode: int) -> str:
    """What a file of this ``st_mode`` is, in words: ``a FIFO``, ``a folder``..."""
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    return "a regular file" if stat.S_ISREG(mode) else f"a special file (mode {oct(mode)})"


def read_regular(path: str, limit: int = DEFAULT_LIMIT) -> bytes:
    """At most ``limit`` + 1 bytes of the regular file ``path`` (one more, so a caller sees "too big").

    :raises NotRegularFile: ``path`` is not a regular file (symlinks are followed).
    :raises OSError: it cannot be opened or read.
    """
    fd = os.open(path, _FLAGS)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise NotRegularFile(path, file_kind(st.st_mode))
        os.set_blocking(fd, True)  # a regular file never blocks; reads stay simple
        chunks: list[bytes] = []
        left = limit + 1
        while left > 0:
            chunk = os.read(fd, min(left, 1024 * 1024))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def read_regular_text(path: str, limit: int = DEFAULT_LIMIT) -> str:
    """The regular file ``path`` as UTF-8 text (a BOM dropped).

    :raises NotRegularFile: it is not a regular file.
    :raises OSError: it cannot be read, or is over ``limit`` bytes (``EFBIG``).
    :raises UnicodeDecodeError: it is not UTF-8.
    """
    raw = read_regular(path, limit)
    if len(raw) > limit:
        raise OSError(errno.EFBIG, f"over the limit of {limit} bytes", path)
    return raw.decode("utf-8").removeprefix("\ufeff")
