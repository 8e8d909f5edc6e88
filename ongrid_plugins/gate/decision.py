"""The permission decision (built-in plugin ``gate``) and the built-in personas.

The specification's class taxonomy decides the floor of every call:

=========== =========== ====================== ====================
class       read-only   mutating-with-confirm  dual-sign-required
=========== =========== ====================== ====================
safe        allow       allow                  allow
mutating    deny        confirm                confirm
dangerous   deny        deny                   dual_sign
=========== =========== ====================== ====================

Plugins vote through ``ongrid_check_permission``; the strictest vote wins
(deny > dual_sign > confirm > allow). The host always adds this module's
rule itself, so no plugin — and no disabled or unregistered ``gate`` plugin —
can loosen it. A permission or approval plugin that failed to load counts as a
``deny`` for every mutating and dangerous tool (it fails closed).
"""

from __future__ import annotations

import logging
from fnmatch import fnmatchcase
from typing import TYPE_CHECKING

from ..core.echo import printable
from ..core.hooks import hooks, plugin_label
from ..hookspecs import hookimpl
from ..models import Decision, PermissionMode, Persona, Tool, ToolClass, Verdict

if TYPE_CHECKING:
    import pluggy

    from ..core.hooks import Contribution
    from ..models import CallRequest

__all__ = ["BUILTIN_PERSONAS", "GATE_PLUGIN", "class_rule", "decide", "failed_vote"]

logger = logging.getLogger(__name__)

GATE_PLUGIN = "ongrid.gate"

BUILTIN_PERSONAS: dict[str, Persona] = {
    "viewer": Persona("viewer", PermissionMode.READ_ONLY, "Looks, never touches: runs safe tools only."),
    "operator": Persona(
        "operator",
        PermissionMode.MUTATING_WITH_CONFIRM,
        "Day-to-day operations: safe tools, and mutating tools after a confirmation.",
    ),
    "admin": Persona(
        "admin",
        PermissionMode.DUAL_SIGN_REQUIRED,
        "Everything, with dangerous tools behind a two-person approval.",
    ),
}

_TABLE: dict[tuple[ToolClass, PermissionMode], Verdict] = {
    (ToolClass.SAFE, PermissionMode.READ_ONLY): Verdict.ALLOW,
    (ToolClass.SAFE, PermissionMode.MUTATING_WITH_CONFIRM): Verdict.ALLOW,
    (ToolClass.SAFE, PermissionMode.DUAL_SIGN_REQUIRED): Verdict.ALLOW,
    (ToolClass.MUTATING, PermissionMode.READ_ONLY): Verdict.DENY,
    (ToolClass.MUTATING, PermissionMode.MUTATING_WITH_CONFIRM): Verdict.CONFIRM,
    (ToolClass.MUTATING, PermissionMode.DUAL_SIGN_REQUIRED): Verdict.CONFIRM,
    (ToolClass.DANGEROUS, PermissionMode.READ_ONLY): Verdict.DENY,
    (ToolClass.DANGEROUS, PermissionMode.MUTATING_WITH_CONFIRM): Verdict.DENY,
    (ToolClass.DANGEROUS, PermissionMode.DUAL_SIGN_REQUIRED): Verdict.DUAL_SIGN,
}

_NEEDS = {
    ToolClass.SAFE: "any persona",
    ToolClass.MUTATING: "a persona in mode mutating-with-confirm or dual-sign-required",
    ToolClass.DANGEROUS: "a persona in mode dual-sign-required",
}


def needs(tool_class: ToolClass) -> str:
    """What a persona needs to call a tool of this class, in words."""
    return _NEEDS[tool_class]


def class_rule(tool: Tool, persona: Persona) -> Decision:
    """The built-in decision: class x mode, the persona's globs, ``confirmation: required``."""
    if _denied_by_globs(tool.name, persona):
        return Decision(Verdict.DENY, f"persona {persona.name} does not allow tool {tool.name}", GATE_PLUGIN)
    verdict = _TABLE[(tool.tool_class, persona.permission_mode)]
    cls, mode = tool.tool_class.value, persona.permission_mode.value
    if verdict is Verdict.DENY:
        reason = f"{cls} tools need {needs(tool.tool_class)}; persona {persona.name} is {mode}"
    elif verdict is Verdict.ALLOW and tool.confirmation_required:
        verdict = Verdict.CONFIRM
        reason = f"tool {tool.name} asks for a confirmation before every call"
    elif verdict is Verdict.CONFIRM:
        reason = f"{cls} tools need a confirmation for persona {persona.name} ({mode})"
    elif verdict is Verdict.DUAL_SIGN:
        reason = f"{cls} tools need two-person approval for persona {persona.name} ({mode})"
    else:
        reason = f"{cls} tools run for any persona"
    return Decision(verdict, reason, GATE_PLUGIN)


def _denied_by_globs(name: str, persona: Persona) -> bool:
    if any(fnmatchcase(name, pattern) for pattern in persona.disallowed_tools):
        return True
    return not any(fnmatchcase(name, pattern) for pattern in persona.tools)


def decide(pm: pluggy.PluginManager, tool: Tool, persona: Persona, request: CallRequest | None) -> Decision:
    """The gate's decision: the built-in rule and every plugin's vote, strictest wins.

    A permission or approval plugin that failed to load votes ``deny`` on everything but
    ``safe`` tools: its votes are missing, and they may have been refusals.
    """
    floor = class_rule(tool, persona)
    closed = getattr(pm, "failed_closed", ())
    if closed and tool.tool_class is not ToolClass.SAFE:
        info = closed[0]
        reason = (
            f"plugin {info.name} (a permission or approval plugin) failed to load ({info.error}); "
            f"{tool.tool_class.value} calls are refused until it is fixed or disabled with "
            f"ONGRID_DISABLE_PLUGINS={info.name}"
        )
        return Decision(Verdict.DENY, reason, info.name)
    votes = hooks(pm).check_permission(tool=tool, persona=persona, request=request)
    return Decision.strictest([floor, *(_checked(pm, vote) for vote in votes)])


#: How the reason of a deny standing for a failed vote ends (:func:`failed_vote`).
_FAILED_VOTE = "; a vote that fails counts as a deny"


def failed_vote(decision: Decision) -> bool:
    """True when ``decision`` is the deny standing for a plugin's vote that raised or was no Decision.

    The tool stays visible to the persona (REST, MCP list it), so that the call is refused
    with the plugin's fault (403) rather than hidden as unknown (404).
    """
    return decision.verdict is Verdict.DENY and decision.reason.endswith(_FAILED_VOTE)


def _checked(pm: pluggy.PluginManager, vote: Contribution) -> Decision:
    # A plugin that raises or returns garbage must not crash the call, nor be read as
    # "allow": it is a deny naming the plugin, its distribution and what went wrong.
    if vote.error is None and isinstance(vote.result, Decision):
        return vote.result
    who = plugin_label(pm, vote.plugin) if vote.plugin else "a permission plugin"
    if vote.error is not None:
        what = f"raised {type(vote.error).__name__}: {printable(str(vote.error), 200)}"
    else:
        what = f"returned {printable(repr(vote.result), 60)}, not a Decision"
    reason = f"the permission vote of {who} {what}{_FAILED_VOTE}"
    logger.warning("gate: %s", reason)
    return Decision(Verdict.DENY, reason, vote.plugin or "unknown")


@hookimpl
def ongrid_check_permission(tool: Tool, persona: Persona) -> Decision:
    """The built-in class x persona-mode rule (the same decision as the floor)."""
    return class_rule(tool, persona)
