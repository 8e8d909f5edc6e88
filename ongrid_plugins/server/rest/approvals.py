"""``/v1/approvals``: two-person tickets, read, opened, approved, rejected and claimed over HTTP.

The token's identity signs (``approver``) and asks (``requester``), so the store's rules
-- never your own ticket, never twice -- hold between tokens. Tickets are read as the
audit log is, by a dual-sign-required persona, or by their requester; a ticket another
token may not read is answered as if absent.
"""

from __future__ import annotations

import re
from typing import Any

from ...audit.rows import clip
from ...core.echo import MAX_ECHO, echo
from ...core.identity import same_person
from ...errors import ApprovalError, InvalidArguments
from ...gate.tickets import STATUSES, Ticket
from ...host.pipeline import digest_now
from ...host.ticketlog import record, refused_approval
from ...models import CallRequest, Decision, Outcome, Tool, Verdict, args_digest
from ...schema.arguments import check_arguments
from ...schema.redact import redact
from .. import missing_extra
from ..responses import ApiError, api_error
from ..rules import may_read_ticket, readable_tickets
from ..tokens import Principal
from .api import Api
from .bodies import fields, query, required, short_texts

try:
    from starlette.concurrency import run_in_threadpool
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response
except ImportError as exc:  # pragma: no cover - exercised without the extra
    raise missing_extra("server", "starlette") from exc

__all__ = ["approve", "claim", "get_approval", "list_approvals", "open_approval", "reject"]

_HEX_DIGEST = re.compile(r"[0-9a-f]{64}")


async def list_approvals(api: Api, request: Request, who: Principal) -> Response:
    """``GET /v1/approvals``: the tickets this token may read, newest first."""
    status = query(request, "status").get("status")
    if status is not None and status not in STATUSES:
        raise ApiError(400, "bad_request", f"status must be one of {', '.join(STATUSES)}")
    tickets = await api.in_thread(api.host.tickets, status)
    tickets = readable_tickets(api.host, tickets, who)  # as the audit log is, or by their requester
    return JSONResponse({"items": [t.to_dict() for t in tickets], "total": len(tickets)})


async def get_approval(api: Api, request: Request, who: Principal) -> Response:
    """``GET /v1/approvals/{ticket_id}``: one ticket."""
    query(request)
    ticket_id = request.path_params["ticket_id"]
    return JSONResponse((await _readable(api, ticket_id, who)).to_dict())


async def _readable(api: Api, ticket_id: str, who: Principal) -> Ticket:
    """The ticket, if ``who`` may read it; one it may not is answered as if absent (404), so
    no route tells a token that someone else's ticket exists, or who asked for it."""
    ticket: Ticket = await api.in_thread(api.host.ticket, ticket_id)
    if not may_read_ticket(api.host, ticket, who):
        message = f"no approval ticket {echo(ticket_id)} (see `ongrid-skills approvals list`)"
        raise api_error(ApprovalError("unknown", ticket_id[:MAX_ECHO], message))  # as if absent
    return ticket


async def approve(api: Api, request: Request, who: Principal) -> Response:
    """``POST /v1/approvals/{ticket_id}/approve``: sign the ticket as the token's identity."""
    ticket_id = request.path_params["ticket_id"]
    body = short_texts(
        fields(await api.json(request), {"note": str, "sop": (str, type(None))}), "note", "sop"
    )
    if not api.signs(who):
        await _readable(api, ticket_id, who)  # a ticket it may not read: 404, and no row for it
        message = f"persona {who.persona} may not approve: approving needs a dual-sign-required persona"
        note = body.get("note", "")
        await run_in_threadpool(lambda: refused_approval(api.host, ticket_id, who.identity, note, message))
        raise ApiError(403, "forbidden", message)
    ticket = await api.in_thread(
        lambda: api.host.approve(
            ticket_id, approver=who.identity, note=body.get("note", ""), sop=body.get("sop")
        )
    )
    return JSONResponse(ticket.to_dict())


async def reject(api: Api, request: Request, who: Principal) -> Response:
    """``POST /v1/approvals/{ticket_id}/reject``: reject it, or withdraw one's own."""
    ticket_id = request.path_params["ticket_id"]
    body = short_texts(fields(await api.json(request), {"note": str}), "note")
    await _readable(api, ticket_id, who)  # its readers: a signer, or its requester (withdrawing it)
    ticket = await api.in_thread(
        lambda: api.host.reject(ticket_id, approver=who.identity, note=body.get("note", ""))
    )
    return JSONResponse(ticket.to_dict())


async def open_approval(api: Api, request: Request, who: Principal) -> Response:
    """Open (or find) a ticket for a call another host wants to make, requested by the token's identity.

    The server works out the digest and the redaction from the checked arguments
    (schema defaults filled in) itself, as execution does, so what approvers read is
    what the ticket covers and what will run.
    """
    allowed = {
        "tool": str,
        "params": dict,
        "persona": str,
        "reason": str,
        "skill_digest": str,
        "profile": str,
    }
    body = required(fields(await api.json(request), allowed), "tool", "params", "persona")
    short_texts(body, "reason")
    tool = api.tool(body["tool"], who)
    if body["persona"] not in {p.name for p in await run_in_threadpool(api.host.personas)}:
        raise ApiError(400, "bad_request", f"persona {body['persona']!r} does not exist on this server")
    checked, text, errors = check_arguments(tool, body["params"])
    if errors:  # approvers would sign a call that can never run
        raise api_error(InvalidArguments(tool.name, errors))
    persona = api.host.persona(body["persona"])
    asked = CallRequest(
        tool, checked, persona, "approval-check", args_digest(tool.name, checked), text, who.identity
    )
    decision = await run_in_threadpool(api.host.decide, tool, persona, asked)  # the gate, these arguments
    _needs_two_people(decision, tool, body["persona"])
    # The call as it will run -- defaults filled in, as the gate saw it and as execute digests
    # it -- or the ticket could never be spent (mismatch) and approvers would read another call.
    digest = asked.args_digest
    shown, _paths = redact(tool.schema, checked)
    profile, skill_digest = _binding(api, tool, body)
    ticket = await api.in_thread(
        lambda: api.host.approvals.open_ticket(
            tool=tool.name,
            args_digest=digest,
            persona=body["persona"],
            requester=who.identity,
            args=shown,
            tool_class=tool.tool_class.value,
            reason=body.get("reason", ""),
            profile=profile,
            skill_digest=skill_digest,
        )
    )
    # The gate's dual_sign decision on this request, as execute records it: the row the
    # audit check of its approvals compares the arguments with when it is spent.
    gate = {"verdict": decision.verdict.value, "plugin": decision.plugin}
    await api.in_thread(
        lambda: record(api.host, ticket, Outcome.NEEDS_APPROVAL, who.identity, decision.reason, **gate)
    )
    return JSONResponse(ticket.to_dict())


async def claim(api: Api, request: Request, who: Principal) -> Response:
    """Spend an approved ticket for the call its requester's host is about to make."""
    ticket_id = request.path_params["ticket_id"]
    allowed = {"tool": str, "args_digest": str, "persona": str, "call_id": str}
    body = fields(await api.json(request), {**allowed, "skill_digest": str, "profile": str})
    required(body, *allowed)
    ticket = await _readable(api, ticket_id, who)
    if not same_person(ticket.requester, who.identity):
        message = f"only the requester of ticket {ticket_id} ({ticket.requester}) may run it over the server"
        raise ApiError(403, "forbidden", message)
    profile, skill_digest = _binding(api, api.tool(body["tool"], who), body)
    spent = await api.in_thread(lambda: _spend(api, ticket, who, body, profile, skill_digest))
    return JSONResponse(spent.to_dict())


def _spend(
    api: Api, ticket: Ticket, who: Principal, body: dict[str, Any], profile: str, skill: str
) -> Ticket:
    """Claim ``ticket`` for the call ``body`` describes, and record the spend -- or its
    refusal -- in the audit log, as execute records ``ok`` or ``ticket_refused``."""
    call = f"call {clip(body['call_id'])} on the requester's host"
    try:
        spent = api.host.approvals.claim(
            ticket.id,
            tool=body["tool"],
            args_digest=body["args_digest"],
            persona=body["persona"],
            caller=who.identity,
            call_id=body["call_id"],
            profile=profile,
            skill_digest=skill,
        )
    except ApprovalError as exc:
        record(api.host, ticket, Outcome.TICKET_REFUSED, who.identity, call, error=str(exc), approvers=[])
        raise
    record(api.host, spent, Outcome.CLAIM, who.identity, call)
    return spent


def _needs_two_people(decision: Decision, tool: Tool, persona: str) -> None:
    """Refuse to open a ticket no one could ever spend: the gate lets the call run without
    one (409), or denies it whatever the approvals (403)."""
    if decision.verdict is Verdict.DUAL_SIGN:
        return
    said = f"the gate says {decision.verdict.value}: {decision.reason}"
    if decision.verdict is Verdict.DENY:
        raise ApiError(403, "denied", f"persona {persona!r} may not call {tool.name!r} ({said})")
    message = f"{tool.name!r} called as {persona!r} needs no two-person approval ({said}); call it"
    raise ApiError(409, "no_approval_needed", message + " without a ticket")


def _binding(api: Api, tool: Tool, body: dict[str, Any]) -> tuple[str, str]:
    """The sandbox profile and skill digest a ticket is bound to, or spent under: the ones the
    requester's host sends (the files and profile *it* runs), else this server's own view.

    A host that keeps its tickets here (``approvals_url``) runs the call itself, so its
    files are the ones approvers' signatures must cover: the server's copy may differ.
    """
    sent = []
    for name in ("profile", "skill_digest"):
        value = body.get(name)
        if value is not None and not _HEX_DIGEST.fullmatch(value) and value != "":
            message = f"field {name!r} must be a sha256 digest (64 lower-case hex digits), or empty"
            raise ApiError(400, "bad_request", message)
        sent.append(value)
    profile = sent[0] if sent[0] is not None else api.host.sandbox_profile(tool).digest
    skill_digest = sent[1] if sent[1] is not None else digest_now(api.host, tool)
    return profile, skill_digest
