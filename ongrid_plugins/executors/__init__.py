"""Executors: the objects that actually run a tool.

An executor is anything with ``run(request) -> CallResult`` and
``async arun(request) -> CallResult``; the ``ongrid_executor`` hook chooses one
per tool. The built-in ones live in :mod:`.subprocess` and :mod:`.native`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from ..models import CallRequest, CallResult

__all__ = ["Executor"]


@runtime_checkable
class Executor(Protocol):
    """Runs one call of a tool. Skill-level failures are results, not exceptions."""

    def run(self, request: CallRequest) -> CallResult:
        """Run the call in this thread and return its result."""
        ...

    async def arun(self, request: CallRequest) -> CallResult:
        """Run the call without blocking the event loop and return its result."""
        ...
