"""Skill packs: folders holding a Claude Code or openclaw plugin manifest.

A folder with ``.claude-plugin/plugin.json``, ``openclaw.plugin.json`` or its legacy
name ``clawdbot.plugin.json`` is a pack. The walk is shared with every other loader,
so a pack is not walked on its own: when the walker reaches a ``SKILL.md``, the
loader looks upward (up to the allow-listed root) for the nearest pack manifest,
remembering the answer for every folder on the way for the rest of the load
(a side table keyed by the root object), so each folder costs one ``listdir`` per load.

A pack's skills are the ``SKILL.md`` at its root, and the folders its ``skills`` list
names (a skill folder, or a folder of skill folders); without a list, ``skills/*/``.
Claude Code packs always keep ``skills/*/`` too, as Claude Code does. Those skills get
the pack's name and version as provenance. List entries that are absolute, contain
``..`` or resolve outside the pack are refused. Hooks, MCP servers, commands and
agents are reported as unsupported (once per load), never silently dropped.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from typing import Any

import attrs

from ..discovery.roots import is_within, resolve_file
from ..errors import ManifestParseError
from ..models import Problem, SkillRoot
from ..models.sidetable import SideTable
from .skill_json import read_manifest

__all__ = ["MANIFESTS", "Pack", "find_pack"]

#: Pack manifests, relative to the pack folder, with their dialect.
MANIFESTS = (
    (".claude-plugin/plugin.json", "claude"),
    ("openclaw.plugin.json", "openclaw"),
    ("clawdbot.plugin.json", "openclaw"),
)
SKILL_FILES = ("SKILL.md", "skill.md")
_FIRST_PARTS = frozenset(relative.split("/")[0] for relative, _kind in MANIFESTS)
#: Per root object (so per load): the pack of each folder seen, and the packs whose notices were given.
_PACKS: SideTable[dict[str, Pack | None]] = SideTable()
_REPORTED: SideTable[set[str]] = SideTable()

#: (manifest key, files or folders in the pack, what it is) of every unsupported component.
_UNSUPPORTED = (
    ("hooks", ("hooks/hooks.json",), "hooks"),
    ("mcpServers", (".mcp.json",), "MCP servers"),
    ("commands", ("commands",), "commands"),
    ("agents", ("agents",), "agents"),
    ("lspServers", (), "LSP servers"),
    ("channels", (), "openclaw channels"),
    ("providers", (), "openclaw providers"),
    ("cliBackends", (), "openclaw CLI backends"),
)


@attrs.frozen
class Pack:
    """A plugin folder and what its manifest says about its skills."""

    folder: str
    """Canonical path of the pack folder."""
    manifest: str
    kind: str
    """``claude`` or ``openclaw``."""
    name: str = ""
    """The pack's name (Claude ``name``, openclaw ``id``); empty when the manifest is unusable."""
    version: str = ""
    members: frozenset[str] = frozenset()
    """Folders whose SKILL.md is one of the pack's skills."""
    parents: frozenset[str] = frozenset()
    """Folders whose sub-folders are the pack's skills."""
    notices: tuple[Problem, ...] = ()

    @property
    def label(self) -> str:
        """The provenance its skills get: ``name version``."""
        return f"{self.name} {self.version}".strip()

    def owns(self, skill_dir: str) -> bool:
        """True if the SKILL.md in ``skill_dir`` is one of the pack's skills."""
        if not self.name:
            return False
        return skill_dir in self.members or os.path.dirname(skill_dir) in self.parents


def find_pack(skill_dir: str, root: SkillRoot) -> Pack | None:
    """The nearest pack at or above ``skill_dir`` within ``root``, cached for the load."""
    cache = _PACKS.of(root, dict)
    visited: list[str] = []
    folder = skill_dir
    pack: Pack | None = None
    while is_within(folder, root.real):
        if folder in cache:
            pack = cache[folder]
            break
        visited.append(folder)
        pack = _pack_at(folder, root)
        if pack is not None or folder == root.real:
            break
        folder = os.path.dirname(folder)
    for seen in visited:
        cache[seen] = pack
    return pack


def take_notices(pack: Pack, root: SkillRoot) -> tuple[Problem, ...]:
    """The pack's notices the first time they are asked for in this load, then nothing."""
    reported = _REPORTED.of(root, set)
    if pack.manifest in reported:
        return ()
    reported.add(pack.manifest)
    return pack.notices


def _pack_at(folder: str, root: SkillRoot) -> Pack | None:
    # One listdir (~2 us) instead of a failed lookup per manifest name (~8 us): most folders are no pack.
    try:
        if _FIRST_PARTS.isdisjoint(os.listdir(folder)):
            return None
    except OSError:
        return None
    for relative, kind in MANIFESTS:
        manifest = os.path.join(folder, relative)
        try:
            real, st = resolve_file(manifest)
        except (OSError, ValueError):
            continue
        if not stat.S_ISREG(st.st_mode):
            continue
        if not is_within(real, root.real):
            why = f"pack manifest {manifest} resolves to {real}, outside {root.real}; ignored"
            return Pack(folder, manifest, kind, notices=(_notice(manifest, "pack_escapes_root", why),))
        return _read_pack(folder, manifest, kind)
    return None


def _read_pack(folder: str, manifest: str, kind: str) -> Pack:
    try:
        data = read_manifest(manifest)
    except ManifestParseError as exc:
        message = f"pack manifest {manifest} cannot be read ({exc.message}); its skills load without it"
        return Pack(folder, manifest, kind, notices=(_notice(manifest, "pack_unreadable", message),))
    notices: list[Problem] = []
    name = _pack_name(data, kind, folder, manifest, notices)
    version = data.get("version")
    version = str(version) if isinstance(version, str | int | float) and not isinstance(version, bool) else ""
    members, parents = _skill_folders(data, kind, folder, manifest, name, notices)
    notices.extend(_unsupported(data, folder, manifest, name))
    return Pack(folder, manifest, kind, name, version, members, parents, tuple(notices))


def _pack_name(data: dict[str, Any], kind: str, folder: str, manifest: str, notices: list[Problem]) -> str:
    keys = ("name",) if kind == "claude" else ("id", "name")
    for key in keys:
        value = data.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()
    fallback = os.path.basename(folder)
    message = f'pack manifest {manifest} has no "{keys[0]}"; the folder name "{fallback}" is used'
    notices.append(_notice(manifest, "pack_name_missing", message, "/" + keys[0]))
    return fallback


def _skill_folders(
    data: dict[str, Any], kind: str, folder: str, manifest: str, name: str, notices: list[Problem]
) -> tuple[frozenset[str], frozenset[str]]:
    members = {folder}
    parents: set[str] = set()
    listed = data.get("skills")
    if listed is None or kind == "claude":
        parents.add(os.path.join(folder, "skills"))
    entries = [listed] if isinstance(listed, str) else listed if isinstance(listed, list) else []
    if listed is not None and not isinstance(listed, str | list):
        notices.append(
            _notice(manifest, "pack_skills_entry", f'pack "{name}": "skills" must be a list; ignored')
        )
    for index, entry in enumerate(entries):
        target = _entry_folder(entry, index, folder, manifest, name, notices)
        if target is None:
            continue
        if any(os.path.isfile(os.path.join(target, f)) for f in SKILL_FILES):
            members.add(target)
        else:
            parents.add(target)
    return frozenset(members), frozenset(parents)


def _entry_folder(
    entry: object, index: int, folder: str, manifest: str, name: str, notices: list[Problem]
) -> str | None:
    where = f"/skills/{index}"
    if not isinstance(entry, str) or not entry.strip():
        notices.append(
            _notice(manifest, "pack_skills_entry", f'pack "{name}": skills[{index}] is not a path', where)
        )
        return None
    parts = entry.replace("\\", "/").split("/")
    if os.path.isabs(entry) or entry.startswith(("/", "\\")) or ".." in parts:
        reason = "is absolute" if ".." not in parts else 'contains ".."'
        message = (
            f'pack "{name}": skills entry "{entry}" {reason}; entries must stay inside the pack, refused'
        )
        notices.append(_notice(manifest, "pack_skills_entry", message, where))
        return None
    target = os.path.normpath(os.path.join(folder, entry))
    if target.endswith(os.sep + "SKILL.md") or target.endswith(os.sep + "skill.md"):
        target = os.path.dirname(target)
    try:
        real, _st = resolve_file(target)
    except (OSError, ValueError):
        message = f'pack "{name}": skills entry "{entry}" does not exist; ignored'
        notices.append(_notice(manifest, "pack_skills_entry", message, where))
        return None
    if not is_within(real, folder):
        message = f'pack "{name}": skills entry "{entry}" resolves to {real}, outside the pack; refused'
        notices.append(_notice(manifest, "pack_skills_entry", message, where))
        return None
    return real


def _unsupported(data: dict[str, Any], folder: str, manifest: str, name: str) -> Iterator[Problem]:
    for key, paths, what in _UNSUPPORTED:
        found = [f'"{key}" in the manifest'] if key in data else []
        found += [p for p in paths if os.path.lexists(os.path.join(folder, p))]
        if found:
            message = f'pack "{name}" has {what} ({", ".join(found)}): not supported, not loaded'
            yield _notice(manifest, "pack_unsupported", message, f"/{key}" if key in data else "")


def _notice(manifest: str, code: str, message: str, where: str = "") -> Problem:
    return Problem("warning", code, message, manifest, where)
