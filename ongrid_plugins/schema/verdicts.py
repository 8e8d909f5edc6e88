"""The verdict cache: jsonschema's "valid" answers about schemas, kept across processes.

What the fast path cannot vouch for costs a jsonschema run.  :class:`VerdictCache` keeps,
across processes, a hash of every schema jsonschema declared valid, keyed by the canonical
JSON text and a tag naming the checker's rules (:data:`CACHE_VERSION`), the Python version
(``re`` syntax changes between versions) and the installed jsonschema, metaschema and
format-checker packages.  Only "valid" is ever cached, so a stale or missing cache only
costs time.  :func:`content_key` gives loaders keys for whole documents under the same tag;
:meth:`VerdictCache.knows_content` and :meth:`VerdictCache.add_content_later` key them
lazily: a cache that holds nothing hashes nothing to answer "no", and what a load adds is
hashed after the load (:func:`settle_in_background`), not between its manifests.

It may import the standard library and :mod:`~ongrid_plugins.forksafe` only (it finds
jsonschema's files, never imports it).
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import hashlib
import json
import logging
import math
import os
import stat
import sys
import threading
import time
from typing import Any, Final

from ..forksafe import renew_after_fork

__all__ = [
    "CACHE_FILENAME",
    "CACHE_VERSION",
    "VerdictCache",
    "content_key",
    "settle_in_background",
    "verdict_cache",
]

logger = logging.getLogger(__name__)

#: Bump whenever the checker's idea of validity changes: it is part of every cache key.
CACHE_VERSION: Final = 2
CACHE_FILENAME: Final = "schema-verdicts-v1.bin"

_CANONICAL_MAX_DEPTH: Final = 200  # json.dumps recurses in C; stay far from the limit
_CANONICAL_MAX_NODES: Final = 1_000_000
_SCALAR_TYPES: Final = frozenset({str, int, bool, type(None)})


def _is_plain_json(value: object) -> bool:
    """Only exact JSON types may be cached: json.dumps would write a tuple as a list and
    a key 1 as "1", colliding with a plain schema jsonschema may judge differently."""
    budget = _CANONICAL_MAX_NODES
    stack: list[tuple[object, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        budget -= 1
        if budget < 0 or depth > _CANONICAL_MAX_DEPTH:
            return False
        if type(item) is dict:
            for key, sub in item.items():
                if type(key) is not str:
                    return False
                stack.append((sub, depth + 1))
        elif type(item) is list:
            stack.extend((sub, depth + 1) for sub in item)
        elif type(item) is float:
            if not math.isfinite(item):
                return False
        elif type(item) not in _SCALAR_TYPES:
            return False
    return True


def _cache_key(schema: object) -> bytes | None:
    """16-byte blake2b of tag + canonical JSON, or None if the schema is not cacheable."""
    fingerprint = _environment_fingerprint()
    if fingerprint is None or not _is_plain_json(schema):
        return None
    try:
        text = json.dumps(schema, sort_keys=True, separators=(",", ":"), allow_nan=False)
    except (ValueError, TypeError, RecursionError):  # e.g. ints beyond the str() limit
        return None
    # The tag keeps the name of the module this came from, so caches written before stay valid.
    tag = f"ongrid-schemacheck/{CACHE_VERSION}/{fingerprint}".encode()
    digest = hashlib.blake2b(len(tag).to_bytes(4, "big"), digest_size=16)
    digest.update(tag)
    digest.update(text.encode())
    return digest.digest()


def content_key(domain: bytes, payload: bytes) -> bytes | None:
    """A 16-byte cache key for ``payload`` under ``domain`` and this module's tag.

    For callers that cache verdicts about whole documents (the skill.json loader
    keys "this manifest's schema and defaults are valid" by the manifest's raw
    bytes). None when caching is off (jsonschema cannot be located).
    """
    base = _content_base(domain)
    if base is None:
        return None
    digest = base.copy()
    digest.update(payload)
    key: bytes = digest.digest()
    return key


@functools.lru_cache(maxsize=16)
def _content_base(domain: bytes) -> Any:
    """The hash of :func:`content_key`'s prefix for ``domain``, to copy (one per load, not per file)."""
    fingerprint = _environment_fingerprint()
    if fingerprint is None:
        return None
    tag = f"ongrid-schemacheck/{CACHE_VERSION}/{fingerprint}/".encode() + domain
    digest = hashlib.blake2b(len(tag).to_bytes(4, "big"), digest_size=16)
    digest.update(tag)
    return digest


@functools.cache
def _environment_fingerprint() -> str | None:
    """Python version plus version and file stamp of every package that shapes
    check_schema's verdict; None (no caching) if jsonschema cannot be located.

    Read from the filesystem: importlib.metadata alone costs ~30 ms of imports and
    importing jsonschema 70-90 ms, which is what a cache hit is meant to save.
    """
    import importlib.util

    parts = [sys.implementation.name, "{}.{}".format(*sys.version_info[:2])]
    modules = (
        "jsonschema",
        "jsonschema_specifications",
        "referencing",
        "rfc3987",
        "rfc3986_validator",
        "re2",
    )
    for module in modules:
        try:
            spec = importlib.util.find_spec(module)
            stamp = None if spec is None or not spec.origin else _package_stamp(spec.origin)
        except (ImportError, ValueError, OSError):
            stamp = None
        if stamp is None and module == "jsonschema":
            return None
        parts.append(f"{module}={stamp or 'absent'}")
    return ";".join(parts)


def _package_stamp(origin: str) -> str:
    """ "<dist-info versions>@<mtime_ns>:<size>" of a module's file (a reinstall touches it)."""
    info = os.stat(origin)
    base = os.path.basename(origin)
    module = os.path.splitext(base)[0]
    if module == "__init__":
        module = os.path.basename(os.path.dirname(origin))
        site = os.path.dirname(os.path.dirname(origin))
    else:
        site = os.path.dirname(origin)
    prefix = module.lower() + "-"
    versions = sorted(
        entry[len(prefix) : -len(".dist-info")]
        for entry in _listdir(site)
        if entry.lower().startswith(prefix) and entry.endswith(".dist-info")
    )
    return f"{'+'.join(versions) or '?'}@{info.st_mtime_ns}:{info.st_size}"


@functools.cache
def _listdir(directory: str) -> tuple[str, ...]:
    return tuple(os.listdir(directory))


_MAGIC: Final = b"ongrid-verdict-1"  # 16 bytes, so records stay 16-byte aligned
_RECORD: Final = 16
_MAX_RECORDS: Final = 1 << 18  # 4 MiB: plenty for tens of thousands of skills


class VerdictCache:
    """Persistent set of content hashes of schemas jsonschema already declared valid.

    The file (``CACHE_FILENAME`` in `directory`) is a 16-byte magic followed by 16-byte
    records.  It is read lazily on first use; an unreadable, corrupt, foreign-owned or
    group/world-writable file counts as empty (a planted record would let an invalid
    schema through).  Nothing here raises on I/O trouble: it is logged at DEBUG.
    """

    def __init__(self, directory: str | os.PathLike[str] | None) -> None:
        self._directory = None if directory is None else os.fspath(directory)
        self._known: set[bytes] | None = None
        self._added: set[bytes] = set()
        self._later: list[tuple[bytes, bytes]] = []
        self._settler: threading.Thread | None = None
        self._lock = threading.Lock()
        renew_after_fork(self, "_lock")  # the settling thread takes it: a fork may land then

    @property
    def path(self) -> str | None:
        """The cache file, or None for an in-memory cache."""
        if self._directory is None:
            return None
        return os.path.join(self._directory, CACHE_FILENAME)

    def __contains__(self, key: object) -> bool:
        return key in self._added or key in self._loaded()

    def __len__(self) -> int:
        self.settle()
        return len(self._loaded() | self._added)

    def knows_content(self, domain: bytes, payload: bytes) -> bool:
        """Is ``content_key(domain, payload)`` in the cache? Hashes nothing while it is empty.

        A document added with :meth:`add_content_later` and not yet settled counts as
        unknown (it is only checked again).
        """
        known = self._loaded()
        if not known and not self._added:  # a first load on this machine: nothing to find
            return False
        key = content_key(domain, payload)
        return key is not None and (key in self._added or key in known)

    def add_content_later(self, domain: bytes, payload: bytes) -> None:
        """Record a "valid" verdict about a whole document; it is hashed by :meth:`settle`."""
        with self._lock:
            self._later.append((domain, payload))

    def settle(self) -> None:
        """Hash the documents :meth:`add_content_later` recorded into keys (waits for a running settle)."""
        settler = self._settler
        if settler is not None and settler is not threading.current_thread():
            settler.join()
        if not self._later:
            return
        with self._lock:
            later, self._later = self._later, []
        keys = {content_key(domain, payload) for domain, payload in later}
        keys.discard(None)
        known = self._loaded()
        with self._lock:
            self._added.update(key for key in keys if key is not None and key not in known)

    def settle_in_background(self) -> None:
        """Start hashing what :meth:`add_content_later` recorded in a thread of its own."""
        if not self._later or (self._settler is not None and self._settler.is_alive()):
            return
        thread = threading.Thread(target=self._settle_soon, name="ongrid-schema-verdicts", daemon=False)
        self._settler = thread
        thread.start()

    def add(self, key: bytes) -> None:
        if type(key) is not bytes or len(key) != _RECORD:
            raise ValueError(f"cache keys are {_RECORD} bytes")
        if key not in self._loaded():
            with self._lock:
                self._added.add(key)

    def _settle_soon(self) -> None:
        # Wait first: the load that started this thread has its last steps to do (the
        # load cache's writer thread to start, whose Thread.start() would otherwise wait
        # out this thread's GIL slice, 5 ms or more). The hashes are for the next process.
        time.sleep(SETTLE_DELAY)
        self.settle()

    def flush(self) -> None:
        """Write the file atomically (tempfile + os.replace), only if something was added."""
        self.settle()
        path = self.path
        with self._lock:
            if not self._added or path is None:
                return
            added = set(self._added)
            # Merge what other processes wrote meanwhile; newest verdicts win the cap.
            older = (self._read() | (self._known or set())) - added
            records = [*added, *older][:_MAX_RECORDS]
            try:
                self._write(path, records)
            except OSError as error:
                logger.debug("cannot write schema verdict cache %s: %s", path, error)
                return
            self._known = set(records)
            self._added -= added

    def flush_at_exit(self) -> None:
        """:meth:`flush`, unless the folder that held the cache folder is gone.

        Registered with ``atexit``: an embedder that ran a host over a temporary folder
        and removed it must not find it made again, holding only this file.
        """
        path = self.path
        if path is not None and os.path.isdir(os.path.dirname(os.path.dirname(path))):
            self.flush()

    def _loaded(self) -> set[bytes]:
        known = self._known
        if known is None:
            with self._lock:
                if self._known is None:
                    self._known = self._read()
                known = self._known
        return known

    def _read(self) -> set[bytes]:
        path = self.path
        if path is None:
            return set()
        try:
            with open(path, "rb") as handle:
                info = os.fstat(handle.fileno())
                if not _trustworthy(info):
                    logger.debug("ignoring schema verdict cache %s: unsafe owner/mode", path)
                    return set()
                data = handle.read(len(_MAGIC) + _MAX_RECORDS * _RECORD + 1)
        except FileNotFoundError:
            return set()
        except OSError as error:
            logger.debug("cannot read schema verdict cache %s: %s", path, error)
            return set()
        body = len(data) - len(_MAGIC)
        if not data.startswith(_MAGIC) or body % _RECORD or body > _MAX_RECORDS * _RECORD:
            logger.debug("ignoring corrupt schema verdict cache %s", path)
            return set()
        return {data[i : i + _RECORD] for i in range(len(_MAGIC), len(data), _RECORD)}

    def _write(self, path: str, records: list[bytes]) -> None:
        import tempfile

        directory = os.path.dirname(path)
        os.makedirs(directory, mode=0o700, exist_ok=True)
        fd, temporary = tempfile.mkstemp(dir=directory, prefix=".schema-verdicts-")
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(_MAGIC + b"".join(records))
            os.replace(temporary, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
            raise


def _trustworthy(info: os.stat_result) -> bool:
    return (
        stat.S_ISREG(info.st_mode)
        and info.st_uid == os.geteuid()
        and not info.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
    )


_SHARED_CACHES: dict[str, VerdictCache] = {}
_SHARED_LOCK = threading.Lock()
renew_after_fork(sys.modules[__name__], "_SHARED_LOCK")


#: Seconds a background settling waits before it hashes (see ``VerdictCache._settle_soon``).
SETTLE_DELAY = 0.005


def settle_in_background() -> None:
    """Hash, in a background thread per cache, what loads added to the shared caches.

    The loader calls it after a load: the hashes are bookkeeping for the next
    process, not part of this load's answer.
    """
    with _SHARED_LOCK:
        caches = list(_SHARED_CACHES.values())
    for cache in caches:
        cache.settle_in_background()


def verdict_cache(directory: str | os.PathLike[str]) -> VerdictCache:
    """The process-wide :class:`VerdictCache` for `directory`, flushed at interpreter exit.

    Loaders check one schema per manifest; sharing one instance per directory means the
    file is read once per process and written at most once more.
    """
    path = os.path.abspath(os.fspath(directory))
    with _SHARED_LOCK:
        cache = _SHARED_CACHES.get(path)
        if cache is None:
            cache = _SHARED_CACHES[path] = VerdictCache(path)
            atexit.register(cache.flush_at_exit)
    return cache
