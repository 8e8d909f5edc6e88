"""Progressive disclosure: a skill's instructions and files, read only when asked for.

Listings carry a skill's name, description and ``when_to_use`` and nothing more. The
body of its SKILL.md (the Markdown after the closing fence, verbatim apart from line
endings, which are normalised to LF) and the files under ``scripts/``,
``references/`` and ``assets/`` are read here, on demand, from disk.

Files, the SKILL.md itself included, are read and listed through descriptors, never
by path: the skill folder is opened once (``O_PATH | O_DIRECTORY``), then each file or
folder beneath it with :func:`~ongrid_plugins.discovery.roots.open_beneath` (no symlink in any
component, no ``..``), and what is read is the descriptor that was checked (a regular
file, under the size cap). A symlink is listed as refused with where it points and is never followed, so
no swap of a file or of a parent folder, however timed, can make a read leave the
folder. Nothing here ever executes a file.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator
from typing import Any

import attrs

from ..discovery.roots import open_beneath
from ..errors import ManifestParseError, ResourceRefused
from ..models import Skill

__all__ = ["MAX_FILE_BYTES", "RESOURCE_DIRS", "Instructions", "Resource", "read_instructions"]

_O_PATH = getattr(os, "O_PATH", 0)  # Linux; elsewhere a plain read-only open

#: The folders of a skill whose files are listed (Agent Skills layout).
RESOURCE_DIRS = ("scripts", "references", "assets")
#: At most this many files are listed.
MAX_RESOURCES = 1000
#: The largest file :meth:`Instructions.read` returns.
MAX_FILE_BYTES = 1024 * 1024


@attrs.frozen
class Resource:
    """One file of a skill, relative to its folder."""

    path: str
    """Relative to the skill folder, ``/``-separated (``references/api.md``)."""
    kind: str
    """``scripts``, ``references`` or ``assets``."""
    size: int | None = None
    refused: str = ""
    """Why it may not be read (it escapes the skill folder, it is not a regular file); empty if it may."""

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return attrs.asdict(self)


@attrs.frozen
class Instructions:
    """A skill's body and files, as read from disk just now."""

    skill: str
    path: str
    """The manifest the body comes from."""
    folder: str
    """The skill folder (canonical): every file must stay inside it."""
    body: str
    """The Markdown instructions; empty for formats without a body (skill.json)."""
    resources: tuple[Resource, ...] = ()
    truncated: bool = False
    """More than :data:`MAX_RESOURCES` files: the list stops there."""

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {
            "skill": self.skill,
            "path": self.path,
            "folder": self.folder,
            "body": self.body,
            "resources": [r.to_dict() for r in self.resources],
            "truncated": self.truncated,
        }

    def read(self, relative: str, limit: int = MAX_FILE_BYTES) -> bytes:
        """The bytes of a file of the skill; :class:`ResourceRefused` unless it is safe to read.

        The path is relative to the skill folder and opened now, beneath the folder's
        descriptor with no symlink in any component; the descriptor must be a regular
        file of at most ``limit`` bytes, and is what is read.
        """
        if os.path.isabs(relative) or not relative.strip():
            raise ResourceRefused(self.skill, relative, "give a path relative to the skill folder")
        try:
            with _Folder(self.folder) as folder:
                fd = open_beneath(folder.fd, relative, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
        except (OSError, ValueError) as exc:
            raise ResourceRefused(self.skill, relative, _why(exc)) from None
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise ResourceRefused(self.skill, relative, "not a regular file")
            if st.st_size > limit:
                raise ResourceRefused(
                    self.skill, relative, f"it is {st.st_size} bytes; at most {limit} are read"
                )
            data = _read_upto(fd, limit + 1)
        finally:
            os.close(fd)
        if len(data) > limit:
            raise ResourceRefused(self.skill, relative, f"it is larger than {limit} bytes")
        return data

    def read_text(self, relative: str, limit: int = MAX_FILE_BYTES) -> str:
        """Like :meth:`read`, decoded as UTF-8 (invalid bytes replaced)."""
        return self.read(relative, limit).decode("utf-8", errors="replace")


def read_instructions(skill: Skill) -> Instructions:
    """Read the body of ``skill`` and list its files, now.

    Raises :class:`~ongrid_plugins.errors.ManifestParseError` if its SKILL.md can no
    longer be read.
    """
    folder = os.path.realpath(os.path.dirname(skill.path))
    body = ""
    if skill.format == "SKILL.md":
        body = _read_body(skill.path, folder)
    resources = list(_resources(folder))
    truncated = len(resources) > MAX_RESOURCES
    return Instructions(skill.name, skill.path, folder, body, tuple(resources[:MAX_RESOURCES]), truncated)


def _read_body(path: str, folder: str) -> str:
    """The body of the SKILL.md at ``path``, read through a descriptor beneath its folder.

    ``path`` is canonical (the loader resolves a symlinked manifest), so a SKILL.md
    replaced by a symlink since the load is refused rather than read from elsewhere.
    """
    from ..loaders.skill_md import MAX_BYTES, parse_document

    try:
        with _Folder(folder) as opened:
            fd = open_beneath(opened.fd, os.path.basename(path), os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
    except OSError as exc:
        raise ManifestParseError(path, f"cannot open: {_why(exc)}") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ManifestParseError(path, "not a regular file")
        raw = _read_upto(fd, MAX_BYTES + 1)
    finally:
        os.close(fd)
    if len(raw) > MAX_BYTES:
        raise ManifestParseError(path, f"manifest is larger than the limit of {MAX_BYTES} bytes")
    return parse_document(raw, path).body


def _read_upto(fd: int, count: int) -> bytes:
    """At most ``count`` bytes from ``fd`` (fewer at its end)."""
    chunks, size = [], 0
    while size < count and (chunk := os.read(fd, count - size)):
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)


def _resources(folder: str) -> Iterator[Resource]:
    try:
        opened = _Folder(folder)
    except OSError:
        return
    count = 0
    with opened:
        for kind in RESOURCE_DIRS:
            for resource in _walk(opened, kind):
                yield resource
                count += 1
                if count > MAX_RESOURCES:
                    return


class _Folder:
    """The skill folder, open as an ``O_PATH`` descriptor while the ``with`` block runs.

    The folder's own path is canonical, so its last component may not be a symlink
    (``O_NOFOLLOW``): a folder swapped for one since the skill was read is refused.
    """

    def __init__(self, path: str) -> None:
        self.path = path
        self.fd = os.open(path, _O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)

    def __enter__(self) -> _Folder:
        return self

    def __exit__(self, *_exc: object) -> None:
        os.close(self.fd)

    def link_target(self, relative: str) -> str:
        """Where the symlink ``relative`` points (read beneath the folder, never followed)."""
        parent, _, name = relative.rpartition("/")
        try:
            fd = open_beneath(self.fd, parent, _O_PATH | os.O_DIRECTORY) if parent else os.dup(self.fd)
        except OSError:  # a parent swapped for a symlink meanwhile
            return "?"
        try:
            return os.readlink(name, dir_fd=fd)
        except OSError:
            return "?"
        finally:
            os.close(fd)


def _walk(folder: _Folder, top: str) -> Iterator[Resource]:
    """Resources under ``top``, sorted; every entry is looked at beneath the folder's descriptor."""
    stack = [top]
    while stack:
        relative = stack.pop()
        try:
            fd = open_beneath(folder.fd, relative, _O_PATH | os.O_NOFOLLOW)
        except OSError as exc:
            if relative == top and exc.errno == errno.ENOENT:
                continue  # the skill has no such folder
            yield Resource(
                relative, top, None, _symlink(folder, relative) if exc.errno == errno.ELOOP else _why(exc)
            )
            continue
        try:
            st = os.fstat(fd)
            if stat.S_ISLNK(st.st_mode):
                yield Resource(relative, top, None, _symlink(folder, relative))
            elif stat.S_ISDIR(st.st_mode):
                try:
                    listing = os.open(".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=fd)
                    try:
                        names = sorted(os.listdir(listing), reverse=True)
                    finally:
                        os.close(listing)
                except OSError as exc:
                    yield Resource(relative, top, None, _why(exc))
                    continue
                stack.extend(f"{relative}/{name}" for name in names)
            else:
                yield Resource(
                    relative, top, st.st_size, "" if stat.S_ISREG(st.st_mode) else "not a regular file"
                )
        finally:
            os.close(fd)


def _symlink(folder: _Folder, relative: str) -> str:
    return f"a symbolic link (to {folder.link_target(relative)}): links are not followed"


def _why(exc: BaseException) -> str:
    if isinstance(exc, OSError):
        if exc.errno == errno.ELOOP:
            return "a symbolic link is on the way: links are not followed"
        if exc.errno == errno.EXDEV:
            return "it leaves the skill folder"
        if exc.strerror:
            return exc.strerror.lower()
    return str(exc)
