"""The JSON Schema bound keywords and the comparison each one asks for, written once.

``NUMBER_BOUNDS`` maps ``minimum`` & co to ``compare(instance, limit)``;
``SIZE_BOUNDS`` maps ``minLength`` & co to the type they measure and
``compare(len(instance), limit)``. The default-value check (:mod:`.defaults`)
builds its rules from these tables.
Imports nothing of the package.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

__all__ = ["NUMBER_BOUNDS", "SIZE_BOUNDS"]

NUMBER_BOUNDS: Final[dict[str, Callable[[Any, Any], bool]]] = {
    "minimum": lambda instance, limit: not instance < limit,
    "maximum": lambda instance, limit: not instance > limit,
    "exclusiveMinimum": lambda instance, limit: not instance <= limit,
    "exclusiveMaximum": lambda instance, limit: not instance >= limit,
}

SIZE_BOUNDS: Final[dict[str, tuple[type, Callable[[int, Any], bool]]]] = {
    "minLength": (str, lambda length, limit: not length < limit),
    "maxLength": (str, lambda length, limit: not length > limit),
    "minItems": (list, lambda length, limit: not length < limit),
    "maxItems": (list, lambda length, limit: not length > limit),
}
