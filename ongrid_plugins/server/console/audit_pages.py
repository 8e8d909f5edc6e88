"""The console's audit page as HTML text: filters, the hash chain's status, the rows (no I/O)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

from ...audit import OUTCOMES, AuditEntry, VerifyReport
from .html import attr, badge, esc, iso, options, short

__all__ = ["audit_body", "audit_rows", "chain_html"]


def chain_html(report: VerifyReport | None) -> str:
    """The chain's status in words; a placeholder the page's script fills in when not known yet."""
    if report is None:
        return (
            '<p class="chain" id="chain" data-chain="/audit?part=chain">Checking the hash chain… '
            '<noscript><a href="/audit?part=chain">see the result</a></noscript></p>'
        )
    if report.ok:
        return (
            f'<p class="chain chain-ok" id="chain">{badge("verified", "ok")} The hash chain verifies '
            f'to row {report.entries}. <span class="mono small">head {esc(report.head[:16])}…</span></p>'
        )
    where = f"at row {report.first_bad}" if report.first_bad is not None else ""
    return (
        f'<p class="chain chain-broken" id="chain" role="alert">{badge("broken", "failed")} '
        f"The hash chain is broken {esc(where)}: {esc(report.problem)}. Rows from there on cannot be "
        "trusted; keep a copy of audit.db and investigate.</p>"
    )


def audit_rows(entries: Sequence[AuditEntry], report: VerifyReport | None) -> str:
    """The chain status and the rows, newest first (the live part of the audit page)."""
    if not entries:
        table = '<p class="empty">No audit rows match.</p>'
    else:
        rows = []
        for e in entries:
            args = json.dumps(e.args, ensure_ascii=False, sort_keys=True, default=str)
            who = esc(e.caller) + (f'<div class="small muted">{esc(e.persona)}</div>' if e.persona else "")
            extra = ""
            if e.ticket:
                approved = f"; approved by {', '.join(e.approvers)}" if e.approvers else ""
                extra = f'<div class="small">ticket {esc(e.ticket)}{esc(approved)}</div>'
            if e.error:
                extra += f'<div class="small why">{esc(short(e.error, 200))}</div>'
            suspect = report is not None and report.first_bad is not None and e.seq >= report.first_bad
            rows.append(
                f'<tr{" class=suspect" if suspect else ""}><td class="mono">{e.seq}</td>'
                f'<td class="small">{esc(iso(e.time))}</td>'
                f"<td>{esc(e.tool)}</td><td>{badge(e.tool_class) if e.tool_class else ''}</td>"
                f"<td>{who}</td><td>{badge(e.outcome)}{extra}</td>"
                f'<td class="mono small nowrap">{e.duration * 1000:.0f} ms</td>'
                f'<td class="mono small args-cell">{esc(short(args, 160))}</td></tr>'
            )
        table = (
            '<div class="table-wrap"><table id="audit-rows">'
            '<caption class="sr">Audit rows, newest first</caption>'
            '<thead><tr><th scope="col">Row</th><th scope="col">Time (UTC)</th><th scope="col">Tool</th>'
            '<th scope="col">Class</th><th scope="col">Caller</th><th scope="col">Outcome</th>'
            '<th scope="col">Took</th><th scope="col">Arguments (redacted)</th></tr></thead>'
            f"<tbody>{''.join(rows)}</tbody></table></div>"
        )
    return chain_html(report) + table


def audit_body(rows_html: str, query: Mapping[str, str], part_url: str) -> str:
    """The audit page: filters, then the live chain status and rows."""
    outcomes = options("outcome", [("", "any outcome"), *((o, o) for o in OUTCOMES)], query)
    limits = options(
        "limit", [(n, f"{n} rows") for n in ("50", "100", "500")], {"limit": query.get("limit", "100")}
    )
    fields = "".join(
        f'<div><label for="{key}">{label}</label><input type="{kind}" id="{key}" name="{key}" '
        f'value="{attr(query.get(key, ""))}"></div>'
        for key, label, kind in (
            ("tool", "Tool", "text"),
            ("caller", "Caller", "text"),
            ("start", "From (UTC)", "datetime-local"),
            ("end", "To (UTC)", "datetime-local"),
        )
    )
    return (
        '<h1>Audit log <span class="muted">— newest first</span></h1>'
        f'<form method="get" action="/audit" class="filters" role="search">{fields}'
        '<div><label for="outcome">Outcome</label>'
        f'<select id="outcome" name="outcome">{outcomes}</select></div>'
        f'<div><label for="limit">Show</label><select id="limit" name="limit">{limits}</select></div>'
        '<div class="actions"><button type="submit">Apply</button> <a href="/audit">Clear</a></div></form>'
        '<p class="live-note muted small" id="live-state">Updates live.</p>'
        f'<div id="audit" data-part="{attr(part_url)}">{rows_html}</div>'
    )
