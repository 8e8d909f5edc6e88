"""The OpenAPI 3.1 document of the REST API (served at ``/openapi.json``).

Written by hand next to the routes in :mod:`.rest`; ``tests/test_rest.py`` fuzzes a
running server from it (schemathesis), which fails when a route answers with a status or
a body this document does not describe.
"""

from __future__ import annotations

import copy
from typing import Any

import attrs

from ..audit import OUTCOMES
from ..gate.tickets import STATUSES

__all__ = ["document"]

_STR = {"type": "string"}
_NULLABLE_STR = {"type": ["string", "null"]}
#: What a person writes on a ticket (server.rules.MAX_TEXT characters at most; longer is a 422 too_long).
_TEXT = {"type": "string", "maxLength": 2000}
_INT = {"type": "integer"}
_NULLABLE_INT = {"type": ["integer", "null"]}
_STRS = {"type": "array", "items": _STR}
_CLASS = {"type": "string", "enum": ["safe", "mutating", "dangerous"]}
_TICKET_STATUS = list(STATUSES)


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def _obj(
    properties: dict[str, Any], required: list[str] | None = None, closed: bool = False
) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "object", "properties": properties}
    out["required"] = list(properties) if required is None else required
    if closed:
        out["additionalProperties"] = False
    return out


def _list_of(name: str) -> dict[str, Any]:
    return _obj({"items": {"type": "array", "items": _ref(name)}, "total": _INT})


_SCHEMAS: dict[str, Any] = {
    "Error": {
        "type": "object",
        "properties": {"error": _STR, "code": _STR},
        "required": ["error", "code"],
        "description": "Every error: a message, a stable code, and details that depend on the code.",
    },
    "Decision": _obj(
        {
            "verdict": {"type": "string", "enum": ["allow", "confirm", "dual_sign", "deny"]},
            "reason": _STR,
            "plugin": _STR,
            "needs": {"type": "string", "enum": ["-", "confirmation", "two-person approval", "denied"]},
        }
    ),
    "ToolSummary": _obj(
        {
            "name": _STR,
            "display_name": _STR,
            "description": _STR,
            "when_to_use": _STR,
            "class": _CLASS,
            "category": _STR,
            "skill": _STR,
            "available": {"type": "boolean"},
            "digest": {**_STR, "description": "the skill's content digest (sha256 over its files)"},
            "stale": {**_STR, "description": "why the last good version is served (empty: current)"},
            "decision": _ref("Decision"),
            "pack": {
                "anyOf": [_ref("PackTrust"), {"type": "null"}],
                "description": "the installed or pip pack of the tool, its signer and consent (null: none)",
            },
        }
    ),
    "PackTrust": _obj(
        {
            "name": _STR,
            "kind": {"type": "string", "enum": ["installed", "pip"]},
            "signer": {**_STR, "description": "the trusted signer (docs/trust.md); empty: unsigned"},
            "signed": {"type": "boolean"},
            "consent": {
                "type": "string",
                "enum": ["given", "needed"],
                "description": "needed: the tool asks for more than was consented and is unavailable",
            },
            "consent_version": _STR,
            "consented_by": _STR,
            "consented_at": _STR,
        }
    ),
    "Tool": {
        "allOf": [
            _ref("ToolSummary"),
            _obj(
                {
                    "kind": _STR,
                    "schema": {"type": "object", "description": "JSON Schema of the params object"},
                    "timeout_seconds": {"type": "number"},
                    "unavailable": _STRS,
                    "provenance": _STR,
                }
            ),
        ]
    },
    "ToolList": _list_of("ToolSummary"),
    "ExecuteRequest": _obj(
        {
            "params": {"type": "object", "description": "The skill's arguments (checked against its schema)"},
            "confirm": {
                "type": ["boolean", "string"],
                "description": "true, or the args_digest of a needs_confirmation error, to confirm a change",
            },
            "ticket": {**_NULLABLE_STR, "description": "an approved two-person ticket for exactly this call"},
            "timeout": {
                "type": ["number", "null"],
                "exclusiveMinimum": 0,
                "description": "seconds; can only shorten the skill's own timeout",
            },
        },
        required=[],
        closed=True,
    ),
    "ExecuteResult": {
        "anyOf": [
            _obj({"result": {}, "status": {"const": "ok"}, "call_id": _STR, "duration": {"type": "number"}}),
            {
                **_obj(
                    {
                        "error": _STR,
                        "code": _STR,
                        "status": _STR,
                        "call_id": _STR,
                        "duration": {"type": "number"},
                        "exit_code": _NULLABLE_INT,
                        "signal": _NULLABLE_INT,
                        "timed_out": {"type": "boolean"},
                        "stderr_tail": _STRS,
                        "value": {},
                    }
                ),
                "description": "The skill ran and failed (exit status, timeout, bad output).",
            },
        ]
    },
    "Approval": _obj({"approver": _STR, "note": _STR, "sop": _NULLABLE_STR, "time": _STR}),
    "Ticket": _obj(
        {
            "id": _STR,
            "tool": _STR,
            "args_digest": _STR,
            "persona": _STR,
            "requester": _STR,
            "required": _INT,
            "approvals": {"type": "array", "items": _ref("Approval")},
            "approvers": _STRS,
            "status": {"type": "string", "enum": _TICKET_STATUS},
            "created": _STR,
            "expires": _STR,
            "rejected_by": _NULLABLE_STR,
            "note": _STR,
            "args": {"type": "object", "description": "the call's arguments, secrets redacted"},
            "tool_class": _STR,
            "reason": _STR,
            "executed": _NULLABLE_STR,
            "executed_by": _NULLABLE_STR,
            "call_id": _NULLABLE_STR,
            "skill_digest": {**_STR, "description": "the skill's digest the ticket is bound to"},
        }
    ),
    "TicketList": _list_of("Ticket"),
    "ApproveRequest": _obj(
        {"note": _TEXT, "sop": {**_NULLABLE_STR, "maxLength": 2000}}, required=[], closed=True
    ),
    "RejectRequest": _obj({"note": _TEXT}, required=[], closed=True),
    "OpenTicketRequest": _obj(
        {
            "tool": _STR,
            "params": {"type": "object", "description": "the call's arguments (the server redacts secrets)"},
            "persona": _STR,
            "reason": {**_TEXT, "description": "the requester's own words, shown to approvers as theirs"},
        },
        required=["tool", "params", "persona"],
        closed=True,
    ),
    "ClaimRequest": _obj(
        {"tool": _STR, "args_digest": _STR, "persona": _STR, "call_id": _STR},
        required=["tool", "args_digest", "persona", "call_id"],
        closed=True,
    ),
    "AuditEntry": _obj(
        {
            "seq": _INT,
            "time": {"type": "number"},
            "call_id": _STR,
            "tool": _STR,
            "persona": _STR,
            "caller": _STR,
            "outcome": _STR,
            "verdict": _STR,
            "hash": _STR,
            "prev_hash": _STR,
            "skill_digest": {**_NULLABLE_STR, "description": "the skill's digest at the call"},
        }
    ),
    "AuditList": _obj(
        {
            "items": {"type": "array", "items": _ref("AuditEntry")},
            "total": _INT,
            "next_since": {
                "type": ["integer", "null"],
                "description": "a full page: ask again with since=next_since for the rows after it",
            },
        }
    ),
}


def _json(name: str, description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": _ref(name)}}}


_ERRORS = {
    "400": "the body or a query parameter is malformed, or the params are not UTF-8 text (a lone surrogate)",
    "401": "no token, or not a valid one",
    "403": "the persona may not do this (the reason says why)",
    "404": "no such skill or ticket, or one this token may not see",
    "409": "needs a confirmation (args_digest) or a two-person approval (ticket), or the ticket does not fit",
    "408": "the body did not arrive within the server's body timeout",
    "413": "the body is too large",
    "422": "the params do not match the skill's schema (errors: path and message), or a text field "
    "(reason, note, sop) is longer than 2000 characters (too_long: field and limit)",
    "429": "too many calls are running (for this token, or in all); retry after Retry-After seconds",
    "503": "the audit log or the ticket store cannot be written",
}


def _responses(ok: dict[str, Any], *codes: str) -> dict[str, Any]:
    out: dict[str, Any] = {"200": ok}
    for code in codes:
        out[code] = _json("Error", _ERRORS[code])
    return out


def _name(param: str) -> dict[str, Any]:
    return {"name": param, "in": "path", "required": True, "schema": {"type": "string", "pattern": "^[^/]+$"}}


def _query(name: str, schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {"name": name, "in": "query", "required": False, "schema": schema, "description": description}


_CALL_ERRORS = ("400", "401", "403", "404", "408", "409", "413", "422", "429", "503")
_TICKET_ERRORS = ("400", "401", "403", "404", "408", "409", "413", "503")
_SIGN_ERRORS = (*_TICKET_ERRORS, "422")
_SSE_CALL = {
    "description": "server-sent events: start, log (one per stderr line), exit, then result or error",
    "content": {"text/event-stream": {"schema": _STR}},
}
_SSE_CATALOG = {
    "description": "server-sent events: ready, then added / changed / removed / stale, "
    "each with the skill's name, digest, previous digest, path and tools",
    "content": {"text/event-stream": {"schema": _STR}},
}


@attrs.frozen
class _Op:
    """One operation of the document: a row of :data:`_OPERATIONS`."""

    path: str
    method: str
    summary: str
    ok: dict[str, Any]
    """The 200 answer."""
    errors: tuple[str, ...]
    """The error statuses it may answer (described by :data:`_ERRORS`)."""
    params: tuple[dict[str, Any], ...] = ()
    body: str = ""
    """The schema of its JSON body, if it takes one."""
    body_required: bool = False
    extra: dict[str, Any] = attrs.field(factory=dict)
    """Keys written before ``responses`` (``security``, ``x-endless-stream``)."""

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"summary": self.summary}
        if self.params:
            out["parameters"] = list(self.params)
        if self.body:
            body = {"required": False, "content": {"application/json": {"schema": _ref(self.body)}}}
            out["requestBody"] = {**body, "required": True} if self.body_required else body
        out.update(self.extra)
        out["responses"] = _responses(self.ok, *self.errors)
        return out


_HEALTHZ = {
    "description": "alive",
    "content": {"application/json": {"schema": _obj({"status": {"const": "ok"}})}},
}
_OPERATIONS = (
    # ------------------------------------------------------------ open
    _Op("/healthz", "get", "Liveness (no token needed)", _HEALTHZ, (), extra={"security": []}),
    # ------------------------------------------------------------ skills
    _Op(
        "/v1/skills",
        "get",
        "The tools the token's persona may call",
        _json("ToolList", "the tools"),
        ("400", "401"),
        params=(_query("category", _STR, "only this category"), _query("class", _CLASS, "only this class")),
    ),
    _Op(
        "/v1/skills/{name}",
        "get",
        "One tool: its schema, class and what the persona needs to call it",
        _json("Tool", "the tool"),
        ("401", "404"),
        params=(_name("name"),),
    ),
    _Op(
        "/v1/skills/{name}/execute",
        "post",
        "Run a tool as the token's persona and identity",
        _json("ExecuteResult", "the result, or the skill's failure"),
        _CALL_ERRORS,
        params=(_name("name"),),
        body="ExecuteRequest",
    ),
    _Op(
        "/v1/skills/{name}/execute/stream",
        "post",
        "Run a tool, streaming its log lines, then the result (server-sent events)",
        _SSE_CALL,
        _CALL_ERRORS,
        params=(_name("name"),),
        body="ExecuteRequest",
    ),
    # ------------------------------------------------------------ approvals
    _Op(
        "/v1/approvals",
        "get",
        "Two-person approval tickets, newest first",
        _json("TicketList", "the tickets"),
        ("400", "401", "503"),
        params=(_query("status", {"type": "string", "enum": _TICKET_STATUS}, "only this status"),),
    ),
    _Op(
        "/v1/approvals",
        "post",
        "Open a ticket for a call another host will make, as the token's identity",
        _json("Ticket", "the ticket (the open one, if this requester asked before)"),
        ("400", "401", "403", "404", "409", "413", "422", "503"),
        body="OpenTicketRequest",
        body_required=True,
    ),
    _Op(
        "/v1/approvals/{ticket_id}",
        "get",
        "One ticket",
        _json("Ticket", "the ticket"),
        ("401", "404", "503"),
        params=(_name("ticket_id"),),
    ),
    _Op(
        "/v1/approvals/{ticket_id}/approve",
        "post",
        "Approve a ticket as the token's identity (a dual-sign-required persona)",
        _json("Ticket", "the ticket, approved by one more"),
        _SIGN_ERRORS,
        params=(_name("ticket_id"),),
        body="ApproveRequest",
    ),
    _Op(
        "/v1/approvals/{ticket_id}/reject",
        "post",
        "Reject a ticket (a dual-sign-required persona, or its requester withdrawing it)",
        _json("Ticket", "the rejected ticket"),
        _SIGN_ERRORS,
        params=(_name("ticket_id"),),
        body="RejectRequest",
    ),
    _Op(
        "/v1/approvals/{ticket_id}/claim",
        "post",
        "Spend an approved ticket for exactly this call (its requester, once)",
        _json("Ticket", "the ticket, now executed"),
        _TICKET_ERRORS,
        params=(_name("ticket_id"),),
        body="ClaimRequest",
        body_required=True,
    ),
    # ------------------------------------------------------------ audit and events
    _Op(
        "/v1/audit",
        "get",
        "Rows of the audit log (a dual-sign-required persona)",
        _json("AuditList", "the rows, oldest first"),
        ("400", "401", "403", "503"),
        params=(
            _query("tool", _STR, "only calls of this tool"),
            _query("outcome", {"type": "string", "enum": list(OUTCOMES)}, "only this outcome"),
            _query(
                "since", {"type": "integer", "minimum": 0, "maximum": 2**63 - 1}, "only rows after this seq"
            ),
            _query("limit", {"type": "integer", "minimum": 1, "maximum": 1000}, "at most this many"),
        ),
    ),
    _Op(
        "/v1/events",
        "get",
        "Catalog changes as they happen (server-sent events, never ends by itself)",
        _SSE_CATALOG,
        ("400", "401"),
        extra={"x-endless-stream": True},
    ),
)


def _paths() -> dict[str, Any]:
    """The ``paths`` of the document, one operation per row of :data:`_OPERATIONS` (fresh dicts)."""
    paths: dict[str, Any] = {}
    for op in _OPERATIONS:
        paths.setdefault(op.path, {})[op.method] = copy.deepcopy(op.to_dict())
    return paths


def document() -> dict[str, Any]:
    """The OpenAPI document (a fresh dict)."""
    from ..core.version import __version__

    return {
        "openapi": "3.1.0",
        "info": {
            "title": "ongrid-plugins skills API",
            "version": __version__,
            "description": "Skills of one SkillHost over HTTP: list, run (gated by the token's persona), "
            "two-person approvals, the audit log. Errors are JSON {error, code}.",
        },
        "servers": [{"url": "/"}],
        "security": [{"bearer": []}],
        "paths": _paths(),
        "components": {
            "schemas": _SCHEMAS,
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
    }
