"""What an archive declares about itself, checked before a parser holds it in memory.

:mod:`.archive` counts and sizes what it writes, but the parsers read some things
whole first: ``zipfile.ZipFile`` parses the entire central directory (a million
empty members: 600 MB), and ``tarfile`` holds a PAX or GNU long-name header in
memory several times over (250 MB of header: ~950 MB). Both are bounded here from
the fields that announce them:

* :func:`zip_members` reads the count and size of a zip's central directory from
  its end record (zip64 too), and :func:`zip_entries` counts the entries the
  directory really holds, where ``zipfile`` will look for them, one header at a time
  (``zipfile`` parses the directory by its size in bytes, not by the declared count);
* :class:`BoundedTarInfo`, given to ``tarfile.open(tarinfo=...)``, refuses an
  extended header bigger than :data:`MAX_EXTENDED_HEADER` before reading it.

Imports only the standard library.
"""

from __future__ import annotations

import struct
import tarfile
from typing import IO, Any

__all__ = ["MAX_EXTENDED_HEADER", "BoundedTarInfo", "HugeHeader", "zip_entries", "zip_members"]

MAX_EXTENDED_HEADER = 1024 * 1024
"""The biggest PAX or GNU long-name header read: real ones hold a few paths and numbers."""
_EOCD = b"PK\x05\x06"
_ZIP64_LOCATOR = b"PK\x06\x07"
_ZIP64_EOCD = b"PK\x06\x06"
_EXTENDED = (tarfile.XHDTYPE, tarfile.XGLTYPE, tarfile.SOLARIS_XHDTYPE, tarfile.GNUTYPE_LONGNAME,
             tarfile.GNUTYPE_LONGLINK)  # fmt: skip


class HugeHeader(tarfile.TarError):
    """A tar member's extended header is over :data:`MAX_EXTENDED_HEADER`."""


class BoundedTarInfo(tarfile.TarInfo):
    """A ``TarInfo`` that refuses an oversized extended header before tarfile reads it in."""

    def _proc_member(self, tarfile: Any) -> Any:  # tarfile's hook for every member header
        if self.type in _EXTENDED and self.size > MAX_EXTENDED_HEADER:
            message = f"an extended header of {self.size} bytes; the limit is {MAX_EXTENDED_HEADER}"
            raise HugeHeader(message)
        return super()._proc_member(tarfile)  # type: ignore[misc]  # private in typeshed, there since 3.0


def zip_members(f: IO[bytes]) -> tuple[int, int] | None:
    """``(members, central directory bytes)`` that the zip ``f`` declares; None without an end record.

    The end record is within the last 64 KiB + 22 bytes (its comment is at most 64 KiB).
    """
    f.seek(0, 2)
    size = f.tell()
    f.seek(max(0, size - 65536 - 22))
    tail = f.read()
    at = tail.rfind(_EOCD)
    if at < 0 or len(tail) - at < 22:
        return None
    members, directory = struct.unpack("<HI", tail[at + 10 : at + 16])
    if at >= 20 and tail[at - 20 : at - 16] == _ZIP64_LOCATOR:
        (offset,) = struct.unpack("<Q", tail[at - 12 : at - 4])
        f.seek(offset)
        record = f.read(56)
        if len(record) == 56 and record[:4] == _ZIP64_EOCD:
            members, directory = struct.unpack("<QQ", record[32:48])
    return members, directory


_CENTRAL = b"PK\x01\x02"


def zip_entries(f: IO[bytes], limit: int) -> int | None:
    """How many entries the central directory of the zip ``f`` holds, counted one header
    at a time where ``zipfile`` reads them, stopping at ``limit + 1``; None without an end
    record. Memory stays constant whatever the directory's size."""
    f.seek(0, 2)
    size = f.tell()
    f.seek(max(0, size - 65536 - 22))
    tail_at = f.tell()
    tail = f.read()
    at = tail.rfind(_EOCD)
    if at < 0 or len(tail) - at < 22:
        return None
    (directory,) = struct.unpack("<I", tail[at + 12 : at + 16])
    record_at = tail_at + at
    if at >= 20 and tail[at - 20 : at - 16] == _ZIP64_LOCATOR:
        f.seek(record_at - 20 - 56)  # where zipfile reads the zip64 record: just before the locator
        record = f.read(56)
        if len(record) == 56 and record[:4] == _ZIP64_EOCD:
            (directory,) = struct.unpack("<Q", record[40:48])
            record_at -= 20 + 56
    start = record_at - directory  # zipfile: offset + (data prepended to the archive)
    count, done = 0, 0
    f.seek(max(0, start))
    while done < directory and count <= limit:
        head = f.read(46)
        if len(head) < 46 or head[:4] != _CENTRAL:
            break  # zipfile refuses it as a bad directory
        names, extra, comment = struct.unpack("<HHH", head[28:34])
        f.seek(names + extra + comment, 1)
        done += 46 + names + extra + comment
        count += 1
    return count
