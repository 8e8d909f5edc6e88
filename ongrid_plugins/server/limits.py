"""Connection limits uvicorn does not have: a header timeout and a connection cap.

uvicorn waits for a request's headers for ever, and accepts every connection: 300
clients sending one header byte every few seconds hold 300 connections open (the
"slowloris" attack). :func:`server_config` builds the ``uvicorn.Config`` that
``ongrid-skills serve`` runs, with an HTTP protocol class that

- closes a connection whose request line and headers are not complete within
  ``header_timeout`` seconds of its opening (or of the end of the previous response,
  on a kept-alive connection);
- closes at once any connection beyond ``max_connections`` open ones.

The body timeout is the app's (:func:`~ongrid_plugins.server.rest.create_app`'s
``body_timeout``): a body must arrive within that many seconds or the answer is 408.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from . import missing_extra

try:
    import uvicorn
    from uvicorn.protocols.http.h11_impl import H11Protocol
except ImportError as exc:  # pragma: no cover - exercised without the extra
    raise missing_extra("server", "uvicorn") from exc

__all__ = ["DEFAULT_HEADER_TIMEOUT", "DEFAULT_MAX_CONNECTIONS", "guarded_protocol", "server_config"]

logger = logging.getLogger(__name__)

DEFAULT_HEADER_TIMEOUT = 10.0
DEFAULT_MAX_CONNECTIONS = 256


def guarded_protocol(header_timeout: float, max_connections: int) -> type[asyncio.Protocol]:
    """uvicorn's h11 protocol with a header timeout and a cap on open connections."""

    class GuardedH11Protocol(H11Protocol):
        _header_timer: asyncio.TimerHandle | None = None

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            if len(self.connections) > max_connections:
                logger.warning("rest: refusing a connection: %d are open already", max_connections)
                transport.abort()
                return
            self._arm()

        def data_received(self, data: bytes) -> None:
            before = self.cycle
            super().data_received(data)
            if self.cycle is not before:  # a request's line and headers are complete
                self._disarm()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self.transport.is_closing():
                self._arm()  # the next request on this connection gets the same time

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

        def _arm(self) -> None:
            self._disarm()
            self._header_timer = self.loop.call_later(header_timeout, self._too_slow)

        def _disarm(self) -> None:
            if self._header_timer is not None:
                self._header_timer.cancel()
                self._header_timer = None

        def _too_slow(self) -> None:
            self._header_timer = None
            if not self.transport.is_closing():
                self.transport.abort()

    return GuardedH11Protocol


def server_config(
    app: Any,
    *,
    header_timeout: float = DEFAULT_HEADER_TIMEOUT,
    max_connections: int = DEFAULT_MAX_CONNECTIONS,
    **options: Any,
) -> uvicorn.Config:
    """The ``uvicorn.Config`` for ``app`` with the header timeout and connection cap."""
    protocol = guarded_protocol(header_timeout, max_connections)
    settings: dict[str, Any] = {"log_level": "warning", "access_log": False, "lifespan": "on", **options}
    return uvicorn.Config(app, http=protocol, **settings)
