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
from ...host import SkillHost
from ...models import PermissionMode, Tool
from ..tokens import Principal, TokenStore
from .digests import EntryDigests
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
        self.digests = EntryDigests()

    def __repr__(self) -> str:
        return f"<Console {len(self.held)} held, {self.running} running>"

    def signs(self, principal: Principal) -> bool:
        """Whether ``principal``'s persona is dual-sign-required (approves, reads the audit log)."""
        return self.host.persona(principal.persona).permission_mode is PermissionMode.DUAL_SIGN_REQUIRED

    def tool(self, name: str) -> Tool | None:
        """The tool called ``name``, or None."""
        try:
            return self.host.get(name)
        except UnknownSkill:
            return None
