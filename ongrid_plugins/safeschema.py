"""The documented import path of the safe-schema helpers (``docs/security.md``).

The code lives in :mod:`ongrid_plugins.schema.safe` (RE2 regexes, ``$ref`` refusal,
the validator every caller uses); this module only re-exports its public names so
``from ongrid_plugins.safeschema import safe_validator`` keeps working. It may import
:mod:`ongrid_plugins.schema.safe` and nothing else.
"""

from __future__ import annotations

from .schema.safe import (
    RegexError,
    RetrievalRefused,
    compile_regex,
    pattern_problem,
    refusing_registry,
    regex_search,
    safe_validator,
    schema_problems,
)

__all__ = [
    "RegexError",
    "RetrievalRefused",
    "compile_regex",
    "pattern_problem",
    "refusing_registry",
    "regex_search",
    "safe_validator",
    "schema_problems",
]
