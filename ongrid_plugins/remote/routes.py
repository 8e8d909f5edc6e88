"""``ONGRID_REMOTE_ROUTES``: which tools run on which worker queue.

A comma list of ``PATTERN=QUEUE``; PATTERN is a tool-name glob (``fnmatch``) or
``category:NAME``. The first match wins; an unmatched tool runs locally.
"""

from __future__ import annotations

import fnmatch
import re
from typing import TYPE_CHECKING

import attrs

from ..errors import ConfigError

if TYPE_CHECKING:
    from ..models import Tool

__all__ = ["Route", "parse_routes", "route_for"]

_QUEUE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")


@attrs.frozen
class Route:
    """One ``PATTERN=QUEUE`` pair."""

    pattern: str
    queue: str

    def matches(self, tool: Tool) -> bool:
        """Whether ``tool`` is sent to :attr:`queue` by this route."""
        if self.pattern.startswith("category:"):
            return tool.category == self.pattern[len("category:") :]
        return fnmatch.fnmatchcase(tool.name, self.pattern)


def parse_routes(text: str) -> tuple[Route, ...]:
    """Parse ``PATTERN=QUEUE,...``; a malformed pair is a :class:`ConfigError` naming it."""
    routes = []
    for raw in text.split(","):
        item = raw.strip()
        if not item:
            continue
        pattern, sep, queue = item.partition("=")
        pattern, queue = pattern.strip(), queue.strip()
        if not sep or not pattern or not _QUEUE.match(queue):
            message = (
                f"ONGRID_REMOTE_ROUTES: {item!r} is not PATTERN=QUEUE (a tool-name glob or "
                "category:NAME, '=', a queue name of letters, digits, '.', '_' or '-'); "
                "e.g. ONGRID_REMOTE_ROUTES='disk_*=storage,category:network=edge'"
            )
            raise ConfigError(message)
        routes.append(Route(pattern, queue))
    return tuple(routes)


_parsed: dict[str, tuple[Route, ...]] = {}


def route_for(tool: Tool, routes: str | tuple[Route, ...]) -> str | None:
    """The queue ``tool`` runs on, or ``None`` to run it locally."""
    if isinstance(routes, str):
        if not routes:
            return None
        parsed = _parsed.get(routes)
        if parsed is None:
            parsed = _parsed[routes] = parse_routes(routes)
        routes = parsed
    for route in routes:
        if route.matches(tool):
            return route.queue
    return None
