"""Remote execution: run a tool's calls on Celery workers over a Redis broker.

The host keeps every decision (arguments, gate, confirmation, tickets, audit); a
routed call is then handed to a worker queue instead of a local process, and the
worker runs it with its own skills and the local
:class:`~ongrid_plugins.executors.subprocess.SubprocessExecutor` (sandbox, limits,
env allow-list, timeout, output caps). The caller sees the same
:class:`~ongrid_plugins.models.CallResult` and the same events, stderr streamed live.

- :mod:`.routes`: ``ONGRID_REMOTE_ROUTES`` parsing and matching (no third-party import).
- :mod:`.wire`: the task payload, the profile meet (:func:`.wire.narrower`) and the result codec.
- :mod:`.signing`: the shared remote key; tasks and channel messages carry its HMAC.
- :mod:`.checks`: what the worker checks of a task and the host of a result (types, ranges, schema).
- :mod:`.plugin`: the ``ongrid_executor`` hook implementation (no Celery import until a
  routed call runs).
- :mod:`.client`: the host-side executor (Celery ``send_task`` + Redis pub/sub).
- :mod:`.results`: the host's one result subscription per broker and process.
- :mod:`.worker`: the Celery app, the ``ongrid.run`` task and ``ongrid-skills worker``.
- :mod:`.calls`: a worker process's calls: the one cancel subscription, the lease renewal.

May import: the core values (models, settings, errors, hookspecs, forksafe), the catalog digests
and the executors; Celery and redis only inside :mod:`.client`, :mod:`.results`,
:mod:`.worker` and :mod:`.calls` (the optional extra ``ongrid-plugins[celery]``).
Nothing below the host imports this package, and this package imports the host
(:class:`~ongrid_plugins.host.facade.SkillHost`) only on the worker side, to load the
worker's own skills.
"""

from __future__ import annotations

from typing import Any

__all__ = ["Route", "parse_routes", "route_for"]  # from .routes, on first use


def __getattr__(name: str) -> Any:
    """:mod:`.routes`' names, imported on first use: a host without routes never needs them."""
    if name in __all__:
        from . import routes

        return getattr(routes, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
