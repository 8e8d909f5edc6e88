"""Unpack a pack (a folder, a ``.tar[.gz|.bz2|.xz]`` or a ``.zip``) into a folder, refusing anything hostile.

Nothing is extracted with ``tarfile.extractall`` or ``zipfile.extractall``:
every member goes through :class:`_Stage`, which writes regular files and
folders itself and refuses, naming the member:

* names that are absolute, contain ``..``, a backslash or a NUL, are no valid UTF-8
  (the lock could not record them), or appear twice;
* devices, FIFOs, sockets, hard links, sparse files, encrypted zip members;
* symbolic links that are absolute or resolve (once every link is in place)
  outside the pack, and any member whose path goes through a link;
* a path of more than ``max_depth`` parts (deep trees cost every recursive
  walk a frame per level),
* a file over ``max_file_bytes``, more than ``max_total_bytes`` in all, more than
  ``max_members`` members, or a compressed stream that expands past the total —
  counted on the bytes really written, not on the sizes the archive claims
  (zip bombs lie about those); a zip's member count and a tar's extended headers
  are checked before the parser reads them into memory (:mod:`.headers`).

Links inside the pack are allowed (packs of real projects use them) but are
created last, after every file and folder, so no write ever goes through one.
Files keep only their execute bits: modes become 0755 or 0644.
:func:`remove_tree` removes what an unpack wrote (or a half-written leftover)
without recursion and without ever raising.
"""

from __future__ import annotations

import contextlib
import io
import os
import stat
import tarfile
import zipfile
from collections.abc import Iterator
from typing import IO, Any

import attrs

from ..core.echo import printable, utf8_encodable
from ..core.userfiles import file_kind
from ..errors import OngridError
from .headers import BoundedTarInfo, HugeHeader, zip_entries, zip_members

__all__ = [
    "ARCHIVE_SUFFIXES",
    "Limits",
    "UnpackReport",
    "UnsafeArchive",
    "archive_kind",
    "check_links",
    "copy_folder",
    "remove_tree",
    "unpack",
]

#: The names of the archives a pack comes in, the longer forms before ``.tar`` (an
#: installed pack is named after the file without its suffix).
ARCHIVE_SUFFIXES = (".tar.gz", ".tar.bz2", ".tar.xz", ".tgz", ".tbz2", ".txz", ".tar", ".zip")

MiB = 1024 * 1024
#: Folders of a source folder not copied: version control and byte-code caches.
SKIP_SOURCE = frozenset({".git", ".hg", ".svn", "__pycache__"})
_CHUNK = 256 * 1024
_MAX_LINK = 4096
#: The most bytes a zip's central directory may take per member: the fixed 46, a name
#: of 4 KiB and 4 KiB of extra fields and comment.
_MAX_DIRECTORY_ENTRY = 46 + 8192


class UnsafeArchive(OngridError):
    """A pack source holds a member that is refused; ``member`` names it."""

    exit_code = 1

    def __init__(self, source: str, member: str, reason: str) -> None:
        self.source = source
        self.member = member
        self.reason = reason
        where = f"{source}: {printable(member)}" if member else source  # the archive's text: escaped
        super().__init__(f"{where}: {reason}")


@attrs.frozen
class Limits:
    """How big a pack may be once unpacked."""

    max_file_bytes: int = 64 * MiB
    max_total_bytes: int = 256 * MiB
    max_members: int = 10_000
    max_depth: int = 64
    """Parts of a member's path (``a/b/c`` is 3); the loader itself stops at 32 levels."""


@attrs.frozen
class UnpackReport:
    """What an unpack wrote."""

    files: int
    folders: int
    links: int
    bytes: int


def archive_kind(path: str) -> str | None:
    """``zip``, ``tar`` or None, from the file's first bytes (not its name)."""
    try:
        with open(path, "rb") as f:
            head = f.read(512)
    except OSError:
        return None
    if head.startswith((b"PK\x03\x04", b"PK\x05\x06")):
        return "zip"
    if head.startswith((b"\x1f\x8b", b"BZh", b"\xfd7zXZ\x00")) or head[257:262] == b"ustar":
        return "tar"
    return None


def unpack(source: str, dest: str, limits: Limits | None = None) -> UnpackReport:
    """Unpack the archive or folder ``source`` into the new folder ``dest``."""
    limits = limits or Limits()
    try:
        if os.path.isdir(source):
            return copy_folder(source, dest, limits)
        kind = archive_kind(source)
        if kind is None:
            raise UnsafeArchive(source, "", "not a folder, a tar archive (.tar, .tar.gz, .tgz) or a .zip")
        stage = _Stage(source, dest, limits)
        if kind == "zip":
            _unzip(source, stage)
        else:
            _untar(source, stage)
        return stage.finish()
    except UnsafeArchive:
        raise
    except HugeHeader as exc:
        raise UnsafeArchive(source, "", str(exc)) from None
    except (tarfile.TarError, zipfile.BadZipFile, EOFError, ValueError, NotImplementedError) as exc:
        raise UnsafeArchive(source, "", f"not a valid archive: {exc}") from None
    except (OSError, RuntimeError) as exc:
        raise UnsafeArchive(source, "", f"cannot unpack: {exc}") from None


def copy_folder(source: str, dest: str, limits: Limits | None = None) -> UnpackReport:
    """Copy the folder ``source`` into the new folder ``dest`` under the same rules as an archive."""
    stage = _Stage(source, dest, limits or Limits())
    for rel, entry in _walk(source):
        if entry.is_symlink():
            stage.add_link(rel, os.readlink(entry.path))
        elif entry.is_dir(follow_symlinks=False):
            stage.add_folder(rel)
        elif entry.is_file(follow_symlinks=False):
            fd = os.open(entry.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
            with os.fdopen(fd, "rb") as f:
                st = os.fstat(f.fileno())
                if not stat.S_ISREG(st.st_mode):
                    raise UnsafeArchive(source, rel, "changed into a special file while being copied")
                stage.add_file(rel, st.st_mode, f, st.st_size)
        else:
            stage.refuse(rel, "is a device, FIFO or socket")
    return stage.finish()


def _walk(top: str) -> Iterator[tuple[str, os.DirEntry[str]]]:
    """Every entry under ``top``, a folder before what it holds; iterative (no frame per level)."""
    stack: list[tuple[str, str]] = [(top, "")]
    while stack:
        folder, prefix = stack.pop()
        with os.scandir(folder) as it:
            entries = sorted(it, key=lambda e: e.name)
        below = []
        for entry in entries:
            if entry.name in SKIP_SOURCE:
                continue
            rel = prefix + entry.name
            yield rel, entry
            if entry.is_dir(follow_symlinks=False):
                below.append((entry.path, rel + "/"))
        stack.extend(reversed(below))


def check_links(source: str, unpacked: str, top: str) -> None:
    """Refuse a link under ``top`` whose resolution ever leaves ``top`` (named as in the archive).

    :func:`unpack` checks where links resolve within the whole unpacked folder. When
    the pack is a wrapper folder in it (``tools-1.0/...``), a link could climb one
    level higher, or climb out and come back in through the wrapper's name
    (``../../tools/x``): fine in staging, but once installed under its own name that
    path is the lock or another pack. So every step is followed here, and none may
    rise above ``top``, wherever the pack ends up.
    """
    for folder, dirs, files in os.walk(top):
        for name in sorted(dirs + files):
            path = os.path.join(folder, name)
            if os.path.islink(path) and not _stays_inside(top, os.path.relpath(path, top)):
                member = os.path.relpath(path, unpacked)
                reason = f"is a link to {os.readlink(path)!r}, which resolves outside the pack"
                raise UnsafeArchive(source, member, reason)


def _stays_inside(top: str, rel: str) -> bool:
    """Whether resolving the link ``top/rel`` step by step never goes above ``top``."""
    here = rel.split("/")[:-1]
    todo = list(reversed(os.readlink(os.path.join(top, rel)).split("/")))
    hops = 0
    while todo:
        part = todo.pop()
        if part in ("", "."):
            continue
        if part == "..":
            if not here:
                return False
            here.pop()
            continue
        here.append(part)
        path = os.path.join(top, *here)
        if os.path.islink(path):
            hops += 1
            target = os.readlink(path)
            if hops > 40 or target.startswith("/"):
                return False
            here.pop()
            todo.extend(reversed(target.split("/")))
    return True


def remove_tree(path: str) -> bool:
    """Remove ``path`` and all it holds; links are removed, never followed. Never raises.

    Iterative, unlike ``shutil.rmtree`` (whose ``ignore_errors`` does not catch the
    ``RecursionError`` of a tree a thousand levels deep). True when ``path`` is gone.
    """
    stack: list[tuple[str, bool]] = [(path, False)]
    while stack:
        current, emptied = stack.pop()
        try:
            if emptied:
                os.rmdir(current)
            elif not stat.S_ISDIR(os.lstat(current).st_mode):
                os.unlink(current)
            else:
                stack.append((current, True))
                stack.extend((os.path.join(current, name), False) for name in os.listdir(current))
        except OSError:
            continue
    return not os.path.lexists(path)


def _unzip(source: str, stage: _Stage) -> None:
    limit = stage.limits.max_members
    with open(source, "rb") as f:
        declared = zip_members(f)  # before ZipFile() parses the whole directory into memory
        entries = zip_entries(f, limit)
    if declared is not None and declared[0] > limit:
        stage.refuse("", f"has {declared[0]} members; the limit is {limit}")
    if declared is not None and declared[1] > limit * _MAX_DIRECTORY_ENTRY:
        stage.refuse("", f"has a central directory of {declared[1]} bytes, too big for {limit} members")
    if entries is not None and entries > limit:
        stage.refuse("", f"has more than {limit} members in its central directory; the limit is {limit}")
    with zipfile.ZipFile(source) as zf:
        infos = zf.infolist()
        if len(infos) > limit:
            stage.refuse("", f"has {len(infos)} members; the limit is {limit}")
        for info in infos:
            _unzip_member(zf, info, stage)


def _unzip_member(zf: zipfile.ZipFile, info: zipfile.ZipInfo, stage: _Stage) -> None:
    name = info.filename
    if info.flag_bits & 0x1:
        stage.refuse(name, "is encrypted")
    mode = info.external_attr >> 16 if info.create_system == 3 else 0
    if info.is_dir():
        stage.add_folder(name)
    elif stat.S_ISLNK(mode):
        with zf.open(info) as f:
            target = f.read(_MAX_LINK + 1)
        if len(target) > _MAX_LINK:
            stage.refuse(name, "is a link with an over-long target")
        stage.add_link(name, target.decode("utf-8", "surrogateescape"))
    elif stat.S_IFMT(mode) in (0, stat.S_IFREG):
        stage.check_declared(name, info.file_size)
        with zf.open(info) as f:
            stage.add_file(name, mode, f, info.file_size)
    else:
        stage.refuse(name, f"is {file_kind(mode)}")


def _untar(source: str, stage: _Stage) -> None:
    limits = stage.limits
    # Headers and padding cost at most ~2 KiB per member besides the content.
    cap = limits.max_total_bytes + 2048 * limits.max_members + MiB
    with open(source, "rb") as raw, _decompressed(raw) as inner:
        stream = _Capped(inner, cap, source)
        with tarfile.open(fileobj=stream, mode="r|", tarinfo=BoundedTarInfo) as tf:
            for count, member in enumerate(tf, 1):
                if count > limits.max_members:
                    stage.refuse("", f"has more than {limits.max_members} members")
                _untar_member(tf, member, stage)


def _untar_member(tf: tarfile.TarFile, member: tarfile.TarInfo, stage: _Stage) -> None:
    name = member.name
    if member.isdir():
        stage.add_folder(name)
    elif member.issym():
        stage.add_link(name, member.linkname)
    elif member.islnk():
        stage.refuse(name, f"is a hard link (to {member.linkname})")
    elif member.issparse():
        stage.refuse(name, "is a sparse file")
    elif member.isreg():
        stage.check_declared(name, member.size)
        f = tf.extractfile(member)
        assert f is not None  # regular members always have data
        stage.add_file(name, member.mode, f, member.size)
    elif member.ischr() or member.isblk():
        stage.refuse(name, "is a device")
    elif member.isfifo():
        stage.refuse(name, "is a FIFO")
    else:
        stage.refuse(name, f"has an unsupported member type {member.type!r}")


def _decompressed(raw: IO[bytes]) -> Any:
    head = raw.read(6)
    raw.seek(0)
    if head.startswith(b"\x1f\x8b"):
        import gzip

        return gzip.GzipFile(fileobj=raw, mode="rb")
    if head.startswith(b"BZh"):
        import bz2

        return bz2.BZ2File(raw, "rb")
    if head.startswith(b"\xfd7zXZ\x00"):
        import lzma

        return lzma.LZMAFile(raw, "rb")
    return contextlib.nullcontext(raw)


class _Capped(io.RawIOBase):
    """A read-only stream that refuses to yield more than ``cap`` bytes (gzip bombs, huge headers)."""

    def __init__(self, inner: IO[bytes], cap: int, source: str) -> None:
        self.inner = inner
        self.left = cap
        self.cap = cap
        self.source = source

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        data = self.inner.read(min(len(buffer), self.left + 1))
        if len(data) > self.left:
            raise UnsafeArchive(self.source, "", f"expands to more than {self.cap} bytes")
        self.left -= len(data)
        buffer[: len(data)] = data
        return len(data)


def clean_name(source: str, name: str) -> str:
    """The member's path relative to the pack (``a/b``), or raise :class:`UnsafeArchive`."""
    if not name or "\x00" in name or "\\" in name:
        raise UnsafeArchive(source, name, "has an empty name, a NUL byte or a backslash")
    if not utf8_encodable(name):
        shown = name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
        raise UnsafeArchive(
            source, shown, "is not valid UTF-8: rename it (skills.lock records names as UTF-8)"
        )
    if name.startswith("/"):
        raise UnsafeArchive(source, name, "is an absolute path")
    parts = [p for p in name.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise UnsafeArchive(source, name, 'contains ".." (it would land outside the pack)')
    if parts and len(parts[0]) == 2 and parts[0][1] == ":":
        raise UnsafeArchive(source, name, "starts with a drive letter")
    return "/".join(parts)


class _Stage:
    """Writes members under ``dest``; links last; every rule of the module docstring."""

    def __init__(self, source: str, dest: str, limits: Limits) -> None:
        self.source = source
        self.dest = dest
        self.limits = limits
        os.mkdir(dest, 0o755)
        self.real_dest = os.path.realpath(dest)
        self.seen: set[str] = set()
        self.links: dict[str, str] = {}
        self.folders = 0
        self.files = 0
        self.total = 0

    def refuse(self, name: str, reason: str) -> None:
        raise UnsafeArchive(self.source, name, reason)

    def _claim(self, name: str) -> str:
        rel = clean_name(self.source, name)
        if not rel:
            return rel  # "./": the pack itself
        if rel in self.seen:
            self.refuse(name, "appears twice")
        parts = rel.split("/")
        for i in range(1, len(parts)):
            if "/".join(parts[:i]) in self.links:
                self.refuse(name, "lies under a link")
        if len(parts) > self.limits.max_depth:
            self.refuse(name, f"lies {len(parts)} levels deep; the limit is {self.limits.max_depth}")
        if len(self.seen) >= self.limits.max_members:
            self.refuse(name, f"is one member too many (the limit is {self.limits.max_members})")
        self.seen.add(rel)
        return rel

    def left_out(self, name: str) -> bool:
        """A member in a folder install leaves out, from an archive as from a folder
        (:data:`SKIP_SOURCE`): version control, and Python's bytecode cache, which Python
        would load unchecked and the lock does not cover."""
        return any(part in SKIP_SOURCE for part in clean_name(self.source, name).split("/"))

    def add_folder(self, name: str) -> None:
        if self.left_out(name):
            return
        rel = self._claim(name)
        if rel:
            os.makedirs(os.path.join(self.dest, rel), 0o755, exist_ok=True)
            self.folders += 1

    def check_declared(self, name: str, size: int) -> None:
        if size > self.limits.max_file_bytes:
            self.refuse(name, f"is {size} bytes; the limit per file is {self.limits.max_file_bytes}")
        if self.total + size > self.limits.max_total_bytes:
            self.refuse(name, f"takes the pack past the limit of {self.limits.max_total_bytes} bytes")

    def add_file(self, name: str, mode: int, data: IO[bytes], declared: int) -> None:
        if self.left_out(name):
            return
        rel = self._claim(name)
        if not rel:
            self.refuse(name, "is a file without a name")
        self.check_declared(name, declared)
        path = os.path.join(self.dest, rel)
        os.makedirs(os.path.dirname(path), 0o755, exist_ok=True)
        perm = 0o755 if mode & 0o111 else 0o644
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        with open(os.open(path, flags, perm), "wb") as out:
            written = 0
            while chunk := data.read(_CHUNK):
                written += len(chunk)
                self.total += len(chunk)
                if written > self.limits.max_file_bytes:
                    self.refuse(name, f"expands past the limit per file of {self.limits.max_file_bytes} B")
                if self.total > self.limits.max_total_bytes:
                    self.refuse(name, f"takes the pack past the limit of {self.limits.max_total_bytes} B")
                out.write(chunk)
        os.chmod(path, perm)  # the umask may have taken bits away
        self.files += 1

    def add_link(self, name: str, target: str) -> None:
        if self.left_out(name):
            return
        rel = self._claim(name)
        if not rel:
            self.refuse(name, "is a link without a name")
        if not utf8_encodable(target):
            self.refuse(name, "is a link whose target is not valid UTF-8")
        if not target or target.startswith("/") or "\x00" in target:
            self.refuse(name, f"is a link to {target!r}: only relative links inside the pack are allowed")
        if any(other.startswith(rel + "/") for other in self.seen):
            self.refuse(name, "is a link, and other members lie under it")
        self.links[rel] = target

    def finish(self) -> UnpackReport:
        """Create the links, then check that every one resolves inside the pack."""
        for rel, target in sorted(self.links.items()):
            path = os.path.join(self.dest, rel)
            os.makedirs(os.path.dirname(path), 0o755, exist_ok=True)
            os.symlink(target, path)
        for rel, target in sorted(self.links.items()):
            real = os.path.realpath(os.path.join(self.dest, rel))
            if real != self.real_dest and not real.startswith(self.real_dest + os.sep):
                self.refuse(rel, f"is a link to {target!r}, which resolves outside the pack")
        return UnpackReport(self.files, self.folders, len(self.links), self.total)
