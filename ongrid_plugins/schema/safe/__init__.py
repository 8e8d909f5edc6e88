"""Schemas from untrusted manifests, matched in linear time and never fetched.

A skill's argument schema comes from whoever wrote the manifest or the pack, and it is
evaluated at load (``default`` values), at every call and by redaction.  Two things in a
JSON Schema can be turned against the host: regular expressions (``pattern``,
``patternProperties``, ``format: regex``), which Python's backtracking ``re`` can take
exponential time over, and ``$ref``, which jsonschema's automatic retrieval turns into an
HTTP request or a file read.  This package removes both:

- :mod:`.regex` matches every schema regex with RE2 (``google-re2``), whose time is linear
  in the input; a pattern RE2 cannot compile is a load error that names it.  The dialect
  differences from Python's ``re`` are listed in ``docs/security.md`` and tested.
- :mod:`.refs` allows only references that resolve inside the schema document
  (``#...``, ``$anchor``, an ``$id`` of one of its own subschemas); anything else is a
  load error with its JSON pointer, and every validator is built on a
  ``referencing.Registry`` whose retrieval always refuses.
- :mod:`.validator` is the jsonschema validator every caller in the project uses on a
  tool's schema (arguments, defaults, strict export), with the RE2 keywords in place.

It may import the standard library, ``re2``, ``jsonschema`` and ``referencing`` (the last
two lazily: ``import jsonschema`` costs 70-90 ms) and, from ``ongrid_plugins``, only
:mod:`ongrid_plugins.schema.subschemas` (the one table of where subschemas sit).
"""

from __future__ import annotations

from .check import schema_problems
from .refs import RetrievalRefused, refusing_registry
from .regex import RegexError, compile_regex, pattern_problem, regex_search
from .validator import safe_validator

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
