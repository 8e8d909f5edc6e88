"""Locks a forked child makes anew: a thread of the parent may have held one at the fork.

``os.fork()`` copies only the thread that called it. A lock another thread held at
that moment (the remote results reader, the catalog watcher, or any thread of the
embedding application) stays locked in the child, with no thread left to release it:
the child's first use of it hangs for good. A server that loads its skills and then
forks its workers (a pre-fork server, ``multiprocessing`` with the fork start method)
meets this whenever a fork lands while one of those threads holds its lock.

:func:`renew_after_fork` names the lock attributes of an object or a module; in a
forked child, before any of its own code runs (``os.register_at_fork``), each is
replaced by a new, unlocked lock of the same kind. The state a lock guards is left as
the fork found it: each guarded operation here leaves its state whole at every step a
thread can be stopped at, so only the lock itself needs renewing.

It may import the standard library only.
"""

from __future__ import annotations

import os
import threading
import weakref
from typing import Any

__all__ = ["renew_after_fork"]

_LOCK = type(threading.Lock())
_RLOCK = type(threading.RLock())
#: Each owner (held weakly: one dropped is forgotten) and the names of its locks.
_OWNERS: weakref.WeakKeyDictionary[Any, tuple[str, ...]] = weakref.WeakKeyDictionary()
_OWNERS_LOCK = threading.Lock()  # made anew first, in the child


def renew_after_fork(owner: object, *names: str) -> None:
    """In a forked child, replace ``owner.<name>`` (a ``Lock`` or an ``RLock``) by a new one.

    ``owner`` is an object (weakly referenced: it must support weak references) or a
    module, for its global locks (``renew_after_fork(sys.modules[__name__], "_lock")``;
    code that reads the global at each use gets the new lock).

    :raises TypeError: a name is not a lock's, or ``owner`` cannot be referenced weakly.
    """
    for name in names:
        if not isinstance(getattr(owner, name), _RLOCK | _LOCK):
            raise TypeError(f"renew_after_fork: {owner!r}.{name} is not a Lock or an RLock")
    with _OWNERS_LOCK:
        _OWNERS[owner] = (*_OWNERS.get(owner, ()), *names)


def _renew() -> None:
    global _OWNERS_LOCK
    _OWNERS_LOCK = threading.Lock()
    for owner, names in list(_OWNERS.items()):
        for name in names:
            try:  # one owner that lost its lock (or refuses a new one) keeps the others from harm
                fresh = threading.RLock() if isinstance(getattr(owner, name), _RLOCK) else threading.Lock()
                setattr(owner, name, fresh)
            except (AttributeError, TypeError):
                continue


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_renew)
