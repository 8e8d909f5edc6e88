"""``new``: scaffold a working skill or a pip-installable pack."""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING

from ..core.hints import local_path, pack_install
from .argtypes import Subcommands
from .scaffold import FORMATS, LANGS, scaffold

if TYPE_CHECKING:
    from ..cli import Context

__all__ = ["register"]


def register(sub: Subcommands) -> None:
    """Add the ``new`` sub-command."""
    p = sub.add_parser(
        "new",
        help="scaffold a working skill, or a pip pack of one",
        description="Write a skill that passes `validate` and runs, or with --pack a pip-installable "
        "pack (pyproject with the ongrid_skills entry point, README, a passing test).",
    )
    p.add_argument("name", metavar="NAME", help="the skill's name, lower_snake")
    p.add_argument("--format", dest="fmt", choices=FORMATS, default="json", help="skill.json or SKILL.md")
    p.add_argument("--lang", choices=LANGS, default="sh", help="the entry's language (default: sh)")
    p.add_argument("--pack", action="store_true", help="scaffold a pip-installable pack ongrid-pack-NAME")
    p.add_argument("--dir", default=".", help="where to create it (default: the current folder)")
    p.set_defaults(handler=cmd_new)


def cmd_new(ctx: Context) -> int:
    args = ctx.args
    folder = scaffold(args.name, args.dir, fmt=args.fmt, lang=args.lang, pack=args.pack)
    print(f"created {folder}")
    if args.pack:
        # A pip pack loads once its user consents to what it may do (docs/trust.md).
        trust = f"ongrid-skills trust {args.name} --yes"
        print(
            f'next: {pack_install(folder)} && {trust} && ongrid-skills run {args.name} \'{{"who": "ada"}}\''
        )
    else:
        parent = shlex.quote(str(folder.resolve().parent))
        # ./NAME: a bare name is an installed distribution's to `validate` (attrs, pytest, ...).
        path = shlex.quote(local_path(folder))
        print(f"next: ongrid-skills validate {path} && ongrid-skills --dirs {parent} run {args.name}")
    return 0
