"""The documented import path of checking ``ongrid-skills validate`` paths: ``ongrid_plugins.sources``.

The code lives in :mod:`ongrid_plugins.packs.sources`. This module only re-exports
its public names, so ``from ongrid_plugins.sources import validate_sources`` (as
``docs/embedding.md`` shows) keeps working. It imports nothing but that module.
"""

from __future__ import annotations

from .packs.sources import archive_label, check_no_marker, pack_top, relabel, validate_sources

__all__ = ["archive_label", "check_no_marker", "pack_top", "relabel", "validate_sources"]
