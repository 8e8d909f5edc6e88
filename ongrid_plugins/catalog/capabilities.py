"""What a pack's tools may do, in words and as data, and what grew between two versions.

A pack's *capabilities* are, per tool: its class, whether it runs a script (and
which) or a native function, whether it may use the network, the paths it may
read and write, the environment names it receives and its limits; and, for the
whole pack, the pluggy plugins its distribution ships (code that runs inside the
host process and is *not* confined). ``install`` shows them before installing,
``trust`` before consenting, ``show``/``inspect`` for installed packs, and
``skills.lock`` records the consented ones (:mod:`.lock`).

:func:`growth` compares two of them: what the newer one may do that the older
one may not (a new tool, a raised class, network gained, new paths, new
environment names, higher limits, plugins added). Narrowing is not growth.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

import attrs

from ..models import LIMIT_NAMES, Tool

if TYPE_CHECKING:
    import pluggy

    from ..settings import Settings

__all__ = [
    "PackCapabilities",
    "describe",
    "diff_lines",
    "folder_capabilities",
    "grown_tools",
    "growth",
    "tool_capabilities",
]

_CLASS_RANK = {"safe": 0, "mutating": 1, "dangerous": 2}


def tool_capabilities(tool: Tool, folder: str = "", home: str = "") -> dict[str, Any]:
    """One tool's capabilities as plain values (what the lock records under ``consent``).

    ``network`` is True, False or None (not declared: the operator's policy decides,
    see sandbox.md). ``script`` is the entry relative to ``folder`` when under it; paths
    under ``folder`` read ``<pack>/...`` and paths under ``home`` (default: this user's)
    ``~/...``, as the manifest wrote them: the loader expands ``~/`` against whoever runs
    the command, and what was consented must not grow because another HOME ran the next one.
    """
    decl = tool.sandbox
    prefix = folder.rstrip("/") + "/" if folder else "\0"
    script = tool.entry or ""
    if script.startswith(prefix):
        script = script[len(prefix) :]
    if decl is None:
        read: list[str] = []
        write: list[str] = []
        limits: dict[str, Any] = {}
        network = None
    else:
        home = home or _home()
        read = sorted(_spelled(p, prefix, home) for p in decl.read) if decl.read else []
        write = sorted(_spelled(p, prefix, home) for p in decl.write) if decl.write else []
        limits, network = decl.limits.to_dict(), decl.network
    return {
        "class": tool.tool_class.value,
        "kind": tool.kind,
        "script": script,
        "native": tool.impl or "",
        "network": network,
        "read": read,
        "write": write,
        "env": sorted(tool.env_allow) if tool.env_allow else [],
        "limits": limits,
    }


def _home() -> str:
    home = os.path.expanduser("~").rstrip("/")
    return home + "/" if home else "\0"


def _spelled(path: str, prefix: str, home: str) -> str:
    if path.startswith(prefix):
        return "<pack>/" + path[len(prefix) :]
    return "~/" + path[len(home) :] if path.startswith(home) else path


def _sorted(values: Iterable[str]) -> tuple[str, ...]:
    return tuple(sorted(values))


@attrs.frozen
class PackCapabilities:
    """Everything a pack may do: its tools' capabilities and the plugins it ships."""

    tools: Mapping[str, Mapping[str, Any]]
    plugins: tuple[str, ...] = attrs.field(default=(), converter=_sorted)
    """Entry points of group ``ongrid_plugins`` of the pack's distribution (pip packs only)."""

    @classmethod
    def of_tools(
        cls, tools: Iterable[Tool], folder: str = "", plugins: Iterable[str] = ()
    ) -> PackCapabilities:
        """The capabilities of ``tools`` (a pack's), scripts relative to ``folder``."""
        return cls({t.name: tool_capabilities(t, folder) for t in tools}, tuple(plugins))

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PackCapabilities:
        """Read what :meth:`to_dict` wrote (checked by the lock's reader)."""
        return cls(dict(data.get("tools") or {}), tuple(data.get("plugins") or ()))

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict, keys sorted."""
        return {"tools": {n: dict(self.tools[n]) for n in sorted(self.tools)}, "plugins": list(self.plugins)}

    @property
    def digest(self) -> str:
        """sha256 of the canonical JSON of :meth:`to_dict`: what consent rows and signatures name."""
        text = json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"), ensure_ascii=True)
        return hashlib.sha256(text.encode()).hexdigest()


def describe(caps: PackCapabilities) -> list[str]:
    """The capabilities in plain words, one line per fact, plugins first (they are not confined)."""
    lines = []
    if caps.plugins:
        lines.append(
            "WARNING: this pack ships pluggy plugins ("
            + ", ".join(caps.plugins)
            + "): Python code that runs "
            "inside the host process, with all of its rights, and is NOT confined by any sandbox"
        )
    if not caps.tools:
        lines.append("no tools")
    for name in sorted(caps.tools):
        lines.append(f"tool {name}: " + "; ".join(_tool_words(caps.tools[name])))
    return lines


def _tool_words(c: Mapping[str, Any]) -> list[str]:
    words = [f"class {c.get('class')}"]
    if c.get("native"):
        words.append(f"native function {c['native']} (runs in the host process)")
    elif c.get("script"):
        words.append(f"runs {c['script']}")
    network = c.get("network")
    words.append(
        "network: yes"
        if network
        else "network: no"
        if network is False
        else "network: not declared (policy decides)"
    )
    words.append("reads " + ", ".join(c["read"]) if c.get("read") else "reads: nothing declared")
    words.append("writes " + ", ".join(c["write"]) if c.get("write") else "writes: nothing declared")
    if c.get("env"):
        words.append("environment " + ", ".join(c["env"]))
    limits = c.get("limits") or {}
    if limits:
        words.append("limits " + ", ".join(f"{k}={limits[k]}" for k in LIMIT_NAMES if k in limits))
    return words


def growth(old: PackCapabilities, new: PackCapabilities) -> dict[str, list[str]]:
    """What ``new`` may do that ``old`` may not, per tool (``""``: the pack's plugins); empty: nothing."""
    grown: dict[str, list[str]] = {}
    added = sorted(set(new.plugins) - set(old.plugins))
    if added:
        grown[""] = ["plugins added (not confined): " + ", ".join(added)]
    for name in sorted(new.tools):
        before, now = old.tools.get(name), new.tools[name]
        if before is None:
            grown[name] = [f"new tool ({'; '.join(_tool_words(now))})"]
            continue
        lines = _tool_growth(before, now)
        if lines:
            grown[name] = lines
    return grown


def _tool_growth(before: Mapping[str, Any], now: Mapping[str, Any]) -> list[str]:
    lines = []
    if _CLASS_RANK.get(str(now.get("class")), 3) > _CLASS_RANK.get(str(before.get("class")), 3):
        lines.append(f"class raised {before.get('class')} -> {now.get('class')}")
    if now.get("network") and not before.get("network"):
        lines.append("network gained")
    if now.get("network") is None and before.get("network") is False:
        lines.append("network no longer declared off (policy decides)")
    for key, words in (
        ("read", "new read paths"),
        ("write", "new write paths"),
        ("env", "new environment names"),
    ):
        new_items = sorted(set(now.get(key) or ()) - set(before.get(key) or ()))
        if new_items:
            lines.append(f"{words}: " + ", ".join(new_items))
    for key in ("script", "native", "kind"):
        if (now.get(key) or "") != (before.get(key) or ""):
            lines.append(f"{key} changed {before.get(key) or '-'} -> {now.get(key) or '-'}")
    old_limits, new_limits = before.get("limits") or {}, now.get("limits") or {}
    for key in LIMIT_NAMES:
        if key in old_limits and (key not in new_limits or new_limits[key] > old_limits[key]):
            lines.append(f"limit {key} raised {old_limits[key]} -> {new_limits.get(key, 'the default')}")
    return lines


def grown_tools(grown: Mapping[str, list[str]]) -> set[str]:
    """The tools :func:`growth` names (plugins added make no single tool grow)."""
    return {name for name in grown if name}


def diff_lines(grown: Mapping[str, list[str]]) -> list[str]:
    """The growth in words, one line per change."""
    return [f"{name or 'pack'}: {line}" for name in sorted(grown) for line in grown[name]]


def folder_capabilities(
    folder: str, pm: pluggy.PluginManager, settings: Settings, plugins: Iterable[str] = ()
) -> PackCapabilities:
    """Load the skills of ``folder`` alone (as the host would) and return what their tools may do."""
    from . import loader

    folder = os.path.abspath(folder)
    alone = attrs.evolve(settings, skill_dirs=(folder,), include_defaults=False, load_entry_points=False)
    snapshot, _report = loader.load(pm, alone, announce=False)
    real = os.path.realpath(folder)
    return PackCapabilities.of_tools(snapshot.tools.values(), real, plugins)
