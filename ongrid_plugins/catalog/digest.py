"""Content digests: sha256 over a canonical list of a skill's files.

A skill's digest is the sha256 of the text::

    ongrid-digest-v1\\n
    <relative path>\\0<mode>\\0<sha256 of the bytes>\\n     # one line per file, sorted by path

where the relative path is taken from the manifest's folder (an entry outside
it reads ``../bin/tool``) and the mode is the permission bits that change what
runs: the execute bits, setuid and setgid, in octal (``0755`` and ``0644`` both
read ``0111``/``0000``). A symlink inside a SKILL.md folder is recorded as
``link`` with the sha256 of its target text; it is never followed.

Which files:

* ``skill.json`` (and any other format): the manifest and every tool's entry;
* ``SKILL.md``: every file of the skill's folder (version control and cache
  folders skipped), within the MCP Skills extension's limits of
  :data:`MAX_FILES` files and :data:`MAX_BYTES` bytes; over them, the manifest
  and the tools' scripts only, with a ``digest_partial`` warning.

File hashes are memoised per process, keyed by device, inode, size, mtime and
ctime: a reload re-reads only files that changed (ctime cannot be set back by
a process, so an in-place edit always shows). A file changed in the last two
seconds is never memoised, since a second write within one timestamp tick
would keep every key the same.
"""

from __future__ import annotations

import hashlib
import os
import stat
import sys
import threading
import time
from collections.abc import Iterator

import attrs

from ..core.forksafe import renew_after_fork
from ..models import Problem, Skill, Tool

__all__ = [
    "MAX_BYTES",
    "MAX_FILES",
    "DigestFile",
    "SkillDigest",
    "entry_drift",
    "file_record",
    "file_sha256",
    "partial_warning",
    "skill_digest",
    "tree_records",
]

MAX_FILES = 512
"""More files than this in a SKILL.md folder: the digest covers the manifest and the scripts."""
MAX_BYTES = 16 * 1024 * 1024
"""More bytes than this in a SKILL.md folder: likewise."""
MODE_BITS = stat.S_ISUID | stat.S_ISGID | 0o111
"""The mode bits a digest records: the ones that change what a file does when run."""
SKIP_DIRS = frozenset({".git", ".hg", ".svn", "node_modules", "__pycache__"})
_HEADER = b"ongrid-digest-v1\n"
_MEMO_LIMIT = 200_000
# File timestamps tick coarsely (a few ms): a file changed this recently could
# change again with the same size and timestamps, so its hash is not memoised
# (git's "racily clean" rule).
_RACY_NS = 2_000_000_000
_READ = 1024 * 1024


@attrs.frozen
class DigestFile:
    """One line of a digest: a file's relative path, recorded mode and content hash."""

    path: str
    mode: str
    """The octal :data:`MODE_BITS` of the file (``0111``), or ``link`` for a symlink."""
    sha256: str

    def line(self) -> bytes:
        """The line this file contributes to the digest text."""
        return f"{self.path}\0{self.mode}\0{self.sha256}\n".encode("utf-8", "surrogateescape")


@attrs.frozen
class SkillDigest:
    """A skill's digest and the files it covers."""

    digest: str
    files: tuple[DigestFile, ...]
    partial: str = ""
    """Why only the manifest and scripts are covered (over the limits); empty when complete."""

    @classmethod
    def of(cls, files: list[DigestFile], partial: str = "") -> SkillDigest:
        """The digest of these files (in any order)."""
        ordered = tuple(sorted(files, key=lambda f: f.path))
        h = hashlib.sha256(_HEADER)
        for f in ordered:
            h.update(f.line())
        return cls(h.hexdigest(), ordered, partial)


_memo: dict[tuple[str, int, int, int, int, int], str] = {}
_memo_lock = threading.Lock()
renew_after_fork(sys.modules[__name__], "_memo_lock")  # any thread that hashes takes it


def _key(path: str, st: os.stat_result) -> tuple[str, int, int, int, int, int]:
    return (path, st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def file_sha256(path: str) -> str:
    """sha256 of the bytes of the regular file ``path`` (memoised by its stat; raises ``OSError``)."""
    return _hash_open(path)[0]


def _hash_open(path: str) -> tuple[str, os.stat_result]:
    # One stat answers an unchanged file; a changed or new one is opened and
    # its descriptor's stat is the key, so the hash and the key are one inode's.
    st = os.stat(path)
    found = _memo.get(_key(path, st)) if stat.S_ISREG(st.st_mode) else None
    if found is not None:
        return found, st
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOCTTY | os.O_NONBLOCK)
    try:
        return _hash_fd(fd, path)
    finally:
        os.close(fd)


def _hash_fd(fd: int, path: str, st: os.stat_result | None = None) -> tuple[str, os.stat_result]:
    """sha256 of the regular file open as ``fd`` (read with ``pread``: its offset is left alone).

    ``st``: the caller's ``fstat`` of ``fd``, when it has one."""
    if st is None:
        st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        raise OSError(f"{path} is not a regular file")
    key = _key(path, st)
    found = _memo.get(key)
    if found is not None:
        return found, st
    h = hashlib.sha256()
    offset = 0
    # Reads sized by the stat (one more byte sees a file that grew): a 1 MiB buffer for
    # a small entry is an mmap and an munmap on every call that hashes it.
    want = min(st.st_size + 1, _READ)
    while chunk := os.pread(fd, want, offset):
        h.update(chunk)
        offset += len(chunk)
        want = _READ
    digest = h.hexdigest()
    if time.time_ns() - max(st.st_mtime_ns, st.st_ctime_ns) > _RACY_NS:
        with _memo_lock:
            if len(_memo) >= _MEMO_LIMIT:
                _memo.clear()
            _memo[key] = digest
    return digest, st


def file_record(path: str, relative: str) -> DigestFile:
    """The digest line of one file (a symlink is recorded, not followed)."""
    st = os.lstat(path)
    if stat.S_ISLNK(st.st_mode):
        target = os.readlink(path)
        return DigestFile(relative, "link", hashlib.sha256(os.fsencode(target)).hexdigest())
    digest, st = _hash_open(path)
    return DigestFile(relative, f"{st.st_mode & MODE_BITS:04o}", digest)


def _record_or_missing(path: str, relative: str, st: os.stat_result | None = None) -> DigestFile:
    """The digest line of ``path``; ``st`` (its ``lstat``) when known: a regular file is hashed directly."""
    try:
        if st is not None and stat.S_ISREG(st.st_mode):
            digest, st = _hash_open(path)
            return DigestFile(relative, f"{st.st_mode & MODE_BITS:04o}", digest)
        return file_record(path, relative)
    except OSError:
        return DigestFile(relative, "", "missing")


def _regular(path: str, relative: str) -> DigestFile:
    """The digest line of a canonical path (no symlink left in it: the loaders resolved it)."""
    try:
        digest, st = _hash_open(path)
    except OSError:
        return DigestFile(relative, "", "missing")
    return DigestFile(relative, f"{st.st_mode & MODE_BITS:04o}", digest)


def tree_records(
    folder: str,
    *,
    max_files: int | None = None,
    max_bytes: int | None = None,
    skip: frozenset[str] = frozenset(),
    every_folder: bool = False,
) -> list[DigestFile] | None:
    """Every file under ``folder`` as digest lines, or None once over ``max_files`` / ``max_bytes``.

    Symlinked folders are recorded as links, never walked; ``skip`` names
    top-level files left out (a pack's marker). The folders of :data:`SKIP_DIRS`
    and ``.ongrid-*`` ones are left out too, unless ``every_folder`` (a pack's
    lock: install copied them, and a skill's code may run from them) — but
    ``__pycache__`` always: Python writes it beside what a skill imports, and a pack
    would drift on its first call.
    """
    records: list[DigestFile] = []
    total = 0
    for path, relative, st in _walk(folder, every_folder):
        if relative in skip:
            continue
        if max_files is not None and len(records) >= max_files:
            return None
        total += st.st_size if stat.S_ISREG(st.st_mode) else 0
        if max_bytes is not None and total > max_bytes:
            return None
        records.append(_record_or_missing(path, relative, st))
    return records


def _walk(folder: str, every_folder: bool = False) -> Iterator[tuple[str, str, os.stat_result]]:
    stack = [""]
    while stack:
        prefix = stack.pop()
        try:
            with os.scandir(os.path.join(folder, prefix) if prefix else folder) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError:
            continue
        for entry in entries:
            relative = f"{prefix}/{entry.name}" if prefix else entry.name
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if stat.S_ISDIR(st.st_mode):
                if entry.name == "__pycache__":  # Python rewrites it as it imports: never a lock's
                    continue
                if every_folder or (entry.name not in SKIP_DIRS and not entry.name.startswith(".ongrid-")):
                    stack.append(relative)
            elif stat.S_ISREG(st.st_mode) or stat.S_ISLNK(st.st_mode):
                yield entry.path, relative, st


def skill_digest(skill: Skill) -> SkillDigest:
    """The digest of ``skill`` as its files are now (see the module docstring for which files)."""
    folder = os.path.dirname(skill.path)
    if skill.format == "SKILL.md":
        records = tree_records(folder, max_files=MAX_FILES, max_bytes=MAX_BYTES)
        if records is not None:
            outside = [f for f in _manifest_and_entries(skill, folder) if f.path.startswith("../")]
            return SkillDigest.of(records + outside)
        partial = (
            f"the skill folder {folder} holds more than {MAX_FILES} files or "
            f"{MAX_BYTES // (1024 * 1024)} MiB; "
            "its digest covers the manifest and the tools' scripts only"
        )
        return SkillDigest.of(_manifest_and_entries(skill, folder), partial)
    return SkillDigest.of(_manifest_and_entries(skill, folder))


def _manifest_and_entries(skill: Skill, folder: str) -> list[DigestFile]:
    paths = {skill.path: os.path.basename(skill.path)}
    for tool in skill.tools:
        if tool.entry:
            paths.setdefault(tool.entry, os.path.relpath(tool.entry, folder))
    return [_regular(path, relative) for path, relative in paths.items()]


def partial_warning(skill: Skill, digest: SkillDigest) -> Problem:
    """The load warning of a skill whose digest could not cover its whole folder."""
    return Problem("warning", "digest_partial", digest.partial, skill.path)


def entry_drift(tool: Tool, fd: int | None = None, st: os.stat_result | None = None) -> str | None:
    """Why the entry ``tool`` is about to run is not the file that was loaded, or None.

    The call-time check: only the entry (the one file the call opens anyway) is
    hashed again, against :attr:`Tool.entry_digest`; its memo makes an
    unchanged file cost one ``stat``. ``fd`` is the entry already opened by the
    caller (the file it will execute): it is hashed instead of the path, so no
    swap can slip between the check and the run (``st``: its ``fstat``, when the caller
    has one). Tools without an entry digest (native ones, or loaded without the
    catalog) are not checked.
    """
    if not tool.entry_digest or not tool.entry:
        return None
    try:
        now = file_sha256(tool.entry) if fd is None else _hash_fd(fd, tool.entry, st)[0]
    except OSError as exc:
        return f"entry {tool.entry} cannot be read: {getattr(exc, 'strerror', None) or exc}"
    if now == tool.entry_digest:
        return None
    return (
        f"entry {tool.entry} changed since the skill was loaded "
        f"(sha256 {tool.entry_digest[:12]} -> {now[:12]}); reload to run the new version"
    )
