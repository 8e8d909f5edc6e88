"""The documented import path of the allow-listed roots: ``ongrid_plugins.roots``.

The code lives in :mod:`ongrid_plugins.discovery.roots`. This module only re-exports
its public names, so ``ongrid_plugins.roots.open_beneath`` (as ``docs/skill-md.md``
shows) keeps working. It imports nothing but that module.
"""

from __future__ import annotations

from .discovery.roots import (
    EntryRefusal,
    builtin_skills_dir,
    canonical,
    check_entry,
    check_symlinked_manifest,
    escapes,
    is_within,
    open_beneath,
    resolve_file,
)

__all__ = [
    "EntryRefusal",
    "builtin_skills_dir",
    "canonical",
    "check_entry",
    "check_symlinked_manifest",
    "escapes",
    "is_within",
    "open_beneath",
    "resolve_file",
]
