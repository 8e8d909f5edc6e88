"""One confined call: what is prepared in the host, applied in the spawning thread, and undone.

:class:`Plan` is built by the subprocess executor for each call whose profile is
confined. Its life:

1. ``Plan(profile, ...)`` — in the calling thread: take a cgroup from the pool,
   make the fallback temp folder if there is no mount namespace, work out the
   Landlock grants (cached descriptors; see :mod:`.grants`).
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
import tempfile
from collections.abc import Callable
from typing import Any

from . import caps, landlock, mounts, seccomp
from .grants import KEEP_BASES as _KEEP_BASES  # noqa: F401  (the cache's names before .grants)
from .grants import (
    ConfinementError,
    Static,
    _within,  # one rule for "this path is that folder or beneath it"
    acquire_static,
    entry_key,
    release,
)
from .grants import acquire_base as _acquire_base  # noqa: F401
from .grants import release as _release  # noqa: F401
from .kernel import Support, support
from .profile import Profile
from .warm import Warm, take

__all__ = ["ConfinementError", "Plan"]

logger = logging.getLogger("ongrid_plugins.sandbox")

_MB = 1024 * 1024


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
        self._static: Static | None = None
        self.warm: Warm | None = take(self.support.cgroups, self.support.mount_namespace, self.support.root)
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
        self._rules: list[tuple[int, int, bool]] = []  # this call's own: (fd, rights, is_directory)
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
            entry_key(entry_fd),
            env.get("PATH", ""),
            private_tmp,
            covered,
        )
        static = self._static = acquire_static(
            key, lambda: Static(profile, entry_fd, env, private_tmp, covered)
        )
        self._base_rules = static.base.rules(
            landlock.READ_EXEC | (landlock.WRITE if profile.write_all else 0)
        )
        self._static_rules = static.prepared()
        self._keep = static.keep
        self._uncover = static.uncover
        self._protect = _protected(profile, covered) if private_tmp else ()
        self._writable = [
            stamp
            for stamp in static.stamps
            # a declared write path, or what is granted of one that holds a hidden folder;
            # under /tmp (a symlink into it too) it is bound back, or not there at all
            if any(_within(stamp[0], w) for w in profile.write)
            and not _within(os.path.realpath(stamp[0]), "/tmp")
        ]
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
            self.warm.refresh_covers()  # a secret replaced or added since the thread was made ready
            for path in self._uncover:  # declared readable by this call
                mounts.uncover(path)
            mounts.bind_back(self.warm.under, self._keep)
            if not self.profile.write_all:
                mounts.read_only_except(self._keep, self._writable, self.warm.covered)  # all it may not write
            mounts.read_only(self._protect)  # the hidden folders where it may write: nor chmod, utime
            tmp_fd = os.open("/tmp", os.O_PATH | os.O_CLOEXEC | os.O_DIRECTORY)
        try:
            ruleset = None
            if sup.landlock_abi:
                ruleset = landlock.Ruleset(
                    deny_tcp=not self.profile.network, scope_unix=not self.profile.network
                )
                ruleset.allow_all(self._base_rules)
                ruleset.allow_all(self._static_rules)
                for fd, rights, is_dir in self._rules:
                    ruleset.allow(fd, rights, directory=is_dir)
                if tmp_fd >= 0:
                    ruleset.allow(tmp_fd, landlock.READ_EXEC | landlock.WRITE, directory=True)
            caps.drop_all(sup.root, bounded=self.warm.bounded)
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

    def procs_file(self) -> str | None:
        """The call's ``cgroup.procs`` (every process of the call is listed there), or None."""
        return None if self.group is None else os.path.join(self.group.pids, "cgroup.procs")

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
            release(self._static)
            self._static = None

    def describe_missing(self) -> str:
        return "; ".join(self.missing)


def _protected(profile: Profile, covered: tuple[str, ...]) -> tuple[str, ...]:
    """The hidden paths bound read-only in the call's namespace (:func:`.mounts.read_only`)
    where the call may otherwise write: everywhere for an undeclared mutating call, inside a
    declared ``write`` path for the others (the rest is read-only already). Not those covered
    already, nor one holding a path the call may write (its own folder, a ``write`` path)."""
    writable = [*profile.write, *((profile.skill_dir,) if profile.write_all and profile.skill_dir else ())]
    return tuple(
        hidden
        for hidden in profile.hidden
        if hidden not in covered
        and not any(_within(w, hidden) for w in writable)
        and (profile.write_all or any(_within(hidden, w) for w in profile.write))
    )


_ = errno  # errno numbers appear in messages built by callers
