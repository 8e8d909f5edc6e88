"""People's names as the approval rules compare them: one person, one key.

``bob`` and ``bоb`` (a Cyrillic ``о``), ``alice\\u200b`` (a zero-width space) and the
fullwidth ``ａlice`` look alike to the people reading a ticket, so they must not count
as different approvers.  :func:`identity_key` folds every such spelling to one key:

1. NFKC (fullwidth and other compatibility forms become their plain letters);
2. default-ignorable code points (zero-width spaces and joiners, soft hyphens, bidi
   controls, variation selectors, BOM...) are removed;
3. case folding, and surrounding blanks removed;
4. combining marks removed (``bob\u0301`` is bob; the Turkish ``İ`` casefolds to ``i``
   and a combining dot) and the dotless ``ı`` read as ``i``. Two names that differ
   only in accents then share a key: for approvals, one person too many is refused,
   never one too few counted.

:func:`identity_problem` refuses what cannot be folded safely: control characters, and
letters of more than one script (``bоb``), except the scripts written together in
Japanese and Korean.  The script of a letter is read from its Unicode name (the
standard library has no script property), which is exact for the scripts that matter
here: Latin, Greek, Cyrillic, Armenian, Hebrew, Arabic, the Indic scripts, CJK.

Core value module: imports only the standard library.
"""

from __future__ import annotations

import unicodedata
from typing import Final

__all__ = ["identity_key", "identity_problem", "normalize_identity", "same_person"]

# Default_Ignorable_Code_Point ranges (Unicode DerivedCoreProperties).
_IGNORABLE: Final = (
    (0x00AD, 0x00AD),
    (0x034F, 0x034F),
    (0x061C, 0x061C),
    (0x115F, 0x1160),
    (0x17B4, 0x17B5),
    (0x180B, 0x180F),
    (0x200B, 0x200F),
    (0x202A, 0x202E),
    (0x2060, 0x206F),
    (0x3164, 0x3164),
    (0xFE00, 0xFE0F),
    (0xFEFF, 0xFEFF),
    (0xFFA0, 0xFFA0),
    (0xFFF0, 0xFFF8),
    (0x1BCA0, 0x1BCA3),
    (0x1D173, 0x1D17A),
    (0xE0000, 0xE0FFF),
)
# Scripts that are written mixed within one name.
_TOGETHER: Final = (frozenset({"CJK", "HIRAGANA", "KATAKANA"}), frozenset({"CJK", "HANGUL"}))


def _ignorable(char: str) -> bool:
    point = ord(char)
    return any(low <= point <= high for low, high in _IGNORABLE)


def normalize_identity(name: str) -> str:
    """NFKC, without default-ignorable code points, surrounding blanks removed (case kept)."""
    text = unicodedata.normalize("NFKC", name)
    return "".join(char for char in text if not _ignorable(char)).strip()


def same_person(a: str, b: str) -> bool:
    """Whether ``a`` and ``b`` name one person for access (reading a ticket): NFKC, without
    default-ignorable code points, case folded, but accents kept: ``jose`` is not ``josé``.
    The wider :func:`identity_key` is for refusing one person twice, where folding more is safe."""
    return normalize_identity(a).casefold() == normalize_identity(b).casefold()


def identity_key(name: str) -> str:
    """The key two spellings of one person share (see the module docstring)."""
    folded = unicodedata.normalize("NFD", normalize_identity(name).casefold())
    bare = "".join(char for char in folded if not unicodedata.combining(char))
    return unicodedata.normalize("NFC", bare).replace("\u0131", "i")


def _script(char: str) -> str | None:
    """The script of a letter, from its Unicode name; None for anything but letters."""
    if not unicodedata.category(char).startswith("L"):
        return None
    words = unicodedata.name(char, "UNKNOWN").split()
    return words[0] if words else "UNKNOWN"


def identity_problem(name: object) -> str | None:
    """None if ``name`` is a usable identity, else why not (a sentence)."""
    if not isinstance(name, str) or not normalize_identity(name):
        return f"an identity must be a non-empty name (got {name!r})"
    text = normalize_identity(name)
    for char in text:
        if unicodedata.category(char) in ("Cc", "Cs", "Co", "Cn", "Zl", "Zp"):
            return f"identity {text!r} holds the control or unassigned character U+{ord(char):04X}"
    scripts = {script for script in map(_script, text) if script is not None}
    if len(scripts) > 1 and not any(scripts <= together for together in _TOGETHER):
        shown = " and ".join(script.title() for script in sorted(scripts))
        return f"identity {text!r} mixes {shown} letters; spell it in one script"
    return None
