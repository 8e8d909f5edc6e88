"""``plugins``: every plugin the host was offered, with its status and hooks."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from .argtypes import Subcommands
from .output import print_table

if TYPE_CHECKING:
    from ..cli import Context

__all__ = ["register"]


def register(sub: Subcommands) -> None:
    """Add the ``plugins`` sub-command."""
    p = sub.add_parser("plugins", help="list plugins, their distribution, hooks and status")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(handler=cmd_plugins)


def cmd_plugins(ctx: Context) -> int:
    from ..packs.pipconsent import vet

    vet(ctx.host.pm, ctx.host.settings)  # pip packs waiting for `trust` show as unconsented
    infos = ctx.host.plugins()
    if ctx.args.json:
        print(json.dumps([i.to_dict() for i in infos], indent=2))
        return 0
    rows = [
        (
            info.name,
            info.kind,
            "FAILS CLOSED" if info.fails_closed and info.status == "failed" else info.status,
            f"{info.distribution} {info.version}".strip() or "-",
            f"error: {info.error}" if info.error else ", ".join(info.hooks) or "-",
        )
        for info in infos
    ]
    print_table(("NAME", "KIND", "STATUS", "DISTRIBUTION", "HOOKS"), rows)
    for info in infos:
        if info.fails_closed and info.status == "failed":
            print(
                f"{info.name}: FAILS CLOSED: mutating and dangerous calls are refused until it loads "
                f"or ONGRID_DISABLE_PLUGINS={info.name}"
            )
    return 0
