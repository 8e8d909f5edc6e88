"""The console's approvals page: two-person tickets, approved or rejected as the signed-in identity.

Never one's own ticket: the page offers no button, and the store refuses anyway. A
call the console holds (:attr:`.Console.held`) runs in the background as its
requester once its ticket is approved here, or when its requester asks after an
approval given elsewhere; its progress shows on the ticket's card.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from ...core.identity import same_person
from ...errors import ApprovalError, OngridError
from ...gate.tickets import TicketStatus
from ...host.ticketlog import refused_approval
from .. import missing_extra
from ..rules import readable_tickets, too_long
from ..tokens import Principal
from . import approval_pages
from .guard import respond
from .sessions import Session
from .state import Console, Held

try:
    from starlette.concurrency import run_in_threadpool
    from starlette.requests import Request
    from starlette.responses import HTMLResponse, RedirectResponse, Response
except ImportError as exc:  # pragma: no cover - exercised without the extra
    raise missing_extra("server", "starlette") from exc

__all__ = ["approvals", "approve", "reject", "run_approved"]

logger = logging.getLogger(__name__)

_FINISHED = (TicketStatus.REJECTED, TicketStatus.EXECUTED, TicketStatus.EXPIRED)


async def approvals(console: Console, request: Request, session: Session, form: dict[str, str]) -> Response:
    """``GET /approvals``: the tickets this session may read, pending first (``?part=list``: the live list).

    Exactly the tickets ``GET /v1/approvals`` gives the same token
    (:func:`~ongrid_plugins.server.rules.readable_tickets`); a tool the persona may not
    see is named, not linked.
    """
    who = session.principal
    tickets = await run_in_threadpool(_tickets, console, who)
    gate = await run_in_threadpool(_gate_reasons, console, tickets)
    files = await run_in_threadpool(_server_digests, console, tickets)
    listing = approval_pages.ticket_list(
        tickets,
        me=who.identity,
        can_sign=console.signs(who),
        persona=who.persona,
        csrf=session.csrf,
        running=console.progress,
        held=set(console.held),
        visible=lambda name: console.sees(name, who),
        gate_reason=lambda t: gate.get((t.tool, t.persona), ""),
        server_digest=lambda t: files.get(t.tool),
    )
    if request.query_params.get("part") == "list":
        return HTMLResponse(listing)
    body = approval_pages.approvals_body(listing)
    return respond("Approvals", body, 200, session, current="approvals", live="approvals")


def _tickets(console: Console, who: Principal) -> list[Any]:
    try:
        tickets = console.host.tickets()
    except ApprovalError as exc:
        logger.error("console: %s", exc)
        return []
    for ticket in tickets:  # forget held calls whose ticket can no longer run
        if ticket.status in _FINISHED:
            console.held.pop(ticket.id, None)
    tickets = readable_tickets(console.host, tickets, who)  # the rule of GET /v1/approvals
    closed = [t for t in tickets if t.status in _FINISHED][:50]
    return [t for t in tickets if t.status not in _FINISHED] + closed


def _gate_reasons(console: Console, tickets: list[Any]) -> dict[tuple[str, str], str]:
    """What this server's gate says now of each (tool, persona) of ``tickets``: a ticket's
    ``reason`` equal to it is the gate's; any other is only what its requester sent."""
    reasons: dict[tuple[str, str], str] = {}
    for key in {(t.tool, t.persona) for t in tickets}:
        try:
            reasons[key] = console.host.decide(console.host.get(key[0]), key[1]).reason
        except OngridError:
            reasons[key] = ""
    return reasons


def _server_digests(console: Console, tickets: list[Any]) -> dict[str, str | None]:
    """The content digest of this server's copy of each tool of ``tickets`` now (``None``:
    it has none), to show approvers a ticket bound to other skill files."""
    from ...host.pipeline import digest_now

    digests: dict[str, str | None] = {}
    for name in {t.tool for t in tickets}:
        try:
            digests[name] = digest_now(console.host, console.host.get(name))
        except OngridError:
            digests[name] = None
    return digests


async def approve(console: Console, request: Request, session: Session, form: dict[str, str]) -> Response:
    """``POST /approvals/{ticket_id}/approve``: sign; the last approval starts a held call."""
    ticket_id = request.path_params["ticket_id"]
    who = session.principal
    if not console.signs(who):
        message = f"Your persona {who.persona} cannot approve: that takes a dual-sign-required persona."
        note = form.get("note", "")
        await run_in_threadpool(
            lambda: refused_approval(console.host, ticket_id, who.identity, note, message)
        )
        return await _refused(console, request, session, message)
    note = form.get("note", "")
    if too_long("note", note):  # refused, as over REST: never a silent cut of what is signed
        return await _too_long(console, request, session, note)
    try:
        ticket = await run_in_threadpool(
            lambda: console.host.approve(ticket_id, approver=who.identity, note=note)
        )
    except ApprovalError as exc:
        return await _refused(console, request, session, approval_pages.rule_text(exc.reason, str(exc)))
    if ticket.status == "approved":
        held = console.held.pop(ticket.id, None)
        if held is not None:
            _start_held(console, ticket.id, held)
            session.say(
                "ok", f"You approved ticket {ticket.id}: it is approved, and runs now for {held.caller}."
            )
        else:
            session.say(
                "ok", f"You approved ticket {ticket.id}: it is approved; {ticket.requester} may run it once."
            )
    else:
        session.say("ok", f"You approved ticket {ticket.id} ({len(ticket.approvals)} of {ticket.required}).")
    return RedirectResponse(f"/approvals#t-{ticket.id}", 303)


async def run_approved(
    console: Console, request: Request, session: Session, form: dict[str, str]
) -> Response:
    """The requester runs the call the console holds for an approved ticket (approved elsewhere)."""
    ticket_id = request.path_params["ticket_id"]
    held = console.held.get(ticket_id)
    if held is None:
        message = (
            f"The console holds no call for ticket {ticket_id} (it was asked elsewhere, or the server "
            "restarted): run it where it was asked, with its ticket."
        )
        return await _refused(console, request, session, message)
    if not same_person(held.caller, session.principal.identity):
        return await _refused(
            console, request, session, f"Only {held.caller}, who asked for it, runs this call."
        )
    console.held.pop(ticket_id, None)
    _start_held(console, ticket_id, held)
    session.say("ok", f"Running the approved call of ticket {ticket_id}.")
    return RedirectResponse(f"/approvals#t-{ticket_id}", 303)


def _start_held(console: Console, ticket_id: str, held: Held) -> None:
    console.progress[ticket_id] = f"running now, as {held.caller}"
    task = asyncio.ensure_future(_run_held(console, ticket_id, held))
    console.tasks.add(task)
    task.add_done_callback(console.tasks.discard)


async def _run_held(console: Console, ticket_id: str, held: Held) -> None:
    try:
        result = await console.host.acall(
            held.tool, held.args, persona=held.persona, caller=held.caller, ticket=ticket_id
        )
        console.progress[ticket_id] = f"ran: {result.outcome}"
    except OngridError as exc:
        console.progress[ticket_id] = f"could not run: {exc}"
    except Exception as exc:  # a background task: log, never lose it silently
        logger.exception("console: the approved call of ticket %s crashed", ticket_id)
        console.progress[ticket_id] = f"crashed: {exc!r}"


async def reject(console: Console, request: Request, session: Session, form: dict[str, str]) -> Response:
    """``POST /approvals/{ticket_id}/reject``: reject it (a signer), or withdraw one's own."""
    ticket_id = request.path_params["ticket_id"]
    who = session.principal
    note = form.get("note", "")
    if too_long("note", note):
        return await _too_long(console, request, session, note)
    try:
        ticket = await run_in_threadpool(console.host.ticket, ticket_id)
        if not console.signs(who) and not same_person(ticket.requester, who.identity):
            message = (
                "Only a dual-sign-required persona, or the requester withdrawing it, may reject a ticket."
            )
            return await _refused(console, request, session, message)
        ticket = await run_in_threadpool(
            lambda: console.host.reject(ticket_id, approver=who.identity, note=note)
        )
    except ApprovalError as exc:
        return await _refused(console, request, session, approval_pages.rule_text(exc.reason, str(exc)))
    console.held.pop(ticket.id, None)
    session.say("ok", f"You rejected ticket {ticket.id}: it can never run.")
    return RedirectResponse(f"/approvals#t-{ticket.id}", 303)


async def _refused(
    console: Console, request: Request, session: Session, message: str, status: int = 403
) -> Response:
    session.say("error", message)
    response = await approvals(console, request, session, {})
    response.status_code = status
    return response


async def _too_long(console: Console, request: Request, session: Session, note: str) -> Response:
    """The page again with a 422 saying the note is over :data:`MAX_TEXT` (nothing was changed)."""
    message = f"Nothing was changed: the {too_long('note', note)}."
    return await _refused(console, request, session, message, status=422)
