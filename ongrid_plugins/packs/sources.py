"""What a ``PATH`` given to ``ongrid-skills validate`` may be, and how each is checked.

* a skill folder, a pack folder or a manifest file — :func:`~ongrid_plugins.catalog.validate.validate_paths`;
* an archive (``.tar.gz``, ``.tgz``, ``.tar``, ``.zip``) — unpacked into a temporary
  folder under the rules ``install`` applies (a refused member is a problem),
  then validated; paths are shown as ``archive.tar.gz!/folder/skill.json``;
* the name of an installed distribution — the folders of its ``ongrid_skills``
  entry points are validated, and each of its ``ongrid_plugins`` entry points
  that failed to load is a problem.

Everything ends up as :class:`~ongrid_plugins.catalog.validate.FileReport`\\ s with the
file, JSON pointer and hint of every problem.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

import attrs

from ..catalog.validate import FileReport, validate_paths
from ..core.hooks import hooks
from ..models import Problem
from .archive import ARCHIVE_SUFFIXES, UnsafeArchive, archive_kind, check_links, remove_tree, unpack
from .pack_roots import MARKER, PACK_GROUP, PackError, pack_folder

if TYPE_CHECKING:
    import pluggy

    from ..plugins import PluginManager
    from ..settings import Settings

__all__ = ["archive_label", "check_no_marker", "pack_top", "relabel", "validate_sources"]


def validate_sources(targets: Iterable[str], pm: PluginManager, settings: Settings) -> list[FileReport]:
    """Check every target (folder, manifest, archive or distribution name), in order."""
    reports: list[FileReport] = []
    folders: list[str] = []
    for target in targets:
        if os.path.isfile(target) and (archive_kind(target) is not None or _named_archive(target)):
            reports += validate_paths(folders, pm, settings) if folders else []
            folders = []
            reports += _validate_archive(target, pm, settings)
        elif _looks_like_distribution(target) and (not os.path.lexists(target) or _installed(target)):
            # A bare name is the installed distribution even when a folder has that name
            # too (the checkout next to it): `./NAME` is how to ask for the folder.
            reports += validate_paths(folders, pm, settings) if folders else []
            folders = []
            reports += _validate_distribution(target, pm, settings)
        else:
            folders.append(target)
    if folders:
        reports += validate_paths(folders, pm, settings)
    return reports


def archive_label(source: str) -> str:
    """How paths inside an archive are shown: ``/x/pack.tar.gz!``."""
    return os.path.abspath(source) + "!"


def relabel(report: FileReport, staged: str, shown: str) -> FileReport:
    """The report with the folder ``staged`` replaced by ``shown`` in every path, message and hint."""

    def fix(text: str) -> str:
        return text.replace(staged, shown) if text else text

    problems = [
        attrs.evolve(p, path=fix(p.path), message=fix(p.message), hint=fix(p.hint)) for p in report.problems
    ]
    return attrs.evolve(report, path=fix(report.path), problems=problems)


def _validate_archive(source: str, pm: PluginManager, settings: Settings) -> list[FileReport]:
    label = archive_label(source)
    if archive_kind(source) is None:  # named like one, but no tar, gzip, bzip2, xz or zip header
        where = os.path.abspath(source)
        message = "not a readable archive: not a tar archive (.tar, .tar.gz, .tgz) or a .zip"
        problem = Problem(
            "error", "unreadable_archive", message, where, "", "repack the pack, or give its folder"
        )
        return [FileReport(where, (problem,))]
    tmp = tempfile.mkdtemp(prefix="ongrid-validate-")
    try:
        staged = os.path.join(tmp, "pack")
        try:
            unpack(source, staged)
            top = pack_top(staged, source, pm)[0]
            check_links(source, staged, top)  # as install will
            check_no_marker(source, staged, top)
        except UnsafeArchive as exc:
            where = f"{label}/{exc.member}" if exc.member else os.path.abspath(source)
            hint = "repack the pack without it" if exc.member else ""
            problem = Problem("error", "unsafe_archive", exc.reason, where, "", hint)
            return [FileReport(where, (problem,))]
        staged_real = os.path.realpath(staged)
        return [relabel(r, staged_real, label) for r in validate_paths([staged_real], pm, settings)]
    finally:
        remove_tree(tmp)  # TemporaryDirectory's rmtree recurses once per level


def check_no_marker(source: str, unpacked: str, top: str) -> None:
    """Refuse a pack that ships a file, folder or link named like the marker install writes.

    Install writes its marker at the pack's top after validating the pack: over a
    file of the pack (through a link to one) it would replace what was validated.
    """
    path = os.path.join(top, MARKER)
    if os.path.lexists(path):
        reason = "is the name of the marker install writes beside a pack's files; remove it and pack again"
        raise UnsafeArchive(source, os.path.relpath(path, unpacked), reason)


def pack_top(unpacked: str, source: str, pm: pluggy.PluginManager) -> tuple[str, str]:
    """The pack's own folder and its default name.

    A folder given is the pack. An archive holding one folder that is not itself
    a skill (no manifest directly in it) is a wrapper (``tools-1.0/...``): the
    pack is that folder, named after it. Otherwise the pack is named after the file.
    """
    base = os.path.basename(source.rstrip("/"))
    if os.path.isdir(source):
        return unpacked, base
    names = hooks(pm).manifest_names()
    entries = os.listdir(unpacked)
    if len(entries) == 1:
        only = os.path.join(unpacked, entries[0])
        if os.path.isdir(only) and not os.path.islink(only) and not names & set(os.listdir(only)):
            return only, entries[0]
    for suffix in ARCHIVE_SUFFIXES:
        if base.lower().endswith(suffix):
            base = base[: -len(suffix)]
            break
    return unpacked, base


def _named_archive(path: str) -> bool:
    """Named like an archive ``install`` takes: checked as one, so that a corrupt one is said to
    be no readable archive (as ``install`` says), not "not a manifest"."""
    return path.lower().endswith(ARCHIVE_SUFFIXES)


def _looks_like_distribution(name: str) -> bool:
    return "/" not in name and not name.startswith(".")


def _installed(name: str) -> bool:
    from importlib.metadata import PackageNotFoundError, distribution

    try:
        distribution(name)
    except (PackageNotFoundError, ValueError):
        return False
    return True


def _validate_distribution(name: str, pm: PluginManager, settings: Settings) -> list[FileReport]:
    from importlib.metadata import PackageNotFoundError, distribution

    try:
        dist = distribution(name)
    except PackageNotFoundError:
        message = f"{name} is neither a path nor an installed distribution"
        hint = "give a skill folder, a pack folder or archive, a manifest, or a distribution name"
        return [FileReport(name, (Problem("error", "path_missing", message, name, "", hint),))]
    label = f"{dist.name} {dist.version}"
    packs = [ep for ep in dist.entry_points if ep.group == PACK_GROUP]
    reports = list(_plugin_problems(dist.name, label, pm))
    if not packs and not reports:
        message = f"distribution {label} declares no {PACK_GROUP} entry point"
        hint = f'add [project.entry-points.{PACK_GROUP}] name = "your_package" to its pyproject.toml'
        reports.append(FileReport(name, (Problem("error", "no_pack", message, name, "", hint),)))
    for ep in packs:
        try:
            folder = pack_folder(ep.value)
        except PackError as exc:
            where = f"{label}: entry point {ep.name} = {ep.value}"
            reports.append(FileReport(where, (Problem("error", "pack_unusable", str(exc), where),)))
            continue
        reports += validate_paths([folder], pm, settings)
    return reports


def _plugin_problems(dist: str, label: str, pm: PluginManager) -> Iterator[FileReport]:
    for info in pm.plugin_infos:
        if info.kind == "entrypoint" and info.distribution == dist and info.status == "failed":
            where = f"{label}: entry point {info.name} = {info.module}"
            hint = "run `ongrid-skills plugins` for every plugin's status"
            yield FileReport(where, (Problem("error", "plugin_failed", info.error, where, "", hint),))
