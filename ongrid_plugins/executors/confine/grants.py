"""What a confined call is granted, opened once and shared: the rule base and each tool's grants.

:class:`Base` holds ``O_PATH`` descriptors for ``/`` minus the hidden paths (one per
set of hidden paths); :class:`Static` what every call of one tool under one profile
is granted on top (devices, the skill's folder, the interpreter's installation, the
declared paths). Both are cached, reused while the paths they were opened from still
name the same inodes, and closed only once no call holds them (:func:`acquire_base`,
:func:`acquire_static`, :func:`release`). :class:`~.plan.Plan` builds a call from them.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import sys
import threading
from collections.abc import Callable, Iterable
from typing import Any

from ...core.forksafe import renew_after_fork
from . import landlock
from .profile import Profile
from .stamps import FileStamp, same_files, same_mtimes

__all__ = [
    "KEEP_BASES",
    "Base",
    "ConfinementError",
    "Static",
    "acquire_base",
    "acquire_static",
    "entry_key",
    "release",
]

_DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty")


class ConfinementError(Exception):
    """The call cannot be confined as its profile and ``ONGRID_SANDBOX`` require."""


def _within(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


# -- the read-everything-but-hidden base ------------------------------------------


def _a_device(entry: os.DirEntry[str], is_dir: bool) -> bool:
    """A block or character device (a raw disk reads every file on it, hidden ones too)."""
    return not is_dir and _device_mode(entry.stat(follow_symlinks=False).st_mode)


def _device_mode(mode: int) -> bool:
    return stat.S_ISBLK(mode) or stat.S_ISCHR(mode)


def _holds_devices(folder: str) -> bool:
    """``/dev`` and its folders that hold device nodes, however deep (``/dev/pts``,
    ``/dev/cpu/0/msr``): granted entry by entry, without the devices."""
    if folder == "/dev":
        return True
    if not _within(folder, "/dev"):
        return False
    try:
        with os.scandir(folder) as scan:
            entries = list(scan)
        for entry in entries:
            is_dir = entry.is_dir(follow_symlinks=False)
            if _a_device(entry, is_dir) or (is_dir and _holds_devices(entry.path)):
                return True
    except OSError:
        return True  # unlistable: granted as nothing
    return False


class Base:
    """O_PATH descriptors granting ``/`` minus the hidden paths, and how to tell they are stale."""

    def __init__(self, hidden: tuple[str, ...]) -> None:
        self.grants: list[tuple[int, bool]] = []  # (fd, is_directory)
        self.stamps: list[tuple[str, int]] = []  # the folders listed, with their mtime
        self._prepared: dict[int, Any] = {}
        self.users = 0
        self.retired = False
        # A hidden path that does not exist needs no carving; its parent's mtime changes
        # when it appears, which makes this base stale.
        present = tuple(h for h in hidden if os.path.lexists(h))
        for path in hidden:
            parent = os.path.dirname(path)
            while parent and not os.path.lexists(parent):
                parent = os.path.dirname(parent)
            if parent and path not in present:
                with contextlib.suppress(OSError):
                    self.stamps.append((parent, os.stat(parent).st_mtime_ns))
        self._carve("/", present)
        # Hidden paths share parents (~/.ssh, ~/.aws, ...): each folder is checked once a call.
        self.stamps = list(dict.fromkeys(self.stamps))

    def _carve(self, folder: str, hidden: tuple[str, ...]) -> None:
        try:
            self.stamps.append((folder, os.stat(folder).st_mtime_ns))
            entries = list(os.scandir(folder))
        except OSError:
            return
        for entry in entries:
            path = entry.path
            if any(_within(path, h) for h in hidden):
                continue  # hidden itself, or under it
            try:
                if entry.is_symlink():
                    continue  # reached through its target, which is granted (or not) on its own
                is_dir = entry.is_dir(follow_symlinks=False)
                if _within(path, "/dev") and _a_device(entry, is_dir):
                    continue  # disks, terminals, consoles: only the few of _DEVICES, granted per tool
            except OSError:
                continue
            if is_dir and (any(_within(h, path) for h in hidden) or _holds_devices(path)):
                self._carve(path, hidden)
                continue
            try:
                fd = os.open(path, os.O_PATH | os.O_CLOEXEC | os.O_NOFOLLOW)
            except OSError:
                continue
            self.grants.append((fd, is_dir))

    def rules(self, rights: int) -> Any:
        """The prepared Landlock rules of this base for ``rights`` (built once per rights)."""
        prepared = self._prepared.get(rights)
        if prepared is None:
            prepared = self._prepared[rights] = landlock.prepare(self.grants, rights)
        return prepared

    def fresh(self) -> bool:
        return same_mtimes(self.stamps)

    def close(self) -> None:
        for fd, _ in self.grants:
            with contextlib.suppress(OSError):
                os.close(fd)
        self.grants = []


_bases: dict[tuple[str, ...], Base] = {}
_bases_lock = threading.RLock()  # re-entered when a retired static releases its base
# A thread of the parent may have held it at a fork (the bases' descriptors are inherited,
# and stay usable in the child).
renew_after_fork(sys.modules[__name__], "_bases_lock")
KEEP_BASES = 4  # hosts with many settings objects (tests): keep the newest
_FD_BUDGET = 256
"""Descriptors the caches may hold at once (a host has one base and a static per tool;
a process with many settings objects, like a test suite, must not run out of files)."""


def acquire_base(hidden: tuple[str, ...]) -> Base:
    """The current base for ``hidden``, held until :func:`release`.

    A base that went stale or was evicted is closed only once no call holds it: its
    descriptors are in the rules of calls being prepared, and a closed number could
    be reused by an unrelated file that a rule would then grant.
    """
    with _bases_lock:
        base = _bases.get(hidden)
        if base is not None and base.fresh():
            base.users += 1
            return base
        return _put(_bases, hidden, Base(hidden), KEEP_BASES)  # type: ignore[no-any-return]


def _put(cache: dict[Any, Any], key: Any, fresh: Any, keep: int) -> Any:
    """Store ``fresh`` under ``key`` (held once, for the caller), retiring what it replaces
    and the oldest entries beyond ``keep`` or the descriptor budget. Lock held."""
    old = cache.pop(key, None)
    if old is not None:
        _retire(old)
    cache[key] = fresh
    while len(cache) > 1 and (len(cache) > keep or _held() > _FD_BUDGET):
        _retire(cache.pop(next(iter(cache))))
    fresh.users += 1
    return fresh


def _retire(entry: Base | Static) -> None:
    """No new call gets ``entry``; its descriptors close once no call holds it. Lock held."""
    entry.retired = True
    if entry.users == 0:
        entry.close()


def release(entry: Base | Static) -> None:
    """A call is done with ``entry``."""
    with _bases_lock:
        entry.users -= 1
        if entry.retired and entry.users == 0:
            entry.close()


class Static:
    """What every call of one tool under one profile is granted, opened once.

    The rule base, the devices, the skill's folder, the interpreter's installation and
    the declared paths, as descriptors: kept open and reused while every path still
    names the inode it named (:meth:`fresh`), so a call opens nothing of its own.
    """

    def __init__(
        self,
        profile: Profile,
        entry_fd: int,
        env: dict[str, str],
        private_tmp: bool,
        covered: tuple[str, ...],
    ) -> None:
        self.users = 0
        self.retired = False
        self.fds: list[int] = []
        self.rules: list[tuple[int, int, bool]] = []  # (fd, rights, is_directory)
        self._prepared: landlock.Prepared | None = None
        self.keep: list[tuple[str, int, bool]] = []  # bound back into the private /tmp
        self.stamps: list[FileStamp] = []  # (path, st_dev, st_ino) of what was granted
        self.private_tmp = private_tmp
        hidden = profile.hidden
        self.uncover: list[str] = []
        if private_tmp:
            # The parked thread has /tmp of its own and empty mounts over the system
            # secrets: Landlock need not carve around either.
            hidden = (*(h for h in hidden if h not in set(covered)), "/tmp")
            self.uncover = [p for p in covered if any(_within(p, d) for d in profile.read)]
        self.base = acquire_base(hidden)
        try:
            for device in _DEVICES:
                self._grant(device, landlock.READ_FILE | landlock.WRITE_FILE | landlock.IOCTL_DEV, ())
            self.own = os.path.realpath(profile.skill_dir) if profile.skill_dir else ""
            if profile.skill_dir:
                # Its own folder is readable; an undeclared mutating tool (default policy)
                # keeps the reach it always had there too.
                own = landlock.READ_EXEC | (landlock.WRITE if profile.write_all else 0)
                self._grant(profile.skill_dir, own, profile.hidden)
            self._grant_entry(entry_fd, profile.skill_dir)
            for prefix in _interpreter(entry_fd, env):
                self._grant(prefix, landlock.READ_EXEC, profile.hidden, declared="")
            for path in profile.read:
                self._grant(path, landlock.READ_EXEC, profile.hidden, declared="read")
            for path in profile.write:
                self._grant(path, landlock.READ_EXEC | landlock.WRITE, profile.hidden, declared="write")
        except BaseException:
            self.close()
            raise

    def _grant_entry(self, entry_fd: int, own: str) -> None:
        """The checked entry may run wherever it lives (``../bin/tool`` of a root under
        ``/tmp``, which the private ``/tmp`` leaves out of every other grant): read and
        execute on that one file, the inode the host opened and checked."""
        with contextlib.suppress(OSError):
            path = os.readlink(f"/proc/self/fd/{entry_fd}")
            if own and _within(path, own):
                return  # its own folder's grant covers it
            fd = os.open(f"/proc/self/fd/{entry_fd}", os.O_PATH | os.O_CLOEXEC)
            self.fds.append(fd)
            self.rules.append((fd, landlock.READ_EXEC, False))

    def _open(self, path: str) -> tuple[int, bool] | None:
        try:
            fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
        except OSError:
            return None
        self.fds.append(fd)
        st = os.fstat(fd)
        self.stamps.append((path, st.st_dev, st.st_ino))
        return fd, stat.S_ISDIR(st.st_mode)

    def _grant(self, path: str, rights: int, hidden: tuple[str, ...], declared: str | None = None) -> None:
        """Grant ``rights`` on ``path``; a folder holding a hidden one is granted without it.

        What the path leads to now decides (symlinks and magic links followed: what the
        rule will grant), not its text. Beyond the skill's own folder (``declared`` None)
        it may not be ``/`` or lie in a hidden path: an interpreter's (``declared`` "")
        is then not granted; a declared one (``"read"``, ``"write"``) fails the call,
        since a symlink planted where it pointed at nothing at load would grant the
        host's own state.
        """
        opened = self._open(path)
        if opened is None:
            return
        fd, is_dir = opened
        real = _resolved(fd, path)
        if declared is not None and not (self.own and _within(real, self.own)):
            if declared:
                inside = _led_into(path, real, hidden)
            else:  # an interpreter's folder, from the entry's first line: named by the skill
                inside = "/" if real == "/" else next((h for h in hidden if _within(real, h)), None)
            if inside is not None and declared:
                where = "the whole file system" if inside == "/" else f"inside the hidden {inside}"
                raise ConfinementError(
                    f"the declared {declared} path {path} now leads to {real}, {where}, which its "
                    "text does not name: refused (was a symlink planted there after the tool loaded?); "
                    "remove the link, or declare the real path"
                )
            if inside is not None:
                return  # an interpreter's folder: the base already reads what it may
            if not is_dir and _device_mode(os.fstat(fd).st_mode):
                return  # no device but the usual ones (_DEVICES), whatever is declared
        inner = [h for h in hidden if _within(h, real) and h != real]
        if is_dir and (inner or _holds_devices(real)):
            for entry in _carved(real, tuple(inner)):
                sub = self._open(entry)
                if sub is not None:
                    self.rules.append((sub[0], rights, sub[1]))
            return
        self.rules.append((fd, rights, is_dir))
        if self.private_tmp and _within(path, "/tmp") and path != "/tmp":
            self.keep.append((path, fd, bool(rights & landlock.WRITE_FILE)))

    def prepared(self) -> landlock.Prepared:
        """:attr:`rules`, ready for :meth:`~.landlock.Ruleset.allow_all` (made on the first call)."""
        prepared = self._prepared
        if prepared is None:
            prepared = self._prepared = landlock.prepare_each(self.rules)
        return prepared

    def fresh(self) -> bool:
        if self.base.retired or not self.base.fresh():
            return False
        return same_files(self.stamps)

    def close(self) -> None:
        for fd in self.fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        self.fds = []
        release(self.base)


_statics: dict[tuple[Any, ...], Static] = {}
KEEP_STATICS = 32


def _held() -> int:
    return sum(len(b.grants) for b in _bases.values()) + sum(len(st.fds) for st in _statics.values())


def acquire_static(key: tuple[Any, ...], build: Callable[[], Static]) -> Static:
    """The cached grants for ``key`` (built when missing or stale), held until released."""
    with _bases_lock:
        static = _statics.get(key)
        if static is not None and not static.retired and not static.base.retired:
            fresh_candidate: Static | None = static
        else:
            fresh_candidate = None
    if fresh_candidate is not None and fresh_candidate.fresh():
        with _bases_lock:
            if not fresh_candidate.retired:
                fresh_candidate.users += 1
                return fresh_candidate
    built = build()  # outside the lock: it opens files and may carve folders
    with _bases_lock:
        return _put(_statics, key, built, KEEP_STATICS)  # type: ignore[no-any-return]


def entry_key(fd: int) -> tuple[int, int, int, int]:
    st = os.fstat(fd)
    return (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_size)


def _interpreter(entry_fd: int, env: dict[str, str]) -> list[str]:
    """The ``#!`` interpreter of the entry and the installation it belongs to."""
    try:
        head = os.pread(entry_fd, 256, 0)
    except OSError:
        return []
    if not head.startswith(b"#!"):
        return []
    words = head[2:].split(b"\n", 1)[0].decode("utf-8", "replace").split()
    if not words:
        return []
    paths = [words[0]]
    if os.path.basename(words[0]) == "env" and len(words) > 1:
        found = shutil.which(words[-1], path=env.get("PATH", os.defpath))
        if found:
            paths.append(found)
    out = []
    for path in paths:
        for form in (os.path.abspath(path), os.path.realpath(path)):
            folder = os.path.dirname(form)
            prefix = os.path.dirname(folder) if os.path.basename(folder) == "bin" else folder
            if prefix and prefix != "/" and prefix not in out:
                out.append(prefix)
            cfg = os.path.join(prefix, "pyvenv.cfg")
            with contextlib.suppress(OSError, UnicodeDecodeError), open(cfg, encoding="utf-8") as f:
                for line in f:
                    key, _, value = line.partition("=")
                    if key.strip() == "home" and value.strip():
                        home = os.path.dirname(value.strip())
                        if home not in out:
                            out.append(home)
    return out


def _led_into(path: str, real: str, hidden: tuple[str, ...]) -> str | None:
    """The hidden path (or ``/``) that ``path``, leading to ``real``, reaches though its
    text does not name it; None when it reaches none. A declared path inside a hidden one
    (``/etc/shadow``, a system secret a skill may declare) names it."""
    if real == "/":
        return None if path == "/" else "/"
    canonical = {h: os.path.realpath(h) for h in hidden}
    for h, r in canonical.items():
        if not (_within(real, h) or _within(real, r)):
            continue
        # Named only by a text inside this very folder (in any spelling of it): a hidden
        # folder inside another (~/.config/ongrid in ~/.config) is its own.
        if not any(_within(path, g) for g, q in canonical.items() if q == r) and not _within(path, r):
            return h
    return None


def _resolved(fd: int, path: str) -> str:
    """The path ``fd`` (opened from ``path``) names now; ``path`` when the kernel will not say."""
    try:
        real = os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return os.path.realpath(path)
    return real if real.startswith("/") else os.path.realpath(path)


def _carved(folder: str, hidden: tuple[str, ...]) -> Iterable[str]:
    """The entries under ``folder`` to grant so that ``hidden`` stays out."""
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return
    for entry in entries:
        path = entry.path
        if any(_within(path, h) for h in hidden):
            continue
        try:
            if entry.is_symlink():
                continue
            is_dir = entry.is_dir(follow_symlinks=False)
            if _within(path, "/dev") and _a_device(entry, is_dir):
                continue  # as in the base: no device but the usual ones
            if is_dir and (any(_within(h, path) for h in hidden) or _holds_devices(path)):
                yield from _carved(path, hidden)
                continue
        except OSError:
            continue
        yield path
