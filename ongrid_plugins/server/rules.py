"""What a token may see, decided once for both surfaces: the REST API and the console.

The console promises that its pages do "exactly what its REST calls may do"; that only
holds if both ask the same functions, so the rules live here and nowhere else:

* :func:`may_sign` -- a ``dual-sign-required`` persona approves, reads the audit log and
  reads every ticket;
* :func:`may_see_tool` -- a tool the gate denies to the persona whatever the arguments
  is answered as if absent (404), in listings, pages and suggestions alike;
* :func:`may_read_ticket` / :func:`readable_tickets` -- a ticket is read by its
  requester and by those who may sign; anyone else is answered as if it did not exist;
* :data:`MAX_TEXT` / :func:`too_long` -- what people write on a ticket (a requester's
  reason, an approver's note or SOP reference) is at most 2,000 characters: it is shown
  to every approver, and nobody needs a novel to say why.

Layering: a server leaf beside :mod:`.tokens`, which it imports (for :class:`Principal`);
it may import the host and the core's values.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..core.identity import same_person
from ..errors import OngridError
from ..gate.decision import failed_vote
from ..gate.tickets import Ticket
from ..host.facade import SkillHost
from ..models import PermissionMode, Tool, Verdict
from .tokens import Principal

__all__ = ["MAX_TEXT", "may_read_ticket", "may_see_tool", "may_sign", "readable_tickets", "too_long"]

#: Characters a person may write in one field of a ticket (reason, note, SOP reference).
MAX_TEXT = 2000


def may_sign(host: SkillHost, who: Principal) -> bool:
    """Whether ``who``'s persona is dual-sign-required (approves, reads the audit log and every ticket)."""
    return host.persona(who.persona).permission_mode is PermissionMode.DUAL_SIGN_REQUIRED


def may_see_tool(host: SkillHost, tool: Tool | str, who: Principal) -> bool:
    """Whether ``who``'s persona may see ``tool``: the gate does not deny it outright.

    A name the host does not know, or a decision that fails, is not visible. A deny that
    stands for a plugin's failed vote leaves it visible: its call is then a 403 naming the plugin.
    """
    try:
        resolved = host.get(tool) if isinstance(tool, str) else tool
        decision = host.decide(resolved, who.persona)
        return decision.verdict is not Verdict.DENY or failed_vote(decision)
    except OngridError:
        return False


def may_read_ticket(host: SkillHost, ticket: Ticket, who: Principal) -> bool:
    """Whether ``who`` may read ``ticket``: its requester (the same person by
    :func:`~ongrid_plugins.core.identity.same_person`: accents count), or a persona that may sign."""
    return same_person(ticket.requester, who.identity) or may_sign(host, who)


def readable_tickets(host: SkillHost, tickets: Iterable[Ticket], who: Principal) -> list[Ticket]:
    """The tickets of ``tickets`` that ``who`` may read, in their order."""
    if may_sign(host, who):
        return list(tickets)
    return [ticket for ticket in tickets if same_person(ticket.requester, who.identity)]


def too_long(field: str, value: str | None) -> str:
    """Why ``value`` of ``field`` is refused (longer than :data:`MAX_TEXT`); empty when it is fine."""
    if value is None or len(value) <= MAX_TEXT:
        return ""
    return (
        f"field {field!r} is {len(value)} characters long; at most {MAX_TEXT} characters are accepted "
        "(approvers read it on every ticket): shorten it, or point to a document"
    )
