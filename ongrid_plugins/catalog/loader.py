"""The walker: read every allow-listed root once and feed every manifest to the loaders.

Loading follows the specification's ``LoadDirs``::

    for each root:                      # in order; relative, missing and file roots skipped
      walk(root)                        # recursive, symlinked folders not followed
        for each claimed file:          # names from ongrid_manifest_names
          skill = ongrid_load_manifest  # parse + build; errors logged, never fatal
          availability                  # another OS: skipped; missing needs: unavailable
          ongrid_validate_skill         # any error-level problem rejects it
          first one of a name wins      # later ones logged and skipped

and logs the specification's exact lines on the ``ongrid_plugins.catalog.loader``
logger: ``registered`` at INFO, the skip lines at WARNING.
"""

from __future__ import annotations

import logging
import operator
import os
import re
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

import attrs

from ..core.echo import printable
from ..core.hooks import hooks
from ..discovery.registry import RegistryBuilder, Snapshot
from ..discovery.roots import canonical, check_symlinked_manifest
from ..errors import ManifestBuildError, ManifestError, PluginLoadError
from ..models import LoadEvent, LoadReport, Problem, Skill, SkillRoot
from .availability import Availability

if TYPE_CHECKING:
    import pluggy

    from ..settings import Settings

__all__ = ["iter_manifests", "load", "load_dirs", "resolve_roots"]

logger = logging.getLogger("ongrid_plugins.loader")

#: Folders never descended into: version control, dependency caches.
SKIP_DIRS = frozenset({".git", ".hg", ".svn", "node_modules", "__pycache__"})
#: Folders of this prefix are ``ongrid-skills install``'s staging and trash: half-written packs.
SKIP_PREFIX = ".ongrid-"
#: Deeper folders are not walked (and a warning names each folder where the walk stops).
MAX_DEPTH = 32
#: At most this many of those warnings per root, then one line counting the rest: a
#: hostile tree of a million deep subtrees cannot flood the log.
MAX_DEPTH_LINES = 10

_BY_NAME = operator.attrgetter("name")
#: A folder's claimed files ``(name, is_link)`` and its sub-folders to walk, sorted by name.
Listing = tuple[tuple[tuple[str, bool], ...], tuple[str, ...]]

#: Warnings that describe how a valid file of another dialect was read (a
#: hyphenated Agent Skills name made lower_snake, a description over the Agent
#: Skills limit...): logged at INFO, not WARNING, so loading a folder of
#: Claude Code skills is quiet. ``ongrid-skills validate`` still lists them.
INTEROP_NOTES = frozenset(
    {
        "name_normalized",
        "spec_name",
        "spec_name_folder",
        "spec_description_length",
        "spec_body_length",
        "spec_compatibility_length",
        "coerced",
        "blank_before_fence",
        "description_from_body",
    }
)


@attrs.define
class _Load:
    """The state of one load: events so far and the registry being built."""

    pm: pluggy.PluginManager
    settings: Settings
    builder: RegistryBuilder = attrs.field(factory=RegistryBuilder)
    events: list[LoadEvent] = attrs.field(factory=list)
    availability: Availability = attrs.field(init=False)
    load_manifest: Any = attrs.field(init=False)
    registered_level: int = logging.INFO

    def __attrs_post_init__(self) -> None:
        self.availability = Availability(self.pm, self.settings)
        self.load_manifest = hooks(self.pm).load_manifest

    def event(self, path: str, outcome: str, message: str = "", skill: str = "") -> None:
        self.events.append(LoadEvent(path, outcome, message, skill))


def iter_manifests(
    root: str,
    names: frozenset[str],
    prune: frozenset[str] = frozenset(),
) -> Iterator[tuple[str, bool]]:
    """Yield ``(path, is_symlink)`` for claimed files under ``root``, in a stable order.

    Depth first; within a folder files come before sub-folders and both are
    sorted by name. Symlinked folders are not followed, folders in ``prune``
    (other roots, already walked) are skipped.
    """
    stack: list[tuple[str, int]] = [(root, 0)]
    cut = 0  # folders with sub-folders at the depth limit: each subtree the walk leaves out
    while stack:
        folder, depth = stack.pop()
        listing = _list_folder(folder, names)
        if listing is None:
            continue
        files, subdirs = listing
        prefix = folder if folder.endswith("/") else folder + "/"  # as os.path.join and scandir join
        for name, is_link in files:
            yield prefix + name, is_link
        if depth >= MAX_DEPTH:
            cut += bool(subdirs)
            if subdirs and cut <= MAX_DEPTH_LINES:
                logger.warning(_TOO_DEEP, printable(folder), MAX_DEPTH)
            continue
        for name in reversed(subdirs):
            sub = prefix + name
            if sub not in prune:
                stack.append((sub, depth + 1))
    if cut > MAX_DEPTH_LINES:
        more = cut - MAX_DEPTH_LINES
        logger.warning(_MORE_TOO_DEEP, more, printable(root), MAX_DEPTH)


_TOO_DEEP = "skill loader: %s nests deeper than %d folders; not walked"
_MORE_TOO_DEEP = "skill loader: %d more folders under %s nest deeper than %d folders; not walked"


def _list_folder(folder: str, names: frozenset[str]) -> Listing | None:
    """The claimed files and the sub-folders to walk of ``folder``, sorted by name; None if unreadable."""
    try:
        with os.scandir(folder) as it:
            entries = sorted(it, key=_BY_NAME)
    except OSError as exc:
        logger.warning(
            "skill loader: cannot read %s: %s", printable(folder), printable(str(exc.strerror or exc))
        )
        return None
    files: list[tuple[str, bool]] = []
    subdirs: list[str] = []
    for entry in entries:
        name = entry.name
        if name in names:
            # Every entry of a manifest's name is one (the specification): a symlink, a
            # FIFO or a folder is flagged, then resolved and refused with a log line when read.
            files.append((name, not entry.is_file(follow_symlinks=False)))
            if entry.is_dir(follow_symlinks=False):  # and a folder is walked like any other
                subdirs.append(name)
        elif (
            name not in SKIP_DIRS and not name.startswith(SKIP_PREFIX) and entry.is_dir(follow_symlinks=False)
        ):
            subdirs.append(name)
    return tuple(files), tuple(subdirs)


def resolve_roots(pm: pluggy.PluginManager, settings: Settings, events: list[LoadEvent]) -> list[SkillRoot]:
    """Collect roots from every plugin, keep the usable ones, canonicalised and de-duplicated."""
    seen: set[str] = set()
    usable: list[SkillRoot] = []
    for root in hooks(pm).skill_roots(settings=settings):
        real = _check_root(root, events)
        if real is None:
            continue
        if real in seen:
            logger.info("skill loader: root %s is listed twice, walking it once", printable(root.path))
            continue
        seen.add(real)
        usable.append(attrs.evolve(root, real=real))
    return usable


def _check_root(root: SkillRoot, events: list[LoadEvent]) -> str | None:
    """The canonical path of a usable root, or None (with a log line and an event)."""
    path = root.path
    reason = ""
    real = ""
    if not os.path.isabs(path):
        # The specification's rule for the environment; the hint says what was probably meant.
        guess = os.path.abspath(os.path.expanduser(path))
        reason = f"is not an absolute path (roots must be absolute: did you mean {guess}?)"
    else:
        try:
            real = canonical(path)
        except (OSError, ValueError):
            reason = "does not exist"
        else:
            if not os.path.isdir(real):
                reason = "is not a directory"
    if not reason:
        return real
    origin = f" (from {root.provenance})" if root.source == "pack" else ""
    message = f"skill loader: root {path}{origin} {reason}, skipping"
    quiet = reason == "does not exist" and not root.required
    # The path comes from settings or the environment: never raw in a log line either.
    logger.log(logging.DEBUG if quiet else logging.WARNING, "%s", printable(message))
    events.append(LoadEvent(path, "root_skipped", message))
    return None


def load(
    pm: pluggy.PluginManager,
    settings: Settings,
    skip: frozenset[str] = frozenset(),
    *,
    announce: bool = True,
) -> tuple[Snapshot, LoadReport]:
    """Walk every root, load every manifest, and build a registry snapshot.

    Never raises for a bad root or manifest; every outcome is an event of the
    report. ``skip`` holds canonical folders not to read at all, as a root or
    inside one (the catalog's packs that drifted from ``skills.lock``).
    ``announce=False`` (a reload, whose changes the catalog logs) logs the
    ``registered`` lines at DEBUG instead of INFO.
    """
    state = _Load(pm, settings, registered_level=logging.INFO if announce else logging.DEBUG)
    roots = resolve_roots(pm, settings, state.events)
    names = hooks(pm).manifest_names()
    reals = frozenset(r.real for r in roots) | skip
    roots = [r for r in roots if r.real not in skip]
    for root in roots:
        for path, is_link in iter_manifests(root.real, names, reals - {root.real}):
            _load_one(state, root, path, is_link)
    snapshot = state.builder.build()
    report = LoadReport(len(snapshot.skills), state.events, [r.real for r in roots])
    return snapshot, report


def _load_one(state: _Load, root: SkillRoot, path: str, is_link: bool) -> None:
    outcome = read_one(state, root, path, is_link)
    kind = outcome[0]
    if kind == "s":
        _register(state, outcome[1], root, _shown(path, outcome[1].path) if is_link else "")
    elif kind == "p":
        _log_parse(state, outcome[1], outcome[2], _shown(path, outcome[1]) if is_link else "")
    elif kind == "b":
        _log_build(state, outcome[1], outcome[2], outcome[3], _shown(path, outcome[1]) if is_link else "")


def _shown(walked: str, real: str) -> str:
    """How a log line names a symlinked manifest: the path the walk found, and where it leads."""
    return walked if walked == real else f"{walked} (a symlink to {real})"


def read_one(state: _Load, root: SkillRoot, path: str, is_link: bool) -> tuple[Any, ...]:
    """What the loaders make of one claimed file, nothing registered or logged.

    ``("s", skill)``, ``("p", path, parse error)``, ``("b", path, name, build
    error)`` or ``("-",)`` when no loader took it. A skill's notices are
    reported here (they are about its surroundings, not its registration).
    """
    # A loader claims the file by the name the walk found, whatever a symlink's target is called.
    name = path[path.rfind("/") + 1 :]
    try:
        if is_link:
            path = check_symlinked_manifest(path, root)
        skill = state.load_manifest(path=path, root=root, settings=state.settings, manifest_name=name)
    except ManifestBuildError as exc:
        return ("b", exc.path, exc.name, exc.message)
    except ManifestError as exc:  # ManifestParseError included
        return ("p", exc.path, exc.message)
    except Exception as exc:  # a third-party loader crashed: contain it
        if state.settings.strict:
            raise PluginLoadError("ongrid_load_manifest", f"{path}: {exc!r}") from exc
        who = hooks(state.pm).who_raised("ongrid_load_manifest", exc)
        return ("p", path, f"loader {who} raised {exc!r}")
    if skill is None:
        return ("-",)
    _report_notices(state, skill)
    return ("s", skill)


def _report_notices(state: _Load, skill: Skill) -> None:
    """What a loader found around the skill (its pack): a log line and a ``warning`` event each."""
    for notice in skill.notices:
        logger.warning("skill loader: %s: %s", printable(notice.path), printable(notice.message))
        state.event(notice.path, "warning", notice.message, skill.name)


def _register(state: _Load, skill: Skill, root: SkillRoot, shown: str = "") -> None:
    """Register ``skill``, or log why not; log lines name it ``shown`` (a symlinked manifest's label).

    A path (a folder name may hold a newline), a name from a third-party loader and a
    message echoing a manifest's key go through :func:`printable`: one line per manifest.
    """
    shown = printable(shown or skill.path)
    name = printable(skill.name)
    skip = state.availability.skip_reason(skill)
    if skip is not None:
        logger.info('skill loader: skill "%s" is %s, skipping %s', name, printable(skip), shown)
        state.event(skill.path, "skipped", skip, skill.name)
        return
    skill = state.availability.apply(skill)
    problems = validate_skill(state.pm, skill, root)
    if problems:
        errors = [p for p in problems if p.level == "error"]
        if errors:
            _log_build(state, skill.path, skill.name, "; ".join(p.said for p in errors), shown)
            return
        skill = attrs.evolve(skill, warnings=skill.warnings + tuple(problems))
    for warning in skill.warnings:
        level = logging.INFO if warning.code in INTEROP_NOTES else logging.WARNING
        logger.log(level, 'skill loader: skill "%s" at %s: %s', name, shown, printable(warning.said))
    clash = state.builder.add(skill)
    if clash is not None:
        logger.warning('skill loader: skill "%s" already registered, skipping %s', printable(clash), shown)
        state.event(skill.path, "duplicate", f'skill "{clash}" already registered', skill.name)
        return
    if logger.isEnabledFor(state.registered_level):  # one call, not two, when the line is off
        logger.log(
            state.registered_level,
            'skill loader: registered %s skill "%s" from %s',
            printable(_kind(skill)),
            name,
            shown,
        )
    state.event(skill.path, "registered", "", skill.name)
    if skill.unavailable:
        logger.info(
            'skill loader: skill "%s" is unavailable: %s', name, printable("; ".join(skill.unavailable))
        )
    hooks(state.pm).skill_registered(skill=skill)


def validate_skill(pm: pluggy.PluginManager, skill: Skill, root: SkillRoot) -> list[Problem]:
    """Every problem the ``ongrid_validate_skill`` implementations report."""
    return hooks(pm).validate_skill(skill=skill, root=root)


def _kind(skill: Skill) -> str:
    return "subprocess" if skill.format == "skill.json" else skill.format


def _log_parse(state: _Load, path: str, message: str, shown: str = "") -> None:
    # A file name or a value echoed in the message may hold a NUL or a newline: never raw in a log line.
    logger.warning("skill loader: parse %s: %s", printable(shown or path), printable(message))
    state.event(path, "parse_error", message)


#: A name the build line can show in place of the file: the specification's line for every usable one.
_SHOWN_NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")


def _log_build(state: _Load, path: str, name: str, message: str, shown: str = "") -> None:
    if _SHOWN_NAME.fullmatch(name):
        logger.warning('skill loader: build "%s": %s', name, printable(message))
    else:  # no name, not a string, or one that would not say which file it is: name the file
        logger.warning("skill loader: build %s: %s", printable(shown or path), printable(message))
    state.event(path, "build_error", message, name)


def load_dirs(dirs: Iterable[str]) -> list[Skill]:
    """Load exactly these roots with the built-in plugins; return the registered skills.

    The benchmark entry point (``load_bench.py --callable
    ongrid_plugins.catalog.loader:load_dirs``): no defaults, no entry points.
    """
    from ..plugins import get_plugin_manager
    from ..settings import Settings

    settings = Settings(skill_dirs=tuple(dirs), include_defaults=False, load_entry_points=False)
    snapshot, _report = load(get_plugin_manager(settings), settings)
    return list(snapshot.skills.values())
