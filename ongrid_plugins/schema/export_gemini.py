"""JSON Schema -> the schema subset of Gemini function declarations (``parameters``).

Gemini's ``FunctionDeclaration.parameters`` is a subset of the OpenAPI 3.0 schema
object, not JSON Schema: no ``$ref``, ``allOf``, ``oneOf``, ``const``,
``additionalProperties`` or type lists. :func:`gemini_schema` rewrites what has an
equivalent (a local ``$ref`` inlined, ``oneOf`` -> ``anyOf``, ``const`` -> a one-value
``enum``, ``["string", "null"]`` -> ``nullable``), drops the keywords that only
narrow what is valid (``additionalProperties``, ``multipleOf``, ``exclusiveMinimum``...;
the host still checks every call against the full schema) and names, as problems,
what it cannot express (``allOf``, ``not``, conditionals, a recursive ``$ref``, or
$refs whose inlining would grow past :data:`MAX_NODES`: a few shared ``$defs``
referring to each other twice each already double with every level).

Imports only the standard library and :mod:`.schema.subschemas` (the JSON pointer walk).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any
from urllib.parse import unquote

from .subschemas import pointed

__all__ = ["GEMINI_KEYWORDS", "MAX_NODES", "gemini_schema"]

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
#: The most schema nodes one converted schema may hold once its $refs are inlined:
#: five times the subschemas a loaded schema may have, so only ``$ref`` fan-out reaches it.
MAX_NODES = 50_000
_MISSING = object()


class _Inline:
    """What one conversion shares: the schema $refs point into and the nodes left."""

    __slots__ = ("left", "root")

    def __init__(self, root: Mapping[str, Any]) -> None:
        self.root = root
        self.left = MAX_NODES

    def target(self, ref: str) -> object:
        """The subschema a local ``$ref`` names (a JSON pointer in a URI fragment), or _MISSING."""
        if ref == "#":
            return self.root
        if not ref.startswith("#/"):
            return _MISSING
        return pointed(self.root, "/" + unquote(ref[2:]), _MISSING)


def gemini_schema(schema: Mapping[str, Any]) -> tuple[dict[str, Any], tuple[str, ...]]:
    """``(converted schema, problems)``; the tool is exportable when ``problems`` is empty."""
    problems: list[str] = []
    out = _convert(schema, _Inline(schema), problems, "$", ())
    out.setdefault("type", "object")
    return out, tuple(dict.fromkeys(problems))


def _convert(
    node: object, defs: _Inline, problems: list[str], where: str, refs: tuple[str, ...]
) -> dict[str, Any]:
    defs.left -= 1
    if defs.left < 0:
        if defs.left == -1:
            problems.append(
                f"$: the schema is too large for Gemini once its $refs are inlined (more than {MAX_NODES}"
                " nodes; Gemini has no $ref or $defs): make the shared $defs refer to each other less"
                " often, or export another format, which keeps $defs"
            )
        return {}
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
    defs: _Inline,
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
    node: Mapping[str, Any], defs: _Inline, problems: list[str], where: str, refs: tuple[str, ...]
) -> dict[str, Any]:
    # The whole pointer, as the validator resolves it: "#/$defs/foo/properties/bar" is
    # foo's property bar, never $defs/bar, and #/definitions/k is not #/$defs/k.
    ref = str(node["$ref"])
    target = defs.target(ref)
    if target is _MISSING:
        problems.append(f"{where}: only local $refs (#/...) can be inlined for Gemini (got {ref})")
        return {}
    if ref in refs:
        problems.append(f"{where}: the $ref {ref} is recursive; Gemini schemas cannot refer to themselves")
        return {}
    return _convert(target, defs, problems, where, (*refs, ref))


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
