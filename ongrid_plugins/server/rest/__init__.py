"""The REST API: ``/v1/skills``, approvals and the audit log over a :class:`SkillHost` (extra ``[server]``).

::

    from ongrid_plugins.server.rest import create_app
    from ongrid_plugins.server.tokens import TokenStore

    app = create_app(host, TokenStore.from_file("/etc/ongrid/tokens.json"))   # any ASGI server

Every route but ``/healthz``, ``/openapi.json`` and ``/docs`` (the API reference,
:mod:`ongrid_plugins.server.apidocs`) needs ``Authorization: Bearer <token>``; the token
names an identity and a persona. Calls run as that persona (the gate decides) and are
recorded under that identity (``caller``); approvals are signed by it (``approver``), so
the approval store's rules -- never your own ticket, never twice -- hold between tokens.
Nothing of the gate, the checks or the runner is re-implemented here: each route is a
thin call into the host.

Errors are JSON ``{"error": message, "code": code, ...details}`` with the status the
problem deserves (``docs/rest.md`` has the table). A skill that ran and failed is not an
HTTP error: its call returns 200 with ``error`` and ``code`` (``failed``, ``timed_out``).

The modules, one job each (this ``__init__`` only re-exports):

* :mod:`.app` -- :func:`create_app`: the route table, the error handlers, shutdown;
* :mod:`.api` -- what every route shares: the host, the tokens, sign-in by bearer token,
  the call slots (429), reading a JSON body (413, 408), which tools a persona may see;
* :mod:`.bodies` -- checking query parameters and JSON fields (400), no I/O;
* :mod:`.public` -- the routes without a token: ``/healthz``, ``/openapi.json``, ``/docs``;
* :mod:`.skills` -- ``/v1/skills``: list, describe, execute (plain and streamed), ``/v1/events``;
* :mod:`.approvals` -- ``/v1/approvals``: list, read, open, approve, reject, claim;
* :mod:`.audit` -- ``/v1/audit``: rows of the audit log.

Layering: a surface. These modules may import the host, the core's values and errors,
:mod:`ongrid_plugins.server.responses`, :mod:`~ongrid_plugins.server.tokens`,
:mod:`~ongrid_plugins.server.rules`,
:mod:`~ongrid_plugins.server.access`, :mod:`~ongrid_plugins.server.events`,
:mod:`~ongrid_plugins.server.openapi` / :mod:`~ongrid_plugins.server.apidocs`, the console
(:mod:`ongrid_plugins.server.console`, mounted at ``/``) and Starlette. Inside the
package the resource modules import :mod:`.api` and :mod:`.bodies`; only :mod:`.app`
imports the resource modules; nothing imports :mod:`.app` but this ``__init__``.
"""

from __future__ import annotations

from ..responses import ApiError
from .api import DEFAULT_BODY_TIMEOUT, DEFAULT_MAX_BODY, DEFAULT_MAX_CONCURRENT, DEFAULT_MAX_PER_TOKEN
from .app import close_event_streams, create_app

__all__ = [
    "DEFAULT_BODY_TIMEOUT",
    "DEFAULT_MAX_BODY",
    "DEFAULT_MAX_CONCURRENT",
    "DEFAULT_MAX_PER_TOKEN",
    "ApiError",
    "close_event_streams",
    "create_app",
]
