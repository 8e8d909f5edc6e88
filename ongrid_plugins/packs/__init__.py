"""Skill packs: find them, check them, install them.

A pack is a folder of skills that arrives as a unit: a pip distribution with an
``ongrid_skills`` entry point, or a folder or archive given to
``ongrid-skills install``. This package holds the whole road from one to a root the
loader walks, one module per job:

* :mod:`~ongrid_plugins.packs.archive` — unpack a folder, ``.tar[.gz|.bz2|.xz]`` or
  ``.zip`` into a folder, refusing anything hostile (names, links, devices, bombs);
* :mod:`~ongrid_plugins.packs.pack_roots` — pip packs and installed packs become
  allow-list roots (:class:`PackRoots`, the built-in plugin ``packs``);
* :mod:`~ongrid_plugins.packs.sources` — what a ``PATH`` given to
  ``ongrid-skills validate`` may be (folder, archive, distribution), and its check;
* :mod:`~ongrid_plugins.packs.install` — ``ongrid-skills install`` / ``uninstall``:
  unpack, validate, swap into place atomically, record in ``skills.lock``;
* :mod:`~ongrid_plugins.packs.consent`, :mod:`~ongrid_plugins.packs.pipconsent` and
  :mod:`~ongrid_plugins.packs.trusted` — trust at install: the signature checked, what
  the pack may do shown and consented, the consent sealed; pip packs wait for
  ``ongrid-skills trust`` (docs/trust.md).

The modules sit at three stages of the pipeline (``docs/architecture.md``,
``tests/test_imports.py``), so what each may import differs: ``archive`` imports
only :mod:`ongrid_plugins.errors`; ``pack_roots`` only the core values (``errors``,
``hookspecs``, ``models``), because the plugin manager builds :class:`PackRoots`;
``sources``, ``install``, ``consent``, ``pipconsent`` and ``trusted`` come after the
catalog and may import ``archive``, ``pack_roots``, :mod:`ongrid_plugins.catalog.validate` and
:mod:`ongrid_plugins.catalog`.
None of them imports the host or a surface.

This ``__init__`` re-exports the names of ``pack_roots`` only, the import path
``ongrid_plugins.packs`` has always had. ``install`` and ``sources`` (tarfile,
zipfile, hashlib) are imported when used, as :mod:`ongrid_plugins.packs.install`,
:mod:`ongrid_plugins.packs.sources` and :mod:`ongrid_plugins.packs.archive`.
"""

from __future__ import annotations

from .pack_roots import (
    MARKER,
    PACK_GROUP,
    InstalledPack,
    PackError,
    PackInfo,
    PackRoots,
    installed_packs,
    listed_pack,
    marker_meta,
    pack_folder,
)

# Public without being in ``__all__``, as in the module this package replaced: the
# plugin manager, the catalog and the tests import them from here.
from .pack_roots import dist_name_version as dist_name_version
from .pack_roots import read_marker as read_marker
from .pack_roots import resolve_pack as resolve_pack

__all__ = [
    "MARKER",
    "PACK_GROUP",
    "InstalledPack",
    "PackError",
    "PackInfo",
    "PackRoots",
    "installed_packs",
    "listed_pack",
    "marker_meta",
    "pack_folder",
]
