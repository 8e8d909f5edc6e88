"""The live, content-addressed catalog: digests, ``skills.lock``, hot reload.

What it does:

* :mod:`.digest` — every skill's content digest (sha256 over a canonical list
  of its files), and :func:`entry_drift`, the call-time check that the entry
  about to run is still the file that was loaded;
* :mod:`.lock` — ``<packs>/skills.lock``, written by ``ongrid-skills install``
  and ``uninstall``, and :func:`verify_pack`;
* :mod:`.build` — one catalog load: packs that drifted from the lock are not
  read, every skill gets its digest, a manifest that broke since the previous
  load keeps its last good version marked ``stale``;
* :mod:`.events` — what a reload changed (:class:`CatalogChange`) and the
  :class:`Hub` that tells subscribers (REST ``/v1/events``, MCP ``list_changed``);
* :mod:`.watch` — :class:`Watch`, the watchfiles / polling reloader behind
  ``SkillHost.watch()``.

What it may import: the core values (``models``, ``errors``, ``forksafe``), ``registry``,
``loader``, ``packs`` and ``settings`` — never ``host``, ``server``, ``cli`` or
``commands`` (the host calls the catalog, not the other way round).
``watchfiles`` is imported only when a watch starts, and :mod:`.watch` (asyncio)
only by ``SkillHost.watch()``.

Moved in from the top level: :mod:`.loader` (the walk over every root),
:mod:`.availability` (does a skill apply here), :mod:`.instructions` (a skill's
body and files, read when asked), :mod:`.validate` (``ongrid-skills validate``) and
:mod:`.resolve` (which skills to mount for one message).
"""

from __future__ import annotations

from .build import drifted_packs, load_catalog, with_digest
from .digest import MAX_BYTES, MAX_FILES, DigestFile, SkillDigest, entry_drift, skill_digest
from .events import CatalogChange, Hub, diff
from .lock import LOCK_NAME, Drift, LockEntry, read_lock, verify_pack

__all__ = [
    "LOCK_NAME",
    "MAX_BYTES",
    "MAX_FILES",
    "CatalogChange",
    "DigestFile",
    "Drift",
    "Hub",
    "LockEntry",
    "SkillDigest",
    "diff",
    "drifted_packs",
    "entry_drift",
    "load_catalog",
    "read_lock",
    "skill_digest",
    "verify_pack",
    "with_digest",
]
