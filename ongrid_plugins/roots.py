"""Allow-list roots and path containment (built-in plugin ``roots``).

Containment is always decided on canonical paths (every symlink resolved):
a manifest's entry must resolve to a path under the canonical root, whatever
``..`` components, symlinked files or symlinked folders lie on the way.

On Linux the canonical path comes from one ``open(O_PATH)`` and a
``readlink`` of ``/proc/self/fd/N`` instead of ``os.path.realpath``'s
``lstat`` per component; the same descriptor answers ``fstat``, so resolving
and checking an entry costs three system calls.
"""

from __future__ import annotations

import os
import stat
import sys
from importlib import resources
from typing import TYPE_CHECKING

from .hookspecs import hookimpl
from .models import SkillRoot

if TYPE_CHECKING:
    from .settings import Settings

__all__ = ["builtin_skills_dir", "canonical", "is_within", "resolve_file"]

_O_PATH = getattr(os, "O_PATH", 0)
_USE_PROC = sys.platform.startswith("linux") and _O_PATH != 0 and os.path.isdir("/proc/self/fd")


def builtin_skills_dir() -> str:
    """The folder of skills shipped inside the package."""
    return str(resources.files("ongrid_plugins") / "skills")


def is_within(path: str, root: str) -> bool:
    """True if canonical ``path`` is ``root`` or lies under it (both canonical)."""
    if root == os.sep:
        return path.startswith(os.sep)
    return path == root or path.startswith(root + os.sep)


def _resolve_proc(path: str) -> tuple[str, os.stat_result]:
    fd = os.open(path, _O_PATH | os.O_CLOEXEC)
    try:
        real = os.readlink(f"/proc/self/fd/{fd}")
        st = os.fstat(fd)
    finally:
        os.close(fd)
    return real, st


def resolve_file(path: str) -> tuple[str, os.stat_result]:
    """Canonical path and ``stat`` of ``path``, following every symlink.

    Raises ``OSError`` (``FileNotFoundError`` for a missing file or a dangling
    link) and ``ValueError`` for a path with a NUL byte.
    """
    if _USE_PROC:
        real, st = _resolve_proc(path)
        if real.startswith("/"):
            return real, st
    real = os.path.realpath(path, strict=True)
    return real, os.stat(real)


def canonical(path: str) -> str:
    """Canonical form of an existing path (raises ``OSError`` if it does not exist)."""
    return resolve_file(path)[0]


def is_executable_file(st: os.stat_result) -> bool:
    """A regular file with an execute bit set."""
    return stat.S_ISREG(st.st_mode) and bool(st.st_mode & 0o111)


@hookimpl(tryfirst=True)
def ongrid_skill_roots(settings: Settings) -> list[SkillRoot]:
    """The configured roots, then the built-in, system and per-user ones.

    Order decides which skill wins a name clash: explicit ``--dirs`` /
    ``Settings(skill_dirs=...)`` first, then ``ONGRID_SKILLS_EXTERNAL_DIRS``,
    then the package's own skills, ``/etc/ongrid/skills`` and the user folder.
    """
    roots = [SkillRoot(path, source="settings") for path in settings.skill_dirs]
    roots += [SkillRoot(path, source="env") for path in settings.env_dirs]
    if settings.include_defaults:
        roots.append(SkillRoot(builtin_skills_dir(), source="builtin", provenance="built-in"))
        roots.append(SkillRoot(settings.system_skills_dir, source="system", required=False))
        roots.append(SkillRoot(settings.user_skills_dir, source="user", required=False))
    return roots
