"""The console's approvals page as HTML text: ticket cards, pending first, each with its actions (no I/O)."""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Mapping, Sequence

from ...gate.tickets import Ticket
from .html import attr, badge, esc, iso, pretty_json, relative

__all__ = ["NOTE_LIMIT", "approvals_body", "rule_text", "ticket_list"]

#: The longest note the form takes: ``server.rules.MAX_TEXT``, which the HTML modules may not
#: import (they import no server module); ``tests/test_console.py`` checks the two agree.
NOTE_LIMIT = 2000


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
    "too_many_open": "One requester holds a limited number of open tickets.",
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
    visible: Callable[[str], bool] = lambda name: True,
    gate_reason: Callable[[Ticket], str] = lambda ticket: "",
    server_digest: Callable[[Ticket], str | None] = lambda ticket: "",
) -> str:
    """The tickets, pending first, each with its actions for ``me``.

    :param held: Tickets whose call the console holds, to run once approved.
    :param visible: Whether the reader may see a tool (its name is linked to its page only then).
    :param gate_reason: What this server's gate says of a ticket's tool and persona: a ticket
        whose reason says the same shows it as the gate's, any other as its requester's words.
    :param server_digest: This server's digest of a ticket's skill files now (``None``: it
        has no such tool; ``""``: unknown); a ticket bound to others says so.
    """
    now = time.time() if now is None else now
    if not tickets:
        return '<p class="empty">No tickets yet. A call that needs two-person approval opens one.</p>'
    order = {"pending": 0, "approved": 1}
    ordered = sorted(tickets, key=lambda t: (order.get(t.status, 2), -t.created))
    cards = [
        _ticket(
            t,
            me,
            can_sign,
            persona,
            csrf,
            running.get(t.id, ""),
            t.id in held,
            now,
            visible(t.tool),
            gate_reason(t),
            server_digest(t),
        )
        for t in ordered
    ]
    pending = sum(1 for t in tickets if t.status == "pending")
    return f'<p class="summary" id="pending-summary">{pending} pending · {len(tickets)} shown</p>' + "".join(
        cards
    )


def _ticket(
    t: Ticket,
    me: str,
    can_sign: bool,
    persona: str,
    csrf: str,
    running: str,
    held: bool,
    now: float,
    linked: bool,
    gate: str,
    files: str | None = "",
) -> str:
    mine = _key(t.requester) == _key(me)
    signed = _key(me) in {_key(a) for a in t.approvers}
    count = f"{len(t.approvals)} of {t.required}"
    left = ""
    if t.is_open:
        left = (
            f'<span class="time-left" data-expires="{t.expires:.0f}">{relative(t.expires - now)} left</span>'
        )
    facts = _facts(t, mine, count, running, gate) + _files(t, files)
    actions = _actions(t, mine, signed, can_sign, persona, csrf, held)
    name = f'<a href="/tools/{attr(t.tool)}">{esc(t.tool)}</a>' if linked else esc(t.tool)
    return (
        f'<article class="ticket card t-{attr(t.status)}" id="t-{attr(t.id)}" '
        f'aria-labelledby="h-{attr(t.id)}">'
        f'<header><h2 id="h-{attr(t.id)}">{name}</h2> '
        f"{badge(t.tool_class or 'dangerous')} {badge(t.status)} "
        f'<span class="count big">{count}</span> {left}'
        f'<span class="mono small muted">ticket {esc(t.id)}</span></header>'
        f'<dl class="facts">{facts}</dl>'
        "<details open><summary>Arguments</summary>"
        f'<pre class="args">{pretty_json(dict(t.args))}</pre></details>'
        f"{actions}</article>"
    )


def _facts(t: Ticket, mine: bool, count: str, running: str, gate: str) -> str:
    """The ticket's facts: who asked and why, the approvals, the rejection, the execution, the console run."""
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
        f"<dt>Needs</dt><dd>two-person approval: a {esc(t.tool_class or 'dangerous')} tool</dd>"
        + _why(t.reason, gate)
        + f'<dt>Approvals</dt><dd><span class="count">{count}</span>'
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
    return facts


def _files(t: Ticket, server: str | None) -> str:
    """A warning when the ticket binds skill files other than this server's copy: approvers
    read this server's tool, the host that runs the ticket has other files."""
    if not t.skill_digest or server == "" or server == t.skill_digest:
        return ""
    have = "this server has no such tool" if server is None else f"this server's copy is {esc(server[:16])}…"
    return (
        '<dt>Skill files</dt><dd class="warn"><strong>Bound to other skill files than this server’s '
        f'copy</strong>: the ticket binds digest <span class="mono">{esc(t.skill_digest[:16])}…</span>, '
        f"{have}. The host that runs it has another version: check it before approving.</dd>"
    )


def _why(reason: str, gate: str) -> str:
    """The gate's reason when the ticket's reason is what this server's gate says; else the
    requester's words, quoted as theirs (``POST /v1/approvals`` takes any text)."""
    if reason and reason == gate:
        return f"<dt>Gate’s reason</dt><dd>{esc(reason)}</dd>"
    if not reason:
        return '<dt>Requester’s reason</dt><dd><span class="muted">none given</span></dd>'
    return (
        f'<dt>Requester’s reason</dt><dd><span class="said">“{esc(reason)}”</span> '
        '<span class="muted small">(their words, not the gate’s)</span></dd>'
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
            f'maxlength="{NOTE_LIMIT}" placeholder="why you withdraw it">'
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
            f'<label for="{note_id}">Note</label>'
            f'<input type="text" id="{note_id}" name="note" maxlength="{NOTE_LIMIT}">'
            '<button type="submit" class="danger">Reject</button></form>'
        )
    return (
        f'<form method="post" action="/approvals/{attr(t.id)}/approve" class="decide">{hidden}'
        f'<label for="{note_id}">Note <span class="muted">(kept with your decision)</span></label>'
        f'<input type="text" id="{note_id}" name="note" maxlength="{NOTE_LIMIT}" '
        'placeholder="e.g. backup checked">'
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
