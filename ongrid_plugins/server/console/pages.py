"""The console's sign-in, catalog and tool pages as HTML text, from values the routes already fetched.

No I/O here. The approvals page is :mod:`.approval_pages`, the audit page :mod:`.audit_pages`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ...models import Decision, Tool
from .forms import render_fields
from .html import attr, badge, esc, options, pretty_json, short

__all__ = ["catalog_body", "login_body", "outcome_html", "tool_body"]


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
    trust: Mapping[str, Mapping[str, Any] | None] | None = None,
) -> str:
    """The catalog: the filter form and one row per tool (``trust``: each tool's pack signer and consent)."""
    head = _catalog_head(len(rows), total, query, categories, persona)
    if not rows:
        return head + '<p class="empty">No tool matches these filters.</p>'
    body = [_catalog_row(tool, decision, (trust or {}).get(tool.name)) for tool, decision in rows]
    return (
        head + '<div class="table-wrap"><table id="tools"><caption class="sr">Tools</caption><thead><tr>'
        '<th scope="col">Tool</th><th scope="col">What it does</th><th scope="col">Class</th>'
        '<th scope="col">Category</th><th scope="col">From</th><th scope="col">Availability</th>'
        '<th scope="col">Needs</th></tr></thead>'
        f"<tbody>{''.join(body)}</tbody></table></div>"
        '<p class="empty" id="no-match" hidden>No tool matches this filter.</p>'
    )


def _catalog_head(
    shown: int, total: int, query: Mapping[str, str], categories: Sequence[str], persona: str
) -> str:
    """The catalog's title and its filter form, filled in from ``query``."""
    q = query.get("q", "")
    classes = options(
        "class",
        [("", "any class"), ("safe", "safe"), ("mutating", "mutating"), ("dangerous", "dangerous")],
        query,
    )
    cats = options("category", [("", "any category"), *((c, c) for c in categories)], query)
    avail = options(
        "available", [("", "available or not"), ("yes", "available"), ("no", "unavailable")], query
    )
    return (
        f'<h1>Catalog <span class="muted">— {shown} of {total} tools persona '
        f"<strong>{esc(persona)}</strong> may call</span></h1>"
        '<form method="get" action="/" class="filters" role="search">'
        '<div><label for="q">Filter</label>'
        f'<input type="search" id="q" name="q" value="{attr(q)}" '
        'placeholder="name, words of the description" '
        'data-filter-rows="#tools tbody tr"></div>'
        f'<div><label for="class">Class</label><select id="class" name="class">{classes}</select></div>'
        '<div><label for="category">Category</label>'
        f'<select id="category" name="category">{cats}</select></div>'
        f'<div><label for="available">Availability</label><select id="available" name="available">'
        f"{avail}</select></div>"
        '<div class="actions"><button type="submit">Apply</button> <a href="/">Clear</a></div></form>'
    )


def _pack_trust(pack: Mapping[str, Any] | None) -> str:
    """Who signed the tool's pack and whether its consent holds, under its origin."""
    if not pack:
        return ""
    signer = f"signed by {pack['signer']}" if pack.get("signer") else "unsigned"
    consent = "consented" if pack.get("consent") == "given" else "needs consent again"
    return f'<div class="small pack-trust">{esc(signer)} · {esc(consent)}</div>'


def _catalog_row(tool: Tool, decision: Decision, pack: Mapping[str, Any] | None = None) -> str:
    """One tool of the catalog: name, description, class, category, origin, availability, needs."""
    needs = _NEEDS.get(decision.verdict.value, "")
    available = (
        badge("available", "ok")
        if tool.available
        else badge("unavailable", "failed") + f' <span class="why">{esc("; ".join(tool.unavailable))}</span>'
    )
    words = f"{tool.name} {tool.display_name} {tool.description} {tool.category} {tool.skill}".lower()
    return (
        f'<tr data-search="{attr(words)}">'
        f'<td><a href="/tools/{attr(tool.name)}">'
        f"<strong>{esc(tool.display_name or tool.name)}</strong></a>"
        + (
            f'<div class="mono small">{esc(tool.name)}</div>'
            if tool.display_name not in ("", tool.name)
            else ""
        )
        + "</td>"
        f'<td class="desc">{esc(short(tool.description, 160))}</td>'
        f"<td>{badge(tool.tool_class.value)}</td>"
        f"<td>{esc(tool.category)}</td>"
        f'<td class="small">{esc(tool.provenance or tool.skill)}{_pack_trust(pack)}</td>'
        f"<td>{available}</td>"
        f"<td>{esc(needs) or '<span class=muted>nothing</span>'}</td></tr>"
    )


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
    head = _tool_head(tool, needs)
    about = _tool_about(tool, decision, needs, digest, sandbox)
    if verdict == "deny":
        return head + '<p class="flash flash-error">Your persona may not call this tool.</p>' + about
    return head + _run_form(tool, verdict, csrf, values, errors, outcome) + about


def _tool_head(tool: Tool, needs: str) -> str:
    """The tool's name, its one-line summary, its description and when to use it."""
    when = f"<p><strong>When to use:</strong> {esc(tool.when_to_use)}</p>" if tool.when_to_use else ""
    summary = [badge(tool.tool_class.value), esc(tool.category)]
    summary.append(badge("available", "ok") if tool.available else badge("unavailable", "failed"))
    summary.append(esc("needs " + needs) if needs else esc("runs when asked"))
    return (
        f'<p class="crumbs"><a href="/">Catalog</a> › {esc(tool.name)}</p>'
        f"<h1>{esc(tool.display_name or tool.name)}</h1>"
        f'<p class="summary-line">{" · ".join(summary)}</p>'
        f'<p class="lead">{esc(tool.description)}</p>{when}'
    )


def _tool_about(tool: Tool, decision: Decision, needs: str, digest: str, sandbox: str) -> str:
    """The facts about a tool: class, needs, origin, availability, sandbox, digest, timeout."""
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
    return f'<section class="card"><h2>About</h2><dl class="facts">{dl}</dl></section>'


def _run_form(
    tool: Tool,
    verdict: str,
    csrf: str,
    values: Mapping[str, str] | None,
    errors: Mapping[str, str] | None,
    outcome: str,
) -> str:
    """The run form (its fields, the confirmation a verdict asks for) and the output beside it."""
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
    return (
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
