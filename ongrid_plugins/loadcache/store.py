"""The load cache of one load: what it holds, how it is read, checked and looked up.

The file ``<cache_dir>/load-cache.bin`` (its byte layout and writer:
:mod:`.cachefile`; its key: :mod:`.key`) holds a head and records::

    (FORMAT, fingerprint, roots, folders, digests), {manifest: record, ...}...

of plain values only (tuples, strings, numbers, bytes): nothing in it is code or
names a class, and every record is checked for its shape when it is used. It is
read only when it is a regular file of this user that nobody else may write. A
wrong magic, length, checksum or shape is one warning and a cold load; a
fingerprint of other code or settings is a cold load without a warning (an
upgrade is no fault).

* ``folders``: ``{folder: (signature, claimed files, sub-folders)}``, what the
  walker's ``scandir`` found there. A folder whose ``lstat`` signature is
  unchanged has the same entries (creating, removing or renaming one changes
  its mtime and ctime), so a warm walk costs one ``lstat`` per folder.
* ``records``: ``{manifest: (root, signature, entry, value)}``; ``entry`` is
  ``(declared path, canonical path or "", signature)`` of the one other file
  the verdict rests on, or None; ``value`` is ``("s", skill record)``,
  ``("p", parse error)`` or ``("b", name, build error)``.
* ``digests``: the catalog's memo of file hashes (``catalog.digest``).

A signature is ``(dev, inode, mode, links, uid, gid, size, mtime_ns,
ctime_ns)``: ``os.utime`` cannot set ctime back, so an edit that keeps size and
mtime still shows. A file or folder changed less than :data:`RACY_NS` before the
load is not recorded (a second change within one timestamp tick could keep every
field the same).

On a cold load the walker only notes what it read; the signatures (taken after
the load: anything changed since the load began has a later ctime and is not
recorded), the entry's and the skills' records are made after the load, in a
background thread: the body goes to a temporary file in the same
folder (mode 0600) that is renamed over the old one, so a reader sees the old
file or the new one, never half of one, whoever writes. The last writer wins.
A process keeps what it wrote last in memory and reuses it while the file is
still the one it wrote (same inode, size and times).
"""

from __future__ import annotations

import logging
import marshal
import os
import threading
import time
import zlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..models import SkillRoot
from . import cachefile as _cachefile
from .cachefile import EMPTY as _EMPTY
from .cachefile import FORMAT, Listing, RootKey, Signature, signature, wait_for_writes
from .cachefile import HEAD as _HEAD
from .cachefile import HEAD_SIZE as _HEAD_SIZE
from .cachefile import MAGIC as _MAGIC
from .cachefile import Job as _Job
from .cachefile import State as _State
from .cachefile import dep_holds as _dep_holds
from .cachefile import read_all as _read_all
from .cachefile import split_chunks as _split
from .cachefile import untrusted as _untrusted
from .cachefile import writers as _writers
from .cachefile import written as _written
from .key import deferred_fingerprint

if TYPE_CHECKING:
    import pluggy

    from ..settings import Settings

__all__ = ["CACHE_NAME", "RACY_NS", "LoadCache", "open_cache", "signature", "wait_for_writes"]

logger = logging.getLogger(__name__)

CACHE_NAME = "load-cache.bin"
"""The cache file's name inside ``Settings.cache_dir``."""
RACY_NS = 2_000_000_000
"""A file changed this recently (in ns) is not recorded."""
MAX_FILE_BYTES = 512 * 1024 * 1024
"""A bigger cache file is ignored (it cannot be one this module wrote)."""


def _root_key(root: SkillRoot) -> RootKey:
    return (root.path, root.real, root.source, root.provenance, root.required)


# ---------------------------------------------------------------- the cache
class LoadCache:
    """One load's view of the cache file: look up, record, then :meth:`flush` once."""

    def __init__(self, directory: str, key: str | Callable[[], str]) -> None:
        self.path = os.path.join(directory, CACHE_NAME)
        self._key = key
        """The fingerprint, or what works it out (:func:`.key.deferred_fingerprint`): a load
        that finds no file leaves that to the writer."""
        self._old = _EMPTY
        self._roots: dict[RootKey, int] = {}
        self._folders: dict[str, tuple[Signature, Listing]] = {}
        self._records: dict[str, tuple[Any, ...]] = {}
        self.digests: dict[tuple[Any, ...], str] = {}
        self._pending: list[tuple[str, int, Signature | None, str, tuple[Any, ...]]] = []
        self._pending_folders: list[tuple[str, Listing]] = []
        self._stored = False
        self._now = time.time_ns()
        self._root: tuple[SkillRoot | None, int, int] = (None, -1, -1)
        self.hits = 0
        """Manifests answered from the cache in this load."""
        self.stale = 0
        """Manifests with a record that no longer holds (the file, its entry or its root changed)."""
        self.record: Callable[[Any, Any], Any] | None = None
        """``record(skill, warnings)``: a stored skill as its plain record (None: not recordable),
        called by the writer after the load; the loader sets it. Without it skills are not kept."""

    @property
    def key(self) -> str:
        """The fingerprint this cache is read and written under."""
        key = self._key
        if not isinstance(key, str):
            key = self._key = key()
        return key

    # -- reading
    def read(self) -> None:
        """Load the file (a missing one is simply empty; a bad one is one warning)."""
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK)
        except FileNotFoundError:
            return
        except OSError as exc:
            self._ignore(f"cannot open it ({exc.strerror or exc})")
            return
        try:
            info = os.fstat(fd)
            why = _untrusted(info)
            if why:
                self._ignore(why)
                return
            known = _written.get(self.path)
            if known is not None and known[0] == signature(info):
                if known[1] == self.key:
                    self._use(known[2])
                return
            data = _read_all(fd, min(info.st_size, MAX_FILE_BYTES) + 1)
        except OSError as exc:
            self._ignore(f"cannot read it ({exc.strerror or exc})")
            return
        finally:
            os.close(fd)
        self._parse(data)

    def _parse(self, data: bytes) -> None:
        if len(data) > MAX_FILE_BYTES:
            self._ignore("it is larger than any load cache")
            return
        if not data.startswith(_MAGIC) or len(data) < _HEAD_SIZE:
            self._ignore("it is not a load cache of this version (or it was cut short)")
            return
        crc, size = _HEAD.unpack_from(data, len(_MAGIC))
        body = memoryview(data)[_HEAD_SIZE:]
        if len(body) != size:
            self._ignore(f"it holds {len(body)} bytes of {size} (truncated)")
            return
        if zlib.crc32(body) != crc:
            self._ignore("its checksum does not match (corrupted)")
            return
        try:
            chunks = _split(body)
            fmt, key, roots, folders, digests = marshal.loads(next(chunks))
            if not (
                fmt == FORMAT
                and type(key) is str
                and type(roots) is tuple
                and type(folders) is dict
                and type(digests) is dict
            ):
                raise TypeError("unexpected layout")
            if key != self.key:
                logger.debug("load cache %s was written for other code or settings; loading cold", self.path)
                return
            records: dict[str, tuple[Any, ...]] = {}
            for chunk in chunks:
                part = marshal.loads(chunk)
                if type(part) is not dict:
                    raise TypeError("unexpected layout")
                records.update(part)
            table = {tuple(r): i for i, r in enumerate(roots)}
        except Exception as exc:
            self._ignore(f"it cannot be read back ({type(exc).__name__}: {exc})")
            return
        self._use(_State(table, folders, records, digests))

    def _use(self, state: _State) -> None:
        self._old = state
        self._roots = dict(state.roots)
        self.digests = dict(state.digests)

    def _ignore(self, why: str) -> None:
        logger.warning("load cache: ignoring %s: %s; loading without it", self.path, why)
        self._stored = True  # replace it, even with an empty cache: one line, not one per load

    # -- the walker's side
    def listing(self, folder: str) -> tuple[Listing | None, Signature | None]:
        """What the walk found in ``folder`` last time if it is unchanged, and its signature now.

        The signature is None when the cache knows nothing of the folder: the
        writer takes it after the load (see :meth:`_Job._complete`).
        """
        known = self._old.folders.get(folder)
        if known is None:
            return None, None
        try:
            sig = signature(os.lstat(folder))
        except OSError:
            return None, None
        if known[0] == sig:
            self._folders[folder] = known
            return known[1], sig
        return None, sig

    def remember_listing(self, folder: str, sig: Signature | None, listing: Listing) -> None:
        """Record what ``scandir`` found in ``folder`` (signature taken before it read, or None)."""
        if sig is None:
            self._pending_folders.append((folder, listing))
        elif self._now - max(sig[7], sig[8]) >= RACY_NS:
            self._folders[folder] = (sig, listing)
        self._stored = True

    def lookup(
        self, path: str, root: SkillRoot, build: Callable[[Any, str, SkillRoot], Any]
    ) -> tuple[tuple[Any, ...] | None, Signature | None]:
        """``(cached value, the manifest's signature now)``; the value is None on a miss.

        A skill's value is ``("s", skill)`` with the skill made by ``build(record,
        path, root)``; errors are returned as recorded.
        """
        record = self._old.records.get(path)
        if record is None:  # nothing to compare: the writer takes the signature after the load
            return None, None
        try:
            sig = signature(os.lstat(path))
        except OSError:
            return None, None
        result = self._check(record, sig, path, root, build)
        if result is None:
            self.stale += 1
            return None, sig
        self._records[path] = record
        self.hits += 1
        return result, sig

    def _check(
        self,
        record: tuple[Any, ...],
        sig: Signature,
        path: str,
        root: SkillRoot,
        build: Callable[[Any, str, SkillRoot], Any],
    ) -> tuple[Any, ...] | None:
        """The value of a record that still holds, else None."""
        try:
            root_index, manifest_sig, dep, value = record
            if root_index != self._root_index(root)[0] or manifest_sig != sig:
                return None
            if dep is not None and not _dep_holds(dep):
                return None
            kind = value[0]
            if kind == "s":
                return ("s", build(value[1], path, root))
            if kind == "p" and type(value[1]) is str:
                return tuple(value)
            if kind == "b" and type(value[1]) is str and type(value[2]) is str:
                return tuple(value)
        except (TypeError, ValueError, KeyError, IndexError, EOFError, AttributeError, OSError):
            pass
        return None

    def _root_index(self, root: SkillRoot) -> tuple[int, int]:
        """(index of the root in the file read, index in the file to write)."""
        known, old, new = self._root
        if known is not root:
            key = _root_key(root)
            old = self._old.roots.get(key, -1)
            new = self._roots.setdefault(key, len(self._roots))
            self._root = (root, old, new)
        return old, new

    def store(
        self, path: str, root: SkillRoot, sig: Signature | None, value: tuple[Any, ...], entry: str | None
    ) -> None:
        """Record what the built-in skill.json loader made of ``path``.

        ``value`` is ``("s", skill)``, ``("p", message)`` or ``("b", name,
        message)``; ``entry`` is the declared entry the verdict rests on ("" for
        none, None: it rests on more, so it is not recorded). ``sig`` is the
        manifest's signature taken before it was read, or None: the writer takes
        it, with the entry's and the skill's record, after the load.
        """
        if entry is None or (sig is not None and self._now - max(sig[7], sig[8]) < RACY_NS):
            return
        if value[0] == "s":  # the warnings now: the catalog may stamp a digest warning later
            value = ("s", value[1], value[1].warnings)
        self._pending.append((path, self._root_index(root)[1], sig, entry, value))
        self._stored = True

    # -- writing
    def flush(self) -> None:
        """Write the file (in a background thread) if this load changed anything; never raises."""
        old = self._old
        unchanged = (
            not self._stored
            and len(self._records) == len(old.records)
            and len(self._folders) == len(old.folders)
            and self._roots == old.roots
            and self.digests == old.digests
        )
        if unchanged:
            return
        job = _Job(
            self.path, self._key, self._now, self._roots, self._folders, self._records, self.digests, RACY_NS
        )
        job.pending, self._pending = self._pending, []
        job.pending_folders, self._pending_folders = self._pending_folders, []
        job.record = self.record
        thread = threading.Thread(target=job.run, name="ongrid-load-cache", daemon=False)
        with _cachefile.lock:  # read at each use: a forked child gets a new one
            previous = _writers.get(self.path)
            _writers[self.path] = thread
        if previous is not None:
            previous.join()
        thread.start()


def open_cache(pm: pluggy.PluginManager, settings: Settings) -> LoadCache | None:
    """The cache for one load with these plugins and settings, read; None when there is none."""
    if not settings.cache_dir or not settings.load_cache:
        return None
    key = deferred_fingerprint(pm, settings)
    if key is None:
        logger.debug("load cache off: a loader from outside ongrid_plugins is installed")
        return None
    cache = LoadCache(settings.cache_dir, key)
    wait_for_writes(cache.path)
    cache.read()
    return cache
