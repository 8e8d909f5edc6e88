"""``ONGRID_REMOTE_ROUTES``: which tools run on which worker queue.

A comma list of ``PATTERN=QUEUE`` (or, in ``config.toml``, a list of them); PATTERN is
a tool-name glob (``fnmatch``) or ``category:NAME``. The first match wins; an
unmatched tool runs locally.

A bad item never stops a host: :func:`route_table` keeps it, in its place, as a
problem. Tools matched by a good route *before* the first bad item are routed as
written; every other subprocess tool is refused with the problem (the bad item might
have been meant for it, and a routed tool never silently runs locally instead).
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable
from typing import TYPE_CHECKING

import attrs

from ..errors import ConfigError

if TYPE_CHECKING:
    from ..models import Tool

__all__ = ["Route", "RouteTable", "parse_routes", "route_for", "route_table", "unmatched"]

SETTING = "ONGRID_REMOTE_ROUTES"
_QUEUE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")
_GLOB = re.compile(r"^[A-Za-z0-9_.*?\[\]!-]{1,200}$")
_CATEGORY = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,99}$")
_EXAMPLE = "e.g. disk_*=storage,category:network=edge"


@attrs.frozen
class Route:
    """One ``PATTERN=QUEUE`` pair."""

    pattern: str
    queue: str

    @property
    def category(self) -> str | None:
        """The NAME of a ``category:NAME`` route, None for a glob."""
        return self.pattern[len("category:") :] if self.pattern.startswith("category:") else None

    def matches(self, tool: Tool) -> bool:
        """Whether ``tool`` is sent to :attr:`queue` by this route."""
        category = self.category
        if category is not None:
            return tool.category == category
        return fnmatch.fnmatchcase(tool.name, self.pattern)


@attrs.frozen
class RouteTable:
    """The parsed routes of one setting, bad items kept in place as problem sentences."""

    items: tuple[Route | str, ...] = ()
    source: str = SETTING
    """Where the routes were read: the variable, or ``routes`` in ``[remote]`` of a config file."""

    @property
    def routes(self) -> tuple[Route, ...]:
        """The good routes, in order."""
        return tuple(item for item in self.items if isinstance(item, Route))

    @property
    def problems(self) -> tuple[str, ...]:
        """One sentence per bad item (empty when every item parsed)."""
        return tuple(item for item in self.items if isinstance(item, str))

    def queue_for(self, tool: Tool) -> str | None:
        """The queue ``tool`` runs on, None to run it locally.

        :raises ConfigError: a bad item comes before any route matching ``tool``.
        """
        for item in self.items:
            if isinstance(item, str):
                raise ConfigError(
                    f"{tool.name} is not run: {item} (the routes after it, and running it locally, "
                    f"are not tried while this item is broken)"
                )
            if item.matches(tool):
                return item.queue
        return None


def _problem(source: str, item: str, why: str) -> str:
    return f"{source}: {item!r} {why}; fix or remove it ({_EXAMPLE})"


def _item(raw: str, source: str) -> Route | str:
    pattern, sep, queue = raw.partition("=")
    pattern, queue = pattern.strip(), queue.strip()
    if not sep:
        return _problem(source, raw, "is not PATTERN=QUEUE (no '=')")
    if not queue:
        return _problem(source, raw, "has an empty queue: name the worker queue after '='")
    if not _QUEUE.match(queue):
        return _problem(
            source, raw, f"has a bad queue {queue!r} (letters, digits, '.', '_' or '-', at most 100)"
        )
    if pattern.startswith("category:"):
        name = pattern[len("category:") :]
        if not _CATEGORY.match(name):
            why = 'names no category: write category:NAME, NAME as in the skills\' "category"'
            return _problem(source, raw, why)
        return Route(pattern, queue)
    if not pattern:
        return _problem(source, raw, "has an empty pattern: give a tool-name glob or category:NAME")
    if not _GLOB.match(pattern) or pattern.count("[") != pattern.count("]"):
        why = "has a bad pattern: a tool-name glob (letters, digits, '_', '-', '.', '*', '?', [...])"
        return _problem(source, raw, why + " or category:NAME")
    return Route(pattern, queue)


def route_table(text: str | Iterable[str], source: str = SETTING) -> RouteTable:
    """Parse ``PATTERN=QUEUE,...`` (or a list of items); never raises, bad items become problems."""
    pieces = text.split(",") if isinstance(text, str) else [p for item in text for p in str(item).split(",")]
    items = [_item(piece.strip(), source) for piece in pieces if piece.strip()]
    return RouteTable(tuple(items), source)


def parse_routes(text: str, source: str = SETTING) -> tuple[Route, ...]:
    """Parse ``PATTERN=QUEUE,...``; a malformed pair is a :class:`ConfigError` naming it."""
    table = route_table(text, source)
    if table.problems:
        raise ConfigError(table.problems[0])
    return table.routes


def unmatched(table: RouteTable, tools: Iterable[Tool]) -> list[str]:
    """Warnings for good routes that send no loaded tool anywhere (a typo, most often)."""
    tools = list(tools)
    categories = {tool.category for tool in tools}
    warnings = []
    for route in table.routes:
        category = route.category
        if category is not None and category not in categories:
            known = ", ".join(sorted(categories)) or "none"
            warnings.append(
                f"{table.source}: {route.pattern}={route.queue} names an unknown category "
                f"{category!r} (the loaded tools' categories: {known})"
            )
        elif category is None and not any(route.matches(tool) for tool in tools):
            warnings.append(f"{table.source}: {route.pattern}={route.queue} matches no loaded tool")
    return warnings


_parsed: dict[tuple[str, str], RouteTable] = {}


def cached_table(text: str, source: str = SETTING) -> RouteTable:
    """:func:`route_table`, parsed once per (text, source)."""
    key = (text, source)
    table = _parsed.get(key)
    if table is None:
        table = _parsed[key] = route_table(text, source)
    return table


def route_for(tool: Tool, routes: str | tuple[Route, ...] | RouteTable) -> str | None:
    """The queue ``tool`` runs on, or ``None`` to run it locally.

    :raises ConfigError: the routes have a bad item before any that matches ``tool``.
    """
    if isinstance(routes, str):
        if not routes:
            return None
        routes = cached_table(routes)
    if isinstance(routes, RouteTable):
        return routes.queue_for(tool)
    for route in routes:
        if route.matches(tool):
            return route.queue
    return None
