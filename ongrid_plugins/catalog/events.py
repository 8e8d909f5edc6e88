"""Catalog changes: what a reload added, changed, removed or kept stale, and who hears of it.

:func:`diff` compares two registry snapshots skill by skill (by name and
digest); :class:`Hub` hands each batch of changes to every subscriber (the
REST event stream, the MCP sessions, ``async for`` watchers). Subscribers are
called in the thread that reloaded; one that raises is logged and keeps its
subscription.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from typing import Any

import attrs

from ..core.forksafe import renew_after_fork
from ..discovery.registry import Snapshot
from ..models import Skill

__all__ = ["KINDS", "CatalogChange", "Hub", "Listener", "diff"]

logger = logging.getLogger(__name__)

KINDS = ("added", "changed", "removed", "stale")


def _names(value: Sequence[str]) -> tuple[str, ...]:
    return tuple(value)


@attrs.frozen
class CatalogChange:
    """One skill that a reload added, changed, removed, or kept as its last good version."""

    kind: str
    """``added``, ``changed``, ``removed`` or ``stale``."""
    name: str
    digest: str
    """The digest now (empty for ``removed``)."""
    previous: str
    """The digest before (empty for ``added``)."""
    path: str
    tools: tuple[str, ...] = attrs.field(default=(), converter=_names)
    """The skill's tools (before, for ``removed``)."""
    message: str = ""
    """For ``stale``: why the manifest no longer loads."""

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (the data of a ``/v1/events`` event)."""
        return attrs.asdict(self, recurse=False) | {"tools": list(self.tools)}

    def log_line(self) -> str:
        """The one log line this change gets."""
        if self.kind == "added":
            return f'catalog: added skill "{self.name}" ({_short(self.digest)}) from {self.path}'
        if self.kind == "removed":
            return f'catalog: removed skill "{self.name}" ({_short(self.previous)}), was {self.path}'
        if self.kind == "stale":
            return (
                f'catalog: skill "{self.name}" at {self.path} no longer loads, keeping its last good '
                f"version ({_short(self.digest)}) as stale: {self.message}"
            )
        return (
            f'catalog: changed skill "{self.name}" ({_short(self.previous)} -> {_short(self.digest)}) '
            f"at {self.path}"
        )


def _short(digest: str) -> str:
    return digest[:12] if digest else "no digest"


def diff(old: Snapshot, new: Snapshot) -> list[CatalogChange]:
    """What changed from ``old`` to ``new``, sorted by skill name."""
    changes = []
    for name in sorted(set(old.skills) | set(new.skills)):
        before, after = old.skills.get(name), new.skills.get(name)
        change = _change(name, before, after)
        if change is not None:
            changes.append(change)
    return changes


def _change(name: str, before: Skill | None, after: Skill | None) -> CatalogChange | None:
    if after is None:
        assert before is not None
        return CatalogChange("removed", name, "", before.digest, before.path, _tools(before))
    tools = _tools(after)
    if before is None:
        return CatalogChange("added", name, after.digest, "", after.path, tools)
    if after.stale and after.stale != before.stale:
        return CatalogChange("stale", name, after.digest, before.digest, after.path, tools, after.stale)
    if after.digest != before.digest or after.path != before.path or bool(after.stale) != bool(before.stale):
        return CatalogChange("changed", name, after.digest, before.digest, after.path, tools)
    if _tools(before) != tools:
        return CatalogChange("changed", name, after.digest, before.digest, after.path, tools)
    return None


def _tools(skill: Skill) -> tuple[str, ...]:
    return tuple(t.name for t in skill.tools)


Listener = Callable[[list[CatalogChange]], None]
"""Receives each non-empty batch of changes."""


class Hub:
    """The subscribers of one host's catalog."""

    def __init__(self) -> None:
        self._listeners: list[Listener] = []
        self._lock = threading.Lock()
        renew_after_fork(self, "_lock")  # the watcher's thread publishes under it

    def __repr__(self) -> str:
        return f"<Hub listeners={len(self._listeners)}>"

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Call ``listener`` with every batch of changes from now on; returns the unsubscribe function."""
        with self._lock:
            self._listeners.append(listener)

        def unsubscribe() -> None:
            with self._lock:
                if listener in self._listeners:
                    self._listeners.remove(listener)

        return unsubscribe

    def publish(self, changes: list[CatalogChange]) -> None:
        """Log each change once, then tell every subscriber (nothing happens for an empty batch)."""
        if not changes:
            return
        for change in changes:
            logger.info("%s", change.log_line())
        with self._lock:
            listeners = list(self._listeners)
        for listener in listeners:
            try:
                listener(changes)
            except Exception:
                logger.exception("catalog: a change listener failed")
