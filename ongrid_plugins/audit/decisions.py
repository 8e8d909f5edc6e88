"""Rows of ticket decisions, and the audit log's check of a ticket about to be spent.

A ticket decision (an ``approval`` or ``rejection``) is chained as a row naming the
ticket, its tool, persona and redacted arguments. Like a call row, it must not keep an
unkeyed digest of arguments that held a secret: with the other arguments in plain view,
``sha256`` of the canonical arguments would confirm a guessed low-entropy secret (a
PIN), and every token that reads the log over REST, or whoever receives ``audit
export``, could try guesses. Call rows leave the digest empty; decision rows cannot,
because :func:`ticket_problem` compares the digest they covered with the ticket's when
it is spent. So they keep a **keyed** digest instead, ``hmac-sha256:<hex>`` of the
ticket's digest under a random key kept in the log's database (table ``digest_key``,
made on first need): whoever can read the database file can check it, and could read
the ticket's own digest in the approvals database beside it anyway; readers of rows
cannot. Rows written before keyed digests hold the plain digest and are compared as such.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import time
import uuid
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..core.identity import identity_key
from ..models import Outcome
from ..schema.redact import REDACTED
from .inflight import HOST
from .rows import clip, dumps

if TYPE_CHECKING:
    import sqlite3

    from ..gate.tickets import Ticket

__all__ = [
    "KEYED",
    "digest_key",
    "keyed_digest",
    "redacted_paths",
    "ticket_problem",
    "ticket_row",
    "trust_row",
]

#: The prefix of a keyed arguments digest in a row's ``args_digest`` column.
KEYED = "hmac-sha256:"

#: Rows that record a decision on a ticket (or a refused attempt at one), not a call made with it.
_DECISIONS = frozenset({Outcome.APPROVAL, Outcome.REJECTION, Outcome.APPROVAL_REFUSED})


def digest_key(conn: sqlite3.Connection, *, create: bool) -> bytes | None:
    """The log's key for keyed argument digests; made (inside the caller's write
    transaction) when ``create`` and there is none yet, else None when there is none."""
    row = conn.execute("SELECT key FROM digest_key WHERE id = 1").fetchone()
    if row is None and create:
        conn.execute("INSERT INTO digest_key (id, key) VALUES (1, ?)", (os.urandom(32).hex(),))
        row = conn.execute("SELECT key FROM digest_key WHERE id = 1").fetchone()
    return None if row is None else bytes.fromhex(row[0])


def keyed_digest(key: bytes, args_digest: str) -> str:
    """``hmac-sha256:<hex>`` of an arguments digest under the log's key."""
    return KEYED + hmac.new(key, args_digest.encode(), hashlib.sha256).hexdigest()


def redacted_paths(value: Any, path: str = "$") -> list[str]:
    """The JSON paths of the values redaction replaced in a ticket's (already redacted) arguments."""
    if value == REDACTED:
        return [path]
    if isinstance(value, Mapping):
        return [p for key, item in value.items() for p in redacted_paths(item, f"{path}.{key}")]
    if isinstance(value, list):
        return [p for i, item in enumerate(value) for p in redacted_paths(item, f"{path}[{i}]")]
    return []


def ticket_row(
    conn: sqlite3.Connection,
    ticket: Ticket,
    outcome: Outcome,
    by: str,
    note: str = "",
    **fields: Any,
) -> dict[str, Any]:
    """The row of ``by``'s ``outcome`` on ``ticket`` (built inside the write transaction that
    chains it, which makes the digest key if a secret needs it).

    ``fields`` set other columns: ``verdict`` and ``plugin`` (the gate's, for the request that
    opened it), ``error`` (why it was refused), ``approvers`` (a list; the ticket's by default).
    """
    redacted = redacted_paths(dict(ticket.args))
    digest = ticket.args_digest  # what the decision covered
    if redacted:
        key = digest_key(conn, create=True)
        assert key is not None
        digest = keyed_digest(key, digest)
    approvers = fields.pop("approvers", ticket.approvers)
    if "error" in fields:
        fields["error"] = clip(fields["error"])
    return {
        "time": time.time(),
        "call_id": f"{ticket.id}-{outcome}-{uuid.uuid4().hex[:12]}",
        "tool": ticket.tool,
        "tool_class": ticket.tool_class,
        "persona": ticket.persona,
        "caller": by,
        "args": dumps(dict(ticket.args)),
        "args_digest": digest,
        "redacted": dumps(redacted),
        "verdict": "",
        "reason": clip(note),
        "plugin": "",
        "outcome": outcome,
        "duration": 0.0,
        "stderr_tail": dumps([]),
        "result_size": 0,
        "result_digest": "",
        "ticket": ticket.id,
        "approvers": dumps(list(approvers)),
        "pid": os.getpid(),
        "hostname": HOST,
        **fields,
    }


def ticket_problem(
    path: str, ticket: Ticket, rows: Sequence[tuple[str, str, str, str]], key: bytes | None = None
) -> str | None:
    """Why the rows ``(outcome, caller, approvers, args_digest)`` of the log at ``path``
    that name ``ticket`` do not back spending it (see :meth:`.AuditLog.ticket_problem`), or None.

    ``key`` is the log's :func:`digest_key`, for rows that keep a keyed digest.
    """
    signed = {identity_key(row[1]) for row in rows if row[0] == Outcome.APPROVAL}
    unsigned = [a for a in ticket.approvers if identity_key(a) not in signed]
    if unsigned:
        names = ", ".join(unsigned)
        return f"the audit log {path} has no approval of it by {names}, though the approvals database does"
    if any(row[0] not in _DECISIONS and row[2] not in ("", "[]") for row in rows):
        return f"the audit log {path} shows it already ran; a ticket executes once"
    # a digest recorded with the ticket's opening call or an approval: the arguments they covered
    covered = {row[3] for row in rows if row[3] and row[0] in (Outcome.NEEDS_APPROVAL, Outcome.APPROVAL)}
    expected = {ticket.args_digest}
    if key is not None:
        expected.add(keyed_digest(key, ticket.args_digest))
    elif any(digest.startswith(KEYED) for digest in covered):
        return f"the audit log {path} keeps keyed digests of its arguments, but its digest key is missing"
    if covered - expected:
        return f"the audit log {path} shows it was opened or approved for other arguments"
    return None


def trust_row(outcome: str, pack: str, by: str, note: str = "", **facts: Any) -> dict[str, Any]:
    """The row of a trust decision about ``pack`` (docs/trust.md): ``consent``, ``reconsent``,
    ``consent_narrowed``, ``consent_refused``, ``install_refused`` or ``trust_policy``.

    ``facts`` (version, capability digest, signer) are its ``args``, the capability digest its
    ``args_digest``; ``tool`` is ``pack:<name>``. Not a call: no class, persona or result.
    """
    return {
        "time": time.time(),
        "call_id": f"trust-{outcome}-{uuid.uuid4().hex[:12]}",
        "tool": f"pack:{pack}",
        "tool_class": "",
        "persona": "",
        "caller": by,
        "args": dumps(facts),
        "args_digest": str(facts.get("capability_digest", "")),
        "redacted": dumps([]),
        "verdict": "",
        "reason": clip(note),
        "plugin": "ongrid.trust",
        "outcome": outcome,
        "duration": 0.0,
        "stderr_tail": dumps([]),
        "result_size": 0,
        "result_digest": "",
        "approvers": dumps([]),
        "pid": os.getpid(),
        "hostname": HOST,
    }
