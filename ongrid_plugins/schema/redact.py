"""Secret redaction: blank out argument values that are, or may be, secrets.

A value is secret when any schema that *may* apply to it says ``"writeOnly": true``,
``"format": "password"`` or ``"x-ongrid-secret": true``, or when its property name is a
secret's name (:func:`secret_name`: ``password``, ``token``, ``api_key``... in any case,
with or without ``-``/``_``, also as a suffix such as ``db_password``).

The walk follows the arguments and, at each level, every schema of the 2020-12 dialect
that can apply: the in-place applicators (``allOf``/``anyOf``/``oneOf``/``not``,
``if``/``then``/``else``, ``dependentSchemas``, ``$ref``/``$dynamicRef`` to a JSON
pointer, an ``$anchor`` or an ``$id`` of the document), the object applicators
(``properties``, ``patternProperties``, ``additionalProperties``,
``unevaluatedProperties``) and the array ones (``prefixItems``, ``items``, ``contains``,
``unevaluatedItems``, draft-7 ``additionalItems``). Being generous is the point: a schema
that *might* apply (``additionalProperties`` next to a matching ``properties``, any
branch of a ``oneOf``, ``contains`` for every item) and marks a value secret is enough to
hide it, and a reference that cannot be resolved hides the whole value.

A secret object or array is replaced whole. :func:`redact_text` removes known secret
shapes (bearer tokens, AWS access key ids, PEM private keys, ``password=...``) from free
text such as a skill's stderr. The audit log and the approval tickets store only
redacted arguments and redacted stderr.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, Final

from .safe import RegexError, regex_search
from .subschemas import pointed

__all__ = [
    "REDACTED",
    "has_secrets",
    "needs_redaction",
    "redact",
    "redact_lines",
    "redact_text",
    "secret_name",
]

REDACTED = "[redacted]"
_IN_PLACE: Final = ("allOf", "anyOf", "oneOf")
_ONE_IN_PLACE: Final = ("if", "then", "else", "not")
_EVERY_KEY: Final = ("additionalProperties", "unevaluatedProperties")
_EVERY_ITEM: Final = ("contains", "unevaluatedItems", "additionalItems")
_MAX_DEPTH: Final = 64
_MAX_SCHEMAS: Final = 1000
_UNRESOLVED: Final = {"x-ongrid-secret": True}  # a ref we cannot follow: assume the worst

#: Property names that are secrets whatever the schema says (compared lower-case, without
#: ``-`` and ``_``; a name that ends in one of them counts too).
SECRET_NAMES: Final = ("password", "passwd", "secret", "token", "apikey", "authorization", "privatekey")


def secret_name(key: object) -> bool:
    """True for ``password``, ``API-Key``, ``db_password``, ``client_secret``, ``X_Auth_Token``..."""
    return isinstance(key, str) and key.casefold().replace("-", "").replace("_", "").endswith(SECRET_NAMES)


def is_secret(schema: Mapping[str, Any]) -> bool:
    """True when this one schema marks its value secret."""
    return (
        schema.get("writeOnly") is True
        or schema.get("format") == "password"
        or schema.get("x-ongrid-secret") is True
    )


def has_secrets(schema: Any, _depth: int = 0) -> bool:
    """True when any schema nested in ``schema`` marks something secret or names a secret
    property, or holds a reference (a cheap pre-check on the schema alone)."""
    if _depth > _MAX_DEPTH:
        return True  # too deep to be sure: walk the arguments to be safe
    if isinstance(schema, Mapping):
        if is_secret(schema) or "$ref" in schema or "$dynamicRef" in schema:
            return True
        if any(secret_name(key) for key in schema.get("properties", None) or ()):
            return True
        return any(has_secrets(v, _depth + 1) for v in schema.values())
    if isinstance(schema, list):
        return any(has_secrets(v, _depth + 1) for v in schema)
    return False


def needs_redaction(schema: Any, value: Any, schema_has_secrets: bool | None = None) -> bool:
    """Whether :func:`redact` could change ``value``: the schema marks secrets, or a key
    anywhere in the value is a secret's name."""
    if schema_has_secrets if schema_has_secrets is not None else has_secrets(schema):
        return True
    return _has_secret_key(value, 0)


def _has_secret_key(value: Any, depth: int) -> bool:
    if depth > _MAX_DEPTH:
        return True
    if isinstance(value, Mapping):
        return any(secret_name(k) or _has_secret_key(v, depth + 1) for k, v in value.items())
    if isinstance(value, list):
        return any(_has_secret_key(v, depth + 1) for v in value)
    return False


def redact(schema: Mapping[str, Any], value: Any) -> tuple[Any, list[str]]:
    """A copy of ``value`` with every secret replaced by ``"[redacted]"``, and their JSON paths."""
    paths: list[str] = []
    index = _Index(schema)
    return _walk(index.applicable([schema]), value, index, "$", paths, 0), paths


def _walk(
    schemas: list[Mapping[str, Any]], value: Any, index: _Index, path: str, paths: list[str], depth: int
) -> Any:
    if any(is_secret(s) for s in schemas) or depth > _MAX_DEPTH:
        paths.append(path)
        return REDACTED  # a value nested this deep is not worth the risk of missing a secret
    if isinstance(value, Mapping):
        out: dict[Any, Any] = {}
        for key, item in value.items():
            step = f"{path}.{key}"
            if secret_name(key):
                paths.append(step)
                out[key] = REDACTED
            else:
                children = index.applicable(_for_key(schemas, str(key)))
                out[key] = _walk(children, item, index, step, paths, depth + 1)
        return out
    if isinstance(value, list):
        return [
            _walk(index.applicable(_for_index(schemas, i)), item, index, f"{path}[{i}]", paths, depth + 1)
            for i, item in enumerate(value)
        ]
    return value


class _Index:
    """The schemas that apply in place, with references resolved inside the document."""

    def __init__(self, root: Mapping[str, Any]) -> None:
        self.root = root
        self._anchors: dict[str, list[Any]] | None = None
        self._ids: dict[str, list[Any]] | None = None

    def applicable(self, schemas: Iterable[Any]) -> list[Mapping[str, Any]]:
        """Every schema that may apply to the same value: the given ones, their branches and refs."""
        out: list[Mapping[str, Any]] = []
        seen: set[int] = set()
        todo = list(schemas)
        while todo:
            schema = todo.pop()
            if not isinstance(schema, Mapping) or id(schema) in seen:
                continue
            if len(out) >= _MAX_SCHEMAS:
                out.append(_UNRESOLVED)
                break
            seen.add(id(schema))
            out.append(schema)
            for key in _IN_PLACE:
                branches = schema.get(key)
                if isinstance(branches, list):
                    todo.extend(branches)
            todo.extend(schema.get(key) for key in _ONE_IN_PLACE)
            dependent = schema.get("dependentSchemas")
            if isinstance(dependent, Mapping):
                todo.extend(dependent.values())
            for key in ("$ref", "$dynamicRef"):
                ref = schema.get(key)
                if isinstance(ref, str):
                    todo.extend(self.resolve(ref))
        return out

    def resolve(self, ref: str) -> list[Any]:
        """Every subschema ``ref`` may name; ``[_UNRESOLVED]`` when none."""
        base, _, fragment = ref.partition("#")
        if base:
            targets = self._index()[1].get(base) or self._index()[1].get(base.rsplit("/", 1)[-1], [])
        else:
            targets = [self.root]
        found: list[Any] = []
        for target in targets:
            if not fragment:
                found.append(target)
            elif fragment.startswith("/"):
                found.append(pointed(target, fragment))
            else:
                found.extend(self._index()[0].get(fragment, []))
        found = [node for node in found if node is not None]
        return found or [_UNRESOLVED]

    def _index(self) -> tuple[dict[str, list[Any]], dict[str, list[Any]]]:
        if self._anchors is None or self._ids is None:
            self._anchors, self._ids = {}, {}
            stack: list[tuple[Any, int]] = [(self.root, 0)]
            while stack:
                node, depth = stack.pop()
                if depth > _MAX_DEPTH:
                    continue
                if isinstance(node, Mapping):
                    for key in ("$anchor", "$dynamicAnchor"):
                        if isinstance(node.get(key), str):
                            self._anchors.setdefault(node[key], []).append(node)
                    ident = node.get("$id")
                    if isinstance(ident, str):
                        for name in {ident.split("#")[0], ident.split("#")[0].rsplit("/", 1)[-1]}:
                            self._ids.setdefault(name, []).append(node)
                    stack.extend((v, depth + 1) for v in node.values())
                elif isinstance(node, list):
                    stack.extend((v, depth + 1) for v in node)
        return self._anchors, self._ids


def _for_key(schemas: list[Mapping[str, Any]], key: str) -> list[Any]:
    children: list[Any] = []
    for schema in schemas:
        properties = schema.get("properties")
        if isinstance(properties, Mapping) and key in properties:
            children.append(properties[key])
        patterns = schema.get("patternProperties")
        if isinstance(patterns, Mapping):
            children.extend(sub for pattern, sub in patterns.items() if _search(pattern, key))
        children.extend(schema[k] for k in _EVERY_KEY if isinstance(schema.get(k), Mapping))
    return children


def _for_index(schemas: list[Mapping[str, Any]], index: int) -> list[Any]:
    children: list[Any] = []
    for schema in schemas:
        prefix = schema.get("prefixItems")
        items = schema.get("items")
        if isinstance(prefix, list) and index < len(prefix):
            children.append(prefix[index])
        if isinstance(items, list):  # draft 4-7 tuple form
            if index < len(items):
                children.append(items[index])
        elif isinstance(items, Mapping):
            children.append(items)
        children.extend(schema[k] for k in _EVERY_ITEM if isinstance(schema.get(k), Mapping))
    return children


def _search(pattern: str, key: str) -> bool:
    try:
        return regex_search(pattern, key)
    except RegexError:
        return True  # a pattern we cannot read might match: assume it does


# ------------------------------------------------------------------------ free text

_TEXT_SECRETS: Final = (
    # PEM private keys, whole block or what is left of it in one line
    re.compile(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----.*?(?:-----END [A-Z0-9 ]*PRIVATE KEY-----|$)", re.S),
    re.compile(r"(?i)\b(bearer|basic|token)\s+[A-Za-z0-9._~+/=-]{8,}"),  # Authorization values
    re.compile(r"\b(?:AKIA|ASIA|AIDA|AROA)[A-Z0-9]{16}\b"),  # AWS access key ids
    re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{30,}|xox[abprs]-[A-Za-z0-9-]{10,}|sk-[A-Za-z0-9_-]{20,})"),
    # name=value / name: value for a secret's name, the name quoted too (JSON, YAML, Python)
    re.compile(
        r"(?i)\b([A-Za-z0-9_-]*(?:password|passwd|secret|token|api[_-]?key|authorization|private[_-]?key))"
        r"([\"']?\s*[:=]\s*)(\"[^\"]*\"|'[^']*'|\S+)"
    ),
)


def redact_text(text: str) -> str:
    """``text`` with known secret shapes replaced by ``[redacted]`` (for stderr lines)."""
    if not text:
        return text
    bearer, assign = _TEXT_SECRETS[1], _TEXT_SECRETS[4]
    text = _TEXT_SECRETS[0].sub(REDACTED, text)
    text = bearer.sub(lambda m: f"{m.group(1)} {REDACTED}", text)
    text = _TEXT_SECRETS[2].sub(REDACTED, text)
    text = _TEXT_SECRETS[3].sub(REDACTED, text)
    return assign.sub(_assigned, text)


def _assigned(match: re.Match[str]) -> str:
    """A secret's ``name: value`` with the value replaced, quoted as it was."""
    value = match.group(3)
    quote = value[0] if value[:1] in ("'", '"') else ""
    return f"{match.group(1)}{match.group(2)}{quote}{REDACTED}{quote}"


def scrub_values(lines: list[str], original: Any, redacted: Any) -> list[str]:
    """``lines`` without the string values that :func:`redact` took out of ``original``
    (``redacted`` is its result): a skill that echoes its input prints a secret in shapes
    no pattern knows. Values shorter than 4 characters are left (they would blank out
    ordinary words); their JSON-escaped form is removed too."""
    found = sorted({v for v in _taken(original, redacted, 0) if len(v) >= 4}, key=len, reverse=True)
    if not found:
        return lines
    forms = [f for v in found for f in {v, json.dumps(v, ensure_ascii=False)[1:-1]}]
    pattern = re.compile("|".join(re.escape(f) for f in forms))
    return [pattern.sub(REDACTED, line) for line in lines]


def _taken(original: Any, redacted: Any, depth: int) -> Iterator[str]:
    """Every string leaf of ``original`` where ``redacted`` holds :data:`REDACTED` instead."""
    if depth > _MAX_DEPTH + 1:
        return
    if isinstance(redacted, str) and redacted == REDACTED and original != REDACTED:
        if isinstance(original, str):
            yield original
        elif isinstance(original, Mapping):
            for item in original.values():
                yield from _taken(item, REDACTED, depth + 1)
        elif isinstance(original, list):
            for item in original:
                yield from _taken(item, REDACTED, depth + 1)
    elif isinstance(original, Mapping) and isinstance(redacted, Mapping):
        for key, item in original.items():
            yield from _taken(item, redacted.get(key), depth + 1)
    elif isinstance(original, list) and isinstance(redacted, list):
        for item, red in zip(original, redacted, strict=False):
            yield from _taken(item, red, depth + 1)


_PEM_BEGIN: Final = re.compile(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----")
_PEM_END: Final = re.compile(r"-----END [A-Z0-9 ]*PRIVATE KEY-----")


def redact_lines(lines: Iterable[str]) -> list[str]:
    """:func:`redact_text` per line, and every line inside a PEM private key block."""
    out: list[str] = []
    inside = False
    for line in lines:
        if inside:
            out.append(REDACTED)
            inside = not _PEM_END.search(line)
            continue
        if _PEM_BEGIN.search(line) and not _PEM_END.search(line):
            inside = True
        out.append(redact_text(line))
    return out
