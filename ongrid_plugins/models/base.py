"""The plain pieces every value is built from: JSON, its canonical text and the digests over it.

May import: the standard library only.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["JSON", "args_digest", "canonical_json", "digest_json", "strs"]

JSON = dict[str, Any]


def strs(value: Iterable[str]) -> tuple[str, ...]:
    """The ``converter=`` of every tuple-of-strings field."""
    return tuple(value)


def canonical_json(value: Any) -> str:
    """The canonical JSON text of a value: sorted keys, no spaces, UTF-8 kept."""
    return _canonical(value)


# ``json.dumps`` with any non-default option builds a new encoder on every call (a few
# microseconds, several times per call): one encoder, same options, same text.
_canonical = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
).encode


def args_digest(tool: str, args: Mapping[str, Any]) -> str:
    """sha256 over the tool name and the canonical JSON of its arguments."""
    return digest_json(tool, canonical_json(args))


def digest_json(tool: str, canonical_args: str) -> str:
    """:func:`args_digest` from arguments already in canonical JSON text."""
    return hashlib.sha256((tool + "\0" + canonical_args).encode("utf-8")).hexdigest()
