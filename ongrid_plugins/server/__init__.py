"""Network surfaces over :class:`~ongrid_plugins.SkillHost`: REST (extra ``[server]``), MCP (``[mcp]``).

Nothing here is imported by ``import ongrid_plugins``; the modules that need an extra
import it themselves and, when it is missing, name the extra and the ``pip install`` that adds
it (:mod:`ongrid_plugins.core.hints`), before doing anything else.

The modules, one job each:

* :mod:`.rest` -- the REST API (``create_app``), a package with one module per resource;
* :mod:`.console` -- the operator console's web pages, mounted at ``/`` of the REST app;
* :mod:`.mcp` -- the MCP server over stdio (``create_server``);
* :mod:`.openapi` -- the OpenAPI document of the REST API, one table row per route;
  :mod:`.apidocs` -- that document as one HTML page (``/docs``; standard library only);
* :mod:`.responses` -- what REST and the console answer: errors with their status (read
  from the error itself), call results, server-sent events of a run;
* :mod:`.events` -- ``/v1/events``: the catalog's changes as server-sent events;
* :mod:`.tokens` -- the bearer-token file: identities and personas;
* :mod:`.rules` -- what a token may see (a tool, a ticket) and sign: one rule that REST
  and the console both call;
* :mod:`.access` -- the access-log middleware (one line per request, nothing secret);
* :mod:`.limits` -- the uvicorn config of ``serve``: header timeout, connection cap.

Layering: the surfaces stage. These modules may import the host and every earlier stage
(values and errors, the catalog, the gate's ticket values, the audit log's values, the
schema's redaction and argument values) and :mod:`ongrid_plugins.host.dispatch` (MCP calls through it);
nothing outside ``server/`` imports them but the CLI (:mod:`ongrid_plugins.commands`). Inside the
folder, :mod:`.tokens`, :mod:`.responses`, :mod:`.access`, :mod:`.limits`,
:mod:`.openapi` and :mod:`.apidocs` import no other server module but this one;
:mod:`.events` and :mod:`.rules` import :mod:`.tokens`; :mod:`.rest` imports them and :mod:`.console`,
which never imports :mod:`.rest`.
"""

from __future__ import annotations

from ..errors import ConfigError

__all__ = ["MissingExtra", "missing_extra", "require_extra"]

#: The modules each extra brings, checked in this order.
_EXTRA_MODULES = {"server": ("starlette", "uvicorn"), "mcp": ("mcp", "anyio")}


class MissingExtra(ConfigError):
    """An optional dependency is missing: names the extra, the module and the command that adds it."""

    def __init__(self, extra: str, module: str, command: str = "this") -> None:
        from ..core.hints import extra_install

        self.extra = extra
        self.module = module
        message = (
            f"{command} needs the [{extra}] extra of ongrid-plugins, which is not installed "
            f"(no module {module!r}): {extra_install(extra)}"
        )
        super().__init__(message)


def missing_extra(extra: str, module: str, command: str = "this") -> MissingExtra:
    """The error for a missing extra (see :class:`MissingExtra`)."""
    return MissingExtra(extra, module, command)


def require_extra(extra: str, command: str) -> None:
    """Raise :class:`MissingExtra` for ``command`` unless every module of ``extra`` imports."""
    import importlib

    for module in _EXTRA_MODULES[extra]:
        try:
            importlib.import_module(module)
        except ImportError as exc:
            raise MissingExtra(extra, exc.name or module, command) from None
