"""Persona lookup for the host: a :class:`Persona`, a built-in or persona-file name, or a path.

The pipeline's :func:`~ongrid_plugins.host.pipeline.lookup` step resolves the persona of
every call through the host's :class:`PersonaLookup`, which remembers the persona
files found until a load (or a name it does not know yet) makes it look again.

Layering: the host stage. It may import the values, the gate's built-in personas and
the persona files' reader; it never imports the host.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeAlias

from .. import gate
from ..errors import ConfigError, UnknownPersona
from ..models import Persona

if TYPE_CHECKING:
    from ..settings import Settings
    from .personas import PersonaCatalog

__all__ = ["PersonaLike", "PersonaLookup"]

PersonaLike: TypeAlias = str | Persona
"""What every ``persona`` parameter of the host takes: a :class:`Persona`, a name or a file path."""


class PersonaLookup:
    """Resolves persona names for one host; the persona files are read on first need."""

    __slots__ = ("_catalog",)

    def __init__(self) -> None:
        self._catalog: PersonaCatalog | None = None

    def forget(self) -> None:
        """Read the persona folders again on next use (a load calls this)."""
        self._catalog = None

    def resolve(self, persona: PersonaLike, settings: Settings) -> Persona:
        """The persona ``persona`` names: itself, a built-in, a persona file by name or by path.

        :raises UnknownPersona: no persona has that name (there is no fallback); when a
            persona file of that name failed to load, it names the file and its problem.
        :raises ConfigError: the persona file named by path is broken.
        """
        if isinstance(persona, Persona):
            return persona
        if not isinstance(persona, str):
            message = f"persona must be a name, a path or a Persona, got {type(persona).__name__}"
            raise ConfigError(message)
        builtin = gate.BUILTIN_PERSONAS.get(persona)
        if builtin is not None:
            return builtin
        from . import personas as persona_files

        if persona_files.looks_like_path(persona):
            return persona_files.read_persona(persona)
        found = self._files(settings).personas.get(persona)
        if found is None:  # a file added since the last look: read the folders again, once
            found = self._files(settings, refresh=True).personas.get(persona)
        if found is None:
            catalog = self._files(settings)
            raise UnknownPersona(persona, catalog.names(), catalog.broken.get(persona, ""))
        return found

    def every(self, settings: Settings) -> list[Persona]:
        """The three built-ins, then the persona files (read again now), sorted by name."""
        files = self._files(settings, refresh=True).personas
        return [*gate.BUILTIN_PERSONAS.values(), *(files[name] for name in sorted(files))]

    def _files(self, settings: Settings, refresh: bool = False) -> PersonaCatalog:
        catalog = self._catalog
        if catalog is None or refresh:
            from .personas import discover

            catalog = self._catalog = discover(settings)
        return catalog
