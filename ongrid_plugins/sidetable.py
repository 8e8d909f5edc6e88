"""Memos kept beside value objects, never inside them.

A :class:`SideTable` maps an object, by identity, to what a stage remembers about it
(the compiled argument validator of a tool, the pack a folder of a root belongs to),
and forgets the entry when the object is garbage-collected. The value objects of
:mod:`ongrid_plugins.models` stay frozen and free of host state: two stages cannot
collide on a key, a copy made by ``attrs.evolve`` starts with no memo, exactly as a
fresh object does, and nothing mutable travels with a tool when it is pickled.

Identity, not equality: two equal roots of two loads keep separate memos. A lookup is
one ``dict.get`` on ``id(obj)``; the entry lives until the object's weak reference
fires, which CPython does before the id can be reused.

May import: the standard library only (a values module).
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Generic, TypeVar

__all__ = ["SideTable"]

V = TypeVar("V")


class SideTable(Generic[V]):
    """What one stage remembers per object, keyed by the object's identity."""

    __slots__ = ("__weakref__", "_refs", "_values")

    def __init__(self) -> None:
        self._values: dict[int, V] = {}
        self._refs: dict[int, weakref.ref[object]] = {}

    def __repr__(self) -> str:
        return f"<SideTable of {len(self._values)} objects>"

    def __len__(self) -> int:
        return len(self._values)

    def get(self, obj: object) -> V | None:
        """The value kept for ``obj``, or None."""
        return self._values.get(id(obj))

    def put(self, obj: object, value: V) -> V:
        """Keep ``value`` for ``obj`` until ``obj`` is collected; returns ``value``."""
        key = id(obj)
        if key not in self._refs:
            self._refs[key] = weakref.ref(obj, self._forget(key))
        self._values[key] = value
        return value

    def setdefault(self, obj: object, factory: Callable[[], V]) -> V:
        """The value kept for ``obj``, made by ``factory`` and kept on first use."""
        found = self._values.get(id(obj))
        return found if found is not None else self.put(obj, factory())

    def _forget(self, key: int) -> Callable[[weakref.ref[object]], None]:
        values, refs = self._values, self._refs

        def forget(ref: weakref.ref[object]) -> None:
            if refs.get(key) is ref:
                del refs[key]
                values.pop(key, None)

        return forget
