"""The documented import path of persona files: ``ongrid_plugins.personas``.

The code lives in the gate stage, :mod:`ongrid_plugins.gate.personas`. This module
only re-exports its public names, so ``ongrid_plugins.personas.read_persona(path)``
(as ``docs/personas.md`` shows) keeps working. It imports nothing but that module.
"""

from __future__ import annotations

from .gate.personas import (
    MAX_PERSONA_BYTES,
    PersonaCatalog,
    PersonaFileError,
    discover,
    looks_like_path,
    persona_dirs,
    read_persona,
)

__all__ = [
    "MAX_PERSONA_BYTES",
    "PersonaCatalog",
    "PersonaFileError",
    "discover",
    "looks_like_path",
    "persona_dirs",
    "read_persona",
]
