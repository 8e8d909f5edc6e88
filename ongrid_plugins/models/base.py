"""The plain pieces every value is built from: JSON, its canonical text and the digests over it.

May import: the standard library only, and the optional compiled ``ongrid_plugins._speedups``
(a leaf module that imports nothing of ours).
"""

from __future__ import annotations

import enum
import hashlib
import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any

__all__ = [
    "JSON", "args_digest", "canonical_json", "compiled", "decode_json", "digest_json", "sha256_hex", "strs",
]  # fmt: skip

JSON = dict[str, Any]


def strs(value: Iterable[str]) -> tuple[str, ...]:
    """The ``converter=`` of every tuple-of-strings field."""
    return tuple(value)


# ``json.dumps`` with any non-default option builds a new encoder on every call (a few
# microseconds, several times per call): one encoder, same options, same text.
_plain: Callable[[Any], str] = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
).encode


def _not_json(value: Any) -> Any:
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


class _StrSample(enum.StrEnum):
    """A str enum (as the audit's outcomes are), for :func:`_fast_canonical`'s check."""

    X = "x"


def _fast_canonical() -> Callable[[Any], str]:
    """:func:`_plain`, calling the C encoder it runs directly, or ``_plain`` itself.

    ``JSONEncoder.encode`` makes a new C encoder object on every call (and its
    ``markers`` dict, to find cycles), which costs as much as encoding the few values
    of a call's arguments or of an audit row. This one has no markers: a cycle ends in
    a ``RecursionError``, and the text (or the error) then comes from ``_plain``,
    which says "Circular reference detected" as ``json.dumps`` does. The same
    options make the same text: checked here against ``_plain``, else ``_plain`` it is.
    """
    try:
        from json import encoder

        c_encoder = encoder.c_make_encoder(  # type: ignore[attr-defined]
            None, _not_json, encoder.encode_basestring, None, ":", ",", True, False, False
        )

        def canonical_json(value: Any) -> str:
            """The canonical JSON text of a value: sorted keys, no spaces, UTF-8 kept."""
            try:
                return "".join(c_encoder(value, 0))
            except RecursionError:  # a cycle, or nested deeper than the recursion limit
                return _plain(value)

        sample = [1.5, 2**70, -0.0, 'é\n"\u2028', None, True, {"b": [{}], "a": 1}, _StrSample.X]
        if canonical_json(sample) == _plain(sample) and canonical_json("x") == _plain("x"):
            return canonical_json
    except Exception:  # another Python's json module: the plain encoder
        pass
    return _plain


def compiled(name: str) -> Any:
    """``_speedups.<name>``, or None where the extension was not built (no compiler at
    install time) or was built from an older source that lacks it."""
    try:
        from .. import _speedups
    except ImportError:
        return None
    return getattr(_speedups, name, None)


def _compiled_canonical(fallback: Callable[[Any], str]) -> Callable[[Any], str]:
    """``_speedups``' canonical JSON, where it was built, else ``fallback`` itself.

    The compiled encoder writes the values it knows (None, bool, int, finite float, str,
    dict with str keys, list, tuple; see ``_speedups.c``) straight into one buffer, about
    three times as fast as json's encoder for an audit row or a call's arguments, and hands
    anything else to ``fallback`` (this module's Python encoder), which gives the text or
    the error. Checked here against ``fallback`` on every kind of value it writes, else
    ``fallback`` it is.
    """
    try:
        from .. import _speedups
    except ImportError:  # not built (no compiler at install time)
        return fallback
    encode: Callable[[Any], str] = _speedups.canonical_encoder(fallback)
    sample: list[Any] = [
        None, True, False, 0, -(2**63), 2**70, 1.5, -0.0, 5e-324, 1e300,
        'é\n"\\\u2028\x01\x1f\x7f😀', {"b": [{}], "a": (1, "x")}, [], {}, _StrSample.X,
    ]  # fmt: skip
    if encode(sample) == fallback(sample) and encode("x") == fallback("x"):
        return encode
    return fallback


_python_canonical = _fast_canonical()
"""The Python canonical JSON encoder: what the compiled one hands the values it does not know."""
canonical_json = _compiled_canonical(_python_canonical)


def _hashlib_hex(data: bytes | str) -> str:
    return hashlib.sha256(data.encode("utf-8") if isinstance(data, str) else data).hexdigest()


def _compiled_sha256() -> Callable[[bytes | str], str]:
    """``_speedups.sha256_hex`` where it was built and gives hashlib's digests, else hashlib."""
    try:
        from .. import _speedups
    except ImportError:  # not built (no compiler at install time)
        return _hashlib_hex
    compiled: Callable[[bytes | str], str] = _speedups.sha256_hex
    samples: list[bytes | str] = [b"", b"abc", bytes(range(256)) * 5, "caf\u00e9 \u2603" * 9]
    if all(compiled(sample) == _hashlib_hex(sample) for sample in samples):
        return compiled
    return _hashlib_hex


sha256_hex = _compiled_sha256()
"""``hashlib.sha256(data).hexdigest()``, a str hashed as its UTF-8: compiled where it was
built (OpenSSL's set-up for each digest costs more than hashing a call's arguments)."""


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
