"""The Celery application both sides build for one broker URL (Redis broker and backend)."""

from __future__ import annotations

from typing import Any

from celery import Celery  # type: ignore[import-untyped]

__all__ = ["make_app"]

_apps: dict[tuple[str, float], Any] = {}


def make_app(broker_url: str, timeout: float = 3.0) -> Any:
    """The Celery app for ``broker_url`` (cached); JSON only, no retries that could hang a call."""
    key = (broker_url, timeout)
    app = _apps.get(key)
    if app is not None:
        return app
    app = Celery("ongrid", broker=broker_url, backend=broker_url, set_as_current=False)
    transport = {"socket_connect_timeout": timeout, "socket_timeout": timeout, "max_retries": 0}
    app.conf.update(
        task_serializer="json",
        result_serializer="json",
        accept_content=["json"],
        # Early acks: a task is acknowledged when a worker takes it, so a worker killed
        # mid-call is never handed the same call again by the broker (at most once for
        # every class); the idempotency claim in Redis is the second line (docs/remote.md).
        task_acks_late=False,
        task_reject_on_worker_lost=False,
        worker_prefetch_multiplier=1,
        result_expires=3600,
        broker_connection_timeout=timeout,
        broker_connection_retry=False,
        broker_connection_max_retries=0,
        broker_connection_retry_on_startup=True,
        broker_transport_options=transport,
        result_backend_transport_options=transport,
        redis_socket_connect_timeout=timeout,
        redis_socket_timeout=None,
        worker_hijack_root_logger=False,
        worker_redirect_stdouts=False,
        task_default_queue="ongrid",
    )
    _apps[key] = app
    return app
