"""``audit``: read, export and verify the audit log (reading never creates it)."""

from __future__ import annotations

import datetime
import json
import sys
from typing import TYPE_CHECKING, Any, TextIO

from ..audit import OUTCOMES
from ..errors import UnknownAuditRow
from .argtypes import MAX_COUNT, Subcommands, count, non_empty, output_file, row_number
from .output import print_field, print_table, printable

if TYPE_CHECKING:
    from ..audit import AuditEntry
    from ..cli import Context

__all__ = ["register"]


def register(sub: Subcommands) -> None:
    """Add the ``audit`` sub-command: ``list``, ``show``, ``tail``, ``export``, ``head`` and ``verify``."""
    p = sub.add_parser("audit", help="the audit log: list, show, tail, export, head, verify")
    actions = p.add_subparsers(dest="action", metavar="ACTION", required=True)

    a = actions.add_parser("list", help="list recorded call attempts, oldest first")
    a.add_argument("--tool", help="only attempts to call this tool")
    a.add_argument(
        "--outcome",
        choices=[str(outcome) for outcome in OUTCOMES],  # plain strings: argparse quotes their repr
        metavar="OUTCOME",
        help="only this outcome: " + ", ".join(OUTCOMES),
    )
    a.add_argument("--since", type=row_number, metavar="SEQ", help="only rows after this row number")
    a.add_argument("--limit", type=count, metavar="N", help="at most N rows (N >= 1)")
    a.add_argument("--json", action="store_true", help="print JSON")
    a.set_defaults(handler=cmd_list)

    a = actions.add_parser("show", help="every field of one row: by row number or call id")
    a.add_argument("id", metavar="SEQ|CALL_ID", help="a row number (audit list's SEQ) or a call id")
    a.add_argument("--json", action="store_true", help="print JSON")
    a.set_defaults(handler=cmd_show)

    a = actions.add_parser("tail", help="the last rows")
    a.add_argument("-n", type=count, default=10, metavar="N", help="how many rows, 1 or more (default 10)")
    a.add_argument("--json", action="store_true", help="print JSON")
    a.set_defaults(handler=cmd_tail)

    a = actions.add_parser(
        "export", help="every row with its hashes, as JSON Lines (re-verifiable elsewhere)"
    )
    a.add_argument(
        "--output",
        "-o",
        type=non_empty("give a file name, or leave -o out for stdout"),
        metavar="FILE",
        help="write to FILE instead of stdout",
    )
    a.add_argument("--json", action="store_true", help="one JSON document with the rows and the verification")
    a.set_defaults(handler=cmd_export)

    a = actions.add_parser(
        "head", help="verify, then record the head next to the log so that later rows cannot vanish"
    )
    a.add_argument("--json", action="store_true", help="print JSON")
    a.set_defaults(handler=cmd_head)

    a = actions.add_parser("verify", help="check the hash chain; exit 1 naming the first bad row")
    a.add_argument(
        "--anchor",
        metavar="HASH",
        help="a head hash recorded earlier that must still be there (or a unique prefix of 7+ digits)",
    )
    a.add_argument("--json", action="store_true", help="print JSON")
    a.set_defaults(handler=cmd_verify)


def cmd_list(ctx: Context) -> int:
    args = ctx.args
    entries = ctx.host.audit.entries(tool=args.tool, outcome=args.outcome, since=args.since, limit=args.limit)
    return _print_entries(entries, args.json)


def cmd_show(ctx: Context) -> int:
    """Print one row; no row with that number or call id is :class:`UnknownAuditRow` (exit 4)."""
    key = ctx.args.id.strip()
    log = ctx.host.audit
    if key.isdigit():
        seq = int(key)  # past SQLite's integers no row can have it (and the query would overflow)
        found = log.entries(since=seq - 1, limit=1) if 1 <= seq <= MAX_COUNT else []
        entries = [e for e in found if e.seq == seq]
    else:
        entries = log.entries(call_id=key)
    if not entries:
        raise UnknownAuditRow(key)
    if ctx.args.json:
        data = [e.to_dict() for e in entries]
        print(json.dumps(data[0] if len(data) == 1 else data, indent=2, ensure_ascii=False))
        return 0
    for n, entry in enumerate(entries):
        if n:
            print()
        _print_entry(entry)
    return 0


def _print_entry(e: AuditEntry) -> None:
    fields: list[tuple[str, Any]] = [
        ("seq", e.seq),
        ("time", _time(e.time)),
        ("call id", e.call_id),
        ("tool", f"{e.tool} ({e.tool_class})"),
        ("persona", e.persona),
        ("caller", e.caller or "-"),
        ("arguments", json.dumps(e.args, ensure_ascii=False)),
        ("decision", f"{e.verdict or '-'}" + (f" by {e.plugin}: {e.reason}" if e.reason else "")),
        ("outcome", e.outcome),
        ("error", e.error or "-"),
        ("exit code", "-" if e.exit_code is None else e.exit_code),
        ("duration", f"{e.duration:.3f}s"),
        ("ticket", e.ticket or "-"),
        ("approvers", ", ".join(e.approvers) or "-"),
        ("skill digest", e.skill_digest or "-"),
        ("ran on", _where(e)),
    ]
    if isinstance(e.remote, dict):
        fields += [
            ("worker", e.remote.get("worker") or "- (no worker took it)"),
            ("queue", e.remote.get("queue") or "-"),
            ("task id", e.remote.get("task_id") or "-"),
            ("worker digest", e.remote.get("worker_digest") or "-"),
        ]
    fields += [("host", f"{e.hostname} pid {e.pid}"), ("hash", e.hash)]
    for line in e.stderr_tail:
        fields.append(("stderr", line))
    width = max(len(name) for name, _value in fields)
    for name, value in fields:  # every value may hold a skill's or a caller's control characters
        print_field(name, value, width + 1)


def _where(e: AuditEntry) -> str:
    """``local``, or ``WORKER (queue Q)`` for a call a worker ran."""
    if not e.remote:
        return "local"
    if not isinstance(e.remote, dict):  # a row edited by hand (verify names it): its text as it is
        return f"unreadable remote record {str(e.remote)[:80]!r}"
    worker = e.remote.get("worker") or "no worker"
    return f"{worker} (queue {e.remote.get('queue')})"


def cmd_tail(ctx: Context) -> int:
    return _print_entries(ctx.host.audit.tail(ctx.args.n), ctx.args.json)


def cmd_export(ctx: Context) -> int:
    log = ctx.host.audit
    entries = log.entries()
    verified = log.verify().to_dict() if ctx.args.json else None
    if ctx.args.output:
        with output_file(ctx.args.output) as out:
            _export(out, entries, verified)
    else:
        _export(sys.stdout, entries, verified)
    return 0


def cmd_verify(ctx: Context) -> int:
    report = ctx.host.audit.verify(anchor=ctx.args.anchor)
    if ctx.args.json:
        print(json.dumps(report.to_dict(), indent=2))
    elif report.ok and not report.entries:
        print("audit log is EMPTY: 0 rows (no head was recorded for it, so none are known to be missing)")
    elif report.ok:
        print(f"audit log OK: {report.entries} rows, head {report.head}")
    else:
        print(f"{_broken(report)} ({report.entries} rows verified before it)")
    if not ctx.args.json:
        for row in report.inflight:
            state = {True: "running", False: "host gone", None: "other host"}[row["alive"]]
            print(printable(f"in flight: call {row['call_id']} of {row['tool']} (pid {row['pid']}, {state})"))
    return 0 if report.ok else 1


def cmd_head(ctx: Context) -> int:
    log = ctx.host.audit
    report = log.record_head()
    if ctx.args.json:
        print(
            json.dumps({**report.to_dict(), "recorded": log.recorded_head(), "file": log.head_path}, indent=2)
        )
    elif not report.ok:
        print(f"{_broken(report)}; no head recorded")
    elif not report.entries:
        print("audit log is EMPTY: nothing to record")
    else:
        print(f"recorded head row {report.entries} {report.head} in {log.head_path}")
        print("keep a copy elsewhere too, and check it later with `ongrid-skills audit verify --anchor HASH`")
    return 0 if report.ok else 1


def _export(out: TextIO, entries: list[AuditEntry], verified: dict[str, Any] | None) -> None:
    if verified is not None:
        json.dump({"entries": [e.to_dict() for e in entries], "verify": verified}, out, indent=2)
        out.write("\n")
        return
    for entry in entries:
        out.write(json.dumps(entry.to_dict(), ensure_ascii=False) + "\n")


def _print_entries(entries: list[AuditEntry], as_json: bool) -> int:
    if as_json:
        print(json.dumps({"items": [e.to_dict() for e in entries], "total": len(entries)}, indent=2))
        return 0
    if not entries:
        print("no audit rows")
        return 0
    rows = [
        (
            str(e.seq),
            _time(e.time),
            e.tool,
            e.persona,
            e.caller,
            e.outcome,
            e.verdict or "-",
            e.ticket or "-",
            ", ".join(e.approvers) or "-",
            _where(e),
        )
        for e in entries
    ]
    print_table(
        ("SEQ", "TIME", "TOOL", "PERSONA", "CALLER", "OUTCOME", "DECISION", "TICKET", "APPROVERS", "RAN ON"),
        rows,
    )
    return 0


def _time(ts: float) -> str:
    return datetime.datetime.fromtimestamp(ts, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _broken(report: Any) -> str:
    """``audit log BROKEN at row N: problem``, the row named once (a problem may start with it)."""
    problem = printable(report.problem)  # it may quote a row's own (edited) values
    if report.first_bad is None:
        return f"audit log BROKEN: {problem}"
    problem = problem.removeprefix(f"row {report.first_bad}: ")
    return f"audit log BROKEN at row {report.first_bad}: {problem}"
