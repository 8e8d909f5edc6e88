"""``approvals``: list, show, approve and reject two-person tickets.

The approver is the OS user running the command, read from the real uid
(``approvals.os_identity``), not from ``$USER``/``$LOGNAME`` (which anyone can
set) and not from a flag: a ``--as NAME`` option would let one person sign
twice under two names and defeat the two-person rule. Hosts that vouch for
identities themselves (a server with per-user tokens) call
``SkillHost.approve(..., approver=...)``.

With ``--server URL`` every action goes to that server's ticket store instead
(``ongrid-skills serve``), as the identity of the bearer token (``$ONGRID_TOKEN``
or ``--token-file``): the server signs with the token's identity, so people on
different accounts or machines share one store and the two-person rule still
holds between them.
"""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING, Any

from .argtypes import Subcommands
from .output import print_field, print_table, printable

#: Kept in step with ``approvals.STATUSES`` by a test; importing ``approvals``
#: here would load it (and datetime, sqlite glue) for every CLI command.
TICKET_STATUSES = ("pending", "approved", "rejected", "executed", "expired")

if TYPE_CHECKING:
    from ..cli import Context
    from ..gate.tickets import Ticket

__all__ = ["register"]


def _remote_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--server",
        metavar="URL",
        help="act on this ongrid-skills server's tickets, as the token's identity (token: $ONGRID_TOKEN)",
    )
    parser.add_argument("--token-file", metavar="FILE", help="with --server: read the bearer token from FILE")


def register(sub: Subcommands) -> None:
    """Add the ``approvals`` sub-command and its ``list``, ``show``, ``approve`` and ``reject``."""
    p = sub.add_parser("approvals", help="two-person approval tickets: list, show, approve, reject")
    actions = p.add_subparsers(dest="action", metavar="ACTION", required=True)

    a = actions.add_parser("list", help="list tickets, newest first")
    a.add_argument("--status", choices=TICKET_STATUSES, help="only tickets in this state")
    a.add_argument("--json", action="store_true", help="print JSON")
    _remote_options(a)
    a.set_defaults(handler=cmd_list)

    a = actions.add_parser("show", help="show one ticket: the call, its arguments, who approved")
    a.add_argument("ticket_id", metavar="ID")
    a.add_argument("--json", action="store_true", help="print JSON")
    _remote_options(a)
    a.set_defaults(handler=cmd_show)

    a = actions.add_parser("approve", help="approve a ticket as the OS user running this command")
    a.add_argument("ticket_id", metavar="ID")
    a.add_argument("--note", default="", help="why you approve (kept with the ticket)")
    a.add_argument("--sop", metavar="REF", help="the SOP document you followed (URL or id)")
    a.add_argument("--json", action="store_true", help="print the ticket as JSON")
    _remote_options(a)
    a.set_defaults(handler=cmd_approve)

    a = actions.add_parser("reject", help="reject a ticket (the requester may withdraw their own)")
    a.add_argument("ticket_id", metavar="ID")
    a.add_argument("--note", default="", help="why you reject it")
    a.add_argument("--json", action="store_true", help="print the ticket as JSON")
    _remote_options(a)
    a.set_defaults(handler=cmd_reject)


class _Local:
    """The host's own ticket store, acting as the OS user running the command."""

    def __init__(self, ctx: Context) -> None:
        self.host = ctx.host

    def tickets(self, status: str | None = None) -> list[Ticket]:
        return self.host.tickets(status)

    def ticket(self, ticket_id: str) -> Ticket:
        return self.host.ticket(ticket_id)

    def approve(self, ticket_id: str, *, note: str = "", sop: str | None = None) -> Ticket:
        from ..gate.tickets import os_identity

        return self.host.approve(ticket_id, approver=os_identity(), note=note, sop=sop)

    def reject(self, ticket_id: str, *, note: str = "") -> Ticket:
        from ..gate.tickets import os_identity

        return self.host.reject(ticket_id, approver=os_identity(), note=note)


def _store(ctx: Context) -> Any:
    """Where the tickets are: the server of ``--server`` (as the token's identity), else the host's."""
    args = ctx.args
    if args.server:
        from ..gate.approvals_client import ApprovalsClient, read_token

        return ApprovalsClient(args.server, read_token(args.token_file))
    if args.token_file:
        from ..errors import ConfigError

        raise ConfigError("--token-file is for --server URL; without a server you act as your OS user")
    return _Local(ctx)


def cmd_list(ctx: Context) -> int:
    tickets = _store(ctx).tickets(ctx.args.status)
    if ctx.args.json:
        print(json.dumps({"items": [t.to_dict() for t in tickets], "total": len(tickets)}, indent=2))
        return 0
    if not tickets:
        print("no tickets" + (f" with status {ctx.args.status}" if ctx.args.status else ""))
        return 0
    rows = [
        (
            t.id,
            t.status,
            t.tool,
            t.persona,
            t.requester,
            f"{len(t.approvals)}/{t.required}",
            t.to_dict()["expires"],
        )
        for t in tickets
    ]
    print_table(("ID", "STATUS", "TOOL", "PERSONA", "REQUESTER", "APPROVALS", "EXPIRES"), rows)
    return 0


def cmd_show(ctx: Context) -> int:
    return _print(_store(ctx).ticket(ctx.args.ticket_id), ctx.args.json)


def cmd_approve(ctx: Context) -> int:
    args = ctx.args
    ticket = _store(ctx).approve(args.ticket_id, note=args.note, sop=args.sop)
    if args.json:
        return _print(ticket, True)
    if ticket.status == "approved":
        said = (
            f"ticket {ticket.id} is approved by {', '.join(ticket.approvers)}; "
            f"{ticket.requester} can now run it once with --ticket {ticket.id}"
        )
        print(printable(said))
    else:
        print(f"approved ticket {ticket.id} ({len(ticket.approvals)} of {ticket.required} approvals)")
    return 0


def cmd_reject(ctx: Context) -> int:
    ticket = _store(ctx).reject(ctx.args.ticket_id, note=ctx.args.note)
    if ctx.args.json:
        return _print(ticket, True)
    print(f"rejected ticket {ticket.id}: it can never run")
    return 0


def _print(ticket: Ticket, as_json: bool) -> int:
    data = ticket.to_dict()
    if as_json:
        print(json.dumps(data, indent=2, ensure_ascii=False))
        return 0
    # Every value was stored from a caller's or an approver's words: printed with its
    # control and bidirectional characters escaped (print_field), as --json escapes them.
    for key in ("id", "status", "tool", "tool_class", "persona", "requester", "reason", "created", "expires"):
        print_field(key, data[key], 13)
    print_field("args_digest", ticket.args_digest, 13)
    print_field("arguments", json.dumps(data["args"], ensure_ascii=False), 13)
    print_field("approvals", f"{len(ticket.approvals)} of {ticket.required}", 13)
    for approval in data["approvals"]:
        extra = "".join(f" {k}={approval[k]!r}" for k in ("note", "sop") if approval[k])
        print(printable(f"  {approval['time']}  {approval['approver']}{extra}"))
    if ticket.rejected_by:
        print_field("rejected by", ticket.rejected_by + (f" ({ticket.note})" if ticket.note else ""), 13)
    if ticket.executed:
        print_field("executed", f"{data['executed']} by {ticket.executed_by} (call {ticket.call_id})", 13)
    return 0
