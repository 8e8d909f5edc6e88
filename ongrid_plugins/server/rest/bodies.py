"""Checking what a REST request sends: query parameters and JSON fields (no I/O).

Each check raises :class:`~ongrid_plugins.server.responses.ApiError` 400 naming the
parameter or field: an unknown one is refused rather than ignored, so that a typo never
widens a listing or drops an option silently.
"""

from __future__ import annotations

from typing import Any

from ...host.callinputs import no_duplicates
from .. import missing_extra
from ..responses import ApiError
from ..rules import MAX_TEXT, too_long

try:
    from starlette.requests import Request
except ImportError as exc:  # pragma: no cover - exercised without the extra
    raise missing_extra("server", "starlette") from exc

__all__ = [
    "digits",
    "execute_body",
    "fields",
    "integer",
    "no_constant",
    "no_duplicates",
    "query",
    "required",
    "short_texts",
]


def query(request: Request, *allowed: str) -> dict[str, str]:
    """The query parameters, each at most once; an unknown one is a 400 (a typo must not widen a listing)."""
    params = request.query_params
    for key in params:
        if key not in allowed:
            names = ", ".join(allowed) or "none"
            raise ApiError(400, "bad_request", f"unknown query parameter {key!r}; this route takes: {names}")
        if len(params.getlist(key)) > 1:
            raise ApiError(400, "bad_request", f"query parameter {key!r} given more than once")
    return dict(params)


def no_constant(name: str) -> Any:
    """Refuse ``NaN`` and ``Infinity`` (``json.loads``'s ``parse_constant``): they are not JSON."""
    message = f"{name} is not JSON"
    raise ValueError(message)


def fields(body: Any, allowed: dict[str, Any]) -> dict[str, Any]:
    """``body`` if it is an object whose fields are all ``allowed`` (name -> type or tuple of types)."""
    if not isinstance(body, dict):
        raise ApiError(400, "bad_request", "the body must be a JSON object")
    for key, value in body.items():
        if key not in allowed:
            message = f"unknown field {key!r}; allowed: {', '.join(sorted(allowed))}"
            raise ApiError(400, "bad_request", message)
        kinds = allowed[key]
        if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in _tuple(kinds)):
            raise ApiError(400, "bad_request", f"field {key!r} has the wrong type")
    return body


def required(body: dict[str, Any], *names: str) -> dict[str, Any]:
    """``body`` if it has every field of ``names``."""
    missing = [name for name in names if name not in body]
    if missing:
        raise ApiError(400, "bad_request", f"missing field(s): {', '.join(missing)}")
    return body


def short_texts(body: dict[str, Any], *names: str) -> dict[str, Any]:
    """``body`` if each text field of ``names`` is at most :data:`~..rules.MAX_TEXT` characters (else 422)."""
    for name in names:
        problem = too_long(name, body.get(name))
        if problem:
            raise ApiError(422, "too_long", problem, field=name, limit=MAX_TEXT)
    return body


def _tuple(kinds: Any) -> tuple[Any, ...]:
    return kinds if isinstance(kinds, tuple) else (kinds,)


def execute_body(body: Any) -> dict[str, Any]:
    """The body of an execute request with its defaults filled in: params, confirm, ticket, timeout."""
    checked = fields(
        body,
        {
            "params": dict,
            "confirm": (bool, str),
            "ticket": (str, type(None)),
            "timeout": (int, float, type(None)),
        },
    )
    timeout = checked.get("timeout")
    if timeout is not None and not timeout > 0:
        raise ApiError(400, "bad_request", "timeout must be a positive number of seconds")
    return {
        "params": checked.get("params", {}),
        "confirm": checked.get("confirm", False),
        "ticket": checked.get("ticket"),
        "timeout": float(timeout) if timeout is not None else None,
    }


def integer(raw: str | None, name: str, low: int, high: int) -> int | None:
    """The query parameter ``name`` as an integer from ``low`` to ``high``; None when absent."""
    if raw is None:
        return None
    if not digits(raw) or not low <= int(raw) <= high:
        raise ApiError(400, "bad_request", f"{name} must be an integer from {low} to {high}")
    return int(raw)


def digits(text: str) -> bool:
    """Whether ``text`` is a plain decimal number of at most 19 digits (fits SQLite's integer)."""
    return text.isascii() and text.isdigit() and len(text) <= 19
