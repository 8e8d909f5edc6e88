"""One exception tree, rooted at :class:`OngridError`.

Every exception says what went wrong, where, and what to do about it; each
carries what every surface needs to report it, so no surface maps classes to
codes of its own:

- ``exit_code``: the CLI's exit status (``cli.main``; the table is
  :data:`EXIT_CODES`);
- ``code``: a stable machine-readable string, the same in a REST error body,
  a dispatched tool result and an MCP error;
- ``http_status``: the REST status;
- :meth:`OngridError.details`: the structured fields beside the message
  (suggestions, schema errors, the gate's reason, a ticket id).

Skill-level failures (a non-zero exit, a timeout, bad output) are *not*
exceptions: they come back as a :class:`~ongrid_plugins.models.CallResult`
with ``ok=False``. Caller errors (unknown skill, invalid arguments, a denied
call, a call that needs confirmation or approval) raise.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from .core.echo import echo

if TYPE_CHECKING:
    from .models import Decision, Problem

__all__ = [
    "ApprovalError",
    "ApprovalRequired",
    "AuditError",
    "ConfigError",
    "ConfirmationRequired",
    "InvalidArguments",
    "ManifestBuildError",
    "ManifestError",
    "ManifestParseError",
    "OngridError",
    "PackError",
    "PackLoadError",
    "PermissionDenied",
    "PluginFailed",
    "PluginLoadError",
    "ResourceRefused",
    "SkillUnavailable",
    "StateAccessError",
    "StrictSchemaError",
    "UnknownAuditRow",
    "UnknownPersona",
    "UnknownSkill",
]


class OngridError(Exception):
    """Base class of every error this package raises on purpose."""

    #: The CLI exit code for this kind of error.
    exit_code: int = 2
    #: The stable code every surface reports (REST body, dispatch result, MCP error).
    code: str = "bad_request"
    #: The REST status.
    http_status: int = 400

    def details(self) -> dict[str, Any]:
        """The structured fields a surface reports beside the message (JSON-ready)."""
        return {}


class ConfigError(OngridError):
    """A setting, an environment variable or a CLI flag has an unusable value."""

    exit_code = 2


class PluginLoadError(OngridError):
    """A plugin failed to import or register (raised only in strict mode)."""

    exit_code = 2
    code = "plugin_load_failed"
    http_status = 500

    def __init__(self, plugin: str, cause: str) -> None:
        self.plugin = plugin
        self.cause = cause
        message = f"plugin {plugin!r} could not be loaded: {cause}"
        super().__init__(message)


class PluginFailed(OngridError):
    """A plugin's hook raised on a call's path (``ongrid_before_call``, an executor's ``run``).

    The call ends with this error, recorded as ``aborted`` or ``failed``; ``plugin`` names
    the plugin and its distribution, ``cause`` is what it raised. (A permission vote that
    raises is not this: it is a :class:`PermissionDenied`, the gate fails closed.)
    """

    exit_code = 1
    code = "plugin_failed"
    http_status = 502

    def __init__(self, tool: str, plugin: str, hook: str, cause: BaseException) -> None:
        self.tool = tool
        self.plugin = plugin
        self.hook = hook
        self.cause = f"{type(cause).__name__}: {cause}"
        message = f"call to {tool!r} failed: {plugin} raised {self.cause} in {hook}"
        super().__init__(message)

    def details(self) -> dict[str, Any]:
        return {"plugin": self.plugin, "hook": self.hook, "cause": self.cause}


class PackLoadError(PluginLoadError):
    """An ``ongrid_skills`` entry point names no usable folder (raised only in strict mode)."""

    def __init__(self, pack: str, cause: str) -> None:
        self.plugin = pack
        self.cause = cause
        message = f"skill pack {pack!r} could not be loaded: {cause}"
        OngridError.__init__(self, message)


class PackError(OngridError):
    """An ``ongrid_skills`` entry point names no usable folder; the message says why.

    Raised by :func:`ongrid_plugins.packs.pack_folder`; the loader logs it and
    skips that pack (strict mode turns it into :class:`PackLoadError`).
    """

    code = "pack_unusable"


class ManifestError(OngridError):
    """A manifest could not be turned into a skill.

    Loaders raise the two subclasses; the walker logs them with the exact lines
    of the specification and goes on with the next manifest.
    """

    code = "manifest_invalid"

    def __init__(self, path: str, message: str) -> None:
        self.path = path
        self.message = message
        super().__init__(f"{path}: {message}")

    def details(self) -> dict[str, Any]:
        return {"path": self.path}


class ManifestParseError(ManifestError):
    """The file is not readable as a manifest (size, encoding, syntax, shape)."""


class ManifestBuildError(ManifestError):
    """The manifest parsed but breaks a field rule; ``name`` is its declared name.

    ``problems`` holds every finding (errors and warnings) with its JSON
    pointer and hint, for ``ongrid-skills validate``.
    """

    def __init__(
        self,
        path: str,
        name: str,
        message: str,
        problems: Sequence[Problem] = (),
    ) -> None:
        self.name = name
        self.problems = tuple(problems)
        super().__init__(path, message)


class UnknownSkill(OngridError):
    """No registered tool has this name (``skill`` is set when a skill has it: no tool to run)."""

    exit_code = 4
    code = "unknown_skill"
    http_status = 404

    def __init__(self, name: str, suggestions: Sequence[str] = (), *, skill: str | None = None) -> None:
        self.name = name
        self.suggestions = tuple(suggestions)
        self.skill = skill
        if skill is not None:
            message = _not_a_tool(name, skill, self.suggestions)
        else:
            message = f"no skill named {echo(name)} is registered"
            if self.suggestions:
                message += "; did you mean " + " or ".join(repr(s) for s in self.suggestions) + "?"
            else:
                message += " (see `ongrid-skills list`)"
        super().__init__(message)

    def details(self) -> dict[str, Any]:
        return {"suggestions": list(self.suggestions)}


def _not_a_tool(name: str, skill: str, tools: Sequence[str]) -> str:
    if not tools:
        return (
            f"{echo(name)} is a prompt skill: instructions for the model, with no tool to run; "
            f"read them with `ongrid-skills show {skill} --body` (host.instructions({skill!r}))"
        )
    listed = " or ".join(repr(t) for t in tools)
    return f"{echo(name)} is a skill, not a tool: run one of its tools, {listed}"


class UnknownAuditRow(OngridError):
    """No audit row has this row number or call id (``key``): the audit log's "not found"."""

    exit_code = 4
    code = "unknown_audit_row"
    http_status = 404

    def __init__(self, key: str) -> None:
        self.key = key
        message = f"no audit row {echo(key)}: give a SEQ from `ongrid-skills audit list` or a call id"
        super().__init__(message)


class UnknownPersona(ConfigError):
    """The persona asked for does not exist; there is no silent fallback."""

    code = "unknown_persona"

    def __init__(self, name: str, known: Sequence[str], broken: str = "") -> None:
        self.name = name
        self.known = tuple(known)
        self.broken = broken  # what is wrong with the persona file of that name, if one failed to load
        known_text = f"known personas: {', '.join(self.known) or 'none'}"
        if broken:
            message = f"persona {name!r} could not be loaded: {broken}; {known_text}"
        else:
            message = f"unknown persona {name!r}; {known_text}"
        super().__init__(message)


class InvalidArguments(OngridError):
    """The arguments do not match the tool's schema; no process was started.

    ``errors`` holds ``(json_path, message)`` pairs, e.g. ``("$.path", "'path' is
    a required property")``.
    """

    exit_code = 2
    code = "invalid_arguments"
    http_status = 422

    def __init__(self, tool: str, errors: Sequence[tuple[str, str]]) -> None:
        self.tool = tool
        self.errors = tuple(errors)
        lines = "; ".join(f"{path}: {msg}" for path, msg in self.errors)
        super().__init__(f"invalid arguments for {tool!r}: {lines}")

    def details(self) -> dict[str, Any]:
        return {"errors": [{"path": path, "message": message} for path, message in self.errors]}


class SkillUnavailable(OngridError):
    """The tool exists but cannot run here (a missing binary, variable, config)."""

    exit_code = 1
    code = "unavailable"
    http_status = 409

    def __init__(self, tool: str, reasons: Sequence[str]) -> None:
        self.tool = tool
        self.reasons = tuple(reasons)
        super().__init__(f"skill {tool!r} is unavailable: {'; '.join(self.reasons)}")

    def details(self) -> dict[str, Any]:
        return {"reasons": list(self.reasons)}


class PermissionDenied(OngridError):
    """The permission gate refused the call; ``decision`` says why and who."""

    exit_code = 3
    code = "denied"
    http_status = 403

    def __init__(self, tool: str, decision: Decision, hint: str = "") -> None:
        self.tool = tool
        self.decision = decision
        message = f"call to {tool!r} {self._verb} {decision.plugin}: {decision.reason}"
        if hint:
            message += f"; {hint}"
        super().__init__(message)

    _verb = "denied by"

    def details(self) -> dict[str, Any]:
        return {"reason": self.decision.reason, "plugin": self.decision.plugin}


class ConfirmationRequired(PermissionDenied):
    """The call needs an explicit confirmation bound to these exact arguments."""

    _verb = "needs a confirmation, says"
    code = "needs_confirmation"
    http_status = 409

    def __init__(self, tool: str, decision: Decision, args_digest: str) -> None:
        self.args_digest = args_digest
        hint = "re-run with --yes to confirm (confirm=True in Python)"
        super().__init__(tool, decision, hint)

    def details(self) -> dict[str, Any]:
        return {"reason": self.decision.reason, "args_digest": self.args_digest}


class ApprovalRequired(PermissionDenied):
    """The call needs two-person approval; ``ticket`` (if any) is the ticket to approve."""

    _verb = "needs two-person approval, says"
    code = "needs_approval"
    http_status = 409

    def __init__(self, tool: str, decision: Decision, ticket: Any = None, hint: str = "") -> None:
        self.ticket = ticket
        super().__init__(tool, decision, hint)

    def details(self) -> dict[str, Any]:
        ticket = None if self.ticket is None else self.ticket.to_dict()
        return {"reason": self.decision.reason, "ticket": ticket}


class StrictSchemaError(ConfigError):
    """Some tools' schemas cannot be made strict; ``problems`` maps each tool to its reasons."""

    code = "strict_schema"

    def __init__(self, fmt: str, problems: Mapping[str, Sequence[str]]) -> None:
        self.format = fmt
        self.problems = {name: tuple(reasons) for name, reasons in problems.items()}
        lines = "; ".join(f"{name}: {' / '.join(reasons)}" for name, reasons in self.problems.items())
        self.target, fix = (
            ("Gemini function declarations", "fix those schemas")
            if fmt == "gemini"
            else (f"{fmt} strict mode", "export without --strict, or fix the schemas")
        )
        message = f"{len(self.problems)} tool(s) cannot be exported in {self.target}: {lines} ({fix})"
        super().__init__(message)

    def details(self) -> dict[str, Any]:
        return {"problems": {name: list(reasons) for name, reasons in self.problems.items()}}


class ResourceRefused(OngridError):
    """A skill file may not be read: it escapes the skill folder, is missing or is not a regular file."""

    exit_code = 2
    code = "resource_refused"
    http_status = 403

    def __init__(self, skill: str, path: str, reason: str) -> None:
        self.skill = skill
        self.path = path
        self.reason = reason
        super().__init__(f"skill {skill!r}: file {path!r} refused: {reason}")

    def details(self) -> dict[str, Any]:
        return {"skill": self.skill, "path": self.path, "reason": self.reason}


class ApprovalError(OngridError):
    """A two-person ticket could not be approved, rejected or executed.

    ``reason`` is a stable code (one of :data:`APPROVAL_REASONS`) so hosts can
    branch on it; ``ticket_id`` names the ticket. The message says what to do.
    """

    exit_code = 3
    code = "ticket_refused"

    def __init__(self, reason: str, ticket_id: str, message: str, *, not_found: bool = False) -> None:
        self.reason = reason
        self.ticket_id = ticket_id
        if not_found:  # looking a ticket up by id (approvals show/approve/reject): 4, as for a skill
            self.exit_code = 4
        super().__init__(message)

    @property
    def http_status(self) -> int:  # type: ignore[override]
        return _APPROVAL_STATUS.get(self.reason, 409)

    def details(self) -> dict[str, Any]:
        return {"reason": self.reason, "ticket": self.ticket_id}


#: Every ``ApprovalError.reason``: what went wrong with the ticket.
APPROVAL_REASONS = (
    "unknown",  # no ticket has this id
    "expired",  # past its expiry: request a new one
    "rejected",  # someone rejected it: it is dead
    "executed",  # it already ran once (a replay)
    "own_ticket",  # the requester tried to approve their own request
    "duplicate_approver",  # this approver already approved it
    "already_approved",  # it already has every approval it needs
    "not_approved",  # executed before it had its approvals
    "hook_refused",  # an ongrid_verify_approval plugin said no
    "mismatch",  # the call's tool, arguments or persona differ from the ticket's
    "skill_changed",  # the skill's files changed since the ticket was requested
    "no_identity",  # the approver's identity is empty
    "too_many_open",  # the requester already holds the most open tickets one may (max_open_tickets)
    "store",  # the ticket database cannot be read or written
    "forged",  # its approvals break the rules, or the audit log does not back them (a hand-edited database)
)

#: The REST status of an ``ApprovalError`` by reason (409 for the others).
_APPROVAL_STATUS = {"unknown": 404, "own_ticket": 403, "duplicate_approver": 403, "hook_refused": 403}
_APPROVAL_STATUS.update(no_identity=403, store=503, forged=403, too_many_open=429)


class AuditError(OngridError):
    """The audit log cannot be written, so a mutating or dangerous call was refused.

    Raised only when the audit log fails closed (the default, see
    ``ONGRID_AUDIT_FAIL_CLOSED``); safe calls still run and the failure is logged.
    """

    exit_code = 3
    code = "audit_unavailable"
    http_status = 503


class StateAccessError(ConfigError):
    """A file or folder of the state dir (approvals, audit log) cannot be read or written by this user.

    The message names the file, its owner, group and mode, and the fix (a shared
    folder is set up once with ``ongrid-skills state init DIR --group NAME``).
    """

    exit_code = 2
    code = "state_unavailable"
    http_status = 503


#: Exit codes of the CLI, by outcome: what ``ongrid-skills run`` returns, and what
#: each error's ``exit_code`` is one of (a test keeps the two in step).
EXIT_CODES = {
    "ok": 0,
    "skill_failed": 1,
    "usage": 2,
    "denied": 3,
    "unknown_skill": 4,
}
