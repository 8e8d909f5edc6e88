"""``list``, ``show`` and ``run``: the skills in the registry."""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

from ..errors import ApprovalRequired, ConfirmationRequired, UnknownSkill
from ..gate import needs
from ..models import CallResult, Event, Tool
from ..remote.plugin import where
from . import listing
from .argtypes import Subcommands
from .callargs import read_args
from .output import colour, first_line, print_field, print_json, print_table, printable

if TYPE_CHECKING:
    from ..cli import Context

__all__ = ["register"]


def register(sub: Subcommands) -> None:
    """Add the ``list``, ``show`` and ``run`` sub-commands."""
    p = sub.add_parser("list", help="list the registered tools")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.add_argument("--category", help="only tools of this category")
    p.add_argument(
        "--class",
        dest="tool_class",
        choices=["safe", "mutating", "dangerous"],
        help="only tools of this class",
    )
    p.add_argument(
        "--persona", metavar="NAME|PATH", help="only tools this persona may call, with what each would need"
    )
    p.add_argument(
        "--all", action="store_true", help="also unavailable tools (or skills), with what they are missing"
    )
    p.add_argument(
        "--skills",
        action="store_true",
        help="list skills instead of tools, prompt skills (no tools) included",
    )
    p.set_defaults(handler=cmd_list)

    p = sub.add_parser("show", help="show one tool, or a skill without tools, in full")
    p.add_argument("name")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.add_argument(
        "--body", action="store_true", help="print the skill's instructions and list its files (read now)"
    )
    p.add_argument("--file", metavar="PATH", help="print one file of the skill (e.g. references/api.md)")
    p.set_defaults(handler=cmd_show)

    p = sub.add_parser("run", help="run a tool and print its JSON result")
    p.add_argument("name")
    p.add_argument(
        "args_json",
        nargs="?",
        metavar="ARGS_JSON",
        help="the arguments as a JSON object, or - to read them from stdin",
    )
    p.add_argument("--args-file", metavar="FILE", help="read the arguments from this JSON file")
    p.add_argument(
        "--persona", default="operator", metavar="NAME|PATH", help="who is asking (default: operator)"
    )
    p.add_argument("--yes", "-y", action="store_true", help="confirm a call that needs a confirmation")
    p.add_argument(
        "--ticket", metavar="ID", help="run a dangerous call with its approved two-person ticket (spends it)"
    )
    p.add_argument("--timeout", type=float, help="a shorter timeout than the tool's, in seconds")
    p.add_argument("--json", action="store_true", help="print the whole call result as JSON")
    p.set_defaults(handler=cmd_run)


def cmd_list(ctx: Context) -> int:
    args = ctx.args
    if args.skills:
        return listing.list_skills(ctx)
    tools = ctx.host.tools(
        args.persona, category=args.category, tool_class=args.tool_class, include_unavailable=args.all
    )
    if args.persona:
        return _list_for_persona(ctx, tools)
    stale = _stale(ctx)
    filtered = bool(args.category or args.tool_class)
    prompts = [] if filtered else listing.prompt_skills(ctx)
    if args.json:
        items = [
            {
                **_summary(t, stale.get(t.name, "")),
                "sandbox": ctx.host.sandbox_profile(t).to_dict(),
                "runs": where(t, ctx.host.settings),
            }
            for t in tools
        ]
        data: dict[str, Any] = {"items": items, "total": len(tools)}
        if not filtered:
            data["prompt_skills"] = [listing.summary(s) for s in prompts]
        print_json(data)
        return 0
    routed = bool(ctx.host.settings.remote_routes)
    if tools:
        header = ("NAME", "CLASS", "CATEGORY", "FROM", *(("RUNS",) if routed else ()), "DESCRIPTION")
        rows = [
            (
                t.name,
                t.tool_class.value,
                t.category,
                t.provenance,
                *((_runs(t, ctx.host.settings),) if routed else ()),
                listing.described(t.description, t.unavailable, stale.get(t.name, "")),
            )
            for t in tools
        ]
        print_table(header, rows)
    elif filtered:
        print(f"no tool matches --category/--class (see `{ctx.command('list')}` for them all)")
    elif not prompts:
        listing.nothing_listed(ctx)
    else:
        print("no tools registered; the skills loaded are prompt skills (instructions, no tools):")
    listing.print_prompt_skills(ctx, prompts, after_tools=bool(tools))
    if tools or prompts or filtered:  # else nothing_listed said what was left out
        listing.hidden_note(ctx)
    listing.untrusted_note(ctx)
    if routed:
        _route_notes(ctx)
    return 0


def _runs(tool: Tool, settings: Any) -> str:
    """The RUNS cell: ``local``, ``remote queue NAME`` or ``REFUSED`` (the note below says why)."""
    runs = where(tool, settings)
    return "REFUSED (bad route)" if runs.startswith("refused:") else runs


def _route_notes(ctx: Context) -> None:
    """Say on stderr what is wrong with the routes: bad items, routes that match no tool."""
    from ..remote.plugin import routes
    from ..remote.routes import unmatched

    table = routes(ctx.host.settings)
    for problem in table.problems:
        print(f"warning: {problem}", file=sys.stderr)
    if table.problems:
        print(
            "warning: tools no good route matches before a bad one are refused until it is fixed",
            file=sys.stderr,
        )
    for warning in unmatched(table, ctx.host.tools(include_unavailable=True)):
        print(f"warning: {warning}", file=sys.stderr)
    if not ctx.host.settings.broker_url:
        print("warning: remote routes are set but ONGRID_BROKER_URL is not", file=sys.stderr)


def _list_for_persona(ctx: Context, tools: list[Tool]) -> int:
    from .personas import tool_needs

    persona = ctx.host.persona(ctx.args.persona)
    needs = {t.name: tool_needs(ctx.host, t, persona) for t in tools}
    if ctx.args.json:
        stale = _stale(ctx)
        items = [
            {
                **_summary(t, stale.get(t.name, "")),
                "needs": needs[t.name],
                "sandbox": ctx.host.sandbox_profile(t).to_dict(),
                "runs": where(t, ctx.host.settings),
            }
            for t in tools
        ]
        print_json({"persona": persona.name, "items": items, "total": len(tools)})
        return 0
    if not tools:
        print(f"persona {persona.name} may call none of the registered tools")
        return 0
    rows = [
        (t.name, t.tool_class.value, needs[t.name]["needs"], t.category, first_line(t.description))
        for t in tools
    ]
    print_table(("NAME", "CLASS", "NEEDS", "CATEGORY", "DESCRIPTION"), rows)
    return 0


def cmd_show(ctx: Context) -> int:
    if ctx.args.body or ctx.args.file:
        return listing.show_instructions(ctx)
    try:
        tool = ctx.host.get(ctx.args.name)
    except UnknownSkill as exc:
        if exc.skill is None:
            from .packtrust import inspect_if_pack

            if inspect_if_pack(ctx, ctx.args.name):  # `show PACK`: what an installed or pip pack may do
                return 0
            raise
        return listing.show_skill(ctx)
    data = tool.to_dict()
    data["needs"] = needs(tool.tool_class)
    data["runs"] = where(tool, ctx.host.settings)
    profile = ctx.host.sandbox_profile(tool)
    data["sandbox"] = profile.to_dict()
    if tool.sandbox is not None:
        data["sandbox_declared"] = tool.sandbox.to_dict()
    skill = ctx.host.registry.snapshot.skills.get(tool.skill)
    if skill is not None:
        data["warnings"] = [w.to_dict() for w in skill.warnings]
        data["skill_details"] = skill.to_dict()
    if ctx.args.json:
        print_json(data)
        return 0
    for key in (
        "name",
        "description",
        "class",
        "needs",
        "category",
        "kind",
        "entry",
        "impl",
        "env_allow",
        "timeout_seconds",
        "runs",
        "source",
        "provenance",
        "digest",
    ):
        value = data.get(key)
        if value not in (None, "", []):
            print_field(key, ", ".join(value) if isinstance(value, list) else value)
    if skill is not None and skill.stale:
        print_field("stale", f"{skill.stale} (the last good version is registered)")
    if data["unavailable"]:
        print_field("unavailable", "; ".join(data["unavailable"]))
    for warning in data.get("warnings", []):
        print_field("warning", warning["message"])
    print("sandbox:")
    for line in profile.describe():
        print(f"  {printable(line)}")
    print("schema:")
    print_json(data["schema"])
    return 0


def cmd_run(ctx: Context) -> int:
    args = ctx.args
    call_args = read_args(ctx)
    host = ctx.host
    on_event = _StderrEcho()
    try:
        result = host.call(
            args.name,
            call_args,
            persona=args.persona,
            confirm=args.yes,
            ticket=args.ticket,
            on_event=on_event,
            timeout=args.timeout,
        )
    except ApprovalRequired as exc:
        _explain_ticket(ctx, exc)
        raise
    except ConfirmationRequired as exc:
        if not _can_prompt(args) or not _prompt(host.get(args.name), call_args, exc):
            raise
        result = host.call(
            args.name,
            call_args,
            persona=args.persona,
            confirm=exc.args_digest,
            on_event=on_event,
            timeout=args.timeout,
        )
    return _report(result, args.json)


def _explain_ticket(ctx: Context, exc: ApprovalRequired) -> None:
    """Say exactly how to get the call approved and run: the ticket, the commands."""
    from ..gate.tickets import Ticket

    ticket = exc.ticket
    if not isinstance(ticket, Ticket):
        return
    if ctx.args.json:
        print_json({"tool": ticket.tool, "ok": False, "status": "needs_approval", "ticket": ticket.to_dict()})
    rerun = _rerun_command(ctx, ticket.id)
    lines = [
        f"ticket {ticket.id}: {ticket.tool} as persona {ticket.persona}, requested by {ticket.requester}, "
        f"{len(ticket.approvals)} of {ticket.required} approvals, expires {ticket.to_dict()['expires']}",
        f"arguments (secrets redacted): {json.dumps(dict(ticket.args), ensure_ascii=False)}",
    ]
    if ticket.status != "approved":
        lines += [
            f"two people other than {ticket.requester} approve it, each logged in as themselves:",
            f"  ongrid-skills approvals approve {ticket.id} --note 'why'",
            f"(or reject it: ongrid-skills approvals reject {ticket.id} --note 'why')",
            "then run the call again with the ticket:",
        ]
    else:
        lines.append("it is approved; run the call again with the ticket:")
    lines.append(f"  {rerun}")
    print(printable("\n".join(lines), keep="\n"), file=sys.stderr)


def _rerun_command(ctx: Context, ticket_id: str) -> str:
    args = ctx.args
    argv = ["run", args.name]
    if args.args_file:
        argv += ["--args-file", args.args_file]
    elif args.args_json is not None:
        argv.append(args.args_json)
    argv += ["--persona", args.persona, "--ticket", ticket_id]
    command = ctx.command(*argv)
    return command + "   (same arguments on stdin)" if args.args_json == "-" else command


def _can_prompt(args: argparse.Namespace) -> bool:
    return args.args_json != "-" and sys.stdin.isatty() and sys.stderr.isatty()


def _prompt(tool: Tool, call_args: Any, exc: ConfirmationRequired) -> bool:
    shown = json.dumps(call_args, indent=2, ensure_ascii=False)
    said = f"{tool.name} is a {tool.tool_class.value} tool: {exc.decision.reason}.\narguments:\n{shown}"
    print(printable(said, keep="\n"), file=sys.stderr)
    print("Run it? [y/N] ", end="", file=sys.stderr, flush=True)
    try:
        answer = sys.stdin.readline()
    except KeyboardInterrupt:
        return False
    return answer.strip().lower() in ("y", "yes")


#: Most bytes of a running skill's stderr ``run`` echoes (a skill writing ``yes >&2`` put
#: 51 MB on the terminal before its time-out); the call result keeps its last lines.
MAX_ECHO_BYTES = 4 * 1024 * 1024


class _StderrEcho:
    """Echo a running skill's stderr lines, control characters escaped, up to a limit."""

    def __init__(self, limit: int = MAX_ECHO_BYTES) -> None:
        self.left = limit
        self.limit = limit

    def __call__(self, event: Event) -> None:
        if event.kind != "stderr" or self.left < 0:
            return
        # A tab is kept: it only moves the cursor along the line, and logs are full of them.
        line = printable(event.data, keep="\t")
        self.left -= len(line.encode("utf-8", "replace")) + 1
        if self.left >= 0:
            print(line, file=sys.stderr, flush=True)
            return
        mib = self.limit // (1024 * 1024)
        note = f"(the skill wrote more than {mib} MiB on stderr: the rest is not shown; "
        print(note + "--json shows its last lines)", file=sys.stderr, flush=True)


def _report(result: CallResult, as_json: bool) -> int:
    if as_json:
        print_json(result.to_dict())
    elif result.value is not None:
        print_json(result.value)
    if not result.ok:
        error = printable(str(result.error), keep="\n")  # it may quote the skill's stderr
        print(f"{colour('ERROR', 'red', sys.stderr)}: {result.tool}: {error}", file=sys.stderr)
        return 1
    return 0


def _summary(tool: Tool, stale: str = "") -> dict[str, Any]:
    return {
        "name": tool.name,
        "description": tool.description,
        "class": tool.tool_class.value,
        "category": tool.category,
        "skill": tool.skill,
        "kind": tool.kind,
        "provenance": tool.provenance,
        "source": tool.source,
        "available": tool.available,
        "unavailable": list(tool.unavailable),
        "digest": tool.digest,
        "stale": stale,
    }


def _stale(ctx: Context) -> dict[str, str]:
    """Why each stale skill is stale, by tool name (tools of current skills are left out)."""
    skills = ctx.host.registry.snapshot.skills.values()
    return {t.name: s.stale for s in skills if s.stale for t in s.tools}
