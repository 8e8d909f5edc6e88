"""The console's pages as HTML text, from values the routes already fetched (no I/O here)."""

from __future__ import annotations

import json
import time
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from ...audit import OUTCOMES, AuditEntry, VerifyReport
from ...gate.tickets import Ticket
from ...models import Decision, Tool
from .forms import render_fields
from .html import attr, badge, esc, iso, pretty_json, relative

__all__ = [
    "OUTCOMES",
    "approvals_body",
    "audit_body",
    "audit_rows",
    "catalog_body",
    "login_body",
    "ticket_list",
    "tool_body",
]


_NEEDS = {"allow": "", "confirm": "confirmation", "dual_sign": "two-person approval", "deny": "denied"}


def login_body(nonce: str, next_path: str, error: str = "") -> str:
    """The sign-in form: one password field for the bearer token."""
    problem = f'<p class="flash flash-error" role="alert">{esc(error)}</p>' if error else ""
    return (
        '<section class="card narrow"><h1>Sign in</h1>'
        "<p>Paste the bearer token you were given (the one your REST calls send as "
        "<code>Authorization: Bearer …</code>). It is checked once; the browser then keeps a "
        "session cookie scripts cannot read.</p>"
        f"{problem}"
        '<form method="post" action="/login" class="stack">'
        f'<input type="hidden" name="csrf" value="{attr(nonce)}">'
        f'<input type="hidden" name="next" value="{attr(next_path)}">'
        '<label for="token">Token</label>'
        '<input type="password" id="token" name="token" required autocomplete="current-password" '
        'spellcheck="false" autofocus>'
        '<button type="submit" class="primary">Sign in</button></form></section>'
    )


def catalog_body(
    rows: Sequence[tuple[Tool, Decision]],
    *,
    total: int,
    query: Mapping[str, str],
    categories: Sequence[str],
    persona: str,
) -> str:
    """The catalog: the filter form and one row per tool."""
    q = query.get("q", "")
    options = _options(
        "class",
        [("", "any class"), ("safe", "safe"), ("mutating", "mutating"), ("dangerous", "dangerous")],
        query,
    )
    cats = _options("category", [("", "any category"), *((c, c) for c in categories)], query)
    avail = _options(
        "available", [("", "available or not"), ("yes", "available"), ("no", "unavailable")], query
    )
    head = (
        f'<h1>Catalog <span class="muted">— {len(rows)} of {total} tools persona '
        f"<strong>{esc(persona)}</strong> may call</span></h1>"
        '<form method="get" action="/" class="filters" role="search">'
        '<div><label for="q">Filter</label>'
        f'<input type="search" id="q" name="q" value="{attr(q)}" '
        'placeholder="name, words of the description" '
        'data-filter-rows="#tools tbody tr"></div>'
        f'<div><label for="class">Class</label><select id="class" name="class">{options}</select></div>'
        '<div><label for="category">Category</label>'
        f'<select id="category" name="category">{cats}</select></div>'
        f'<div><label for="available">Availability</label><select id="available" name="available">'
        f"{avail}</select></div>"
        '<div class="actions"><button type="submit">Apply</button> <a href="/">Clear</a></div></form>'
    )
    if not rows:
        return head + '<p class="empty">No tool matches these filters.</p>'
    body = []
    for tool, decision in rows:
        needs = _NEEDS.get(decision.verdict.value, "")
        available = (
            badge("available", "ok")
            if tool.available
            else badge("unavailable", "failed")
            + f' <span class="why">{esc("; ".join(tool.unavailable))}</span>'
        )
        words = f"{tool.name} {tool.display_name} {tool.description} {tool.category} {tool.skill}".lower()
        body.append(
            f'<tr data-search="{attr(words)}">'
            f'<td><a href="/tools/{attr(tool.name)}">'
            f"<strong>{esc(tool.display_name or tool.name)}</strong></a>"
            + (
                f'<div class="mono small">{esc(tool.name)}</div>'
                if tool.display_name not in ("", tool.name)
                else ""
            )
            + "</td>"
            f'<td class="desc">{esc(_short(tool.description, 160))}</td>'
            f"<td>{badge(tool.tool_class.value)}</td>"
            f"<td>{esc(tool.category)}</td>"
            f'<td class="small">{esc(tool.provenance or tool.skill)}</td>'
            f"<td>{available}</td>"
            f"<td>{esc(needs) or '<span class=muted>nothing</span>'}</td></tr>"
        )
    return (
        head + '<div class="table-wrap"><table id="tools"><caption class="sr">Tools</caption><thead><tr>'
        '<th scope="col">Tool</th><th scope="col">What it does</th><th scope="col">Class</th>'
        '<th scope="col">Category</th><th scope="col">From</th><th scope="col">Availability</th>'
        '<th scope="col">Needs</th></tr></thead>'
        f"<tbody>{''.join(body)}</tbody></table></div>"
        '<p class="empty" id="no-match" hidden>No tool matches this filter.</p>'
    )


def _options(name: str, choices: Sequence[tuple[str, str]], query: Mapping[str, str]) -> str:
    chosen = query.get(name, "")
    return "".join(
        f'<option value="{attr(value)}"{" selected" if value == chosen else ""}>{esc(text)}</option>'
        for value, text in choices
    )


def _short(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def tool_body(
    tool: Tool,
    decision: Decision,
    *,
    csrf: str,
    digest: str,
    sandbox: str,
    values: Mapping[str, str] | None = None,
    errors: Mapping[str, str] | None = None,
    outcome: str = "",
) -> str:
    """One tool: what it is, where it comes from, whether it can run, and its form."""
    verdict = decision.verdict.value
    needs = _NEEDS.get(verdict, "")
    availability = "available" if tool.available else "unavailable: " + "; ".join(tool.unavailable)
    facts = [
        ("Class", badge(tool.tool_class.value)),
        (
            "Needs",
            esc(needs or "nothing: it runs when asked")
            + f' <span class="muted">({esc(decision.reason)})</span>',
        ),
        ("Category", esc(tool.category)),
        ("Skill", esc(tool.skill)),
        ("Source", f'<span class="mono">{esc(tool.source)}</span>'),
        ("Provenance", esc(tool.provenance or "—")),
        ("Availability", esc(availability)),
        ("Sandbox", esc(sandbox)),
        (
            "Digest",
            f'<span class="mono">{esc(digest)}</span>' if digest else '<span class="muted">not known</span>',
        ),
        ("Timeout", f"{tool.timeout:g} s"),
    ]
    dl = "".join(f"<dt>{name}</dt><dd>{value}</dd>" for name, value in facts)
    when = f"<p><strong>When to use:</strong> {esc(tool.when_to_use)}</p>" if tool.when_to_use else ""
    summary = [badge(tool.tool_class.value), esc(tool.category)]
    summary.append(badge("available", "ok") if tool.available else badge("unavailable", "failed"))
    summary.append(esc("needs " + needs) if needs else esc("runs when asked"))
    head = (
        f'<p class="crumbs"><a href="/">Catalog</a> › {esc(tool.name)}</p>'
        f"<h1>{esc(tool.display_name or tool.name)}</h1>"
        f'<p class="summary-line">{" · ".join(summary)}</p>'
        f'<p class="lead">{esc(tool.description)}</p>{when}'
    )
    about = f'<section class="card"><h2>About</h2><dl class="facts">{dl}</dl></section>'
    if verdict == "deny":
        return head + '<p class="flash flash-error">Your persona may not call this tool.</p>' + about
    confirm = ""
    button = "Run"
    if verdict == "confirm":
        confirm = (
            '<div class="field"><label class="check" for="f-confirm"><input type="checkbox" id="f-confirm" '
            'name="confirm" value="true" required> I confirm this change</label></div>'
        )
    elif verdict == "dual_sign":
        button = "Request approval"
        confirm = (
            '<p class="help">This call needs two people other than you to approve it. Submitting opens a '
            "ticket on the Approvals page; the call runs once, right after the second approval.</p>"
        )
    disabled = "" if tool.available else " disabled"
    placeholder = outcome or '<p class="muted">Run the tool to see its result here.</p>'
    form = (
        '<div class="tool-grid"><section class="card"><h2>Run</h2>'
        f'<form method="post" action="/tools/{attr(tool.name)}/run" class="stack run-form" '
        f'data-stream="/tools/{attr(tool.name)}/run/stream">'
        f'<input type="hidden" name="csrf" value="{attr(csrf)}">'
        f"{render_fields(tool.schema, values, errors)}{confirm}"
        f'<div class="actions"><button type="submit" class="primary"{disabled}>{button}</button></div></form>'
        '</section><section class="card output" id="run-output" aria-live="polite">'
        '<h2>Log <span class="muted small">(the skill\'s stderr, live)</span></h2>'
        '<pre id="run-log" class="log"></pre>'
        f'<h2>Result</h2><div id="run-result">{placeholder}</div></section></div>'
    )
    return head + form + about


def outcome_html(body: Mapping[str, Any]) -> str:
    """What a finished or refused call shows under the form (the REST body of the call)."""
    if "result" in body:
        return f'{badge("ok")} <span class="muted">call {esc(body.get("call_id", ""))}</span>' + (
            f'<pre class="result">{pretty_json(body["result"])}</pre>'
        )
    code = str(body.get("code", "error"))
    parts = [f"{badge(code, 'failed')} <span>{esc(body.get('error', ''))}</span>"]
    ticket = body.get("ticket")
    if isinstance(ticket, dict) and ticket.get("id"):
        parts.append(
            f'<p>Ticket <a href="/approvals#t-{attr(ticket["id"])}" class="mono">{esc(ticket["id"])}</a> '
            f"is waiting for {int(ticket.get('required', 2))} approvals.</p>"
        )
    if body.get("stderr_tail"):
        parts.append(f'<pre class="log">{esc(chr(10).join(body["stderr_tail"]))}</pre>')
    return "".join(parts)


# ---------------------------------------------------------------------- approvals

_RULES = {
    "own_ticket": "Nobody approves their own ticket.",
    "duplicate_approver": "Each person approves a ticket once.",
    "already_approved": "A ticket takes exactly its required approvals.",
    "hook_refused": "An approval policy plugin refused this approval.",
    "expired": "A ticket expires if it is not run in time.",
    "rejected": "A rejected ticket is dead.",
    "executed": "A ticket runs once.",
    "not_approved": "A ticket runs only once it is approved.",
    "unknown": "There is no such ticket.",
    "no_identity": "Approvals need an identity.",
    "store": "The ticket store cannot be used.",
    "mismatch": "A ticket covers one exact call.",
}


def rule_text(reason: str, message: str) -> str:
    """A refusal in words: the rule, then what happened."""
    rule = _RULES.get(reason, "")
    return f"{rule} {message}" if rule else message


def _key(identity: str) -> str:
    return identity.strip().casefold()


def ticket_list(
    tickets: Sequence[Ticket],
    *,
    me: str,
    can_sign: bool,
    persona: str,
    csrf: str,
    running: Mapping[str, str],
    held: Collection[str] = (),
    now: float | None = None,
) -> str:
    """The tickets, pending first, each with its actions for ``me``.

    :param held: Tickets whose call the console holds, to run once approved.
    """
    now = time.time() if now is None else now
    if not tickets:
        return '<p class="empty">No tickets yet. A call that needs two-person approval opens one.</p>'
    order = {"pending": 0, "approved": 1}
    ordered = sorted(tickets, key=lambda t: (order.get(t.status, 2), -t.created))
    cards = [
        _ticket(t, me, can_sign, persona, csrf, running.get(t.id, ""), t.id in held, now) for t in ordered
    ]
    pending = sum(1 for t in tickets if t.status == "pending")
    return f'<p class="summary" id="pending-summary">{pending} pending · {len(tickets)} shown</p>' + "".join(
        cards
    )


def _ticket(
    t: Ticket, me: str, can_sign: bool, persona: str, csrf: str, running: str, held: bool, now: float
) -> str:
    mine = _key(t.requester) == _key(me)
    signed = _key(me) in {_key(a) for a in t.approvers}
    count = f"{len(t.approvals)} of {t.required}"
    left = ""
    if t.is_open:
        left = (
            f'<span class="time-left" data-expires="{t.expires:.0f}">{relative(t.expires - now)} left</span>'
        )
    approvals = "".join(
        f"<li><strong>{esc(a.approver)}</strong> at {esc(iso(a.time))}"
        + (f" — “{esc(a.note)}”" if a.note else "")
        + (f' <span class="muted">(SOP {esc(a.sop)})</span>' if a.sop else "")
        + "</li>"
        for a in t.approvals
    )
    facts = (
        f"<dt>Requested by</dt><dd><strong>{esc(t.requester)}</strong>{' (you)' if mine else ''}"
        f" as persona {esc(t.persona)}, {esc(iso(t.created))}</dd>"
        f"<dt>Why</dt><dd>{esc(t.reason or 'dangerous tool')}</dd>"
        f'<dt>Approvals</dt><dd><span class="count">{count}</span>'
        + (f"<ul>{approvals}</ul>" if approvals else "")
        + "</dd>"
    )
    if t.rejected_by:
        facts += (
            f"<dt>Rejected by</dt><dd>{esc(t.rejected_by)}"
            + (f" — “{esc(t.note)}”" if t.note else "")
            + "</dd>"
        )
    if t.executed:
        facts += (
            f"<dt>Executed</dt><dd>{esc(iso(t.executed))} as {esc(t.executed_by or '')} "
            f"(call {esc(t.call_id or '')})</dd>"
        )
    if running:
        facts += f'<dt>Console run</dt><dd class="progress">{esc(running)}</dd>'
    actions = _actions(t, mine, signed, can_sign, persona, csrf, held)
    return (
        f'<article class="ticket card t-{attr(t.status)}" id="t-{attr(t.id)}" '
        f'aria-labelledby="h-{attr(t.id)}">'
        f'<header><h2 id="h-{attr(t.id)}"><a href="/tools/{attr(t.tool)}">{esc(t.tool)}</a></h2> '
        f"{badge(t.tool_class or 'dangerous')} {badge(t.status)} "
        f'<span class="count big">{count}</span> {left}'
        f'<span class="mono small muted">ticket {esc(t.id)}</span></header>'
        f'<dl class="facts">{facts}</dl>'
        "<details open><summary>Arguments</summary>"
        f'<pre class="args">{pretty_json(dict(t.args))}</pre></details>'
        f"{actions}</article>"
    )


def _actions(t: Ticket, mine: bool, signed: bool, can_sign: bool, persona: str, csrf: str, held: bool) -> str:
    hidden = f'<input type="hidden" name="csrf" value="{attr(csrf)}">'
    if t.status != "pending":
        if t.status != "approved":
            return ""
        if held and mine:
            return (
                '<p class="note">Approved. The console holds the call you asked for: run it now, once.</p>'
                f'<form method="post" action="/approvals/{attr(t.id)}/run" class="inline">{hidden}'
                '<button type="submit" class="primary">Run it now</button></form>'
            )
        who = esc(t.requester)
        return f'<p class="note">Approved: {who} may run the call once, with ticket {esc(t.id)}.</p>'
    note_id = f"note-{attr(t.id)}"
    if mine:
        return (
            '<p class="note">You requested this ticket: two other people must approve it, '
            "so there is no approve button for you.</p>"
            f'<form method="post" action="/approvals/{attr(t.id)}/reject" class="inline">{hidden}'
            f'<label for="{note_id}">Note</label><input type="text" id="{note_id}" name="note" '
            'placeholder="why you withdraw it">'
            '<button type="submit" class="danger">Withdraw</button></form>'
        )
    if not can_sign:
        return (
            f'<p class="note">Your persona {esc(persona)} cannot approve: that takes a '
            "dual-sign-required persona (such as admin).</p>"
        )
    if signed:
        approve = '<p class="note">You approved this ticket; it needs another person.</p>'
        return (
            approve + f'<form method="post" action="/approvals/{attr(t.id)}/reject" class="inline">{hidden}'
            f'<label for="{note_id}">Note</label><input type="text" id="{note_id}" name="note">'
            '<button type="submit" class="danger">Reject</button></form>'
        )
    return (
        f'<form method="post" action="/approvals/{attr(t.id)}/approve" class="decide">{hidden}'
        f'<label for="{note_id}">Note <span class="muted">(kept with your decision)</span></label>'
        f'<input type="text" id="{note_id}" name="note" placeholder="e.g. backup checked">'
        '<div class="actions"><button type="submit" class="primary">Approve</button>'
        f'<button type="submit" class="danger" formaction="/approvals/{attr(t.id)}/reject">Reject</button>'
        "</div></form>"
    )


def approvals_body(list_html: str) -> str:
    """The approvals page around its (live) ticket list."""
    return (
        '<h1>Approvals <span class="muted">— two-person tickets, pending first</span></h1>'
        '<p class="live-note muted small" id="live-state">Updates live.</p>'
        f'<div id="tickets" data-part="/approvals?part=list">{list_html}</div>'
    )


# ---------------------------------------------------------------------- audit


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
                extra += f'<div class="small why">{esc(_short(e.error, 200))}</div>'
            suspect = report is not None and report.first_bad is not None and e.seq >= report.first_bad
            rows.append(
                f'<tr{" class=suspect" if suspect else ""}><td class="mono">{e.seq}</td>'
                f'<td class="small">{esc(iso(e.time))}</td>'
                f"<td>{esc(e.tool)}</td><td>{badge(e.tool_class) if e.tool_class else ''}</td>"
                f"<td>{who}</td><td>{badge(e.outcome)}{extra}</td>"
                f'<td class="mono small nowrap">{e.duration * 1000:.0f} ms</td>'
                f'<td class="mono small args-cell">{esc(_short(args, 160))}</td></tr>'
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
    outcomes = _options("outcome", [("", "any outcome"), *((o, o) for o in OUTCOMES)], query)
    limits = _options(
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
