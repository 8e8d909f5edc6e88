"""``mcp``: serve the registry to an MCP client over stdio (extra ``[mcp]``)."""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

from .argtypes import Subcommands, count

if TYPE_CHECKING:
    from ..cli import Context

__all__ = ["register"]


def register(sub: Subcommands) -> None:
    """Add the ``mcp`` sub-command."""
    p = sub.add_parser(
        "mcp", help="serve the tools a persona may call over MCP (stdio); needs the [mcp] extra"
    )
    p.add_argument(
        "--persona",
        default="operator",
        metavar="NAME|PATH",
        help="who the client acts as (default: operator)",
    )
    p.add_argument(
        "--watch",
        action="store_true",
        help="reload when skill files change and tell the client (notifications/tools/list_changed)",
    )
    p.add_argument(
        "--max-calls",
        type=count,
        default=16,
        metavar="N",
        help="tool calls run at once; more wait for one to end (default: 16)",
    )
    p.set_defaults(handler=cmd_mcp)


def cmd_mcp(ctx: Context) -> int:
    from ..server import require_extra

    require_extra("mcp", "`ongrid-skills mcp`")
    import anyio

    from ..server.mcp import serve_stdio

    host = ctx.host
    host.persona(ctx.args.persona)  # an unknown persona is an error before the client connects
    with host.watch() if ctx.args.watch else contextlib.nullcontext():
        anyio.run(lambda: serve_stdio(host, persona=ctx.args.persona, max_calls=ctx.args.max_calls))
    return 0
