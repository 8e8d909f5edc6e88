"""The documented import path of pack installing: ``ongrid_plugins.install``.

The code lives in :mod:`ongrid_plugins.packs.install`. This module only re-exports
its public names, so ``from ongrid_plugins.install import install_pack`` (as
``docs/embedding.md`` shows) keeps working. It imports nothing but that module.
"""

from __future__ import annotations

from .packs.install import (
    InstallError,
    InstallResult,
    install_pack,
    name_problem,
    pack_identity,
    uninstall_pack,
)

__all__ = ["InstallError", "InstallResult", "install_pack", "name_problem", "pack_identity", "uninstall_pack"]
