"""``state``: set up a state folder shared by a group (``state init DIR --group NAME``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .argtypes import Subcommands

if TYPE_CHECKING:
    from ..cli import Context

__all__ = ["register"]


def register(sub: Subcommands) -> None:
    """Add the ``state`` sub-command and its ``init``."""
    p = sub.add_parser("state", help="the state folder (approval tickets, audit log): share it with a group")
    actions = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    a = actions.add_parser(
        "init", help="make DIR a state folder every member of GROUP can use (setgid, group-writable)"
    )
    a.add_argument("folder", metavar="DIR")
    a.add_argument("--group", required=True, metavar="NAME", help="the group whose members share it")
    a.set_defaults(handler=cmd_init)


def cmd_init(ctx: Context) -> int:
    from .statedir import init_shared

    shared = init_shared(ctx.args.folder, ctx.args.group)
    print(
        f"{shared.folder} is a state folder shared by group {shared.group} ({len(shared.paths)} paths set)."
    )
    print(f"Every member sets: export ONGRID_STATE_DIR={shared.folder}")
    return 0
