"""The load cache file: what it holds, how it is keyed, read, checked and written.

The file ``<cache_dir>/load-cache.bin`` is::

    b"ongrid-loadcache-v1\\n" + blake2b-256(body) + body
    body = pickle((fingerprint, records, digests))

read with an unpickler that builds nothing but the model classes of a skill
(no other global, no persistent ids), after checking that the file is a regular
file of this user that nobody else may write. A wrong magic, checksum or shape
is one warning and a cold load; a fingerprint of other code or settings is a
cold load without a warning (an upgrade is no fault). Writes go to a temporary
file in the same folder (mode 0600) and are renamed over the old one, so a
reader sees the old file or the new one, never half of one, whoever writes.

A record maps a manifest path to ``(root key, manifest signature, entry
dependency, value)``; the value is the skill the loader built or the message of
the parse error it raised. A signature is ``(dev, inode, mode, links, uid, gid,
size, mtime_ns, ctime_ns)``: ``os.utime`` cannot set ctime back, so an edit that
keeps size and mtime still shows. A file changed less than :data:`RACY_NS` ago
is never recorded (a second write within one timestamp tick would keep every
field the same).
"""

from __future__ import annotations

import contextlib
import copyreg
import functools
import gc
import hashlib
import logging
import os
import pickle
import stat
import sys
import tempfile
import time
from typing import TYPE_CHECKING, Any

from .. import models
from ..models import Skill, SkillRoot, Tool
from ..roots import builtin_skills_dir, resolve_file

if TYPE_CHECKING:
    import pluggy

    from ..settings import Settings

__all__ = ["CACHE_NAME", "RACY_NS", "LoadCache", "fingerprint", "open_cache", "signature"]

logger = logging.getLogger(__name__)

CACHE_NAME = "load-cache.bin"
"""The cache file's name inside ``Settings.cache_dir``."""
RACY_NS = 2_000_000_000
"""A file changed this recently (in ns) is not recorded."""
MAX_FILE_BYTES = 512 * 1024 * 1024
"""A bigger cache file is ignored (it cannot be one this module wrote)."""
_MAGIC = b"ongrid-loadcache-v1\n"
_SUM = 32
_ALLOWED = frozenset(
    {"Skill", "Tool", "Problem", "SandboxDecl", "SandboxLimits", "ToolClass", "Activation", "Requirements"}
)

Signature = tuple[int, int, int, int, int, int, int, int, int]


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


def _racy(sig: Signature, now: int) -> bool:
    return now - max(sig[7], sig[8]) < RACY_NS


def _root_key(root: SkillRoot) -> tuple[str, str, str, str, bool]:
    return (root.path, root.real, root.source, root.provenance, root.required)


# ---------------------------------------------------------------- fingerprint
@functools.cache
def _code_stamp() -> str:
    """Path, size and mtime of every module of the package, read once per process."""
    top = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    h = hashlib.blake2b(digest_size=16)
    for folder, dirs, files in sorted(os.walk(top)):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(files):
            if name.endswith((".py", ".json")):
                st = os.stat(os.path.join(folder, name))
                h.update(f"{os.path.relpath(folder, top)}/{name}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return h.hexdigest()


def fingerprint(pm: pluggy.PluginManager, settings: Settings) -> str | None:
    """The key of the whole cache: everything but the files that shapes what the loader builds.

    None (no cache) when a plugin from outside this package implements
    ``ongrid_load_manifest``: what a third-party loader reads cannot be known.
    """
    from .. import __version__, schemacheck

    loaders = []
    for impl in pm.hook.ongrid_load_manifest.get_hookimpls():
        module = getattr(impl.plugin, "__name__", "")
        if not module.startswith("ongrid_plugins."):
            return None
        loaders.append((impl.plugin_name, module, impl.tryfirst, impl.trylast, impl.hookwrapper))
    names = sorted(n for result in pm.hook.ongrid_manifest_names() if result for n in result)
    parts: list[Any] = [
        __version__,
        sys.version,
        _code_stamp(),
        schemacheck._environment_fingerprint(),
        loaders,
        names,
        os.path.expanduser("~"),
        os.geteuid(),
        builtin_skills_dir(),
        settings.default_timeout,
        sorted(settings.sandbox_caps.items()),
        settings.state_dir,
        settings.config_dir,
        settings.cache_dir,
        settings.skill_dirs,
        settings.env_dirs,
        settings.system_skills_dir,
        settings.user_skills_dir,
        settings.include_defaults,
    ]
    return hashlib.blake2b(repr(parts).encode("utf-8", "surrogateescape"), digest_size=16).hexdigest()


# ---------------------------------------------------------------- pickling
def _reduce_skill(skill: Skill) -> tuple[Any, ...]:
    # What the loader built, without what the catalog stamps later (digests,
    # stale, the digest_partial warning) and without the root (the walker's own).
    state: dict[str, Any] = dict(skill.__getstate__())  # type: ignore[call-overload]
    state.update(digest="", stale="", root=None)
    state["warnings"] = tuple(w for w in skill.warnings if w.code != "digest_partial")
    return copyreg.__newobj__, (Skill,), state  # type: ignore[attr-defined]


def _reduce_tool(tool: Tool) -> tuple[Any, ...]:
    if tool.native is not None:
        raise pickle.PicklingError(f"tool {tool.name} is native")
    state: dict[str, Any] = dict(tool.__getstate__())  # type: ignore[call-overload]
    state.update(digest="", entry_digest="", cache={})
    return copyreg.__newobj__, (Tool,), state  # type: ignore[attr-defined]


def _reduce_root(root: SkillRoot) -> tuple[Any, ...]:
    raise pickle.PicklingError("roots are not cached")


_DISPATCH: dict[type, Any] = {Skill: _reduce_skill, Tool: _reduce_tool, SkillRoot: _reduce_root}


class _Unpickler(pickle.Unpickler):
    """Builds the model classes of a skill and nothing else."""

    def find_class(self, module: str, name: str) -> Any:
        if module == "ongrid_plugins.models" and name in _ALLOWED:
            return getattr(models, name)
        raise pickle.UnpicklingError(f"{module}.{name} has no place in a load cache")


# ---------------------------------------------------------------- the cache
class LoadCache:
    """One load's view of the cache file: look up, record, then :meth:`flush` once."""

    def __init__(self, directory: str, key: str) -> None:
        self.path = os.path.join(directory, CACHE_NAME)
        self.key = key
        self._old: dict[str, tuple[Any, ...]] = {}
        self._new: dict[str, tuple[Any, ...]] = {}
        self.digests: dict[tuple[Any, ...], str] = {}
        self._read_digests: dict[tuple[Any, ...], str] = {}
        self._dirty = False
        self._now = time.time_ns()
        self._root: tuple[SkillRoot | None, tuple[str, str, str, str, bool] | None] = (None, None)

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
            data = _read_all(fd, min(info.st_size, MAX_FILE_BYTES) + 1)
        except OSError as exc:
            self._ignore(f"cannot read it ({exc.strerror or exc})")
            return
        finally:
            os.close(fd)
        self._parse(data)

    def _parse(self, data: bytes) -> None:
        head = len(_MAGIC) + _SUM
        if len(data) > MAX_FILE_BYTES:
            self._ignore("it is larger than any load cache")
            return
        if not data.startswith(_MAGIC) or len(data) < head:
            self._ignore("it is not a load cache (or it was cut short)")
            return
        body = memoryview(data)[head:]
        if hashlib.blake2b(body, digest_size=_SUM).digest() != data[len(_MAGIC) : head]:
            self._ignore("its checksum does not match (truncated or corrupted)")
            return
        was_enabled = gc.isenabled()
        gc.disable()  # the records are acyclic: collecting while they are built only costs
        try:
            loaded = _Unpickler(_Reader(body)).load()
            key, records, digests = loaded
            if not (isinstance(key, str) and isinstance(records, dict) and isinstance(digests, dict)):
                raise TypeError("unexpected layout")
        except Exception as exc:
            self._ignore(f"it cannot be read back ({type(exc).__name__}: {exc})")
            return
        finally:
            if was_enabled:
                gc.enable()
        if key != self.key:
            logger.debug("load cache %s was written for other code or settings; loading cold", self.path)
            self._dirty = True
            return
        self._old = records
        self._read_digests = digests
        self.digests = dict(digests)

    def _ignore(self, why: str) -> None:
        logger.warning("load cache: ignoring %s: %s; loading without it", self.path, why)
        self._dirty = True

    # -- the walker's side
    def lookup(self, path: str, root: SkillRoot) -> tuple[Skill | str | None, Signature | None]:
        """``(cached value, the manifest's signature now)``; the value is None on a miss."""
        try:
            sig = signature(os.lstat(path))
        except OSError:
            return None, None
        record = self._old.get(path)
        if record is None:
            return None, sig
        try:
            root_key, manifest_sig, dep, value = record
            if root_key != self._key_of(root) or manifest_sig != sig or not _dep_holds(dep):
                return None, sig
            if isinstance(value, Skill):
                object.__setattr__(value, "root", root)  # a fresh object: this load's only
            elif not isinstance(value, str):
                return None, sig
        except (TypeError, ValueError, AttributeError, OSError):
            return None, sig
        self._new[path] = record
        return value, sig

    def _key_of(self, root: SkillRoot) -> tuple[str, str, str, str, bool]:
        known, key = self._root
        if known is not root or key is None:
            key = _root_key(root)
            self._root = (root, key)
        return key

    def store(self, path: str, root: SkillRoot, sig: Signature | None, value: Skill | str) -> None:
        """Record what the built-in skill.json loader made of ``path`` (signature taken before it read)."""
        if sig is None or _racy(sig, self._now):
            return
        dep: tuple[Any, ...] | None = None
        if isinstance(value, Skill):
            dep = _entry_dep(path, value, self._now)
            if dep is None:
                return
        self._new[path] = (self._key_of(root), sig, dep, value)
        self._dirty = True

    # -- writing
    def flush(self) -> None:
        """Write the file if this load found anything new, changed or gone; never raises."""
        if not self._dirty and self._new.keys() == self._old.keys() and self.digests == self._read_digests:
            return
        try:
            body = _dumps((self.key, self._new, self.digests))
        except (pickle.PicklingError, TypeError, AttributeError, RecursionError) as exc:
            logger.debug("load cache: cannot record this load: %s", exc)
            return
        data = _MAGIC + hashlib.blake2b(body, digest_size=_SUM).digest() + body
        try:
            _write_atomic(self.path, data)
        except OSError as exc:
            logger.debug("load cache: cannot write %s: %s", self.path, exc)


def open_cache(pm: pluggy.PluginManager, settings: Settings) -> LoadCache | None:
    """The cache for one load with these plugins and settings, read; None when there is none."""
    if not settings.cache_dir:
        return None
    key = fingerprint(pm, settings)
    if key is None:
        logger.debug("load cache off: a loader from outside ongrid_plugins is installed")
        return None
    cache = LoadCache(settings.cache_dir, key)
    cache.read()
    return cache


def _entry_dep(path: str, skill: Skill, now: int) -> tuple[Any, ...] | None:
    """How to tell, on a later load, that the entry is still the file checked now; None: do not cache."""
    if skill.format != "skill.json" or skill.notices or len(skill.tools) != 1:
        return None
    tool = skill.tools[0]
    declared = tool.entry_declared
    if tool.kind != "subprocess" or not isinstance(declared, str) or not tool.entry:
        return None
    folder = path.rpartition("/")[0]
    candidate = declared if declared.startswith("/") else f"{folder}/{declared}"
    try:
        if "/" not in declared and declared not in (".", ".."):
            st = os.lstat(candidate)
            if not stat.S_ISLNK(st.st_mode):
                sig = signature(st)
                ok = candidate == tool.entry and not _racy(sig, now)
                return ("l", candidate, sig) if ok else None
        real, st = resolve_file(candidate)
    except (OSError, ValueError):
        return None
    sig = signature(st)
    if real != tool.entry or _racy(sig, now):
        return None
    return ("r", candidate, real, sig)


def _dep_holds(dep: tuple[Any, ...] | None) -> bool:
    if dep is None:
        return True
    if dep[0] == "l":
        try:
            return bool(signature(os.lstat(dep[1])) == dep[2])
        except OSError:
            return False
    if dep[0] == "r":
        try:
            real, st = resolve_file(dep[1])
        except (OSError, ValueError):
            return False
        return bool(real == dep[2] and signature(st) == dep[3])
    return False


def _dumps(value: object) -> bytes:
    import io

    buffer = io.BytesIO()
    pickler = pickle.Pickler(buffer, protocol=pickle.HIGHEST_PROTOCOL)
    pickler.dispatch_table = _DISPATCH
    pickler.dump(value)
    return buffer.getvalue()


class _Reader:
    """A file-like view of the body for the unpickler (no copy)."""

    def __init__(self, view: memoryview) -> None:
        self._view = view
        self._pos = 0

    def read(self, n: int = -1) -> bytes:
        end = len(self._view) if n < 0 else self._pos + n
        chunk = self._view[self._pos : end].tobytes()
        self._pos += len(chunk)
        return chunk

    def readinto(self, buffer: Any) -> int:
        chunk = self._view[self._pos : self._pos + len(buffer)]
        buffer[: len(chunk)] = chunk
        self._pos += len(chunk)
        return len(chunk)

    def readline(self) -> bytes:
        rest = self._view[self._pos :].tobytes()
        line, sep, _ = rest.partition(b"\n")
        self._pos += len(line) + len(sep)
        return line + sep


def _untrusted(info: os.stat_result) -> str:
    if not stat.S_ISREG(info.st_mode):
        return "it is not a regular file"
    if info.st_uid != os.geteuid():
        return f"it belongs to uid {info.st_uid}, not to this user"
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return f"others may write it (mode {stat.S_IMODE(info.st_mode):04o})"
    return ""


def _read_all(fd: int, limit: int) -> bytes:
    chunks = []
    size = 0
    while size < limit and (chunk := os.read(fd, min(limit - size, 16 * 1024 * 1024))):
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)


def _write_atomic(path: str, data: bytes) -> None:
    directory = os.path.dirname(path)
    os.makedirs(directory, mode=0o700, exist_ok=True)
    fd, temporary = tempfile.mkstemp(dir=directory, prefix=".load-cache-")
    try:
        with os.fdopen(fd, "wb") as handle:
            os.fchmod(handle.fileno(), 0o600)
            handle.write(data)
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
