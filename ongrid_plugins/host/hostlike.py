"""What each module that serves the host reads of it, as protocols ``SkillHost`` meets.

The host imports the pipeline, the ticket log, dispatch and export; none of them imports
the host back, not even for a type annotation. Each names instead, here, the members it
reads, and mypy checks at every ``self`` the host passes that the host has them:

* :class:`StepHost`, taken by the steps of ``pipeline``: settings, registry, pm,
  approvals, get, persona, sandbox_profile, and two members of the host's own
  (``_hooks``, ``_os_user``);
* :class:`TicketHost`, taken by ``ticketlog``: pm, approvals, ``_audited``;
* :class:`CallingHost`, taken by ``dispatch``: get, call, acall;
* :class:`ExportingHost`, taken by ``export.export_for_host``: persona, tools, decide.

Layering: the host stage. It imports nothing of the package at run time; its
annotations name values, the gate, the audit log and the executors' profile.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from ..audit import AuditLog
    from ..core.hooks import Hooks
    from ..discovery.registry import Registry
    from ..executors.confine import Profile
    from ..gate.approvals import ApprovalStore
    from ..gate.persona_lookup import PersonaLike
    from ..models import CallResult, Decision, EventCallback, Persona, Skill, Tool
    from ..plugins import PluginManager
    from ..settings import Settings

__all__ = ["CallingHost", "ExportingHost", "StepHost", "TicketHost"]


class StepHost(Protocol):
    """What the pipeline's steps read of their host.

    ``_hooks`` is the hooks facade the host keeps once its plugin manager is built (None
    before); ``_os_user`` the OS user a call without ``caller`` is made in the name of,
    looked up once per host. Both are the host's own, not its public API.
    """

    @property
    def settings(self) -> Settings: ...
    @property
    def registry(self) -> Registry: ...
    @property
    def pm(self) -> PluginManager: ...
    @property
    def approvals(self) -> ApprovalStore: ...
    @property
    def _hooks(self) -> Hooks | None: ...
    def _os_user(self) -> str: ...
    def get(self, name: str) -> Tool: ...
    def persona(self, persona: PersonaLike) -> Persona: ...
    def sandbox_profile(self, tool: Tool) -> Profile: ...


class TicketHost(Protocol):
    """What a ticket decision reads of its host (``_audited``: the audit log, or None while
    the ``audit`` plugin is disabled; the host's own, not its public API)."""

    @property
    def pm(self) -> PluginManager: ...
    @property
    def approvals(self) -> ApprovalStore: ...
    def _audited(self) -> AuditLog | None: ...


class CallingHost(Protocol):
    """What dispatch reads of a host: ``get``, and ``call`` and ``acall`` with their signatures."""

    def get(self, name: str) -> Tool: ...

    def call(
        self,
        name: str,
        args: object = None,
        *,
        persona: PersonaLike = "operator",
        confirm: bool | str = False,
        caller: str | None = None,
        ticket: str | None = None,
        on_event: EventCallback | None = None,
        timeout: float | None = None,
    ) -> CallResult: ...

    async def acall(
        self,
        name: str,
        args: object = None,
        *,
        persona: PersonaLike = "operator",
        confirm: bool | str = False,
        caller: str | None = None,
        ticket: str | None = None,
        on_event: EventCallback | None = None,
        timeout: float | None = None,
    ) -> CallResult: ...


class ExportingHost(Protocol):
    """What :func:`~ongrid_plugins.host.export.export_for_host` reads of a host."""

    def persona(self, persona: PersonaLike) -> Persona: ...
    def tools(self, persona: Persona) -> list[Tool]: ...
    def decide(self, tool: Tool, persona: Persona) -> Decision: ...
    def skills(self) -> list[Skill]: ...  # the skills-prompt format (export_prompt)
