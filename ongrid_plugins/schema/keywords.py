"""Keywords of a tool's schema that JSON Schema draft 2020-12 does not know: likely typos.

jsonschema ignores a keyword it does not know, so ``"requried": ["path"]`` or
``"additonalProperties": false`` pass every check and the tool then takes any argument.
:func:`unknown_keywords` names each one, with the closest known keyword, as the
manifest loaders do for an unknown manifest field (a warning at load, an error under
``validate --strict``). Only the keywords of draft 2020-12's vocabularies count as known,
annotations included; ``x-`` prefixed keys are extensions and stay allowed. Property
names (the keys under ``properties``) are not keywords: only subschemas are read.

It may import the standard library and :mod:`.subschemas` only.
"""

from __future__ import annotations

import difflib
from typing import Final

from .subschemas import (
    MAX_SUBSCHEMAS,
    SUBSCHEMA_ARRAY_KEYWORDS,
    SUBSCHEMA_KEYWORDS,
    SUBSCHEMA_MAP_KEYWORDS,
    _LimitExceeded,
    _pointer,
    _subschemas,
)

__all__ = ["KEYWORDS", "unknown_keywords"]

#: Every keyword of draft 2020-12's core, applicator, unevaluated, validation,
#: meta-data, format-annotation and content vocabularies.
KEYWORDS: Final = frozenset(
    {
        # core
        "$schema", "$id", "$ref", "$anchor", "$dynamicRef", "$dynamicAnchor", "$vocabulary",
        "$comment", "$defs",
        # applicator
        "prefixItems", "items", "contains", "additionalProperties", "properties",
        "patternProperties", "dependentSchemas", "propertyNames", "if", "then", "else",
        "allOf", "anyOf", "oneOf", "not",
        # unevaluated
        "unevaluatedItems", "unevaluatedProperties",
        # validation
        "type", "const", "enum", "multipleOf", "maximum", "exclusiveMaximum", "minimum",
        "exclusiveMinimum", "maxLength", "minLength", "pattern", "maxItems", "minItems",
        "uniqueItems", "maxContains", "minContains", "maxProperties", "minProperties",
        "required", "dependentRequired",
        # meta-data
        "title", "description", "default", "deprecated", "readOnly", "writeOnly", "examples",
        # format-annotation
        "format",
        # content
        "contentEncoding", "contentMediaType", "contentSchema",
    }
)  # fmt: skip
_SORTED: Final = sorted(KEYWORDS)


def _all_known(schema: object) -> bool:
    """True when every subschema's keys are keywords (False also means "look closer")."""
    stack = [schema]
    budget = MAX_SUBSCHEMAS
    while stack:
        node = stack.pop()
        if type(node) is not dict:
            continue
        if not node.keys() <= KEYWORDS:
            return False
        for key, value in node.items():
            if key in SUBSCHEMA_KEYWORDS:
                stack.append(value)
            elif key in SUBSCHEMA_MAP_KEYWORDS and type(value) is dict:
                stack.extend(value.values())
            elif key in SUBSCHEMA_ARRAY_KEYWORDS and type(value) is list:
                stack.extend(value)
        budget -= 1
        if budget < 0:
            return False
    return True


def unknown_keywords(schema: object) -> list[tuple[str, str]]:
    """``(JSON pointer of the key, message)`` for each key of a subschema that is no keyword.

    ``x-`` prefixed keys are left alone. A schema beyond the walk's limits gives nothing
    here (the metaschema check reports those).
    """
    if _all_known(schema):  # the usual case: no paths built
        return []
    try:
        found = _subschemas(schema)
    except _LimitExceeded:
        return []
    problems: list[tuple[str, str]] = []
    for path, node in found:
        if type(node) is not dict:
            continue
        for key in node:
            if key in KEYWORDS or not isinstance(key, str) or key.startswith("x-"):
                continue
            close = difflib.get_close_matches(key, _SORTED, n=1, cutoff=0.6)
            hint = f' — did you mean "{close[0]}"?' if close else ""
            message = f'unknown JSON Schema keyword "{key}"{hint} (an extension must start with "x-")'
            problems.append((_pointer((*path, key)), message))
    return problems
