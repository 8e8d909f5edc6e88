"""The REST routes that need no token: ``/healthz``, ``/openapi.json`` and ``/docs``."""

from __future__ import annotations

from .. import missing_extra
from .api import Api

try:
    from starlette.requests import Request
    from starlette.responses import HTMLResponse, JSONResponse, Response
except ImportError as exc:  # pragma: no cover - exercised without the extra
    raise missing_extra("server", "starlette") from exc

__all__ = ["healthz", "openapi", "reference"]


async def healthz(api: Api, request: Request) -> Response:
    """``GET /healthz``: alive."""
    return JSONResponse({"status": "ok"})


async def openapi(api: Api, request: Request) -> Response:
    """``GET /openapi.json``: the OpenAPI document (:mod:`ongrid_plugins.server.openapi`)."""
    if api.openapi is None:
        from ..openapi import document

        api.openapi = document()
    return JSONResponse(api.openapi)


async def reference(api: Api, request: Request) -> Response:
    """The API reference page, rendered here: no script or stylesheet from anywhere else."""
    from ..apidocs import render

    if api.openapi is None:
        from ..openapi import document

        api.openapi = document()
    # nothing loads from elsewhere, no other site may frame it (nosniff and DENY: access.py)
    headers = {
        "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'"
    }
    return HTMLResponse(render(api.openapi), headers=headers)
