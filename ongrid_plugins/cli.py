"""The ``ongrid-skills`` command: a thin edge over :class:`SkillHost`.

Each sub-command lives in a module of :mod:`ongrid_plugins.commands` that adds
its parser and a handler returning an exit code. Library errors become
``ERROR: ...`` and an exit code here, and only here:

== ===================================================================
0  ok
1  the skill failed (non-zero exit, timeout, bad output), or validate found errors
2  usage error or invalid arguments
3  denied, a confirmation or approval is needed, a ticket does not cover the
   call, or the audit log cannot record a mutating/dangerous call
4  unknown skill, no approval ticket of that id (``approvals show/approve/reject``), or no audit
   row with that number or call id
== ===================================================================
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import shlex
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from .commands import UsageError
from .commands.output import colour, printable
from .commands.repeats import RepeatFilter
from .errors import OngridError, UnknownSkill
from .settings import Settings, split_dirs

if TYPE_CHECKING:
    from .host.facade import SkillHost

__all__ = ["Context", "build_parser", "main"]

COMMAND_MODULES = (
    "ongrid_plugins.commands.skills",
    "ongrid_plugins.commands.validate",
    "ongrid_plugins.commands.plugins",
    "ongrid_plugins.commands.resolve",
    "ongrid_plugins.commands.personas",
    "ongrid_plugins.commands.approvals",
    "ongrid_plugins.commands.state",
    "ongrid_plugins.commands.audit",
    "ongrid_plugins.commands.packs",
    "ongrid_plugins.commands.packtrust",
    "ongrid_plugins.commands.new",
    "ongrid_plugins.commands.export",
    "ongrid_plugins.commands.serve",
    "ongrid_plugins.commands.mcp",
    "ongrid_plugins.commands.doctor",
    "ongrid_plugins.commands.remote",
    "ongrid_plugins.commands.trust",
)


class Context:
    """What a command handler gets: the parsed arguments and a lazily built host."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self._host: SkillHost | None = None

    def settings(self) -> Settings:
        """Settings from the environment, with the global flags applied."""
        overrides: dict[str, Any] = {}
        if self.args.dirs:
            # On the command line a root may be relative or start with ~ (the shell leaves
            # `--dirs=~/x` alone); the environment variable keeps the specification's rule.
            dirs = (d for raw in self.args.dirs for d in split_dirs(raw))
            overrides["skill_dirs"] = tuple(os.path.abspath(os.path.expanduser(d)) for d in dirs)
        if self.args.no_defaults:
            overrides["include_defaults"] = False
        if self.args.project:
            overrides["project_dir"] = os.path.abspath(os.path.expanduser(self.args.project))
        if getattr(self.args, "strict_plugins", False):
            overrides["strict"] = True
        return Settings.from_env(**overrides)

    def command(self, *words: str) -> str:
        """The command line ``ongrid-skills WORDS`` with this run's global options (``--dirs``,
        ``--no-defaults``), for a hint a user can paste as it is and see the same skills."""
        argv = ["ongrid-skills"]
        for raw in self.args.dirs or ():
            argv += ["--dirs", raw]
        if self.args.no_defaults:
            argv.append("--no-defaults")
        if self.args.project:
            argv += ["--project", self.args.project]
        return shlex.join([*argv, *words])

    @property
    def host(self) -> SkillHost:
        """The host, created (not yet loaded) on first use."""
        if self._host is None:
            from .host.facade import SkillHost

            self._host = SkillHost(self.settings())
        return self._host


class _Formatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        text = printable(super().format(record), keep="\n")  # paths and names come from skills
        if record.levelno < logging.WARNING:
            return text
        style = "yellow" if record.levelno == logging.WARNING else "red"
        return f"{colour(record.levelname, style, sys.stderr)}: {text}"


def _error(exc: object) -> None:
    print(f"{colour('ERROR', 'red', sys.stderr)}: {printable(str(exc), keep=chr(10))}", file=sys.stderr)


class _Version(argparse.Action):
    """``--version``, reading the version only when asked (package metadata is slow to load)."""

    def __call__(self, parser: argparse.ArgumentParser, *_args: Any, **_kwargs: Any) -> None:
        from .core.version import __version__

        print(f"{parser.prog} {__version__}")
        parser.exit()


class _Parser(argparse.ArgumentParser):
    """An argument parser that remembers its sub-command groups (argparse keeps them private)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.subcommands: list[Any] = []
        """What each ``add_subparsers()`` returned: its ``choices`` are the sub-parsers."""
        self.plain_only = False
        """A positional the intermixed parse refuses: sub-commands, or ``nargs=REMAINDER``."""
        super().__init__(*args, **kwargs)

    def add_subparsers(self, **kwargs: Any) -> Any:
        """argparse's, remembered in :attr:`subcommands`."""
        action = super().add_subparsers(**kwargs)
        self.subcommands.append(action)
        self.plain_only = True
        return action

    def add_argument(self, *args: Any, **kwargs: Any) -> argparse.Action:
        """argparse's; a ``REMAINDER`` positional makes the parse :attr:`plain_only`."""
        action = super().add_argument(*args, **kwargs)
        if not action.option_strings and action.nargs in (argparse.PARSER, argparse.REMAINDER):
            self.plain_only = True
        return action


class _AnyOrderParser(_Parser):
    """A sub-command's parser: its options may come before, between or after its positionals.

    Plain argparse matches positionals in runs, so ``run NAME --timeout 5 '{}'`` gave the
    optional ARGS_JSON nothing when it met NAME and then refused ``{}`` as unrecognized.
    The intermixed parse reads every option first, then the positionals. Parsers with
    sub-commands of their own (``approvals``, ``audit``, ``state``) keep the plain parse,
    which intermixing does not support; their leaf parsers are of this class too.
    """

    _intermixing = False

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        if self.plain_only or self._intermixing:  # up to 3.12 the intermixed parse calls this method twice
            return super().parse_known_args(args, namespace)
        self._intermixing = True
        try:
            return self.parse_known_intermixed_args(args, namespace)
        finally:
            self._intermixing = False


def build_parser() -> argparse.ArgumentParser:
    """The full argument parser, every sub-command included."""
    parser = _Parser(
        prog="ongrid-skills",
        description="List, inspect, validate and run ongrid skills.",
        epilog="Exit codes: 0 ok, 1 skill failed, 2 usage or invalid arguments, "
        "3 denied or needs confirmation/approval, 4 unknown skill (or audit row).",
    )
    parser.add_argument("--version", action=_Version, nargs=0, help="show the version and exit")
    parser.add_argument(
        "--dirs",
        action="append",
        metavar="DIRS",
        help="extra skill roots (separated by ':', ',' or ';'; relative to the working directory, "
        "~ expanded); walked first; repeatable",
    )
    parser.add_argument(
        "--no-defaults",
        action="store_true",
        help="do not walk the built-in, system and user skill roots or installed packs",
    )
    parser.add_argument(
        "--project",
        metavar="DIR",
        help="the project whose .agents/skills is walked when trusted (default: the working directory)",
    )
    verbosity = parser.add_mutually_exclusive_group()
    verbosity.add_argument(
        "-v", "--verbose", action="count", default=0, help="show the loader's INFO lines (-vv: debug)"
    )
    verbosity.add_argument("-q", "--quiet", action="store_true", help="show errors only")
    sub = parser.add_subparsers(
        dest="command", metavar="COMMAND", required=True, parser_class=_AnyOrderParser
    )
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    _remember_parsers(parser)
    return parser


def _remember_parsers(parser: argparse.ArgumentParser) -> None:
    """Give every leaf sub-parser a ``usage_parser`` default: itself, for a usage error's usage line."""
    groups = parser.subcommands if isinstance(parser, _Parser) else []
    children = [child for action in groups for child in dict.fromkeys(action.choices.values())]
    if not children:
        parser.set_defaults(usage_parser=parser)
    for child in children:
        _remember_parsers(child)


def _setup_logging(args: argparse.Namespace, repeats: RepeatFilter | None) -> None:
    level = logging.WARNING
    if args.quiet:
        level = logging.ERROR
    elif args.verbose:
        level = logging.INFO if args.verbose == 1 else logging.DEBUG
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_Formatter("%(message)s"))
    if repeats is not None:
        handler.addFilter(repeats)
    package = logging.getLogger("ongrid_plugins")
    package.handlers[:] = [handler]
    package.setLevel(level)
    package.propagate = False


def _repeat_filter(args: argparse.Namespace) -> RepeatFilter | None:
    """Hold back repeated state warnings, unless -v or -q asked for all or none."""
    if args.verbose or args.quiet:
        return None
    try:
        cache_dir = Settings.from_env().cache_dir
    except OngridError:
        return None  # the handler reports the bad setting
    return RepeatFilter(cache_dir)


def _after_load(ctx: Context, repeats: RepeatFilter | None) -> None:
    host = ctx._host
    if repeats is None or host is None or host._report is None:
        return
    repeats.save()
    if repeats.hidden and not sys.stderr.closed:
        print(
            f"({repeats.hidden} warning(s) shown before are unchanged and not repeated: -v shows them all)",
            file=sys.stderr,
        )


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit code."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, --version, or a usage error argparse printed
        return exc.code if isinstance(exc.code, int) else 2
    repeats = _repeat_filter(args)
    _setup_logging(args, repeats)
    ctx = Context(args)
    try:
        return _run(args, ctx)
    finally:
        _after_load(ctx, repeats)


def _not_loaded(ctx: Context, exc: UnknownSkill) -> str:
    """Why a skill of that name was found but not registered (an OS gate, a broken manifest), if it was."""
    if exc.skill is not None or ctx._host is None or ctx._host._report is None:
        return ""
    wanted = exc.name.replace("-", "_")
    events = ctx.host.report.events
    why = [e for e in events if e.skill.replace("-", "_") == wanted and e.outcome != "registered"]
    return f"; a skill of that name was found but not loaded: {why[0].message} ({why[0].path})" if why else ""


def _run(args: argparse.Namespace, ctx: Context) -> int:
    try:
        code: int = args.handler(ctx)
    except UsageError as exc:
        _error(exc)
        args.usage_parser.print_usage(sys.stderr)
        return exc.exit_code
    except UnknownSkill as exc:
        _error(f"{exc}{_not_loaded(ctx, exc)}")
        return exc.exit_code
    except OngridError as exc:
        _error(exc)
        return exc.exit_code
    except KeyboardInterrupt:
        _error("interrupted")
        return 130
    except BrokenPipeError:
        # The reader went away (`| head`): not an error worth a traceback.
        sys.stderr.close()
        return 0
    return code
