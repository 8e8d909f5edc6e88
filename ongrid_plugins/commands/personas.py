"""``personas``: who may call what, and what each call would need."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from ..models import Persona, Tool, Verdict
from .argtypes import Subcommands
from .output import print_table

if TYPE_CHECKING:
    from ..cli import Context
    from ..host.facade import SkillHost

__all__ = ["NEEDS", "register", "tool_needs"]

#: What a call needs, by the gate's verdict (:attr:`Verdict.needs`), in the words the listings use.
NEEDS = {verdict: verdict.needs for verdict in Verdict}


def register(sub: Subcommands) -> None:
    """Add the ``personas`` sub-command."""
    p = sub.add_parser(
        "personas",
        help="list the personas (built-in and from persona files), or show one and the tools it may call",
    )
    p.add_argument("name", nargs="?", metavar="NAME|PATH", help="show this persona and its tools")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(handler=cmd_personas)


def tool_needs(host: SkillHost, tool: Tool, persona: Persona) -> dict[str, Any]:
    """The gate's decision for ``persona`` calling ``tool``, ready for ``--json``."""
    decision = host.decide(tool, persona)
    return {**decision.to_dict(), "needs": decision.verdict.needs}


def cmd_personas(ctx: Context) -> int:
    host = ctx.host
    personas = [host.persona(ctx.args.name)] if ctx.args.name else host.personas()
    listing = {p.name: _tools(host, p) for p in personas}
    if ctx.args.json:
        items = [{**p.to_dict(), "tools_allowed": listing[p.name]} for p in personas]
        print(json.dumps(items[0] if ctx.args.name else {"items": items, "total": len(items)}, indent=2))
        return 0
    if ctx.args.name:
        return _show(personas[0], listing[personas[0].name])
    rows = [
        (p.name, p.permission_mode.value, str(len(listing[p.name])), p.path or "built-in", p.description)
        for p in personas
    ]
    print_table(("NAME", "MODE", "TOOLS", "FROM", "DESCRIPTION"), rows)
    return 0


def _tools(host: SkillHost, persona: Persona) -> list[dict[str, Any]]:
    return [
        {"name": t.name, "class": t.tool_class.value, **tool_needs(host, t, persona)}
        for t in host.tools(persona)
    ]


def _show(persona: Persona, tools: list[dict[str, Any]]) -> int:
    for key, value in (
        ("name", persona.name),
        ("description", persona.description),
        ("permission mode", persona.permission_mode.value),
        ("tools", ", ".join(persona.tools) or "(none)"),
        ("disallowed", ", ".join(persona.disallowed_tools)),
        ("from", persona.path or "built-in"),
    ):
        if value:
            print(f"{key + ':':17} {value}")
    if not tools:
        print("this persona may call no registered tool")
        return 0
    print()
    print_table(
        ("TOOL", "CLASS", "NEEDS", "WHY"), [(t["name"], t["class"], t["needs"], t["reason"]) for t in tools]
    )
    return 0
