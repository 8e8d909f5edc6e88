"""JSON Schema -> the schema subset of Gemini function declarations (``parameters``).

Gemini's ``FunctionDeclaration.parameters`` is a subset of the OpenAPI 3.0 schema
object, not JSON Schema: no ``$ref``, ``allOf``, ``oneOf``, ``const``,
``additionalProperties`` or type lists. :func:`gemini_schema` rewrites what has an
equivalent (a local ``$ref`` inlined, ``oneOf`` -> ``anyOf``, ``const`` -> a one-value
``enum``, ``["string", "null"]`` -> ``nullable``), drops the keywords that only
narrow what is valid (``additionalProperties``, ``multipleOf``, ``exclusiveMinimum``...;
the host still checks every call against the full schema) and names, as problems,
what it cannot express (``allOf``, ``not``, conditionals, a recursive ``$ref``).

Imports only the standard library.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

__all__ = ["GEMINI_KEYWORDS", "gemini_schema"]

#: The schema fields Gemini's function declarations accept.
GEMINI_KEYWORDS = frozenset(
    {
        "type",
        "format",
        "title",
        "description",
        "nullable",
        "enum",
        "items",
        "minItems",
        "maxItems",
        "properties",
        "required",
        "minProperties",
        "maxProperties",
        "minLength",
        "maxLength",
        "pattern",
        "example",
        "anyOf",
        "propertyOrdering",
        "default",
        "minimum",
        "maximum",
    }
)
_UNEXPRESSIBLE = ("allOf", "not", "if", "then", "else", "dependentSchemas", "prefixItems")
_MAX_DEPTH = 32


def gemini_schema(schema: Mapping[str, Any]) -> tuple[dict[str, Any], tuple[str, ...]]:
    """``(converted schema, problems)``; the tool is exportable when ``problems`` is empty."""
    problems: list[str] = []
    defs = {**_mapping(schema.get("definitions")), **_mapping(schema.get("$defs"))}
    out = _convert(schema, defs, problems, "$", ())
    out.setdefault("type", "object")
    return out, tuple(dict.fromkeys(problems))


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _convert(
    node: object, defs: Mapping[str, Any], problems: list[str], where: str, refs: tuple[str, ...]
) -> dict[str, Any]:
    if not isinstance(node, Mapping):
        return {}  # `true` (anything): no constraint Gemini could state
    if len(refs) > _MAX_DEPTH:
        problems.append(f"{where}: nested too deeply for Gemini")
        return {}
    if "$ref" in node:
        return _ref(node, defs, problems, where, refs)
    for keyword in _UNEXPRESSIBLE:
        if keyword in node:
            problems.append(f"{where}: Gemini function declarations have no {keyword!r}")
    out: dict[str, Any] = {}
    _type(node, out, problems, where)
    for key in ("format", "title", "description", "minItems", "maxItems", "minLength", "maxLength"):
        if key in node:
            out[key] = node[key]
    for key in ("pattern", "minProperties", "maxProperties", "minimum", "maximum", "default"):
        if key in node:
            out[key] = node[key]
    if "examples" in node and isinstance(node["examples"], list) and node["examples"]:
        out["example"] = node["examples"][0]
    _enum(node, out, problems, where)
    if isinstance(node.get("properties"), Mapping):
        out["properties"] = {  # a `false` property may never be sent: left out
            str(k): _convert(v, defs, problems, f"{where}.{k}", refs)
            for k, v in node["properties"].items()
            if v is not False
        }
    if isinstance(node.get("required"), list):
        out["required"] = [str(r) for r in node["required"]]
    if node.get("items") is False:
        out["maxItems"] = 0  # no item is valid: only the empty array
    elif "items" in node:
        out["items"] = _convert(node["items"], defs, problems, f"{where}[]", refs)
    branches = node.get("anyOf", node.get("oneOf"))
    if isinstance(branches, list):
        _branches(branches, out, defs, problems, where, refs)
    return out


def _branches(
    branches: list[Any],
    out: dict[str, Any],
    defs: Mapping[str, Any],
    problems: list[str],
    where: str,
    refs: tuple[str, ...],
) -> None:
    """``anyOf``/``oneOf``: a ``false`` branch matches nothing and is dropped; a ``null``
    branch makes the value ``nullable``; a single branch left is merged into ``out``."""
    kept: list[dict[str, Any]] = []
    for i, branch in enumerate(branches):
        if branch is False:
            continue
        converted = _convert(branch, defs, problems, f"{where}|{i}", refs)
        if converted == {"nullable": True}:
            out["nullable"] = True
        else:
            kept.append(converted)
    if len(kept) == 1 and not set(kept[0]) & set(out):
        out.update(kept[0])
    elif kept:
        out["anyOf"] = kept


def _ref(
    node: Mapping[str, Any], defs: Mapping[str, Any], problems: list[str], where: str, refs: tuple[str, ...]
) -> dict[str, Any]:
    ref = str(node["$ref"])
    name = ref.rpartition("/")[2]
    if not ref.startswith(("#/$defs/", "#/definitions/")) or name not in defs:
        problems.append(f"{where}: only local $refs to #/$defs can be inlined for Gemini (got {ref})")
        return {}
    if ref in refs:
        problems.append(f"{where}: the $ref {ref} is recursive; Gemini schemas cannot refer to themselves")
        return {}
    return _convert(defs[name], defs, problems, where, (*refs, ref))


def _type(node: Mapping[str, Any], out: dict[str, Any], problems: list[str], where: str) -> None:
    kind = node.get("type")
    if isinstance(kind, list):
        types = [t for t in kind if t != "null"]
        if len(types) < len(kind):
            out["nullable"] = True
        if len(types) == 1:
            out["type"] = types[0]
        elif types:
            out["anyOf"] = [{"type": t} for t in types]
    elif isinstance(kind, str):
        if kind == "null":
            out["nullable"] = True
        else:
            out["type"] = kind


def _enum(node: Mapping[str, Any], out: dict[str, Any], problems: list[str], where: str) -> None:
    values = [node["const"]] if "const" in node else node.get("enum")
    if not isinstance(values, list):
        return
    if all(isinstance(v, str) for v in values):
        out["enum"] = values
        out.setdefault("type", "string")
        if "format" not in out:
            out["format"] = "enum"
        return
    shown = ", ".join(json.dumps(v, ensure_ascii=False) for v in values[:10])
    more = f" (and {len(values) - 10} more)" if len(values) > 10 else ""
    out["description"] = (str(out.get("description", "")) + f" One of: {shown}{more}.").strip()
