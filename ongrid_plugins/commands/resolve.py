"""``resolve``: the skills a host would mount for one user message."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from .argtypes import Subcommands
from .output import print_table

if TYPE_CHECKING:
    from ..cli import Context

__all__ = ["register"]


def register(sub: Subcommands) -> None:
    """Add the ``resolve`` sub-command."""
    p = sub.add_parser(
        "resolve",
        help="show the skills to mount for a user message",
        description="Skills whose activation matches the message (always, or a keyword in it), "
        "with the tools the persona may call; skills left without tools are dropped, prompt skills kept.",
    )
    p.add_argument("query", metavar="QUERY", help="the user's message")
    p.add_argument("--persona", help="only tools this persona may call (default: no filtering)")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(handler=cmd_resolve)


def cmd_resolve(ctx: Context) -> int:
    mounted = ctx.host.resolve(ctx.args.query, persona=ctx.args.persona)
    if ctx.args.json:
        data = {
            "query": ctx.args.query,
            "persona": ctx.args.persona,
            "skills": [m.to_dict() for m in mounted],
        }
        print(json.dumps(data, indent=2, ensure_ascii=False))
        return 0
    if not mounted:
        print("no skill matches (see `ongrid-skills list --skills --all`)")
        return 0
    rows = [(m.name, m.reason, ", ".join(t.name for t in m.tools) or "(prompt)") for m in mounted]
    print_table(("SKILL", "WHY", "TOOLS"), rows)
    return 0
