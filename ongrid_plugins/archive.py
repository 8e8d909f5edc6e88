"""The documented import path of safe unpacking: ``ongrid_plugins.archive``.

The code lives in :mod:`ongrid_plugins.packs.archive`. This module only re-exports
its public names, so ``from ongrid_plugins.archive import UnsafeArchive`` (as
``docs/embedding.md`` shows) keeps working. It imports nothing but that module.
"""

from __future__ import annotations

from .packs.archive import (
    ARCHIVE_SUFFIXES,
    Limits,
    UnpackReport,
    UnsafeArchive,
    archive_kind,
    check_links,
    copy_folder,
    remove_tree,
    unpack,
)

__all__ = [
    "ARCHIVE_SUFFIXES",
    "Limits",
    "UnpackReport",
    "UnsafeArchive",
    "archive_kind",
    "check_links",
    "copy_folder",
    "remove_tree",
    "unpack",
]
