"""Progressive disclosure: a skill's instructions and files, read only when asked for.

Listings carry a skill's name, description and ``when_to_use`` and nothing more. The
body of its SKILL.md (the Markdown after the closing fence, verbatim apart from line
endings, which are normalised to LF) and the files under ``scripts/``,
``references/`` and ``assets/`` are read here, on demand, from disk.

Every file is resolved with its symlinks followed and must stay inside the skill
folder: one that escapes is listed as refused, with the reason, and is never opened.
Nothing here ever executes a file.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from typing import Any

import attrs

from .errors import ResourceRefused
from .models import Skill
from .roots import is_within, resolve_file

__all__ = ["MAX_FILE_BYTES", "RESOURCE_DIRS", "Instructions", "Resource", "read_instructions"]

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

        The path is relative to the skill folder; it is resolved again now (symlinks
        followed) and must be a regular file inside the folder, of at most ``limit`` bytes.
        """
        if os.path.isabs(relative) or not relative.strip():
            raise ResourceRefused(self.skill, relative, "give a path relative to the skill folder")
        candidate = os.path.normpath(os.path.join(self.folder, relative))
        try:
            real, st = resolve_file(candidate)
        except (OSError, ValueError) as exc:
            raise ResourceRefused(self.skill, relative, _why(exc)) from None
        reason = _refusal(real, st, self.folder)
        if not reason and st.st_size > limit:
            reason = f"it is {st.st_size} bytes; at most {limit} are read"
        if reason:
            raise ResourceRefused(self.skill, relative, reason)
        # The canonical path has no symlink left: O_NOFOLLOW refuses one swapped in since.
        try:
            fd = os.open(real, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOFOLLOW)
        except OSError as exc:
            raise ResourceRefused(self.skill, relative, _why(exc)) from None
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise ResourceRefused(self.skill, relative, "not a regular file")
            chunks, size = [], 0
            while size <= limit and (chunk := os.read(fd, limit + 1 - size)):
                chunks.append(chunk)
                size += len(chunk)
        finally:
            os.close(fd)
        if size > limit:
            raise ResourceRefused(self.skill, relative, f"it is larger than {limit} bytes")
        return b"".join(chunks)

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
        from .loaders.skill_md import read_document

        body = read_document(skill.path).body
    resources = list(_resources(folder))
    truncated = len(resources) > MAX_RESOURCES
    return Instructions(skill.name, skill.path, folder, body, tuple(resources[:MAX_RESOURCES]), truncated)


def _resources(folder: str) -> Iterator[Resource]:
    count = 0
    for kind in RESOURCE_DIRS:
        top = os.path.join(folder, kind)
        if not os.path.lexists(top):
            continue
        for resource in _walk(folder, top, kind):
            yield resource
            count += 1
            if count > MAX_RESOURCES:
                return


def _walk(folder: str, top: str, kind: str) -> Iterator[Resource]:
    """Resources under ``top``, sorted; symlinked folders are checked, never followed."""
    stack = [top]
    while stack:
        current = stack.pop()
        relative = os.path.relpath(current, folder).replace(os.sep, "/")
        try:
            real, st = resolve_file(current)
        except (OSError, ValueError) as exc:
            yield Resource(relative, kind, None, _why(exc))
            continue
        if not is_within(real, folder):
            yield Resource(relative, kind, None, f"it resolves to {real}, outside the skill folder")
            continue
        if stat.S_ISDIR(st.st_mode):
            if os.path.islink(current) and current != top:
                yield Resource(relative, kind, None, "a symlinked folder: not followed")
                continue
            try:
                names = sorted(os.listdir(current), reverse=True)
            except OSError as exc:
                yield Resource(relative, kind, None, _why(exc))
                continue
            stack.extend(os.path.join(current, name) for name in names)
            continue
        yield Resource(relative, kind, st.st_size, _refusal(real, st, folder))


def _refusal(real: str, st: os.stat_result, folder: str) -> str:
    if not is_within(real, folder):
        return f"it resolves to {real}, outside the skill folder"
    if not stat.S_ISREG(st.st_mode):
        return "not a regular file"
    return ""


def _why(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror.lower()
    return str(exc)
