"""Confinement: every subprocess call runs inside a kernel-enforced sandbox.

What it does: turns a tool's class, its ``sandbox`` declaration and the operator's
policy into a :class:`Profile` (:mod:`.profile`), and a profile into the kernel
state of one child process and all its descendants (:mod:`.plan`): Landlock rules
(:mod:`.landlock`), a seccomp filter (:mod:`.seccomp`), no capabilities
(:mod:`.caps`), per-call cgroups for limits and for killing every descendant
(:mod:`.cgroups`), a private ``/tmp`` in its own mount namespace (:mod:`.mounts`).
:func:`support` says what this machine offers (``ongrid-skills doctor``).

What it may import: the standard library, :mod:`attrs`, and from the package only
the core values (:mod:`ongrid_plugins.models`, :mod:`ongrid_plugins.settings`,
:mod:`ongrid_plugins.models.sidetable`, :mod:`ongrid_plugins.core.forksafe`), ``open_beneath`` of
:mod:`ongrid_plugins.discovery.roots` (:mod:`.mounts`). It never imports the host, the
gate, the surfaces or the loaders; the subprocess executor imports it, lazily.

See ``docs/sandbox.md`` for the model, the rules and what is still out of reach.
"""

from __future__ import annotations

import logging
import sys
import threading

from ...core.forksafe import renew_after_fork
from .kernel import Support, support
from .plan import ConfinementError, Plan
from .profile import HOME_SECRETS, Profile, hidden_paths, profile_for

__all__ = [
    "HOME_SECRETS",
    "ConfinementError",
    "Plan",
    "Profile",
    "Support",
    "hidden_paths",
    "profile_for",
    "support",
    "warn_missing",
]

logger = logging.getLogger("ongrid_plugins.sandbox")
_warned: set[str] = set()
_warned_lock = threading.Lock()
renew_after_fork(sys.modules[__name__], "_warned_lock")


def warn_missing(missing: list[str]) -> None:
    """Say once per process what ``ONGRID_SANDBOX=auto`` could not enforce."""
    with _warned_lock:
        fresh = [m for m in missing if m not in _warned]
        _warned.update(fresh)
    for item in fresh:
        logger.warning("sandbox: %s; calls run with what the kernel offers (ONGRID_SANDBOX=auto)", item)
