"""References stay inside the document: no schema ever makes the host fetch or read.

jsonschema resolves a ``$ref`` it does not know by retrieving it: ``http(s)://`` with
``urllib``, ``file://`` from the disk.  A manifest could thus make ``load``, ``validate``
and ``install`` send requests (SSRF from validating an untrusted pack), hang on a server
that never answers, or echo a local file in an error message.  Here every registry
refuses retrieval, and :func:`ref_problem` tells the loader, before any validator
exists, which references would have needed it.
"""

from __future__ import annotations

import functools
from typing import Any, Final

__all__ = ["RetrievalRefused", "ref_problem", "refusing_registry"]

_DIALECT: Final = "https://json-schema.org/draft/2020-12/schema"


class RetrievalRefused(LookupError):
    """A reference pointed outside its schema document; nothing was fetched."""


def _refuse(uri: str) -> Any:
    message = f"reference {uri!r} points outside the schema; only in-document references are allowed"
    raise RetrievalRefused(message)


@functools.cache
def refusing_registry() -> Any:
    """An empty ``referencing.Registry`` whose retrieval always raises :class:`RetrievalRefused`."""
    from referencing import Registry

    return Registry(retrieve=_refuse)  # type: ignore[call-arg]  # an attrs field mypy misreads


def root_resolver(schema: Any) -> Any:
    """A resolver rooted at ``schema`` over a crawled, refusing registry (its own ids and anchors)."""
    from referencing.jsonschema import DRAFT202012

    resource = DRAFT202012.create_resource(schema)
    registry = refusing_registry().with_resource(resource.id() or "", resource).crawl()
    return registry.resolver_with_root(resource)


def enter(resolver: Any, node: dict[str, Any]) -> Any:
    """The resolver for a subschema: a new base URI when it carries an ``$id``."""
    if isinstance(node.get("$id"), str):
        from referencing.jsonschema import DRAFT202012

        return resolver.in_subresource(DRAFT202012.create_resource(node))
    return resolver


def ref_problem(resolver: Any, ref: object) -> str | None:
    """None if ``ref`` resolves inside the document, else why not (names the reference)."""
    if not isinstance(ref, str):
        return None  # the metaschema check reports the type
    from referencing.exceptions import NoSuchAnchor, PointerToNowhere, Unresolvable

    try:
        resolver.lookup(ref)
    except PointerToNowhere:
        return f"$ref {ref!r} points to nothing in this schema"
    except NoSuchAnchor:
        return f"$ref {ref!r} names an anchor this schema does not define"
    except Unresolvable:
        return (
            f"$ref {ref!r} points outside this schema; only in-document references "
            '("#/$defs/x", "#anchor" or the $id of a subschema) are allowed, nothing is fetched'
        )
    except Exception as error:  # a malformed URI or pointer
        return f"$ref {ref!r} cannot be resolved: {type(error).__name__}"
    return None


def dialect_problem(value: object) -> str | None:
    """None if ``$schema`` names draft 2020-12 (the dialect every check uses)."""
    if not isinstance(value, str) or value.rstrip("#") == _DIALECT:
        return None
    return f"$schema {value!r} is not supported; schemas are JSON Schema draft 2020-12 ({_DIALECT})"
