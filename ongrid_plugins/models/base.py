"""The plain pieces every value is built from: JSON, its canonical text and the digests over it.

May import: the standard library only.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any

__all__ = [
    "JSON", "args_digest", "canonical_json", "digest_json", "sha256_hex", "strs",
]  # fmt: skip

JSON = dict[str, Any]


def strs(value: Iterable[str]) -> tuple[str, ...]:
    """The ``converter=`` of every tuple-of-strings field."""
    return tuple(value)


canonical_json: Callable[[Any], str] = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
).encode
"""The canonical JSON text of a value: sorted keys, no blanks, UTF-8 kept, no NaN.

The stdlib encoder with these fixed options, made once (``json.dumps`` with any
non-default option builds a new encoder on every call). Every digest covers these bytes:
``tests/test_canonical_json.py`` pins them."""


def sha256_hex(data: bytes | str) -> str:
    """``hashlib.sha256(data).hexdigest()``, a str hashed as its UTF-8."""
    return hashlib.sha256(data.encode("utf-8") if isinstance(data, str) else data).hexdigest()


def args_digest(tool: str, args: Mapping[str, Any]) -> str:
    """sha256 over the tool name and the canonical JSON of its arguments."""
    return digest_json(tool, canonical_json(args))


def digest_json(tool: str, canonical_args: str) -> str:
    """:func:`args_digest` from arguments already in canonical JSON text."""
    return sha256_hex(tool + "\0" + canonical_args)
