"""One confined call: what is prepared in the host, applied in the spawning thread, and undone.

:class:`Plan` is built by the subprocess executor for each call whose profile is
confined. Its life:

1. ``Plan(profile, ...)`` — in the calling thread: take a cgroup from the pool,
   make the fallback temp folder if there is no mount namespace, work out the
   Landlock grants (cached descriptors; see :class:`_Static` and :func:`_acquire_base`).
2. :meth:`Plan.apply` — in a fresh thread that exists only to start this one child
   (restrictions on a thread are irreversible and inherited by what it starts, and
   they leave the host's other threads alone): join the cgroup, mount the private
   ``/tmp``, set ``no_new_privs``, drop every capability, restrict itself with
   Landlock, load the seccomp filter. Then the caller ``posix_spawn``\\ s from that
   thread, so the entry's first instruction already runs confined.
3. :meth:`Plan.started` — rlimits (CPU seconds, file size, open files; address
   space where there is no memory cgroup) on the new pid.
4. :meth:`Plan.kill_all` on exit and on kill; :meth:`Plan.finish` says whether a
   limit was hit and gives the cgroup back.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import resource
import shutil
import stat
import tempfile
import threading
from collections.abc import Callable, Iterable
from typing import Any

from . import caps, landlock, mounts, seccomp
from .kernel import Support, support
from .profile import Profile
from .warm import Warm, take

__all__ = ["ConfinementError", "Plan"]

logger = logging.getLogger("ongrid_plugins.sandbox")

_DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty")
_MB = 1024 * 1024


class ConfinementError(Exception):
    """The call cannot be confined as its profile and ``ONGRID_SANDBOX`` require."""


def _within(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


# -- the read-everything-but-hidden base ------------------------------------------


class _Base:
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
            except OSError:
                continue
            if is_dir and any(_within(h, path) for h in hidden):
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
        for folder, mtime in self.stamps:
            try:
                if os.stat(folder).st_mtime_ns != mtime:
                    return False
            except OSError:
                return False
        return True

    def close(self) -> None:
        for fd, _ in self.grants:
            with contextlib.suppress(OSError):
                os.close(fd)
        self.grants = []


_bases: dict[tuple[str, ...], _Base] = {}
_bases_lock = threading.RLock()  # re-entered when a retired static releases its base
_KEEP_BASES = 4  # hosts with many settings objects (tests): keep the newest
_FD_BUDGET = 256
"""Descriptors the caches may hold at once (a host has one base and a static per tool;
a process with many settings objects, like a test suite, must not run out of files)."""


def _acquire_base(hidden: tuple[str, ...]) -> _Base:
    """The current base for ``hidden``, held until :func:`_release`.

    A base that went stale or was evicted is closed only once no call holds it: its
    descriptors are in the rules of calls being prepared, and a closed number could
    be reused by an unrelated file that a rule would then grant.
    """
    with _bases_lock:
        base = _bases.get(hidden)
        if base is not None and base.fresh():
            base.users += 1
            return base
        return _put(_bases, hidden, _Base(hidden), _KEEP_BASES)  # type: ignore[no-any-return]


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


def _retire(entry: _Base | _Static) -> None:
    """No new call gets ``entry``; its descriptors close once no call holds it. Lock held."""
    entry.retired = True
    if entry.users == 0:
        entry.close()


def _release(entry: _Base | _Static) -> None:
    """A call is done with ``entry``."""
    with _bases_lock:
        entry.users -= 1
        if entry.retired and entry.users == 0:
            entry.close()


class _Static:
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
        self.keep: list[tuple[str, int, bool]] = []  # bound back into the private /tmp
        self.stamps: list[tuple[str, int, int]] = []  # (path, st_dev, st_ino) of what was granted
        self.private_tmp = private_tmp
        hidden = profile.hidden
        self.uncover: list[str] = []
        if private_tmp:
            # The parked thread has /tmp of its own and empty mounts over the system
            # secrets: Landlock need not carve around either.
            hidden = (*(h for h in hidden if h not in set(covered)), "/tmp")
            self.uncover = [p for p in covered if any(_within(p, d) for d in profile.read)]
        self.base = _acquire_base(hidden)
        try:
            for device in _DEVICES:
                self._grant(device, landlock.READ_FILE | landlock.WRITE_FILE | landlock.IOCTL_DEV, ())
            if profile.skill_dir:
                # Its own folder is readable; an undeclared mutating tool (default policy)
                # keeps the reach it always had there too.
                own = landlock.READ_EXEC | (landlock.WRITE if profile.write_all else 0)
                self._grant(profile.skill_dir, own, profile.hidden)
            for prefix in _interpreter(entry_fd, env):
                self._grant(prefix, landlock.READ_EXEC, profile.hidden)
            for path in profile.read:
                self._grant(path, landlock.READ_EXEC, profile.hidden)
            for path in profile.write:
                self._grant(path, landlock.READ_EXEC | landlock.WRITE, profile.hidden)
        except BaseException:
            self.close()
            raise

    def _open(self, path: str) -> tuple[int, bool] | None:
        try:
            fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
        except OSError:
            return None
        self.fds.append(fd)
        st = os.fstat(fd)
        self.stamps.append((path, st.st_dev, st.st_ino))
        return fd, stat.S_ISDIR(st.st_mode)

    def _grant(self, path: str, rights: int, hidden: tuple[str, ...]) -> None:
        """Grant ``rights`` on ``path``; a folder holding a hidden one is granted without it."""
        opened = self._open(path)
        if opened is None:
            return
        fd, is_dir = opened
        inner = [h for h in hidden if _within(h, path) and h != path]
        if is_dir and inner:
            for entry in _carved(path, tuple(inner)):
                sub = self._open(entry)
                if sub is not None:
                    self.rules.append((sub[0], rights, sub[1]))
            return
        self.rules.append((fd, rights, is_dir))
        if self.private_tmp and _within(path, "/tmp") and path != "/tmp":
            self.keep.append((path, fd, bool(rights & landlock.WRITE_FILE)))

    def fresh(self) -> bool:
        if self.base.retired or not self.base.fresh():
            return False
        for path, dev, ino in self.stamps:
            try:
                st = os.stat(path)
            except OSError:
                return False
            if (st.st_dev, st.st_ino) != (dev, ino):
                return False
        return True

    def close(self) -> None:
        for fd in self.fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        self.fds = []
        _release(self.base)


_statics: dict[tuple[Any, ...], _Static] = {}
_KEEP_STATICS = 32


def _held() -> int:
    return sum(len(b.grants) for b in _bases.values()) + sum(len(st.fds) for st in _statics.values())


def _acquire_static(key: tuple[Any, ...], build: Callable[[], _Static]) -> _Static:
    """The cached grants for ``key`` (built when missing or stale), held until released."""
    with _bases_lock:
        static = _statics.get(key)
        if static is not None and not static.retired and not static.base.retired:
            fresh_candidate: _Static | None = static
        else:
            fresh_candidate = None
    if fresh_candidate is not None and fresh_candidate.fresh():
        with _bases_lock:
            if not fresh_candidate.retired:
                fresh_candidate.users += 1
                return fresh_candidate
    built = build()  # outside the lock: it opens files and may carve folders
    with _bases_lock:
        return _put(_statics, key, built, _KEEP_STATICS)  # type: ignore[no-any-return]


def _entry_key(fd: int) -> tuple[int, int, int, int]:
    st = os.fstat(fd)
    return (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_size)


# -- one call ---------------------------------------------------------------------


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


class Plan:
    """Everything one confined call needs, prepared before its child exists."""

    def __init__(self, profile: Profile, entry_fd: int, env: dict[str, str], mode: str) -> None:
        self.profile = profile
        self.support: Support = support()
        self.mode = mode
        self.missing = self.support.missing()
        if mode == "require" and self.missing:
            raise ConfinementError(
                "ONGRID_SANDBOX=require and this call cannot be fully confined: " + "; ".join(self.missing)
            )
        self._fds: list[int] = []
        self._static: _Static | None = None
        self.warm: Warm | None = take(self.support.cgroups, self.support.mount_namespace)
        try:
            self.warm.wait_ready()
        except OSError as exc:
            self.warm = None
            raise ConfinementError(f"cannot prepare the call's sandbox: {exc}") from exc
        self.group = self.warm.group
        if self.group is not None:
            self.group.configure(profile.limits["processes"], profile.limits["memory_mb"])
        self.tmpdir = ""
        self.env_extra: dict[str, str] = {}
        self._keep: list[tuple[str, int, bool]] = []
        self._uncover: list[str] = []
        self._rules: list[tuple[int, int, bool]] = []  # (fd, rights, is_directory)
        try:
            self._prepare(entry_fd, env)
        except BaseException:
            self.finish()
            raise

    # host side ------------------------------------------------------------------

    def _prepare(self, entry_fd: int, env: dict[str, str]) -> None:
        profile = self.profile
        private_tmp = self.support.mount_namespace and self.warm is not None and self.warm.private_tmp
        covered = tuple(self.warm.covered) if private_tmp and self.warm is not None else ()
        key = (
            profile.digest,
            profile.skill_dir,
            _entry_key(entry_fd),
            env.get("PATH", ""),
            private_tmp,
            covered,
        )
        static = self._static = _acquire_static(
            key, lambda: _Static(profile, entry_fd, env, private_tmp, covered)
        )
        self._base_rules = static.base.rules(
            landlock.READ_EXEC | (landlock.WRITE if profile.write_all else 0)
        )
        self._rules = list(static.rules)
        self._keep = static.keep
        self._uncover = static.uncover
        if not private_tmp:
            self.tmpdir = tempfile.mkdtemp(prefix="ongrid-call-")
            try:
                fd = os.open(self.tmpdir, os.O_PATH | os.O_CLOEXEC | os.O_DIRECTORY)
            except OSError:
                return
            self._fds.append(fd)
            self._rules.append((fd, landlock.READ_EXEC | landlock.WRITE, True))
            self.env_extra["TMPDIR"] = self.tmpdir

    # spawning thread ------------------------------------------------------------

    def run(self, job: Callable[[], Any]) -> Any:
        """Run ``job`` (``apply`` then the spawn) in this call's parked thread."""
        assert self.warm is not None
        return self.warm.run(lambda _warm: job())

    def apply(self) -> None:
        """Confine the calling thread (irreversibly): the parked thread of :meth:`run`.

        That thread is already in the call's cgroup and, where mounts are possible, in
        a namespace of its own with a fresh tmpfs on ``/tmp`` (:mod:`.warm`).
        """
        sup = self.support
        assert self.warm is not None
        tmp_fd = -1
        if self.warm.under >= 0:
            for path in self._uncover:  # declared readable by this call
                mounts.uncover(path)
            mounts.bind_back(self.warm.under, self._keep)
            tmp_fd = os.open("/tmp", os.O_PATH | os.O_CLOEXEC | os.O_DIRECTORY)
        try:
            ruleset = None
            if sup.landlock_abi:
                ruleset = landlock.Ruleset(
                    deny_tcp=not self.profile.network, scope_unix=not self.profile.network
                )
                ruleset.allow_all(self._base_rules)
                for fd, rights, is_dir in self._rules:
                    ruleset.allow(fd, rights, directory=is_dir)
                if tmp_fd >= 0:
                    ruleset.allow(tmp_fd, landlock.READ_EXEC | landlock.WRITE, directory=True)
            caps.drop_all(sup.root)
            try:
                if sup.seccomp:
                    seccomp.install(self.profile.network)  # sets no_new_privs first
                else:
                    from ._sys import prctl

                    prctl(38, 1)  # PR_SET_NO_NEW_PRIVS
                if ruleset is not None:
                    ruleset.restrict_self()
            finally:
                if ruleset is not None:
                    ruleset.close()
        finally:
            if tmp_fd >= 0:
                os.close(tmp_fd)

    # after the spawn ------------------------------------------------------------

    def started(self, pid: int) -> None:
        """Apply the rlimits to the new child (every descendant inherits them)."""
        limits = self.profile.limits
        wanted = [
            (resource.RLIMIT_CPU, limits["cpu_seconds"], limits["cpu_seconds"] + 1),
            (resource.RLIMIT_FSIZE, limits["file_size_mb"] * _MB, limits["file_size_mb"] * _MB),
            (resource.RLIMIT_NOFILE, limits["open_files"], limits["open_files"]),
        ]
        if self.group is None:
            memory = limits["memory_mb"] * _MB
            wanted.append((resource.RLIMIT_AS, memory, memory))
        for which, soft, hard in wanted:
            with contextlib.suppress(OSError, ValueError):
                resource.prlimit(pid, which, (soft, hard))

    def kill_all(self) -> None:
        """Kill every process of the call still alive (setsid and double forks included)."""
        if self.group is not None:
            with contextlib.suppress(OSError):
                self.group.kill_all()

    def limit_hit(self) -> str | None:
        """Which limit ended or crippled the call, in words, if any."""
        if self.group is None:
            return None
        limits = self.profile.limits
        try:
            if self.group.hit_memory_limit():
                return f"memory limit reached ({limits['memory_mb']} MiB): the skill was killed"
            if self.group.hit_process_limit():
                return (
                    f"process limit reached ({limits['processes']} processes): the skill could not start more"
                )
        except OSError:
            return None
        return None

    def finish(self) -> None:
        """Kill what is left, give the cgroup back, remove the temp folder, close descriptors."""
        self.group = None
        if self.warm is not None:
            self.warm.release()  # the cgroup back to the pool, the namespace dropped, off this thread
            self.warm = None
        if self.tmpdir:
            shutil.rmtree(self.tmpdir, ignore_errors=True)
            self.tmpdir = ""
        for fd in self._fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        self._fds = []
        if self._static is not None:
            _release(self._static)
            self._static = None

    def describe_missing(self) -> str:
        return "; ".join(self.missing)


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
            if entry.is_dir(follow_symlinks=False) and any(_within(h, path) for h in hidden):
                yield from _carved(path, hidden)
                continue
        except OSError:
            continue
        yield path


_ = errno  # errno numbers appear in messages built by callers
