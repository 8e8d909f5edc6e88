"""The plain pieces every value is built from: JSON, its canonical text and the digests over it.

May import: the standard library only.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any

__all__ = [
    "JSON", "args_digest", "canonical_json", "decode_json", "digest_json", "sha256_hex", "strs",
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


_SPACE: Any = json.decoder.WHITESPACE.match  # type: ignore[attr-defined]  # the pattern decode() uses


def decode_json(scan: Callable[[str, int], tuple[Any, int]], text: str) -> Any:
    """``decoder.decode(text)`` for the decoder whose ``scan_once`` is ``scan`` (same value, same errors).

    ``JSONDecoder.decode`` and ``raw_decode`` are two Python-level wrappers around the
    C scanner, ~60 bytecodes a document: on a call path that parses twice a call, and a
    load that parses every manifest, they are written out once here.
    """
    # The whitespace pattern is matched only where there is whitespace to skip: a regex
    # match costs more than the scan of a small document, and a text stripped already
    # (a skill's stdout) or written by our encoder has none.
    start = _SPACE(text, 0).end() if text[:1] in _BLANKS else 0
    try:
        data, end = scan(text, start)
    except StopIteration as err:
        raise json.JSONDecodeError("Expecting value", text, err.value) from None
    if end != len(text):
        end = _SPACE(text, end).end()
        if end != len(text):
            raise json.JSONDecodeError("Extra data", text, end)
    return data


#: What ``_SPACE`` skips (``[ \t\n\r]*``): a text starting with none of them starts at 0
#: (``""`` is in every str: an empty text is matched, and fails as ``decode`` fails).
_BLANKS = " \t\n\r"
