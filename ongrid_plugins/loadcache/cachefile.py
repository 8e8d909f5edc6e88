"""The load cache file on disk: its layout, the signatures it compares, its background writer.

The file ``<cache_dir>/load-cache.bin`` is::

    b"ongrid-loadcache-v2\\n" + crc32(body) (4 bytes) + len(body) (8 bytes) + body
    body = length-prefixed chunks: marshal((FORMAT, fingerprint, roots, folders, digests)),
           then marshal({manifest: record, ...}) per chunk of records

of plain values only (see :mod:`.store` for what each part holds). :class:`Job`
turns what a load stored into records after the load, in a background thread, and
writes the body to a temporary file in the same folder (mode 0600) renamed over the
old one, so a reader sees the old file or the new one, never half of one. The last
writer wins; a process keeps what it wrote last in memory (:data:`written`).

It may import the core values (:mod:`~ongrid_plugins.forksafe` among them) and ``roots``.
"""

from __future__ import annotations

import contextlib
import logging
import marshal
import os
import stat
import struct
import sys
import tempfile
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from typing import Any

from ..discovery.roots import resolve_file
from ..forksafe import renew_after_fork

__all__ = [
    "EMPTY",
    "FORMAT",
    "HEAD",
    "HEAD_SIZE",
    "LEN",
    "MAGIC",
    "Job",
    "Listing",
    "RootKey",
    "Signature",
    "State",
    "dep_holds",
    "read_all",
    "signature",
    "split_chunks",
    "untrusted",
    "wait_for_writes",
    "written",
]

# The store's logger: what the writer logs reads as the cache's own lines.
logger = logging.getLogger("ongrid_plugins.loadcache.store")

FORMAT = 2
MAGIC = b"ongrid-loadcache-v2\n"
HEAD = struct.Struct("<IQ")
HEAD_SIZE = len(MAGIC) + HEAD.size

Signature = tuple[int, int, int, int, int, int, int, int, int]
Listing = tuple[tuple[tuple[str, bool], ...], tuple[str, ...]]
"""What the walker found in a folder: ``((file name, is a symlink), ...), (sub-folder, ...)``."""
RootKey = tuple[str, str, str, str, bool]


def signature(st: os.stat_result) -> Signature:
    """What must stay equal for a file to count as unchanged."""
    return (
        st.st_dev,
        st.st_ino,
        st.st_mode,
        st.st_nlink,
        st.st_uid,
        st.st_gid,
        st.st_size,
        st.st_mtime_ns,
        st.st_ctime_ns,
    )


# ---------------------------------------------------------------- the state of one file
class State:
    """The decoded content of a cache file (plain values; shared read-only)."""

    __slots__ = ("digests", "folders", "records", "roots")

    def __init__(
        self,
        roots: dict[RootKey, int],
        folders: dict[str, tuple[Signature, Listing]],
        records: dict[str, tuple[Any, ...]],
        digests: dict[tuple[Any, ...], str],
    ) -> None:
        self.roots = roots
        self.folders = folders
        self.records = records
        self.digests = digests


EMPTY = State({}, {}, {}, {})
#: What this process wrote last, per cache file: (the file's signature right after the rename, state).
written: dict[str, tuple[Signature, str, State]] = {}
writers: dict[str, threading.Thread] = {}
lock = threading.Lock()
# Held by the writer thread ("ongrid-load-cache") as it records a write: a fork then must
# not leave the child's loads waiting on it.
renew_after_fork(sys.modules[__name__], "lock")


def wait_for_writes(path: str | None = None) -> None:
    """Wait until this process's background writes (of ``path``, else all) are on disk."""
    with lock:
        threads = [t for p, t in writers.items() if path is None or p == path]
    for thread in threads:
        thread.join()


class Job:
    """One write of the cache file, run by a background thread after the load."""

    def __init__(
        self,
        path: str,
        key: str | Callable[[], str],
        now: int,
        roots: dict[RootKey, int],
        folders: dict[str, tuple[Signature, Listing]],
        records: dict[str, tuple[Any, ...]],
        digests: dict[tuple[Any, ...], str],
        racy: int,
    ) -> None:
        self.path = path
        self.key = key
        self.now = now
        self.racy = racy
        """A file changed less than this (ns) before ``now`` is not recorded."""
        self.roots = dict(roots)
        self.folders = folders
        self.records = records
        self.digests = digests
        self.pending: list[tuple[str, int, Signature | None, str, tuple[Any, ...]]] = []
        self.pending_folders: list[tuple[str, Listing]] = []
        self.record: Callable[[Any, Any], Any] | None = None

    def run(self) -> None:
        # A new thread holds the GIL from its start for a whole switch interval (5 ms,
        # 5-12 ms measured on a busy 2-core VM), and Thread.start() waits for it:
        # yield at once, so the load that started it returns without that wait.
        time.sleep(0)
        try:
            if not isinstance(self.key, str):  # a cold load left the fingerprint to this thread
                self.key = self.key()
            self._complete()
            data = self._encode(self.key)
        except Exception as exc:  # a value marshal does not know, a record that will not build
            logger.debug("load cache: cannot record this load: %s", exc)
            return
        try:
            sig = write_atomic(self.path, data)
        except OSError as exc:
            logger.debug("load cache: cannot write %s: %s", self.path, exc)
            return
        state = State(self.roots, self.folders, self.records, self.digests)
        with lock:
            written[self.path] = (sig, self.key, state)

    def _complete(self) -> None:
        """Turn what the load stored into records: the signatures, the skills' values.

        A signature taken after the load is as good as one taken before the read:
        a file or folder changed since ``now`` (the load's start) has a later
        ctime and is not recorded (see ``store.RACY_NS``, :attr:`racy` here); one renamed into place
        gets a new ctime too (Linux filesystems set it on rename).
        """
        for folder, listing in self.pending_folders:
            found = quiet_signature(folder, self.now, self.racy)
            if found is not None:
                self.folders[folder] = (found, listing)
        records = self.records
        for path, root, taken, entry, value in self.pending:
            sig = taken if taken is not None else quiet_signature(path, self.now, self.racy)
            if sig is None:
                continue
            dep = entry_dep(path, entry, self.now, self.racy) if entry else None
            if entry and dep is None:
                continue
            if value[0] == "s":
                if self.record is None:
                    continue
                try:
                    record = self.record(value[1], value[2])
                except ValueError:  # a value marshal does not know: that skill is built every time
                    continue
                if record is None:
                    continue
                value = ("s", record)
            records[path] = (root, sig, dep, value)
        self.pending = []

    def _encode(self, key: str) -> bytes:
        """The file: a head chunk and the records in chunks, so the writer lets the load's thread run."""
        roots = tuple(sorted(self.roots, key=self.roots.__getitem__))
        chunks = [marshal.dumps((FORMAT, key, roots, self.folders, self.digests), 4)]
        items = list(self.records.items())
        for start in range(0, len(items), CHUNK_RECORDS):
            chunks.append(marshal.dumps(dict(items[start : start + CHUNK_RECORDS]), 4))
        body = b"".join(LEN.pack(len(c)) + c for c in chunks)
        return MAGIC + HEAD.pack(zlib.crc32(body), len(body)) + body


CHUNK_RECORDS = 500
LEN = struct.Struct("<I")


def split_chunks(body: memoryview) -> Iterator[memoryview]:
    """The length-prefixed chunks of a body (raises ``ValueError`` on a bad length)."""
    offset = 0
    while offset < len(body):
        (size,) = LEN.unpack_from(body, offset)
        offset += LEN.size
        if offset + size > len(body):
            raise ValueError("a chunk runs past the end")
        yield body[offset : offset + size]
        offset += size


def quiet_signature(path: str, now: int, racy: int) -> Signature | None:
    """The ``lstat`` signature of ``path`` unless it changed since ``now - racy`` (or is gone)."""
    try:
        sig = signature(os.lstat(path))
    except OSError:
        return None
    return None if now - max(sig[7], sig[8]) < racy else sig


def entry_dep(path: str, declared: str, now: int, racy: int) -> tuple[str, str, Signature] | None:
    """How to tell, on a later load, that the entry is still the file checked now; None: do not cache."""
    folder = path.rpartition("/")[0]
    candidate = declared if declared.startswith("/") else f"{folder}/{declared}"
    try:
        if "/" not in declared and declared not in (".", ".."):
            st = os.lstat(candidate)
            if not stat.S_ISLNK(st.st_mode):
                sig = signature(st)
                return None if now - max(sig[7], sig[8]) < racy else (candidate, "", sig)
        real, st = resolve_file(candidate)
    except (OSError, ValueError):
        return None
    sig = signature(st)
    return None if now - max(sig[7], sig[8]) < racy else (candidate, real, sig)


def dep_holds(dep: tuple[str, str, Signature]) -> bool:
    candidate, real, sig = dep
    try:
        if not real:
            return signature(os.lstat(candidate)) == sig
        now_real, st = resolve_file(candidate)
    except (OSError, ValueError):
        return False
    return now_real == real and signature(st) == sig


def untrusted(info: os.stat_result) -> str:
    if not stat.S_ISREG(info.st_mode):
        return "it is not a regular file"
    if info.st_uid != os.geteuid():
        return f"it belongs to uid {info.st_uid}, not to this user"
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return f"others may write it (mode {stat.S_IMODE(info.st_mode):04o})"
    return ""


def read_all(fd: int, limit: int) -> bytes:
    chunks = []
    size = 0
    while size < limit and (chunk := os.read(fd, min(limit - size, 16 * 1024 * 1024))):
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)


def write_atomic(path: str, data: bytes) -> Signature:
    """Write ``data`` to ``path`` through a renamed temporary file; the new file's signature."""
    directory = os.path.dirname(path)
    os.makedirs(directory, mode=0o700, exist_ok=True)
    fd, temporary = tempfile.mkstemp(dir=directory, prefix=".load-cache-")
    try:
        with os.fdopen(fd, "wb") as handle:
            os.fchmod(handle.fileno(), 0o600)
            handle.write(data)
            handle.flush()
            os.replace(temporary, path)
            return signature(os.fstat(handle.fileno()))
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
