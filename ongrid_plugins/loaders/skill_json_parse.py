"""Reading a ``skill.json``: bounded bytes, strict UTF-8, one JSON object, no duplicate keys.

The first step of the ``skill_json`` loader (:mod:`.skill_json`): the file's
bytes become a plain ``dict``, or a :class:`~ongrid_plugins.errors.ManifestParseError`
saying why not. Nothing here checks a field.

It may import the core values (``errors``, ``models``) and :mod:`._fields`.
"""

from __future__ import annotations

import json
import os
import re
from typing import Any

from ..core.echo import number_too_long, utf8_encodable
from ..errors import ManifestParseError
from ._fields import show, type_name

__all__ = [
    "MANIFEST_NAME",
    "MAX_MANIFEST_BYTES",
    "got",
    "json_type",
    "parse_manifest",
    "read_bounded",
    "read_manifest",
]

MANIFEST_NAME = "skill.json"
MAX_MANIFEST_BYTES = 1024 * 1024


def _reject_constant(name: str) -> None:
    message = f"{name} is not valid JSON"
    raise ValueError(message)


def _unique_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        keys = [key for key, _value in pairs]
        dup = next(key for index, key in enumerate(keys) if key in keys[:index])
        message = f'duplicate key "{dup}" (two parsers could read two different manifests)'
        raise ValueError(message)
    return obj


_DECODER = json.JSONDecoder(object_pairs_hook=_unique_object, parse_constant=_reject_constant)


def read_manifest(path: str, limit: int = MAX_MANIFEST_BYTES) -> dict[str, Any]:
    """Read and parse a manifest; raise :class:`ManifestParseError` saying why not.

    Refuses anything but a regular file of at most ``limit`` bytes of UTF-8
    holding one JSON object without duplicate keys or NaN/Infinity.
    """
    return parse_manifest(read_bounded(path, limit), path)


def parse_manifest(raw: bytes, path: str) -> dict[str, Any]:
    """Parse the bytes of a manifest (see :func:`read_manifest`)."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        message = f"invalid UTF-8 at byte {exc.start}: {exc.reason}"
        raise ManifestParseError(path, message) from None
    if text.startswith("\ufeff"):
        text = text[1:]
    try:
        data = _DECODER.decode(text)
    except ValueError as exc:
        message = str(exc)
        if "int_max_str_digits" in message:
            message = number_too_long(text) or message
        raise ManifestParseError(path, message) from None
    except RecursionError:  # the C scanner recurses once per container
        raise ManifestParseError(path, _too_deep()) from None
    if not isinstance(data, dict):
        message = f"the manifest must be a JSON object, got {json_type(data)}"
        raise ManifestParseError(path, message)
    if _SURROGATE_ESCAPE.search(text) and (where := _lone_surrogate(data)):
        raise ManifestParseError(path, _not_unicode(*where))
    return data


#: A ``\uD800``-``\uDFFF`` escape: only then can the decoded text hold a lone surrogate
#: (the file itself is strict UTF-8). Also matches an escaped backslash before ``ud800``,
#: which only costs the walk below.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89abcdefABCDEF]")


def _lone_surrogate(data: dict[str, Any]) -> tuple[str, str] | None:
    """``(JSON pointer, string)`` of the first key or string holding a lone surrogate, or None.

    Iterative: the decoder accepts nesting deeper than a recursive walk could follow.
    """
    stack: list[tuple[str, Any]] = [("", data)]
    while stack:
        where, value = stack.pop()
        if isinstance(value, str):
            if not utf8_encodable(value):
                return where, value
        elif isinstance(value, dict):
            for key, item in reversed(value.items()):
                step = where + "/" + key.replace("~", "~0").replace("/", "~1")
                if not utf8_encodable(key):
                    return step, key
                stack.append((step, item))
        elif isinstance(value, list):
            stack.extend((f"{where}/{index}", item) for index, item in reversed(list(enumerate(value))))
    return None


def _not_unicode(where: str, text: str) -> str:
    """The parse message for a lone surrogate: which escape, where, and what to write instead."""
    escape = next(f"\\u{ord(char):04x}" for char in text if 0xD800 <= ord(char) <= 0xDFFF)
    shown = where.encode("utf-8", "backslashreplace").decode("utf-8")
    return (
        f'found invalid Unicode character escape "{escape}" at {shown}: a lone surrogate is not UTF-8 text'
        " (write the character itself, or a high and low surrogate pair such as \\ud83d\\ude00)"
    )


def _too_deep() -> str:
    from ..schema.subschemas import MAX_DEPTH  # only on this path: the schema package is big

    return f"the manifest is nested too deeply to read: a schema may nest at most {MAX_DEPTH} levels"


def read_bounded(path: str, limit: int) -> bytes:
    # The walker only offers regular files (symlinked manifests are resolved and
    # checked first), so one read of limit+1 bytes tells the size without an
    # fstat; O_NONBLOCK still keeps a FIFO swapped in meanwhile from hanging boot.
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError as exc:
        raise ManifestParseError(path, f"cannot open: {exc.strerror}") from None
    try:
        raw = _read_upto(fd, limit + 1)
    except OSError as exc:
        raise ManifestParseError(path, f"cannot read: {exc.strerror}") from None
    finally:
        os.close(fd)
    if len(raw) > limit:
        message = f"manifest is larger than the limit of {limit} bytes"
        raise ManifestParseError(path, message)
    return raw


def _read_upto(fd: int, count: int) -> bytes:
    # Asking os.read for a whole MiB allocates a MiB per manifest; manifests are
    # small, so read a page-sized chunk first and only loop for big files.
    chunk = os.read(fd, min(count, _CHUNK))
    if len(chunk) < _CHUNK:
        return chunk
    chunks = [chunk]
    size = len(chunk)
    while size < count and (chunk := os.read(fd, min(count - size, 1024 * 1024))):
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)


_CHUNK = 64 * 1024


def json_type(value: object) -> str:
    """The JSON name of a parsed value's type (``object``, ``array``, ``string``...)."""
    return type_name(value, json=True)


def got(value: object) -> str:
    """What a message says a field held: ``null``, or its type and a short rendering (``a number 5``)."""
    return "null" if value is None else f"{json_type(value)} {show(value)}"
