"""Built-in plugin ``remote``: routes tools to worker queues (``ONGRID_REMOTE_ROUTES``).

Imports nothing third-party: a host without the ``[celery]`` extra, or without routes,
pays one string check per call. A routed call on a host without Celery fails with a
result that says which extra to install (it never silently runs locally instead).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from ..errors import ConfigError
from ..hookspecs import hookimpl
from ..models import CallResult

if TYPE_CHECKING:
    from ..models import CallRequest, Tool
    from ..settings import Settings
    from .routes import RouteTable

__all__ = ["ongrid_executor", "routes", "where"]

logger = logging.getLogger(__name__)


def routes(settings: Settings) -> RouteTable:
    """The parsed routes of ``settings`` (bad items kept as problems, never raised)."""
    from .routes import cached_table  # only a host with routes parses them

    return cached_table(settings.remote_routes, settings.remote_routes_from)


def where(tool: Tool, settings: Settings) -> str:
    """Where calls of ``tool`` run under ``settings``: ``local`` or ``remote queue NAME``.

    A tool a broken route leaves undecided says so (``refused: ...``): its calls fail
    until the route is fixed, they do not run locally.
    """
    if tool.kind != "subprocess" or not settings.remote_routes:
        return "local"
    try:
        queue = routes(settings).queue_for(tool)
    except ConfigError as exc:
        return f"refused: {exc}"
    if queue is None:
        return "local"
    if not settings.broker_url:
        return f"refused: routed to queue {queue} but ONGRID_BROKER_URL is not set"
    return f"remote queue {queue}"


@hookimpl
def ongrid_executor(tool: Tool, settings: Settings) -> Any:
    """A remote executor for a routed ``subprocess`` tool; ``None`` for every other tool."""
    if not settings.remote_routes or tool.kind != "subprocess":
        return None
    try:
        queue = routes(settings).queue_for(tool)
    except ConfigError as exc:
        return _Refusing(str(exc))
    if queue is None:
        return None
    if not settings.broker_url:
        return _Refusing(f"{tool.name} is routed to queue {queue!r} but ONGRID_BROKER_URL is not set")
    key = (
        settings.broker_url,
        queue,
        settings.broker_timeout,
        settings.kill_grace,
        settings.stdout_cap,
        settings.remote_key_file,
        # The audit log a late result's follow-up row goes to (.late): this host's.
        settings.state_dir,
        settings.audit_key_file,
        settings.audit_fail_closed,
        settings.disable_plugins,
    )
    executor = _executors.get(key)
    if executor is None:
        from .signing import broker_refusal, load_signer

        refused = broker_refusal(settings.broker_url)
        if refused:
            return _Refusing(f"{tool.name} is routed to queue {queue!r}, refused: {refused}")
        try:
            signer = load_signer(settings.remote_key_file, "the host")
        except ConfigError as exc:
            return _Refusing(f"{tool.name} is routed to queue {queue!r}, refused: {exc}")
        try:
            from .client import RemoteExecutor
        except ImportError as exc:
            return _Refusing(
                f"{tool.name} is routed to queue {queue!r} but Celery is not installed ({exc}): "
                "pip install 'ongrid-plugins[celery]'"
            )
        executor = _executors[key] = RemoteExecutor(settings.broker_url, queue, settings, signer)
    return executor


_executors: dict[tuple[Any, ...], Any] = {}


class _Refusing:
    """An executor that fails every call with one reason (a routed tool never runs locally)."""

    def __init__(self, reason: str) -> None:
        self.reason = reason

    def run(self, request: CallRequest) -> CallResult:
        return CallResult(request.tool.name, False, error=self.reason, call_id=request.call_id)

    async def arun(self, request: CallRequest) -> CallResult:
        return self.run(request)
