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

import ctypes
import errno
import os
import stat
import sys
from importlib import resources
from typing import TYPE_CHECKING, NamedTuple

from ..core.userfiles import file_kind
from ..errors import ManifestParseError
from ..hookspecs import hookimpl
from ..models import SkillRoot

if TYPE_CHECKING:
    from ..settings import Settings

__all__ = [
    "EntryRefusal",
    "builtin_skills_dir",
    "canonical",
    "check_entry",
    "check_symlinked_manifest",
    "entry_warning",
    "escapes",
    "is_within",
    "open_beneath",
    "resolve_file",
]

_O_PATH = getattr(os, "O_PATH", 0)
_USE_PROC = sys.platform.startswith("linux") and _O_PATH != 0 and os.path.isdir("/proc/self/fd")


_SYS_OPENAT2 = 437  # the same number on every Linux architecture (unified syscall table)
_RESOLVE_NO_MAGICLINKS = 0x02
_RESOLVE_NO_SYMLINKS = 0x04
_RESOLVE_BENEATH = 0x08
_openat2: object = None  # the libc ``syscall`` function once looked up; False when unusable


class _OpenHow(ctypes.Structure):
    _fields_ = (("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64))


def _syscall() -> object:
    global _openat2
    if _openat2 is None:
        try:
            func = ctypes.CDLL(None, use_errno=True).syscall
            func.restype = ctypes.c_long
            _openat2 = func if sys.platform.startswith("linux") and _SYS_OPENAT2 else False
        except (OSError, AttributeError):
            _openat2 = False
    return _openat2


def open_beneath(dirfd: int, relative: str, flags: int = os.O_RDONLY) -> int:
    """Open ``relative`` under the directory ``dirfd`` with no symlink and no ``..`` escape.

    Every component must be a real entry below ``dirfd`` (no symlink at all, no
    ``..`` above it, no absolute path): ``openat2(RESOLVE_BENEATH |
    RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS)`` where the kernel has it (Linux
    5.6+), else a walk that opens one component at a time with ``O_NOFOLLOW``.
    Either way the answer is a descriptor of the file that was checked, so a swap
    of any component after the call cannot change what the caller reads or runs.
    Raises ``OSError`` (``ELOOP`` for a symlink, ``EXDEV`` for an escape).
    """
    flags |= os.O_CLOEXEC
    if not relative or relative.startswith("/") or "\0" in relative:
        raise OSError(errno.EXDEV, f"{relative!r} is not a relative path beneath its folder")
    call = _syscall()
    if call:
        how = _OpenHow(flags, 0, _RESOLVE_BENEATH | _RESOLVE_NO_SYMLINKS | _RESOLVE_NO_MAGICLINKS)
        fd = call(_SYS_OPENAT2, dirfd, os.fsencode(relative), ctypes.byref(how), ctypes.sizeof(how))  # type: ignore[operator]
        if fd >= 0:
            return int(fd)
        err = ctypes.get_errno()
        if err not in (errno.ENOSYS, errno.EPERM):  # EPERM: a seccomp filter without openat2
            raise OSError(err, os.strerror(err), relative)
    return _walk_beneath(dirfd, relative, flags)


def _walk_beneath(dirfd: int, relative: str, flags: int) -> int:
    parts = [part for part in relative.split("/") if part not in ("", ".")]
    if not parts or ".." in parts:
        raise OSError(errno.EXDEV, "the path leaves its folder", relative)
    current = os.dup(dirfd)
    try:
        for part in parts[:-1]:
            try:
                nxt = os.open(part, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=current)
            except OSError as exc:
                raise _symlink_error(exc, current, part, relative) from None
            os.close(current)
            current = nxt
        try:
            fd = os.open(parts[-1], flags | os.O_NOFOLLOW, dir_fd=current)
        except OSError as exc:
            raise _symlink_error(exc, current, parts[-1], relative) from None
        if flags & os.O_PATH and stat.S_ISLNK(os.fstat(fd).st_mode):
            os.close(fd)
            raise OSError(errno.ELOOP, os.strerror(errno.ELOOP), relative)
        return fd
    finally:
        os.close(current)


def _symlink_error(exc: OSError, dirfd: int, name: str, relative: str) -> OSError:
    """``ELOOP`` (as ``openat2`` says) when ``name`` is a symlink that ``O_NOFOLLOW`` refused."""
    if exc.errno == errno.ENOTDIR:
        try:
            if stat.S_ISLNK(os.stat(name, dir_fd=dirfd, follow_symlinks=False).st_mode):
                return OSError(errno.ELOOP, os.strerror(errno.ELOOP), relative)
        except OSError:
            pass
    return exc


def builtin_skills_dir() -> str:
    """The folder of skills shipped inside the package (what ``importlib.resources`` answers)."""
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


#: Roots whose files a package installer wrote: installers such as uv hard-link files
#: from their cache, so a link count above 1 says nothing there.
_INSTALLED_SOURCES = frozenset({"builtin", "pack"})


def escapes(what: str, real: str, root: str) -> str | None:
    """The specification's refusal when canonical ``real`` is outside canonical ``root``, else None.

    ``what`` is ``entry`` or ``manifest``; the words are the specification's log
    line (``entry %s escapes allowlist root %s``). This is the one place the rule
    "every file a skill runs stays under its root" is decided by path: loaders
    use it at load time, the executor again at call time, before it opens the
    entry beneath the root by descriptor (:func:`open_beneath`).
    """
    if is_within(real, root):
        return None
    return f"{what} {real} escapes allowlist root {root}"


def check_symlinked_manifest(path: str, root: SkillRoot) -> str:
    """The canonical path of a symlinked manifest, if it resolves to a regular file inside the root.

    The manifest is then read from there, so its entry is relative to the
    folder it really lives in (and it is claimed by the name ``path`` has, whatever
    the target is called). Every listed entry that is not a regular file
    comes here: a FIFO or folder of a manifest's name is refused (never opened; a folder is
    still walked for the manifests inside it).
    """
    try:
        real = canonical(path)
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # a link to itself, or a chain back to it: nothing is missing
            message = f"manifest is a symlink loop ({exc.strerror}); point it at the real manifest"
        elif exc.errno in (errno.ENOENT, errno.ENOTDIR):
            message = f"manifest is a dangling symlink ({exc.strerror})"
        else:
            message = f"manifest symlink cannot be resolved ({exc.strerror})"
        raise ManifestParseError(path, message) from exc
    escape = escapes("manifest", real, root.real)
    if escape is not None:
        raise ManifestParseError(path, escape)
    mode = os.stat(real).st_mode
    if not stat.S_ISREG(mode):
        message = f"manifest {real} is not a regular file (it is {file_kind(mode)})"
        raise ManifestParseError(path, message)
    return real


class EntryRefusal(NamedTuple):
    """Why an entry may not run: a stable problem ``code``, the message and a hint."""

    code: str
    message: str
    hint: str = ""


def check_entry(real: str, st: os.stat_result, root: SkillRoot) -> EntryRefusal | None:
    """Why the canonical entry ``real`` (``st`` its stat) must not run from ``root``, or None.

    In order: it escapes the root, it is not a regular file, it has no execute
    bit, it is setuid/setgid or hard-linked (:func:`entry_problem`).
    """
    escape = escapes("entry", real, root.real)
    if escape is not None:
        return EntryRefusal("entry_escapes_root", escape)
    if not stat.S_ISREG(st.st_mode):
        return EntryRefusal("entry_not_file", f"entry {real} is not a regular file")
    if not st.st_mode & 0o111:
        return EntryRefusal("entry_not_executable", f"entry {real} is not executable", f"chmod +x {real}")
    problem = entry_problem(real, st, root)
    return EntryRefusal("entry_unsafe", problem) if problem is not None else None


def entry_warning(real: str) -> EntryRefusal | None:
    """What in the entry's first line will stop it from starting, or None: a CRLF shebang.

    ``#!/usr/bin/env python3\r`` (a file saved with Windows line ends) asks the kernel
    for the interpreter ``python3\r``: the call fails with ``/usr/bin/env: use -[v]S to
    pass options in shebang lines`` or ``No such file or directory``. An entry that
    cannot be read is left to the call.
    """
    try:
        with open(real, "rb") as f:
            head = f.read(256)
    except OSError:
        return None
    if not head.startswith(b"#!"):
        return None
    first = head.split(b"\n", 1)[0]
    if not first.endswith(b"\r"):
        return None
    message = f"entry {real} has Windows line ends (CRLF): its shebang line ends in \\r, so it will not start"
    return EntryRefusal("entry_crlf_shebang", message, f"sed -i 's/\\r$//' {real} (or: dos2unix {real})")


def entry_problem(real: str, st: os.stat_result, root: SkillRoot) -> str | None:
    """Why an entry inside ``root`` must not run, or None.

    A setuid/setgid entry would run with another user's rights. A hard-linked entry
    (link count > 1) may be the same file as one outside the root: the root check
    reads the path, never the inode, so it cannot be trusted.
    """
    if st.st_mode & (stat.S_ISUID | stat.S_ISGID):
        bits = "setuid" if st.st_mode & stat.S_ISUID else "setgid"
        return f"entry {real} has the {bits} bit set (chmod u-s,g-s {real})"
    if st.st_nlink > 1 and root.source not in _INSTALLED_SOURCES:
        return (
            f"entry {real} has {st.st_nlink} hard links: it may be a file outside the root "
            "(replace the link with a copy)"
        )
    return None


@hookimpl(tryfirst=True)
def ongrid_skill_roots(settings: Settings) -> list[SkillRoot]:
    """The configured roots, then the built-in, system and per-user ones.

    Order decides which skill wins a name clash (the loser is reported as a
    ``duplicate``, never dropped silently): explicit ``--dirs`` /
    ``Settings(skill_dirs=...)`` first, then ``ONGRID_SKILLS_EXTERNAL_DIRS``, then
    the project's ``.agents/skills`` (when the project folder is trusted), then
    the package's own skills, ``/etc/ongrid/skills``, the user folder and
    ``~/.agents/skills`` (see :mod:`.agent_skills`); installed packs come after.
    """
    from .agent_skills import roots as agent_roots

    project, user = agent_roots(settings)  # <project>/.agents/skills (trusted only), ~/.agents/skills
    roots = [SkillRoot(path, source="settings") for path in settings.skill_dirs]
    roots += [SkillRoot(path, source="env") for path in settings.env_dirs]
    roots += [SkillRoot(path, source="project", required=False) for path in project]
    if settings.include_defaults:
        roots.append(SkillRoot(builtin_skills_dir(), source="builtin", provenance="built-in"))
        roots.append(SkillRoot(settings.system_skills_dir, source="system", required=False))
        roots.append(SkillRoot(settings.user_skills_dir, source="user", required=False))
    roots += [SkillRoot(path, source="agents-user", required=False) for path in user]
    return roots
