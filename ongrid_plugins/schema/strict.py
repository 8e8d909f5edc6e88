"""Rewrite a tool's JSON Schema into the subset a model API's strict mode accepts.

Strict modes (OpenAI ``"strict": true`` function calling, Anthropic strict tool use)
decode the model's arguments under a grammar compiled from the schema, so they accept
only part of JSON Schema. :func:`make_strict` rewrites what can be rewritten and names,
with a JSON path, everything that cannot:

* every object gets ``"additionalProperties": false``; an open map (``true`` or a schema,
  ``patternProperties``) cannot be strict;
* OpenAI: every property is required, and an optional one becomes nullable
  (``{"type": ["string", "null"]}``) -- :func:`drop_strict_nulls` turns those nulls back
  into "not given" before the arguments are checked, so defaults still apply;
* constraints the profile does not support (``minLength``, Anthropic's ``minimum``...)
  and ``default`` move into the description, where the model still reads them; the
  host checks the arguments against the *original* schema at every call, so nothing is
  loosened for real;
* ``oneOf`` becomes ``anyOf`` (the host's check keeps "exactly one");
* ``not``, ``if``/``then``/``else``, tuples, remote ``$ref``\\ s, untyped values, and the
  profile's size limits cannot be made strict.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import attrs

__all__ = ["PROFILES", "StrictSchema", "drop_strict_nulls", "make_strict"]

PROFILES = ("openai", "anthropic")

#: Strict-mode limits (OpenAI documents them; they are checked for both profiles).
MAX_DEPTH = 10
MAX_PROPERTIES = 5000
MAX_ENUM_VALUES = 1000
MAX_STRING_TOTAL = 120_000

_FORMATS = {
    "openai": {"date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid"},
    "anthropic": {
        "date-time",
        "time",
        "date",
        "duration",
        "email",
        "hostname",
        "uri",
        "ipv4",
        "ipv6",
        "uuid",
    },
}
# Constraints each profile enforces while decoding; the others are folded into the description.
_KEPT = {
    "openai": {"pattern", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"}
    | {"minItems", "maxItems"},
    "anthropic": {"pattern"},
}
_IN_WORDS = {
    "minLength": "minimum length {}",
    "maxLength": "maximum length {}",
    "minimum": "at least {}",
    "maximum": "at most {}",
    "exclusiveMinimum": "more than {}",
    "exclusiveMaximum": "less than {}",
    "multipleOf": "a multiple of {}",
    "minItems": "minimum {} items",
    "maxItems": "maximum {} items",
    "minProperties": "minimum {} properties",
    "maxProperties": "maximum {} properties",
    "pattern": "matching the regular expression {}",
    "format": "format {}",
    "default": "default {}",
}
_DROPPED = {"title", "examples", "$comment", "deprecated", "readOnly", "writeOnly", "$schema", "$id"}
_IMPOSSIBLE = {
    "not": "negation (not)",
    "if": "conditionals (if/then/else)",
    "then": "conditionals (if/then/else)",
    "else": "conditionals (if/then/else)",
    "patternProperties": "an open map (patternProperties)",
    "propertyNames": "property-name rules (propertyNames)",
    "unevaluatedProperties": "unevaluatedProperties",
    "unevaluatedItems": "unevaluatedItems",
    "dependentRequired": "dependentRequired",
    "dependentSchemas": "dependentSchemas",
    "dependencies": "dependencies",
    "prefixItems": "a tuple (prefixItems)",
    "contains": "contains",
    "minContains": "minContains",
    "maxContains": "maxContains",
    "$dynamicRef": "$dynamicRef",
    "$anchor": "$anchor",
}
_TYPED = ("type", "anyOf", "allOf", "enum", "const", "$ref")


@attrs.frozen
class StrictSchema:
    """The rewritten schema, or why it cannot be strict."""

    schema: dict[str, Any]
    problems: tuple[str, ...] = ()
    """Why the schema cannot be made strict, one sentence each with its JSON path; empty if it can."""
    optional: int = 0
    """Optional properties left (Anthropic counts them per request)."""
    unions: int = 0
    """Properties with a union type (``anyOf`` or a list of types)."""

    @property
    def ok(self) -> bool:
        """True when the schema is strict."""
        return not self.problems


def make_strict(schema: Mapping[str, Any], profile: str) -> StrictSchema:
    """Rewrite ``schema`` (an arguments object schema) for ``profile`` (``openai`` or ``anthropic``)."""
    if profile not in PROFILES:
        message = f"unknown strict profile {profile!r}; use one of {', '.join(PROFILES)}"
        raise ValueError(message)
    rewriter = _Rewriter(profile, schema)
    out = rewriter.root()
    rewriter.check_limits()
    return StrictSchema(out, tuple(rewriter.problems), rewriter.optional, rewriter.unions)


class _Rewriter:
    def __init__(self, profile: str, schema: Mapping[str, Any]) -> None:
        self.profile = profile
        self.source = schema
        self.problems: list[str] = []
        self.optional = 0
        self.unions = 0
        self.properties = 0
        self.enum_values = 0
        self.strings = 0
        self.depth = 0

    def problem(self, path: str, message: str) -> None:
        self.problems.append(f"{path}: {message}")

    def root(self) -> dict[str, Any]:
        schema = self.source
        for key in ("anyOf", "oneOf", "allOf"):
            if key in schema:
                self.problem("$", f"the arguments schema itself may not be a union ({key})")
        kind = schema.get("type", "object")
        if kind != "object":
            self.problem("$", f'the arguments schema must have "type": "object" (got {kind!r})')
        out = self.node({"type": "object", **schema}, "$", 0)
        for key in ("$defs", "definitions"):
            defs = schema.get(key)
            if isinstance(defs, Mapping):
                out[key] = {name: self.node(sub, f"$.{key}.{name}", 0) for name, sub in defs.items()}
                self.strings += sum(len(str(name)) for name in defs)
        if self.profile == "anthropic":
            self._check_cycles()
        return out

    def node(self, schema: object, path: str, depth: int) -> dict[str, Any]:
        if not isinstance(schema, Mapping):
            self.problem(path, "a boolean schema (true/false) cannot be strict; give the value a type")
            return {}
        out: dict[str, Any] = {}
        notes: list[str] = []
        found = len(self.problems)
        for key, value in schema.items():
            self._keyword(str(key), value, path, depth, out, notes)
        if _is_object(schema):
            self._object(schema, path, depth, out)
        if not any(key in out for key in _TYPED) and len(self.problems) == found:
            self.problem(path, "accepts any JSON value; strict mode needs a type (or anyOf/enum/const/$ref)")
        if notes:
            description = str(out.get("description", "")).rstrip()
            suffix = "; ".join(notes)
            out["description"] = f"{description} ({suffix})" if description else suffix
        if "$ref" in out and len(out) > 1:  # siblings of a $ref are not allowed: wrap it
            out = {"anyOf": [{"$ref": out.pop("$ref")}], **out}
        return out

    def _keyword(
        self, key: str, value: Any, path: str, depth: int, out: dict[str, Any], notes: list[str]
    ) -> None:
        if key in ("properties", "required", "additionalProperties", "$defs", "definitions"):
            return  # handled with the object / at the root
        if key in ("type", "description"):
            out[key] = value
        elif key in ("enum", "const"):
            self._values(key, value, path)
            out[key] = value
        elif key == "items":
            if isinstance(value, list):
                self.problem(path, "a tuple (items as a list) cannot be strict")
            else:
                out[key] = self.node(value, f"{path}[*]", depth)
        elif key in ("anyOf", "oneOf"):
            self._union(value, f"{path}.{key}", depth, out)
        elif key == "allOf":
            self._all_of(value, path, depth, out, notes)
        elif key == "$ref":
            self._ref(value, path, out)
        elif key in _IMPOSSIBLE:
            self.problem(path, f"{_IMPOSSIBLE[key]} cannot be strict")
        elif key in _IN_WORDS:
            self._constraint(key, value, out, notes)
        elif key == "uniqueItems":
            if value is True:
                notes.append("items must be unique")
        elif key not in _DROPPED and not key.startswith("x-"):
            self.problem(path, f"keyword {key!r} is not supported in {self.profile} strict mode")

    def _constraint(self, key: str, value: Any, out: dict[str, Any], notes: list[str]) -> None:
        kept = key in _KEPT[self.profile]
        if key == "format":
            kept = value in _FORMATS[self.profile]
        elif key == "minItems" and self.profile == "anthropic":
            kept = value in (0, 1)
        if kept:
            out[key] = value
        else:
            shown = json.dumps(value, ensure_ascii=False) if key in ("default", "pattern") else value
            notes.append(_IN_WORDS[key].format(shown))

    def _object(self, schema: Mapping[str, Any], path: str, depth: int, out: dict[str, Any]) -> None:
        if depth + 1 > MAX_DEPTH:
            self.problem(path, f"objects are nested more than {MAX_DEPTH} levels deep")
        self.depth = max(self.depth, depth + 1)
        extra = schema.get("additionalProperties", False)
        if extra is not False:
            self.problem(path, "an open map (additionalProperties other than false) cannot be strict")
        properties = schema.get("properties", {})
        if not isinstance(properties, Mapping):
            properties = {}
        required = [r for r in schema.get("required", []) if r in properties]
        self.properties += len(properties)
        self.strings += sum(len(str(name)) for name in properties)
        out["type"] = _with_object(out.get("type", "object"))
        result: dict[str, Any] = {}
        for name, sub in properties.items():
            node = self.node(sub, f"{path}.{name}", depth + 1)
            if "anyOf" in node or isinstance(node.get("type"), list):
                self.unions += 1
            if name not in required:
                if self.profile == "openai":
                    node = _nullable(node, self.source)
                else:
                    self.optional += 1
            result[str(name)] = node
        out["properties"] = result
        out["required"] = list(result) if self.profile == "openai" else required
        out["additionalProperties"] = False

    def _union(self, value: Any, path: str, depth: int, out: dict[str, Any]) -> None:
        if not isinstance(value, list) or not value:
            self.problem(path, "must be a non-empty list of schemas")
            return
        branches = [self.node(sub, f"{path}[{i}]", depth) for i, sub in enumerate(value)]
        out["anyOf"] = [*out.get("anyOf", []), *branches]

    def _all_of(self, value: Any, path: str, depth: int, out: dict[str, Any], notes: list[str]) -> None:
        if not isinstance(value, list) or not value:
            self.problem(f"{path}.allOf", "must be a non-empty list of schemas")
        elif self.profile == "anthropic":
            out["allOf"] = [self.node(sub, f"{path}.allOf[{i}]", depth) for i, sub in enumerate(value)]
        elif len(value) == 1 and isinstance(value[0], Mapping) and not set(value[0]) & set(out):
            out.update(self.node(value[0], f"{path}.allOf[0]", depth))
        else:
            self.problem(f"{path}.allOf", "allOf (an intersection) cannot be strict for openai")

    def _ref(self, value: Any, path: str, out: dict[str, Any]) -> None:
        if isinstance(value, str) and (value == "#" or value.startswith(("#/$defs/", "#/definitions/"))):
            out["$ref"] = value
        else:
            self.problem(path, f"only local references (#/$defs/...) can be strict, not {value!r}")

    def _values(self, key: str, value: Any, path: str) -> None:
        values = value if key == "enum" and isinstance(value, list) else [value]
        self.enum_values += len(values)
        self.strings += sum(len(v) for v in values if isinstance(v, str))
        if self.profile == "anthropic" and any(isinstance(v, dict | list) for v in values):
            self.problem(path, f"{key} values must be strings, numbers, booleans or null")

    def check_limits(self) -> None:
        if self.properties > MAX_PROPERTIES:
            self.problem("$", f"{self.properties} properties in all; strict mode allows {MAX_PROPERTIES}")
        if self.enum_values > MAX_ENUM_VALUES:
            self.problem("$", f"{self.enum_values} enum values in all; strict mode allows {MAX_ENUM_VALUES}")
        if self.strings > MAX_STRING_TOTAL:
            self.problem(
                "$", f"names and enum values total {self.strings} characters; at most {MAX_STRING_TOTAL}"
            )

    def _check_cycles(self) -> None:
        """Anthropic's strict mode refuses recursive schemas: a $ref that leads back to itself."""
        graph: dict[str, set[str]] = {"#": _refs(self.source, skip_defs=True)}
        for key in ("$defs", "definitions"):
            defs = self.source.get(key)
            if isinstance(defs, Mapping):
                for name, sub in defs.items():
                    graph[f"#/{key}/{name}"] = _refs(sub)
        for start in graph:
            seen: set[str] = set()
            stack = list(graph[start])
            while stack:
                ref = stack.pop()
                if ref == start:
                    self.problem("$", f"the schema is recursive ({start} refers back to itself)")
                    return
                if ref not in seen:
                    seen.add(ref)
                    stack.extend(graph.get(ref, ()))


def _refs(schema: object, skip_defs: bool = False) -> set[str]:
    found: set[str] = set()
    if isinstance(schema, Mapping):
        for key, value in schema.items():
            if key == "$ref" and isinstance(value, str):
                found.add(value)
            elif not (skip_defs and key in ("$defs", "definitions")):
                found |= _refs(value)
    elif isinstance(schema, list):
        for item in schema:
            found |= _refs(item)
    return found


def _is_object(schema: Mapping[str, Any]) -> bool:
    kind = schema.get("type")
    return kind == "object" or (isinstance(kind, list) and "object" in kind) or "properties" in schema


def _with_object(kind: Any) -> Any:
    if isinstance(kind, list):
        return kind if "object" in kind else [*kind, "object"]
    return "object" if kind in (None, "object") else [kind, "object"]


def _nullable(node: dict[str, Any], root: Mapping[str, Any]) -> dict[str, Any]:
    """The same schema, also accepting null (how strict mode spells "optional")."""
    if _allows_null(node, root):
        return node
    kind = node.get("type")
    plain = not {"const", "allOf", "$ref"} & set(node)
    if plain and "anyOf" in node and kind is None and "enum" not in node:
        return {**node, "anyOf": [*node["anyOf"], {"type": "null"}]}
    if plain and "anyOf" not in node and kind is None and isinstance(node.get("enum"), list):
        return {**node, "enum": [*node["enum"], None]}
    if plain and "anyOf" not in node and isinstance(kind, str | list):
        out = {**node, "type": [*kind, "null"] if isinstance(kind, list) else [kind, "null"]}
        if "enum" in node:
            out["enum"] = [*node["enum"], None]
        return out
    inner = {k: v for k, v in node.items() if k != "description"}
    wrapped: dict[str, Any] = {"anyOf": [inner, {"type": "null"}]}
    if "description" in node:
        wrapped["description"] = node["description"]
    return wrapped


def _allows_null(schema: object, root: Mapping[str, Any], seen: frozenset[str] = frozenset()) -> bool:
    """Whether ``null`` may be valid here (True when unsure: then a null is left for the check)."""
    if not isinstance(schema, Mapping):
        return schema is not False
    kind = schema.get("type")
    if kind is not None and not (kind == "null" or (isinstance(kind, list) and "null" in kind)):
        return False
    if "enum" in schema and None not in schema["enum"]:
        return False
    if "const" in schema and schema["const"] is not None:
        return False
    for key in ("anyOf", "oneOf"):
        if isinstance(schema.get(key), list) and not any(_allows_null(s, root, seen) for s in schema[key]):
            return False
    if isinstance(schema.get("allOf"), list) and not all(
        _allows_null(s, root, seen) for s in schema["allOf"]
    ):
        return False
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref not in seen:
        target = _resolve(ref, root)
        if target is not None and not _allows_null(target, root, seen | {ref}):
            return False
    return True


def _resolve(ref: str, root: Mapping[str, Any]) -> object | None:
    if ref == "#":
        return root
    for key in ("$defs", "definitions"):
        prefix = f"#/{key}/"
        if ref.startswith(prefix):
            defs = root.get(key)
            return defs.get(ref[len(prefix) :]) if isinstance(defs, Mapping) else None
    return None


def drop_strict_nulls(schema: Mapping[str, Any], value: Any) -> Any:
    """``value`` with each null dropped where it stands for an optional property not given.

    A strict-mode model sends ``null`` for an optional property it leaves out. Where the
    original schema does not accept null for that (optional) property, the null is
    removed so that defaults fill in and the check passes; every other value is kept.
    """
    return _drop(schema, value, schema, 0)


def _drop(schema: object, value: Any, root: Mapping[str, Any], depth: int) -> Any:
    if not isinstance(schema, Mapping) or depth > MAX_DEPTH * 4 or not isinstance(value, dict | list):
        return value
    ref = schema.get("$ref")
    if isinstance(ref, str):
        target = _resolve(ref, root)
        return _drop(target, value, root, depth + 1) if target is not None else value
    for key in ("anyOf", "oneOf"):
        if isinstance(schema.get(key), list):
            value = _drop_union(schema[key], value, root, depth)
    if isinstance(value, dict):
        properties = schema.get("properties")
        if not isinstance(properties, Mapping):
            return value
        required = schema.get("required", [])
        out = {}
        for key, item in value.items():
            sub = properties.get(key)
            if item is None and sub is not None and key not in required and not _allows_null(sub, root):
                continue
            out[key] = _drop(sub, item, root, depth + 1) if sub is not None else item
        return out
    if isinstance(schema.get("items"), Mapping):
        return [_drop(schema["items"], item, root, depth + 1) for item in value]
    return value


def _drop_union(branches: list[Any], value: Any, root: Mapping[str, Any], depth: int) -> Any:
    """Drop nulls along the branch the value belongs to: the only one of its JSON type, else the
    first where the result has the branch's shape (checked with jsonschema, which only then is
    imported). Formats are left out of that check: a badly formatted string does not change which
    branch the model wrote, and the host's argument check, which asserts formats, then names it."""
    kind = "object" if isinstance(value, dict) else "array"
    candidates = [b for b in branches if isinstance(b, Mapping) and _admits(b, kind, root)]
    if len(candidates) == 1:
        return _drop(candidates[0], value, root, depth + 1)
    from .safe import safe_validator

    defs = {k: root[k] for k in ("$defs", "definitions") if k in root}
    for branch in candidates:
        dropped = _drop(branch, value, root, depth + 1)
        if safe_validator({**defs, **branch}, formats=False).is_valid(dropped):
            return dropped
    return value


def _admits(schema: Mapping[str, Any], kind: str, root: Mapping[str, Any]) -> bool:
    ref = schema.get("$ref")
    if isinstance(ref, str):
        target = _resolve(ref, root)
        return not isinstance(target, Mapping) or _admits(target, kind, root)
    declared = schema.get("type")
    if declared is None:
        return "enum" not in schema and "const" not in schema
    return declared == kind or (isinstance(declared, list) and kind in declared)
