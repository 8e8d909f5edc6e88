"""The ``metadata`` of a SKILL.md: what the skill needs, in the ongrid and openclaw dialects.

Agent Skills calls ``metadata`` a free-form map, so keys we do not interpret are kept
without a warning. We read:

* ``metadata.os`` and ``metadata.requires`` (the ongrid dialect, read directly under
  ``metadata``);
* ``metadata.ongrid``: ``scope``, ``edge_runtime``, ``edge_capabilities``,
  ``activation`` (handed back to the caller), ``min_version`` (or the original's
  ``min_ongrid_version``), ``category``, ``sandbox`` (handed back to the caller, which
  reads it with the tools: see :mod:`._sandbox`);
* openclaw's block under ``metadata.openclaw`` or one of its legacy names
  ``clawdbot``, ``clawdis``, ``moltbot`` (first found wins, in that order), given as
  a mapping or as JSON / YAML text: ``os``, ``requires``, ``install`` (labels become
  install hints), ``always``, ``emoji``, ``homepage``, ``primaryEnv``, ``skillKey``.

Both dialects' requirements are merged; ``os`` lists are normalised (``win32`` is
``windows``, ``macos`` is ``darwin``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import attrs

from ..models import Requirements
from ._fields import Fields, canon, pointer, type_name
from .frontmatter import FrontMatterError, parse_yaml

__all__ = ["OPENCLAW_KEYS", "Metadata", "normalise_os", "read_metadata"]

#: Where openclaw's block may live under ``metadata``, by precedence.
OPENCLAW_KEYS = ("openclaw", "clawdbot", "clawdis", "moltbot")

REQUIRES_NAMES = {"bins": "bins", "any_bins": "anyBins", "env": "env", "config": "config"}
ONGRID_NAMES = {
    "scope": "scope",
    "edge_runtime": "edge_runtime",
    "edge_capabilities": "edge_capabilities",
    "activation": "activation",
    "min_version": "min_version",
    "min_ongrid_version": "min_ongrid_version",
    "category": "category",
    "sandbox": "sandbox",
}
OPENCLAW_NAMES = {
    "always": "always",
    "emoji": "emoji",
    "homepage": "homepage",
    "os": "os",
    "requires": "requires",
    "install": "install",
    "primary_env": "primaryEnv",
    "skill_key": "skillKey",
    "nix": "nix",
    "config": "config",
}
_OS_ALIASES = {"win32": "windows", "win": "windows", "macos": "darwin", "mac": "darwin", "osx": "darwin"}


@attrs.frozen
class Metadata:
    """What ``metadata`` says that the loader acts on."""

    requires: Requirements = attrs.field(factory=Requirements)
    activation: Any = None
    """``metadata.ongrid.activation`` as written (None when absent)."""
    category: str | None = None
    openclaw_key: str = ""
    """Which key held openclaw's block (``openclaw``, ``moltbot``, ...), empty if none."""
    sandbox: Any = None
    """``metadata.ongrid.sandbox`` as written (meaningful only when ``has_sandbox``)."""
    has_sandbox: bool = False
    """True when ``metadata.ongrid`` has a ``sandbox`` key (even an empty or a broken one)."""


def normalise_os(name: str) -> str:
    """``win32`` -> ``windows``, ``macOS`` -> ``darwin``; other names lower-cased."""
    lowered = name.strip().lower()
    return _OS_ALIASES.get(lowered, lowered)


def read_metadata(fields: Fields, raw: object) -> Metadata:
    """Read ``metadata`` (a mapping, or JSON / YAML text holding one)."""
    data = _as_mapping(fields, raw, "/metadata", "metadata")
    if data is None:
        return Metadata()
    keys = {canon(key): key for key in data}
    os_names = _os(fields, data, keys, "/metadata")
    own = _requires(fields, data[keys["requires"]], "/metadata/requires") if "requires" in keys else {}
    ongrid = _ongrid(fields, data, keys)
    claw_key, claw = _openclaw(fields, data, keys)
    claw_os: tuple[str, ...] = ()
    claw_req: dict[str, Any] = {}
    hints: dict[str, str] = {}
    if claw is not None:
        where = pointer("metadata", claw_key)
        known = fields.known(claw, OPENCLAW_NAMES, where)
        claw_os = _os(fields, known, {"os": "os"} if "os" in known else {}, where)
        if "requires" in known:
            claw_req = _requires(fields, known["requires"], where + "/requires")
        hints = _install_hints(fields, known.get("install"), where + "/install")
    if os_names and claw_os and set(os_names) != set(claw_os):
        message = f"metadata.os {list(os_names)} and metadata.{claw_key}.os {list(claw_os)} differ; "
        fields.warn("/metadata/os", "os_conflict", message + "metadata.os is used")
    requires = Requirements(
        os=os_names or claw_os,
        bins=_merge(own.get("bins", ()), claw_req.get("bins", ())),
        any_bins=[group for group in (own.get("any_bins"), claw_req.get("any_bins")) if group],
        env=_merge(own.get("env", ()), claw_req.get("env", ())),
        config=_merge(own.get("config", ()), claw_req.get("config", ())),
        min_version=ongrid.get("min_version", ""),
        hints=hints,
    )
    return Metadata(
        requires,
        ongrid.get("activation"),
        ongrid.get("category"),
        claw_key,
        sandbox=ongrid.get("sandbox"),
        has_sandbox="sandbox" in ongrid,
    )


def _as_mapping(fields: Fields, raw: object, where: str, label: str) -> dict[Any, Any] | None:
    """A mapping as written, or parsed from JSON (or YAML flow) text, as openclaw allows."""
    if isinstance(raw, dict):
        return raw
    if isinstance(raw, str):
        try:
            value = json.loads(raw)
        except RecursionError:  # the C scanner recurses once per container: say so, for this file alone
            message = (
                f'"{label}" is JSON text nested too deeply to read; flatten it (a few levels are enough)'
            )
            fields.error(where, "too_deep", message)
            return None
        except ValueError:
            try:
                value = parse_yaml(raw)[0]
            except FrontMatterError:
                value = None
        if isinstance(value, dict):
            return value
        message = f'"{label}" is text that is neither a JSON nor a YAML mapping; ignored'
        fields.warn(where, "wrong_type", message)
        return None
    fields.warn(where, "wrong_type", f'"{label}" must be a mapping (got {type_name(raw)}); ignored')
    return None


def _os(fields: Fields, data: Mapping[Any, Any], keys: Mapping[str, Any], where: str) -> tuple[str, ...]:
    if "os" not in keys:
        return ()
    names = fields.strings(data[keys["os"]], where + "/os", "os")
    return tuple(dict.fromkeys(normalise_os(name) for name in names))


def _requires(fields: Fields, raw: object, where: str) -> dict[str, Any]:
    data = fields.mapping(raw, where, "requires")
    if data is None:
        return {}
    known = fields.known(data, REQUIRES_NAMES, where)
    found: dict[str, Any] = {}
    for name, spelled in REQUIRES_NAMES.items():
        if name in known:
            found[name] = fields.strings(known[name], where + "/" + spelled, f"requires.{spelled}")
    return found


def _ongrid(fields: Fields, data: Mapping[Any, Any], keys: Mapping[str, Any]) -> dict[str, Any]:
    if "ongrid" not in keys:
        return {}
    where = "/metadata/ongrid"
    block = fields.mapping(data[keys["ongrid"]], where, "metadata.ongrid")
    if block is None:
        return {}
    known = fields.known(block, ONGRID_NAMES, where)
    found: dict[str, Any] = {"activation": known.get("activation")}
    if "sandbox" in known:
        found["sandbox"] = known["sandbox"]
    for name in ("min_version", "min_ongrid_version"):
        if name in known and "min_version" not in found:
            text = fields.text(known[name], f"{where}/{name}", f"metadata.ongrid.{name}")
            if text:
                found["min_version"] = text
    if "category" in known:
        found["category"] = fields.text(known["category"], where + "/category", "metadata.ongrid.category")
    return found


def _openclaw(
    fields: Fields, data: Mapping[Any, Any], keys: Mapping[str, Any]
) -> tuple[str, dict[Any, Any] | None]:
    present = [keys[name] for name in OPENCLAW_KEYS if name in keys]
    if not present:
        return "", None
    chosen = present[0]
    for other in present[1:]:
        message = f'metadata has both "{chosen}" and "{other}" (openclaw blocks); "{chosen}" is used'
        fields.warn(pointer("metadata", other), "openclaw_key_conflict", message)
    block = _as_mapping(fields, data[chosen], pointer("metadata", chosen), f"metadata.{chosen}")
    return str(chosen), block


def _install_hints(fields: Fields, raw: object, where: str) -> dict[str, str]:
    """``binary -> how to install it`` from openclaw installer entries."""
    if raw is None:
        return {}
    if not isinstance(raw, list):
        fields.warn(where, "wrong_type", f'"install" must be a list (got {type_name(raw)}); ignored')
        return {}
    hints: dict[str, str] = {}
    for entry in raw:
        if not isinstance(entry, dict):
            continue
        label = entry.get("label") or " ".join(
            str(entry[k]) for k in ("kind", "formula", "cask", "package", "module") if entry.get(k)
        )
        bins = entry.get("bins")
        for name in bins if isinstance(bins, list) else ():
            if isinstance(name, str) and label:
                hints.setdefault(name, str(label))
    return hints


def _merge(*groups: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(item for group in groups for item in group))
