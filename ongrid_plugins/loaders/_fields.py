"""Lenient field reading for front-matter manifests: coerce what real clients coerce, note it.

Every reader records a :class:`~ongrid_plugins.models.Problem` (with a JSON pointer
into the front matter) for anything it had to forgive or ignore, so the loader stays
as lenient as Claude Code or openclaw while ``ongrid-skills validate --strict`` can
still hold authors to the letter.

Keys are matched in any of the spellings clients accept: ``allowed-tools``,
``allowed_tools`` and ``allowedTools`` are the same key (:func:`canon`).
"""

from __future__ import annotations

import difflib
import functools
import json
import re
from collections.abc import Mapping
from typing import Any

from ..models import Problem

__all__ = ["Fields", "canon", "pointer"]

_CAMEL = re.compile(r"(?<=[a-z0-9])([A-Z])")
_TRUE = frozenset({"true", "yes", "on", "1"})
_FALSE = frozenset({"false", "no", "off", "0"})
_LIST_SPLIT = re.compile(r"[,\s]+")


def canon(key: object) -> str:
    """The canonical spelling of a key: snake_case (``anyBins``, ``any-bins`` -> ``any_bins``)."""
    return _canon(key if isinstance(key, str) else str(key))


@functools.lru_cache(maxsize=4096)
def _canon(text: str) -> str:  # the same few dozen keys come back in every file
    return _CAMEL.sub(r"_\1", text).lower().replace("-", "_")


def pointer(*parts: object) -> str:
    """A JSON pointer from its parts (``pointer("tools", 0, "name")`` -> ``/tools/0/name``)."""
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in parts)


def show(value: object, limit: int = 60) -> str:
    """A short rendering of a value for messages."""
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def type_name(value: object, *, json: bool = False) -> str:
    """The YAML (or, with ``json=True``, JSON) name of a value's type, with an article."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array" if json else "a list"
    if isinstance(value, dict):
        return "an object" if json else "a mapping"
    return type(value).__name__


class Fields:
    """Collects the problems of one manifest while its fields are read."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.problems: list[Problem] = []

    def error(self, where: str, code: str, message: str, hint: str = "") -> None:
        """Record an error: the skill will not be registered."""
        self.problems.append(Problem("error", code, message, self.path, where, hint))

    def warn(self, where: str, code: str, message: str, hint: str = "") -> None:
        """Record a warning: something forgiven or ignored."""
        self.problems.append(Problem("warning", code, message, self.path, where, hint))

    @property
    def errors(self) -> list[Problem]:
        """The error-level problems so far."""
        return [p for p in self.problems if p.level == "error"]

    def known(self, data: Mapping[Any, Any], names: Mapping[str, str], where: str) -> dict[str, Any]:
        """Values of ``data`` by canonical key, for keys in ``names`` (canonical -> preferred spelling).

        Unknown keys get an ``unknown_field`` warning naming the closest known key; a
        key given twice in two spellings keeps the first with a ``duplicate_field`` warning.
        """
        found: dict[str, Any] = {}
        spelled: dict[str, str] = {}
        for key, value in data.items():
            name = canon(key)
            if name not in names:
                close = difflib.get_close_matches(name, list(names), n=1, cutoff=0.7)
                hint = f' — did you mean "{names[close[0]]}"?' if close else ""
                self.warn(where + pointer(key), "unknown_field", f'unknown field "{key}"{hint}')
            elif name in found:
                message = f'"{key}" repeats "{spelled[name]}" in another spelling; the first one is used'
                self.warn(where + pointer(key), "duplicate_field", message)
            else:
                found[name] = value
                spelled[name] = str(key)
        return found

    def text(self, value: object, where: str, label: str) -> str | None:
        """A string; numbers and booleans are turned into strings with a warning."""
        if isinstance(value, str):
            return value
        if isinstance(value, bool | int | float):
            text = str(value).lower() if isinstance(value, bool) else str(value)
            message = f'"{label}" should be a string; {type_name(value)} {show(value)} was read as "{text}"'
            self.warn(where, "coerced", message, "quote the value")
            return text
        self.warn(where, "wrong_type", f'"{label}" must be a string (got {type_name(value)}); ignored')
        return None

    def strings(self, value: object, where: str, label: str) -> tuple[str, ...]:
        """A list of strings, or one string of comma- or space-separated items."""
        if isinstance(value, str):
            return tuple(item for item in _LIST_SPLIT.split(value) if item)
        if not isinstance(value, list):
            message = f'"{label}" must be a list of strings (got {type_name(value)}); ignored'
            self.warn(where, "wrong_type", message)
            return ()
        items: list[str] = []
        for index, item in enumerate(value):
            text = self.text(item, where + pointer(index), f"{label}[{index}]") if item is not None else None
            if text and text not in items:
                items.append(text)
        return tuple(items)

    def flag(self, value: object, where: str, label: str) -> bool | None:
        """A boolean; ``yes``/``no``/``on``/``off``/``1``/``0`` strings accepted (any case)."""
        if isinstance(value, bool):
            return value
        lowered = str(value).strip().lower() if isinstance(value, str | int) else ""
        if lowered in _TRUE or lowered in _FALSE:
            return lowered in _TRUE
        self.warn(where, "wrong_type", f'"{label}" must be true or false (got {show(value)}); ignored')
        return None

    def mapping(self, value: object, where: str, label: str) -> dict[Any, Any] | None:
        """A mapping, or None with a warning."""
        if isinstance(value, dict):
            return value
        self.warn(where, "wrong_type", f'"{label}" must be a mapping (got {type_name(value)}); ignored')
        return None
