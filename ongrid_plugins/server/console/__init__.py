"""The operator console: web pages over a :class:`~ongrid_plugins.SkillHost` (extra ``[server]``).

``ongrid-skills serve`` serves it at ``/`` next to the REST API (``/v1``), in the same
process and over the same token store: an operator signs in once with their bearer
token and gets a session cookie (``HttpOnly``, ``SameSite=Strict``, ``Secure`` over
TLS). The pages:

* ``/`` -- the catalog: every tool the signed-in persona may call, filterable;
* ``/tools/{name}`` -- one tool: class, source, provenance, availability, sandbox,
  digest, and its schema as a form checked in the browser and again on the server;
  a run streams the skill's stderr live;
* ``/approvals`` -- two-person tickets, pending first; approve or reject with a note
  as the signed-in identity (never one's own ticket: the page offers no button and the
  store refuses anyway); live over server-sent events (``/events``);
* ``/audit`` -- the newest audit rows, filters, and the hash chain's status, live.

Defences: every state-changing form carries the session's CSRF token in a hidden
``csrf`` field (sign-in uses a double-submit cookie, not a tracked nonce), a
cross-origin ``Origin`` is refused, and every answer carries a strict ``Content-Security-Policy``: no inline
script or style, no third-party origin -- the one stylesheet and the one script are
files of this package (``static/``), so the console works without any CDN.

The modules, one job each:

* :mod:`.app` -- :func:`console_routes`: the route table and the static files;
* :mod:`.state` -- :class:`~.state.Console`, what the handlers share: host, tokens,
  sessions, running and held calls, the chain status and the entry digests;
* :mod:`.guard` -- what every answer passes through: the hardening headers, the session
  check, the same-origin and CSRF checks of a POST, the page frame;
* :mod:`.sessions` -- session cookies, their CSRF tokens and flashes, idle expiry;
* the handlers, one module per page: :mod:`.signin`, :mod:`.tools` (catalog, tool page,
  runs), :mod:`.approvals`, :mod:`.audit`, :mod:`.live` (``/events``);
* the HTML, no I/O: :mod:`.html` (escaping, the frame, small parts), :mod:`.forms` (a
  schema as a form and back), :mod:`.pages` (sign-in, catalog, tool),
  :mod:`.approval_pages`, :mod:`.audit_pages`;
* :mod:`.digests` -- file fingerprints and entry-file digests.

Layering: a surface. It may import the host (:mod:`ongrid_plugins.host.facade`), the values and
errors of the core, :mod:`ongrid_plugins.server.tokens`,
:mod:`ongrid_plugins.server.rules` (who may see what: REST's rule, not a copy) and
:mod:`ongrid_plugins.server.responses`, and Starlette; nothing below the server layer
imports it. :mod:`ongrid_plugins.server.rest` mounts it (:func:`console_routes`).
Inside the folder the HTML modules import only each other (and the core's values); the
handlers import them, :mod:`.guard`, :mod:`.state` and the helpers; only :mod:`.app`
imports the handlers (``tests/test_imports.py`` checks these rules).
"""

from __future__ import annotations

from .app import console_routes

__all__ = ["console_routes"]
