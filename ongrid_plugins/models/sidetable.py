"""Memos kept beside value objects, never inside them.

A :class:`SideTable` maps an object, by identity, to what a stage remembers about it
(the compiled argument validator of a tool, the pack a folder of a root belongs to),
and forgets the entry when the object is garbage-collected. The value objects of
:mod:`ongrid_plugins.models` stay frozen and free of host state: two stages cannot
collide on a key, a copy made by ``attrs.evolve`` starts with no memo, exactly as a
fresh object does, and nothing mutable travels with a tool when it is pickled.

Identity, not equality: two equal roots of two loads keep separate memos. A lookup is
one ``dict.get`` on ``id(obj)`` (as cheap as the ``tool.cache.get`` it replaces); the
entry lives until the object's weak reference fires, which CPython does before the id
can be reused.

May import: the standard library only (a values module).
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import TypeVar

__all__ = ["SideTable"]

V = TypeVar("V")


class SideTable(dict[int, V]):
    """What one stage remembers per object: a dict keyed by ``id(obj)``, entries dropped with their object.

    Read with ``table.get(id(obj))``: one dict lookup, what the per-call path can
    afford. Write with :meth:`put` or :meth:`of`, which tie the entry to the object's life.
    """

    __slots__ = ("__weakref__", "_refs")

    def __init__(self) -> None:
        super().__init__()
        self._refs: dict[int, weakref.ref[object]] = {}

    def __repr__(self) -> str:
        return f"<SideTable of {len(self)} objects>"

    def put(self, obj: object, value: V) -> V:
        """Keep ``value`` for ``obj`` until ``obj`` is collected; returns ``value``."""
        key = id(obj)
        if key not in self._refs:
            self._refs[key] = weakref.ref(obj, self._forget(key))
        self[key] = value
        return value

    def of(self, obj: object, factory: Callable[[], V]) -> V:
        """The value kept for ``obj``, made by ``factory`` and kept on first use."""
        found = self.get(id(obj))
        return found if found is not None else self.put(obj, factory())

    def _forget(self, key: int) -> Callable[[weakref.ref[object]], None]:
        refs = self._refs

        def forget(ref: weakref.ref[object]) -> None:
            if refs.get(key) is ref:
                del refs[key]
                self.pop(key, None)

        return forget
