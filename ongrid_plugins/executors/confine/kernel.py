"""What this machine offers for confinement, probed once per process.

``support()`` answers without side effects on the host (the probes that need one,
like creating a mount namespace, run in a throw-away thread or are inferred from
the credentials). ``doctor`` prints it; the planner uses it to decide what each
call gets and what is missing.
"""

from __future__ import annotations

import functools
import os
import shutil

import attrs

from . import cgroups, landlock, seccomp

__all__ = ["Support", "support"]


@attrs.frozen
class Support:
    """The confinement primitives of this machine and this host process."""

    landlock_abi: int
    seccomp: bool
    cgroups: bool
    """Per-call pids + memory cgroups (v1, writable): limits, and killing every descendant."""
    mount_namespace: bool
    """A private /tmp mount per call (needs a root host)."""
    root: bool
    user_namespaces: bool
    bwrap: str
    """Path of bubblewrap if installed (not used by the built-in sandbox)."""
    proc_fd_exec: bool
    """The entry can be executed through ``/proc/self/fd/N`` (the descriptor that was checked)."""

    def missing(self) -> list[str]:
        """What full confinement needs and this machine lacks, in words."""
        out = []
        if self.landlock_abi == 0:
            out.append("Landlock (filesystem rules) is not available in this kernel")
        if not self.seccomp:
            out.append("seccomp filtering is not available on this architecture or kernel")
        if not self.cgroups:
            out.append(
                "per-call cgroups are not writable (needs a root host with cgroup v1 pids and memory):"
                " no process or memory limit, and a process that leaves its group (setsid) survives"
            )
        return out

    def to_dict(self) -> dict[str, object]:
        return {
            "landlock_abi": self.landlock_abi,
            "seccomp": self.seccomp,
            "cgroups": self.cgroups,
            "mount_namespace": self.mount_namespace,
            "root": self.root,
            "user_namespaces": self.user_namespaces,
            "bwrap": self.bwrap,
            "proc_fd_exec": self.proc_fd_exec,
            "missing": self.missing(),
        }


def _userns() -> bool:
    try:
        with open("/proc/sys/user/max_user_namespaces", encoding="ascii") as f:
            if int(f.read()) == 0:
                return False
    except (OSError, ValueError):
        return False
    try:
        with open("/proc/sys/kernel/unprivileged_userns_clone", encoding="ascii") as f:
            return f.read().strip() != "0"
    except OSError:
        return True


@functools.cache
def support() -> Support:
    """Probe once; later calls return the same answer."""
    root = os.geteuid() == 0
    return Support(
        landlock_abi=landlock.abi(),
        seccomp=seccomp.available() and os.path.exists("/proc/self/status"),
        cgroups=cgroups.available(),
        mount_namespace=root,
        root=root,
        user_namespaces=_userns(),
        bwrap=shutil.which("bwrap") or "",
        proc_fd_exec=os.path.isdir("/proc/self/fd"),
    )
