"""The Agent Skills folders: ``<project>/.agents/skills`` and ``~/.agents/skills``.

The Agent Skills client guide (agentskills.io, ``docs/client-implementation/``) has
clients scan those two folders besides their own, so that skills installed by one
client are seen by the others. Both become skill roots (contributed by
:func:`~.roots.ongrid_skill_roots`, in the order ``docs/skill-md.md`` gives):

* ``~/.agents/skills`` when :attr:`Settings.agent_skills_user` is on (the default) and
  the default roots are walked;
* ``<project>/.agents/skills``, the project being :attr:`Settings.project_dir`
  (``--project``) or else the working directory, only when the project folder is
  trusted, as the guide advises: a freshly cloned repository must not slip
  instructions into the agent's context. A folder is trusted when
  ``ongrid-skills trust-folder PATH`` recorded it (one canonical path a line in
  ``<config dir>/trusted-folders``) or :attr:`Settings.trusted_folders` names it.
  An untrusted project's skills are not walked; :func:`untrusted` lists them, for
  ``ongrid-skills list`` to show as "not loaded: folder not trusted".

This module imports only the standard library and the settings.
"""

from __future__ import annotations

import logging
import os
import tempfile
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..settings import Settings

__all__ = [
    "AGENTS_DIR",
    "TRUST_FILE",
    "forget",
    "is_trusted",
    "project_folder",
    "project_skills_dir",
    "trust",
    "trusted_folders",
    "untrusted",
    "user_skills_dir",
]

AGENTS_DIR = os.path.join(".agents", "skills")
TRUST_FILE = "trusted-folders"
_MAX_LISTED = 200
logger = logging.getLogger(__name__)


def project_folder(settings: Settings) -> str:
    """The project: ``--project`` / :attr:`Settings.project_dir`, else the working directory."""
    return os.path.abspath(os.path.expanduser(settings.project_dir or os.getcwd()))


def project_skills_dir(settings: Settings) -> str:
    return os.path.join(project_folder(settings), AGENTS_DIR)


def user_skills_dir() -> str:
    return os.path.join(os.path.expanduser("~"), AGENTS_DIR)


def _trust_path(settings: Settings) -> str:
    return os.path.join(settings.config_dir, TRUST_FILE)


def _canonical(path: str) -> str:
    return os.path.realpath(os.path.abspath(os.path.expanduser(path)))


def trusted_folders(settings: Settings) -> list[str]:
    """Every trusted folder, canonical: the recorded ones, then the settings'."""
    from ..core.userfiles import read_regular_text

    recorded: list[str] = []
    try:
        text = read_regular_text(_trust_path(settings))
    except FileNotFoundError:
        text = ""
    except (OSError, ValueError) as exc:
        logger.warning(
            "agent skills: cannot read %s, no folder is trusted from it: %s", _trust_path(settings), exc
        )
        text = ""
    recorded = [line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#")]
    found = recorded + [_canonical(p) for p in settings.trusted_folders]
    return list(dict.fromkeys(found))


def is_trusted(settings: Settings, folder: str) -> bool:
    return _canonical(folder) in trusted_folders(settings)


def _write(settings: Settings, folders: list[str]) -> None:
    os.makedirs(settings.config_dir, mode=0o700, exist_ok=True)
    text = "# folders whose .agents/skills ongrid-skills loads (ongrid-skills trust-folder)\n"
    text += "".join(f"{folder}\n" for folder in folders)
    fd, temporary = tempfile.mkstemp(prefix=".trusted-", dir=settings.config_dir)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(temporary, _trust_path(settings))
    except BaseException:
        os.unlink(temporary)
        raise


def _project_of(path: str) -> str:
    """``path`` canonical, a ``.../.agents/skills`` folder read as its project."""
    real = _canonical(path)
    if real.endswith(os.sep + AGENTS_DIR):
        real = real[: -len(AGENTS_DIR) - 1]
    return real


def trust(settings: Settings, path: str) -> str:
    """Record ``path`` (a project folder) as trusted; return it canonical."""
    folder = _project_of(path)
    if not os.path.isdir(folder):
        raise NotADirectoryError(f"{folder} is not a folder")
    recorded = [f for f in trusted_folders(settings) if f not in map(_canonical, settings.trusted_folders)]
    if folder not in recorded:
        _write(settings, [*recorded, folder])
    return folder


def forget(settings: Settings, path: str) -> bool:
    """Stop trusting ``path``; False when it was not recorded (a setting may still trust it)."""
    folder = _project_of(path)
    recorded = [f for f in trusted_folders(settings) if f not in map(_canonical, settings.trusted_folders)]
    if folder not in recorded:
        return False
    _write(settings, [f for f in recorded if f != folder])
    return True


def _is_user_folder(settings: Settings, folder: str) -> bool:
    """Whether the project's folder is the user's own (a project at ``~``): walked as the user's."""
    walked = settings.include_defaults and settings.agent_skills_user
    return walked and _canonical(folder) == _canonical(user_skills_dir())


def untrusted(settings: Settings) -> list[str]:
    """The ``SKILL.md`` files of an untrusted project's ``.agents/skills`` (not loaded)."""
    if not (settings.include_defaults or settings.project_dir):
        return []
    folder = project_skills_dir(settings)
    if _is_user_folder(settings, folder):
        return []
    if not os.path.isdir(folder) or is_trusted(settings, project_folder(settings)):
        return []
    found = []
    try:
        names = sorted(os.listdir(folder))
    except OSError:
        return []
    for name in names[:_MAX_LISTED]:
        manifest = os.path.join(folder, name, "SKILL.md")
        if os.path.isfile(manifest):
            found.append(manifest)
    return found


def roots(settings: Settings) -> tuple[list[str], list[str]]:
    """``(project roots, user roots)`` to walk: the project's only when trusted."""
    project: list[str] = []
    if settings.include_defaults or settings.project_dir:
        folder = project_skills_dir(settings)
        if os.path.isdir(folder) and not _is_user_folder(settings, folder):
            if is_trusted(settings, project_folder(settings)):
                project.append(folder)
            else:
                logger.info(
                    "agent skills: %s not loaded: folder not trusted "
                    "(trust it with `ongrid-skills trust-folder %s`)",
                    folder,
                    project_folder(settings),
                )
    user = [user_skills_dir()] if settings.include_defaults and settings.agent_skills_user else []
    return project, user
