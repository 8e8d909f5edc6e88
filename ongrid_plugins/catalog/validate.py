"""Lint manifests without registering them (``ongrid-skills validate``).

Uses the very same walker, loaders and ``ongrid_validate_skill`` hooks as a
real load, so what ``validate`` accepts is exactly what the host loads; but
instead of log lines it returns every problem with its file, JSON pointer and
hint.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

import attrs

from ..core.hooks import hooks
from ..core.userfiles import file_kind
from ..discovery.registry import spelling
from ..discovery.roots import canonical, check_symlinked_manifest
from ..errors import ManifestBuildError, ManifestError
from ..models import Problem, Skill, SkillRoot
from .availability import Availability
from .loader import iter_manifests, validate_skill

if TYPE_CHECKING:
    import pluggy

    from ..settings import Settings

__all__ = ["FileReport", "validate_paths"]


def _problems(value: Iterable[Problem]) -> tuple[Problem, ...]:
    return tuple(value)


def _strs(value: Iterable[str]) -> tuple[str, ...]:
    return tuple(value)


@attrs.frozen
class FileReport:
    """The verdict on one manifest (or on a path that holds none)."""

    path: str
    problems: tuple[Problem, ...] = attrs.field(default=(), converter=_problems)
    skill: str = ""
    format: str = ""
    sandbox: Mapping[str, Any] = attrs.field(factory=dict)
    """Each tool's ``sandbox`` declaration as loaded (``~/`` expanded), None for a tool without one."""
    machine: tuple[str, ...] = attrs.field(default=(), converter=_strs)
    """Why the skill will not load, or will load unavailable, on *this* machine (another OS,
    a missing binary, variable or config key): warnings about the machine, not the
    manifest, so ``--strict`` does not fail on them."""

    @property
    def errors(self) -> list[Problem]:
        """Error-level problems: the host would not load this manifest."""
        return [p for p in self.problems if p.level == "error"]

    @property
    def ok(self) -> bool:
        """No error-level problem."""
        return not self.errors

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {
            "path": self.path,
            "skill": self.skill,
            "format": self.format,
            "ok": self.ok,
            "problems": [p.to_dict() for p in self.problems],
            "sandbox": dict(self.sandbox),
            "machine": list(self.machine),
        }


def validate_paths(paths: Iterable[str], pm: pluggy.PluginManager, settings: Settings) -> list[FileReport]:
    """Check every manifest under ``paths`` (folders or manifest files)."""
    names = hooks(pm).manifest_names()
    reports: list[FileReport] = []
    owners: dict[str, tuple[str, str, str]] = {}
    availability = Availability(pm, settings)
    for raw in paths:
        for report in _validate_path(os.path.abspath(raw), names, pm, settings, availability):
            reports.append(_with_duplicates(report, owners))
    return reports


def _validate_path(
    path: str,
    names: frozenset[str],
    pm: pluggy.PluginManager,
    settings: Settings,
    availability: Availability,
) -> Iterator[FileReport]:
    if not os.path.lexists(path):
        yield _fail(path, "path_missing", f"{path} does not exist")
        return
    is_folder = os.path.isdir(path)
    named = os.path.basename(path) in names
    if not is_folder and not named:
        yield _not_a_manifest(path, names)
        return
    if named:
        # Every path of a manifest's name is a manifest, as in the walk: a symlink, a FIFO
        # or a folder is resolved and checked (the loader's very line), never opened as it is.
        parent = os.path.dirname(path)
        where = SkillRoot(parent, source="validate", real=canonical(parent))
        manifest = os.path.join(where.real, os.path.basename(path))
        yield _inspect(pm, settings, where, manifest, not stat.S_ISREG(os.lstat(path).st_mode), availability)
    if not is_folder:
        return
    # A folder (even one of a manifest's name, which the walk enters too): its manifests.
    root = SkillRoot(path, source="validate", real=canonical(path))
    manifests = list(iter_manifests(root.real, names))
    if not manifests and not named:
        yield _fail(path, "no_manifest", f"no manifest ({', '.join(sorted(names))}) under {path}")
    for manifest, is_link in manifests:
        yield _inspect(pm, settings, root, manifest, is_link, availability)


def _not_a_manifest(path: str, names: frozenset[str]) -> FileReport:
    """The report on a path that is neither a folder nor named like a manifest."""
    try:
        mode = os.stat(path).st_mode  # a symlink: what it points to (never opened: a FIFO would block)
    except OSError:
        mode = stat.S_IFREG  # dangling: said to be no manifest by its name, as before
    if not stat.S_ISREG(mode):
        message = f"{path} is not a regular file (it is {file_kind(mode)})"
        hint = "give a skill or pack folder, a manifest or a pack archive"
        return FileReport(path, (Problem("error", "not_a_file", message, path, "", hint),))
    expected = ", ".join(sorted(names))
    return _fail(path, "not_a_manifest", f"{path} is not a manifest (expected one of: {expected})")


def _inspect(
    pm: pluggy.PluginManager,
    settings: Settings,
    root: SkillRoot,
    path: str,
    is_link: bool,
    availability: Availability,
) -> FileReport:
    # Reported by the path the walk found; a symlink is read from its target (``real``),
    # by the loader that claims the name it was found under (as the loader does).
    skill: Skill | None = None
    real = path
    try:
        if is_link:
            real = check_symlinked_manifest(path, root)
        skill = hooks(pm).load_manifest(
            path=real, root=root, settings=settings, manifest_name=os.path.basename(path)
        )
    except ManifestBuildError as exc:
        problems = exc.problems or (Problem("error", "build_error", exc.message, real),)
        return FileReport(path, problems, exc.name)
    except ManifestError as exc:
        return _fail(path, "parse_error", exc.message)
    except Exception as exc:  # a third-party loader crashed
        who = hooks(pm).who_raised("ongrid_load_manifest", exc)
        return _fail(path, "loader_crashed", f"loader {who} raised {exc!r}")
    if skill is None:
        leads = f" (a symlink to {real})" if real != path else ""
        return _fail(path, "not_loaded", f"no loader accepted this file{leads}")
    # Natives are bound here too: a builtin: key no plugin provides is reported. The
    # machine's other lacks (OS, binaries, variables) are not problems of the manifest:
    # they are said apart (FileReport.machine).
    skill = availability.apply(skill)
    found = [*skill.notices, *skill.warnings, *validate_skill(pm, skill, root)]
    declared = {t.name: t.sandbox.to_dict() if t.sandbox is not None else None for t in skill.tools}
    return FileReport(path, found, skill.name, skill.format, declared, _on_this_machine(skill, availability))


def _on_this_machine(skill: Skill, availability: Availability) -> tuple[str, ...]:
    """What stops ``skill`` here: not loaded at all (another OS), or loaded but unavailable."""
    skipped = availability.skip_reason(skill)
    if skipped:
        return (f"will not load on this machine: {skipped}",)
    return tuple(f"unavailable on this machine: {reason}" for reason in skill.unavailable)


def _fail(path: str, code: str, message: str) -> FileReport:
    return FileReport(path, (Problem("error", code, message, path),))


def _with_duplicates(report: FileReport, owners: dict[str, tuple[str, str, str]]) -> FileReport:
    """``report`` with a ``duplicate_name`` warning when the loader would skip its skill.

    The registry's rule (:meth:`RegistryBuilder.add <ongrid_plugins.discovery.registry.RegistryBuilder.add>`):
    skills and tools share one namespace, and ``-`` and ``_`` spell one name, so a
    skill is skipped when its name or any of its tools' names is taken. ``owners``
    maps each taken spelling to ``(path, what took it, as declared)``.
    """
    if not report.skill or not report.ok:
        return report
    names = [("skill", report.skill), *(("tool", name) for name in report.sandbox if name != report.skill)]
    for kind, name in names:
        taken = owners.get(spelling(name))
        if taken is not None and taken[0] != report.path:
            return attrs.evolve(report, problems=(*report.problems, _duplicate(report, kind, name, taken)))
    for kind, name in names:
        owners.setdefault(spelling(name), (report.path, kind, name))
    return report


def _duplicate(report: FileReport, kind: str, name: str, taken: tuple[str, str, str]) -> Problem:
    first, first_kind, first_name = taken
    if kind == "skill" and first_kind == "skill":
        spelled = f' (as "{first_name}": - and _ spell one name)' if first_name != name else ""
        message = f'skill "{name}" is also declared by {first}{spelled}; only the first one found is loaded'
    else:
        what = f'tool "{name}" of skill "{report.skill}"' if kind == "tool" else f'skill "{name}"'
        message = (
            f'{what} is also declared by {first} (as {first_kind} "{first_name}"); skills and tools share'
            " one namespace: only the first one found is loaded, so this whole skill is skipped"
        )
    # a warning, as the loader skips it without failing (--strict fails on it)
    return Problem(
        "warning", "duplicate_name", message, report.path, "/name" if kind == "skill" else "/tools"
    )
