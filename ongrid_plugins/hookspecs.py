"""Every hook of the ``ongrid`` plugin system.

Hooks are synchronous and cheap; slow work (processes, network) lives in the
objects they return, which offer both ``run()`` and ``async arun()``.

Plugins implement hooks with :data:`ongrid_plugins.hookimpl`::

    from ongrid_plugins import hookimpl

    @hookimpl
    def ongrid_manifest_names():
        return ["tool.toml"]

A plugin only needs to implement the hooks it cares about, and may accept only
the arguments it uses (pluggy passes arguments by name).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import pluggy

if TYPE_CHECKING:
    from .executors import Executor
    from .gate.tickets import Approval, Ticket
    from .models import CallRequest, CallResult, Decision, Persona, Problem, Skill, SkillRoot, Tool
    from .settings import Settings

PROJECT_NAME = "ongrid"

hookspec = pluggy.HookspecMarker(PROJECT_NAME)
hookimpl = pluggy.HookimplMarker(PROJECT_NAME)


# -------------------------------------------------------------------------
# Discovery
# -------------------------------------------------------------------------


@hookspec
def ongrid_skill_roots(settings: Settings) -> list[SkillRoot] | None:
    """Contribute allow-listed directories that loaders may read manifests from.

    The built-in ``roots`` plugin contributes, in this order: the explicit
    ``settings.skill_dirs``, ``ONGRID_SKILLS_EXTERNAL_DIRS``, the package's own
    skills, ``/etc/ongrid/skills`` and the per-user skills folder. Roots are
    walked in the order the results come back, and the first skill of a name
    wins, so a root contributed by a plugin registered later comes later.

    :param settings: The host's :class:`~ongrid_plugins.Settings`.
    :return: A list of :class:`~ongrid_plugins.models.SkillRoot` (may be empty).
    """


@hookspec
def ongrid_manifest_names() -> list[str] | None:
    """Name the files a loader claims, e.g. ``["skill.json"]``.

    The walker reads every root once and calls :func:`ongrid_load_manifest` only
    for files whose name is claimed by some plugin. Names are matched exactly
    (case-sensitive).

    :return: A list of file names.
    """


@hookspec(firstresult=True)
def ongrid_load_manifest(path: str, root: SkillRoot, settings: Settings, manifest_name: str) -> Skill | None:
    """Turn one manifest file into a :class:`~ongrid_plugins.models.Skill`.

    Called for every claimed file found under ``root``. A loader returns
    ``None`` for files it does not handle; to reject a file it handles, it raises
    :class:`~ongrid_plugins.errors.ManifestParseError` (unreadable, bad syntax)
    or :class:`~ongrid_plugins.errors.ManifestBuildError` (a broken field rule).
    Either is logged with the specification's exact line and the walk goes on.

    Stops at first non-None result.

    A loader picks its files by ``manifest_name``, not by ``path``'s own name: a
    symlinked manifest (``x/skill.json -> m.json``) is read from where it really
    lives, whatever that file is called.

    :param path: Absolute path of the manifest's content (the canonical target of a
        symlinked one), under ``root.real``: read it from here, and resolve the skill's
        files against its folder.
    :param manifest_name: The file name the walk found the manifest under
        (``skill.json``, ``SKILL.md``, a name from ``ongrid_manifest_names``): the
        name to claim it by.
    :param root: The allow-listed root, with ``root.real`` set to its canonical path.
    :param settings: The host's settings (cache directory, default timeout).
    :return: The skill, or ``None`` if this loader does not handle the file.
    """


# -------------------------------------------------------------------------
# Validation and registration
# -------------------------------------------------------------------------


@hookspec
def ongrid_validate_skill(skill: Skill, root: SkillRoot) -> list[Problem] | None:
    """Add problems about a skill before it is registered.

    Every implementation runs. If any returned problem has level ``error`` the
    skill is not registered, and one log line names all the errors; warnings
    are kept on the skill and shown by ``ongrid-skills validate`` and ``show``.

    :param skill: The skill a loader just built.
    :param root: The root it was found under.
    :return: A list of :class:`~ongrid_plugins.models.Problem` (or None for none).
    """


@hookspec
def ongrid_skill_registered(skill: Skill) -> None:
    """Notification: ``skill`` is now in the registry being built.

    Called once per registered skill during a load or a reload, before the new
    registry becomes visible to callers. Do not block.

    :param skill: The skill that was registered.
    """


# -------------------------------------------------------------------------
# Permissions
# -------------------------------------------------------------------------


@hookspec
def ongrid_check_permission(tool: Tool, persona: Persona, request: CallRequest | None) -> Decision | None:
    """Vote on whether ``persona`` may call ``tool``.

    Every implementation runs; the strictest vote wins (deny > dual_sign >
    confirm > allow). Return ``None`` to abstain. No vote can loosen the
    built-in class x persona rule, which always takes part. Every
    :class:`~ongrid_plugins.models.Decision` carries a reason and the name of
    the plugin that gave it; both are shown to the user when a call is refused.

    :param tool: The tool about to be called (or listed).
    :param persona: Who is asking.
    :param request: The call with its arguments, or ``None`` when the gate is
        only asked which tools a persona may ever call (for listings and
        tool exports).
    :return: A decision, or ``None`` to abstain.
    """


@hookspec
def ongrid_verify_approval(ticket: Ticket, approval: Approval) -> bool | None:
    """Require more of an approver than the built-in rules do.

    Called before an approval of a two-person ticket is recorded, after the
    built-in rules passed (not the requester, not a second approval by the same
    person, ticket still open), e.g. to check a signed SOP document or group
    membership. Every implementation is asked; any ``False`` refuses the
    approval (as does anything else that is not ``True`` or ``None``, or a
    plugin that raises) and the error names the plugin. ``None`` abstains.

    :param ticket: The :class:`~ongrid_plugins.gate.tickets.Ticket` (tool, args
        digest, redacted args, persona, requester, approvals so far).
    :param approval: The :class:`~ongrid_plugins.gate.tickets.Approval` being
        given: ``approver``, ``note``, ``sop``, ``time``.
    :return: ``False`` to refuse, ``True`` or ``None`` to let it through.
    """


# -------------------------------------------------------------------------
# Execution
# -------------------------------------------------------------------------


@hookspec
def ongrid_native_tools() -> Mapping[str, Callable[..., Any]] | None:
    """Contribute Python implementations for ``impl: builtin:<key>`` tools.

    Each value is a callable ``fn(args, ctx)`` (sync or ``async``) that receives
    the validated arguments and a context (an event emitter, the time left, the
    host's ``settings``), and returns a JSON object (a ``dict``). It runs inside
    the host process, where no kernel sandbox narrows it: a tool that touches files
    confines itself (see the built-in ``host_files``). Keys are global: when two plugins contribute the
    same key, the first registered plugin wins and the clash is logged.

    :return: A mapping of key to callable.
    """


@hookspec(firstresult=True)
def ongrid_executor(tool: Tool, settings: Settings) -> Executor | None:
    """Return the executor that will run ``tool``.

    The built-in subprocess executor is ``trylast``, so a plugin can route a
    tool elsewhere (a remote worker, a sandbox) by returning its own executor.
    An executor has ``run(request) -> CallResult`` and
    ``async arun(request) -> CallResult``.

    Stops at first non-None result.

    :param tool: The tool to run.
    :param settings: The host's settings (output caps, kill grace).
    :return: An executor, or ``None`` to let another plugin decide.
    """


@hookspec
def ongrid_before_call(request: CallRequest) -> None:
    """Called for every call attempt, before anything is enforced or started.

    By then the arguments were checked against the schema and the gate has
    decided, but neither verdict has been acted on: audit plugins see invalid,
    denied and approval-needing attempts too. Raising here aborts the call
    (``ongrid_after_call`` still sees it, with outcome ``aborted``); a
    two-person ticket is opened or spent only after every implementation passed.

    :param request: The call being attempted.
    """


@hookspec
def ongrid_after_call(request: CallRequest, result: CallResult) -> None:
    """Called once per call attempt with its outcome, whatever it was.

    For refused calls the result has ``ok=False`` and the refusal in ``error``.
    Exceptions raised here are logged and do not change the result.

    :param request: The call that was attempted.
    :param result: What came of it.
    """
