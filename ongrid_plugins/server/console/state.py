"""The state of one console: its host and tokens, sessions, running calls, held calls, caches.

The route handlers (:mod:`.signin`, :mod:`.tools`, :mod:`.approvals`, :mod:`.audit`,
:mod:`.live`) are functions over a :class:`Console`; :mod:`.app` wires them to routes.
"""

from __future__ import annotations

import asyncio
from typing import Any

import attrs

from ...audit import VerifyReport
from ...errors import UnknownSkill
from ...host.facade import SkillHost
from ...models import Tool
from ..rules import may_see_tool, may_sign
from ..tokens import Principal, TokenStore
from .sessions import Sessions

__all__ = ["MAX_HELD", "Console", "Held"]

#: Calls the console holds at most while they wait for their ticket.
MAX_HELD = 1000


@attrs.frozen
class Held:
    """A call opened from the console that waits for its ticket: run as its requester once approved."""

    tool: str
    args: dict[str, Any]
    persona: str
    caller: str


class Console:
    """The console of one host: its sessions, the calls waiting for approval, the chain status cache."""

    def __init__(self, host: SkillHost, tokens: TokenStore, max_concurrent: int = 16) -> None:
        self.host = host
        self.tokens = tokens
        self.sessions = Sessions()
        self.max_concurrent = max_concurrent
        self.running = 0
        """Calls started from the console that have not finished."""
        self.held: dict[str, Held] = {}
        """Ticket id -> the call to run once the ticket is approved."""
        self.progress: dict[str, str] = {}
        """Ticket id -> how its held call is doing (shown on the approvals page)."""
        self.tasks: set[asyncio.Future[Any]] = set()
        """The held calls running in the background (kept so they are not collected)."""
        self.chain: tuple[Any, VerifyReport] | None = None
        """The audit log's fingerprint and its last chain check."""

    def __repr__(self) -> str:
        return f"<Console {len(self.held)} held, {self.running} running>"

    def signs(self, principal: Principal) -> bool:
        """Whether ``principal``'s persona is dual-sign-required (approves, reads the audit log).

        The REST API asks the same function (:func:`~ongrid_plugins.server.rules.may_sign`).
        """
        return may_sign(self.host, principal)

    def tool(self, name: str, principal: Principal) -> Tool | None:
        """The tool called ``name`` if ``principal``'s persona may see it, else None (answered as absent).

        The rule is REST's (:func:`~ongrid_plugins.server.rules.may_see_tool`): a tool the
        persona may not call is a 404, its description, source and digest unread.
        """
        try:
            tool = self.host.get(name)
        except UnknownSkill:
            return None
        return tool if may_see_tool(self.host, tool, principal) else None

    def sees(self, name: str, principal: Principal) -> bool:
        """Whether ``principal`` may see the tool ``name`` (to link it, or not)."""
        return may_see_tool(self.host, name, principal)
