"""``trust-folder``: let a project's ``.agents/skills`` load (the Agent Skills client guide's trust check)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from . import UsageError
from .argtypes import Subcommands

if TYPE_CHECKING:
    from ..cli import Context

__all__ = ["register"]


def register(sub: Subcommands) -> None:
    """Add the ``trust-folder`` sub-command."""
    p = sub.add_parser(
        "trust-folder",
        help="trust a project folder: its .agents/skills load from then on (recorded in the config folder)",
    )
    p.add_argument("folder", metavar="PATH", nargs="?", help="the project folder (or its .agents/skills)")
    p.add_argument("--forget", action="store_true", help="stop trusting PATH")
    p.add_argument("--list", action="store_true", help="list the trusted folders")
    p.set_defaults(handler=cmd_trust)


def cmd_trust(ctx: Context) -> int:
    from ..discovery.agent_skills import forget, trust, trusted_folders

    settings = ctx.settings()
    if ctx.args.list:
        if ctx.args.folder or ctx.args.forget:
            raise UsageError("--list takes no PATH and no --forget")
        for folder in trusted_folders(settings):
            print(folder)
        return 0
    if not ctx.args.folder:
        raise UsageError("give the project folder to trust (PATH), or --list")
    if ctx.args.forget:
        if forget(settings, ctx.args.folder):
            print(f"{ctx.args.folder} is no longer trusted: its .agents/skills do not load")
            return 0
        print(f"{ctx.args.folder} was not recorded as trusted (ONGRID_TRUSTED_FOLDERS may still name it)")
        return 1
    try:
        folder = trust(settings, ctx.args.folder)
    except OSError as exc:
        raise UsageError(f"cannot trust {ctx.args.folder}: {exc}") from None
    print(f"trusted {folder}: the skills in {folder}/.agents/skills load from now on")
    return 0
