"""MCP's Skills extension (``io.modelcontextprotocol/skills``) for :mod:`.mcp`.

The extension's specification (``modelcontextprotocol/ext-skills``,
``specification/stable/skills.mdx``) adds three methods on top of ``skill://``
resources, all answered here for the skills the connecting persona may use:

* ``skills/list`` (paginated): one entry per skill, ``{uri, frontmatter, resources}``:
  the ``uri`` of its ``SKILL.md``, its front matter verbatim as JSON, and every file of
  the skill with ``sha256:{hex}`` digests and sizes (the catalog's own file hashes, over
  the bytes ``resources/read`` returns);
* ``skills/get``: the entry of one skill, by the URI of its ``SKILL.md``;
* ``resources/directory/read`` (declared as ``directoryRead``): the direct children of a
  folder of a skill (``skill://pdf-processing/templates``).

A skill is served through the extension when its ``SKILL.md`` front matter has the
``name`` the skill is registered under and a ``description`` (the extension requires
both, and the name must be the URI's last segment); other skills stay ordinary
resources and prompts. A skill whose folder lies inside another served skill's folder
is nested: its URI extends the enclosing skill's (``skill://outer/inner/SKILL.md``), and
the enclosing skill's entry lists its files too, as the extension says. Files the
server does not read (symbolic links, files over 1 MiB) are left out of an entry; a
skill over the extension's limits (512 files, 16 MiB) is not served through it.

It imports the ``mcp`` SDK (the ``[mcp]`` extra); only :mod:`.mcp` imports it.
"""

from __future__ import annotations

import base64
import binascii
import json
import mimetypes
import os
import threading
from collections.abc import Callable, Iterable
from typing import Any

import anyio
import mcp.types as types
from mcp.shared.exceptions import MCPError

from ..catalog import skill_digest
from ..catalog.instructions import MAX_FILE_BYTES
from ..errors import ManifestParseError
from ..models import Skill

__all__ = ["EXTENSION", "PAGE", "Served", "directory_read", "get_skill", "list_skills", "register", "served"]

EXTENSION = "io.modelcontextprotocol/skills"
PAGE = 50
"""Entries (or directory children) per page."""
_SCHEME = "skill://"
_CURSOR = "ongrid-skills-cursor"


class GetSkillParams(types.RequestParams):
    uri: str


class DirectoryReadParams(types.RequestParams):
    uri: str
    cursor: str | None = None


class Served:
    """A skill as the extension serves it: its path in the ``skill://`` namespace and its files."""

    def __init__(self, skill: Skill, path: str, frontmatter: dict[str, Any]):
        self.skill = skill
        self.path = path
        self.frontmatter = frontmatter
        self._files: list[dict[str, Any]] | None = None

    @property
    def files(self) -> list[dict[str, Any]] | None:
        """``{"path", "digest", "size"}`` for each file, relative to the skill folder, hashed
        now (the catalog's memo: an unchanged file costs a stat); None if the folder grew
        past the extension's limits since the catalog loaded it."""
        if self._files is None:
            self._files = _files(self.skill)
        return self._files

    @property
    def uri(self) -> str:
        return f"{_SCHEME}{self.path}/SKILL.md"

    def entry(self) -> dict[str, Any]:
        files = self.files
        if files is None:  # no stable, complete list to publish: what the extension calls dynamic
            return {"uri": self.uri, "frontmatter": self.frontmatter, "resources": "dynamic"}
        resources = [
            {"uri": f"{_SCHEME}{self.path}/{f['path']}", "digest": f["digest"], "size": f["size"]}
            for f in files
        ]
        return {"uri": self.uri, "frontmatter": self.frontmatter, "resources": resources}


def register(server: Any, skills: Callable[[], list[Skill]], seen: Callable[[Any], None]) -> None:
    """Declare the extension on ``server`` and answer its methods from ``skills()``, the
    SKILL.md skills the persona may use (called in a worker thread); ``seen(ctx)`` marks a
    session that made a request (it is told of catalog changes from then on)."""
    server.extensions[EXTENSION] = {"directoryRead": True}

    async def on_list(ctx: Any, params: types.PaginatedRequestParams) -> dict[str, Any]:
        seen(ctx)
        return await anyio.to_thread.run_sync(lambda: list_skills(skills(), params.cursor))

    async def on_get(ctx: Any, params: GetSkillParams) -> dict[str, Any]:
        seen(ctx)
        return await anyio.to_thread.run_sync(lambda: get_skill(skills(), params.uri))

    async def on_directory(ctx: Any, params: DirectoryReadParams) -> dict[str, Any]:
        seen(ctx)
        return await anyio.to_thread.run_sync(lambda: directory_read(skills(), params.uri, params.cursor))

    server.add_request_handler("skills/list", types.PaginatedRequestParams, on_list)
    server.add_request_handler("skills/get", GetSkillParams, on_get)
    server.add_request_handler("resources/directory/read", DirectoryReadParams, on_directory)


def _cacheable(result: dict[str, Any]) -> dict[str, Any]:
    # The listing is per persona and the catalog reloads (list_changed says when): never cached.
    return {"resultType": "complete", **result, "ttlMs": 0, "cacheScope": "private"}


def list_skills(skills: list[Skill], cursor: str | None) -> dict[str, Any]:
    entries = served(skills)
    start = _offset(cursor, "skills/list")
    result: dict[str, Any] = {"skills": [s.entry() for s in entries[start : start + PAGE]]}
    if start + PAGE < len(entries):
        result["nextCursor"] = _cursor(start + PAGE, "skills/list")
    return _cacheable(result)


def get_skill(skills: list[Skill], uri: str) -> dict[str, Any]:
    for item in served(skills):
        if item.uri == uri:
            return _cacheable({"skill": item.entry()})
    raise MCPError(types.INVALID_PARAMS, f"No skill is served at {uri} (give the URI of a skill's SKILL.md)")


def directory_read(skills: list[Skill], uri: str, cursor: str | None) -> dict[str, Any]:
    found = locate(served(skills), uri)
    if found is None:
        raise MCPError(types.INVALID_PARAMS, f"{uri} is not a folder of a skill this server serves")
    item, folder = found
    prefix = f"{folder}/" if folder else ""
    children: dict[str, dict[str, Any]] = {}
    for f in item.files or ():
        if not f["path"].startswith(prefix):
            continue
        head, _, rest = f["path"][len(prefix) :].partition("/")
        child = f"{_SCHEME}{item.path}/{prefix}{head}"
        if rest:
            children.setdefault(head, {"uri": child, "name": head, "mimeType": "inode/directory"})
        else:
            mime = mimetypes.guess_type(head)[0] or "application/octet-stream"
            children[head] = {"uri": child, "name": head, "mimeType": mime, "size": f["size"]}
    if folder and not children:
        raise MCPError(types.INVALID_PARAMS, f"{uri} is not a directory resource")
    listed = [children[name] for name in sorted(children)]
    start = _offset(cursor, uri)
    result: dict[str, Any] = {"resultType": "complete", "resources": listed[start : start + PAGE]}
    if start + PAGE < len(listed):
        result["nextCursor"] = _cursor(start + PAGE, uri)
    return result


def locate(items: Iterable[Served], uri: str) -> tuple[Served, str] | None:
    """The served skill ``uri`` is in (the deepest, for nested skills) and the path within it."""
    if not uri.startswith(_SCHEME):
        return None
    rest = uri[len(_SCHEME) :].rstrip("/") if uri != _SCHEME else ""
    if any(part in ("", ".", "..") for part in rest.split("/")):
        return None
    best: tuple[Served, str] | None = None
    for item in items:
        inside = rest == item.path or rest.startswith(item.path + "/")
        if inside and (best is None or len(item.path) > len(best[0].path)):
            best = (item, rest[len(item.path) + 1 :])
    return best


def served(skills: list[Skill]) -> list[Served]:
    """The skills the extension serves, by URI, nested ones under their enclosing skill."""
    found: list[tuple[Skill, dict[str, Any]]] = []
    for skill in skills:
        if any(w.code == "digest_partial" for w in skill.warnings):
            continue  # over the extension's limits (the catalog's verdict): not served through it
        front = frontmatter(skill)
        if front is not None:
            found.append((skill, front))
    found.sort(key=lambda pair: os.path.dirname(pair[0].path).count(os.sep))
    items: list[Served] = []
    folders: dict[str, Served] = {}
    for skill, front in found:
        folder = os.path.dirname(skill.path)
        path = skill.name
        if os.path.basename(folder) == skill.name:
            above = os.path.dirname(folder)
            while above not in folders and os.path.dirname(above) != above:
                above = os.path.dirname(above)
            if above in folders:  # the nearest enclosing served skill
                path = f"{folders[above].path}/{os.path.relpath(folder, above).replace(os.sep, '/')}"
        item = Served(skill, path, front)
        items.append(item)
        folders[folder] = item
    items.sort(key=lambda item: item.uri)
    return items


def frontmatter(skill: Skill) -> dict[str, Any] | None:
    """The front matter of ``skill``'s SKILL.md as JSON, verbatim; None when the extension
    cannot serve it (no front matter, no ``name`` equal to the skill's, no description).
    Parsed once per version of the file (device, inode, size, mtime and ctime)."""
    try:
        st = os.stat(skill.path)
    except OSError:
        return None
    key = (skill.name, st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
    with _LOCK:
        known = _FRONT.get(skill.path)
    if known is not None and known[0] == key:
        return known[1]
    found = _parse_frontmatter(skill)
    with _LOCK:
        if len(_FRONT) >= _MAX_REMEMBERED:
            _FRONT.clear()
        _FRONT[skill.path] = (key, found)
    return found


_FRONT: dict[str, tuple[tuple[Any, ...], dict[str, Any] | None]] = {}
_LOCK = threading.Lock()
_MAX_REMEMBERED = 20_000


def _parse_frontmatter(skill: Skill) -> dict[str, Any] | None:
    from ..loaders.frontmatter import FrontMatterError, parse_yaml
    from ..loaders.skill_md import MAX_BYTES, parse_document

    try:
        with open(skill.path, "rb") as handle:
            raw = handle.read(MAX_BYTES + 1)
        document = parse_document(raw, skill.path)
        if document.front is None:
            return None
        data, _quoted = parse_yaml(document.front, document.front_line)
    except (OSError, ManifestParseError, FrontMatterError):
        return None
    if not isinstance(data, dict) or data.get("name") != skill.name:
        return None
    description = data.get("description")
    if not isinstance(description, str) or not description.strip():
        return None
    verbatim: dict[str, Any] = json.loads(json.dumps({str(k): v for k, v in data.items()}, default=str))
    return verbatim


def _files(skill: Skill) -> list[dict[str, Any]] | None:
    """Each file of the skill as the catalog hashed it (``SKILL.md`` first); None over the limits."""
    digest = skill_digest(skill)
    if digest.partial:
        return None
    folder = os.path.dirname(skill.path)
    manifest = os.path.basename(skill.path)
    files = []
    for record in digest.files:
        if record.mode == "link" or record.sha256 == "missing" or record.path.startswith("../"):
            continue  # never served by resources/read: a link is not followed, outside is not the skill
        try:
            size = os.lstat(os.path.join(folder, record.path)).st_size
        except OSError:
            continue
        if size > MAX_FILE_BYTES:
            continue
        path = "SKILL.md" if record.path == manifest else record.path
        files.append({"path": path, "digest": f"sha256:{record.sha256}", "size": size})
    files.sort(key=lambda f: (f["path"] != "SKILL.md", f["path"]))
    return files


def _cursor(offset: int, scope: str) -> str:
    text = json.dumps([_CURSOR, scope, offset])
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


def _offset(cursor: str | None, scope: str) -> int:
    if cursor is None:
        return 0
    try:
        tag, where, offset = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
    except (ValueError, TypeError, binascii.Error):
        tag, where, offset = None, None, None
    if (
        tag != _CURSOR
        or where != scope
        or not isinstance(offset, int)
        or isinstance(offset, bool)
        or offset < 0
    ):
        raise MCPError(types.INVALID_PARAMS, f"not a cursor this server gave for {scope}: {cursor[:80]!r}")
    return offset
