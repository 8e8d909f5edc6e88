"""The plugin manager: built-in plugins first, then entry points, every one guarded.

Built-in plugins are plain modules registered exactly like third-party ones,
under short names (``roots``, ``skill_json``, ``skill_md``, ``subprocess``, ``native``,
``gate``, ``builtin_tools``, ``audit``; the host swaps the ``audit`` module for its own
audit log object), then ``packs`` (:class:`~ongrid_plugins.packs.PackRoots`, the
roots of the ``ongrid_skills`` entry points). Then every entry point of the
``ongrid_plugins`` group is loaded and registered under its entry-point name.
Both groups come from one read of the installed distributions. A plugin that
fails to import or to register (it raises, even ``SystemExit`` from a
``sys.exit()`` at import, or a hook implementation has a wrong signature) is
logged with its distribution and cause and skipped, so the host always starts;
only Ctrl-C (``KeyboardInterrupt``) goes through. In strict mode the failure
raises :class:`~ongrid_plugins.errors.PluginLoadError` instead. A failed plugin
that implements or names a permission or approval hook fails *closed*: the gate
then refuses every mutating and dangerous call, naming it, until it loads or is
disabled by name.

While third-party code is imported (entry points, and the parent packages of
``ongrid_skills`` packs), what it prints goes to stderr
(:func:`~ongrid_plugins.core.stdio.stdout_to_stderr`): stdout carries only our JSON and
MCP stream. An entry point slower to import than :data:`SLOW_IMPORT_SECONDS` is
named in a warning, so a slow start has a culprit.

Nothing here runs at import time: :func:`get_plugin_manager` builds a fresh
manager every time it is called. Hooks are called through the manager's typed
facade (:attr:`PluginManager.hooks`, :mod:`ongrid_plugins.core.hooks`).
"""

from __future__ import annotations

import contextlib
import difflib
import functools
import importlib
import logging
import re
import sys
import time
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

import attrs
import pluggy

from . import hookspecs
from .core.hooks import Hooks, hooks
from .core.stdio import stdout_to_stderr
from .errors import PluginLoadError
from .packs import PACK_GROUP, PackRoots, dist_name_version
from .settings import Settings

if TYPE_CHECKING:
    from importlib.metadata import EntryPoint

__all__ = [
    "BUILTIN_PLUGINS",
    "ENTRY_POINT_GROUP",
    "PER_HOST_PLUGINS",
    "POWER_HOOKS",
    "PROTECTED_PLUGINS",
    "SLOW_IMPORT_SECONDS",
    "PluginInfo",
    "PluginManager",
    "collect_native_tools",
    "get_plugin_manager",
]

logger = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "ongrid_plugins"

#: (name, module) of every built-in plugin, registered in this order. A module plugin is
#: the module itself; a per-host one (:data:`PER_HOST_PLUGINS`) is an object the host hands
#: over (``get_plugin_manager(per_host=...)``), registered at its place in this order.
BUILTIN_PLUGINS: tuple[tuple[str, str], ...] = (
    ("roots", "ongrid_plugins.discovery.roots"),
    ("skill_json", "ongrid_plugins.loaders.skill_json"),
    ("skill_md", "ongrid_plugins.loaders.skill_md"),
    ("remote", "ongrid_plugins.remote.plugin"),
    ("subprocess", "ongrid_plugins.executors.subprocess"),
    ("native", "ongrid_plugins.executors.native"),
    ("gate", "ongrid_plugins.gate"),
    ("builtin_tools", "ongrid_plugins.discovery.builtin_tools"),
    ("audit", "ongrid_plugins.audit"),
)

#: Built-in plugins that are one object per host, since their hooks need the host's state:
#: ``audit`` is the host's :class:`~ongrid_plugins.audit.AuditLog`. A manager built without
#: a host has no such object, so it goes without them.
PER_HOST_PLUGINS = frozenset({"audit"})

#: Plugins that cannot be disabled: without them a safety rule would vanish.
PROTECTED_PLUGINS = frozenset({"gate"})

#: Hooks that hold power over calls: a plugin implementing one that fails to load must
#: not silently take its refusals with it (see :attr:`PluginInfo.fails_closed`).
POWER_HOOKS = ("ongrid_check_permission", "ongrid_verify_approval")

#: An entry point whose import takes longer (seconds) is named in a warning: start-up waits for it.
SLOW_IMPORT_SECONDS = 2.0


def _strs(value: Iterable[str]) -> tuple[str, ...]:
    return tuple(value)


@attrs.frozen
class PluginInfo:
    """What became of one plugin: shown by ``ongrid-skills plugins``."""

    name: str
    kind: str
    """``builtin``, ``entrypoint``, ``manual`` (registered by the host) or ``pack`` (an
    ``ongrid_skills`` entry point: a folder of skills, no hooks)."""
    status: str
    """``active``, ``blocked`` (disabled by name) or ``failed``."""
    module: str = ""
    distribution: str = ""
    version: str = ""
    hooks: tuple[str, ...] = attrs.field(default=(), converter=_strs)
    error: str = ""
    fails_closed: bool = False
    """A failed plugin that implements (or names) a permission or approval hook: until it
    is fixed or disabled with ``ONGRID_DISABLE_PLUGINS``, every mutating and dangerous
    call is refused, since the votes it was meant to cast are missing."""

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return attrs.asdict(self)


class PluginManager(pluggy.PluginManager):
    """A pluggy manager that remembers what happened to every plugin it was offered."""

    def __init__(self) -> None:
        super().__init__(hookspecs.PROJECT_NAME)
        self.add_hookspecs(hookspecs)
        self.plugin_infos: list[PluginInfo] = []
        self.failed_closed: list[PluginInfo] = []
        """The failed plugins that hold power (permission or approval hooks): the gate reads
        it on every call, so it is kept apart from ``plugin_infos``."""
        self.hook_monitors = 0
        """How many monitors (``add_hookcall_monitoring``, ``enable_tracing``) watch the hook
        calls: while there is one, :mod:`ongrid_plugins.core.hooks` calls every hook through pluggy."""

    def add_hookcall_monitoring(self, before: Any, after: Any) -> Callable[[], None]:
        """pluggy's, counted in :attr:`hook_monitors` until its undo function is called."""
        undo = super().add_hookcall_monitoring(before, after)
        self.hook_monitors += 1
        undone = False

        def counted_undo() -> None:
            nonlocal undone
            undo()
            if not undone:
                undone = True
                self.hook_monitors -= 1

        return counted_undo

    @property
    def hooks(self) -> Hooks:
        """The typed hook calls of this manager (:class:`~ongrid_plugins.core.hooks.Hooks`)."""
        return hooks(self)

    def add_plugin(self, plugin: object, name: str) -> None:
        """Register a plugin the host hands over; a broken one raises at once.

        Hooks the plugin implements must exist: a misspelt hook name is a
        ``pluggy.PluginValidationError``, not a silent no-op.
        """
        self.register(plugin, name=name)
        _check_known_hooks(self, plugin, name)
        self.plugin_infos.append(PluginInfo(name, "manual", "active", type(plugin).__module__))

    def describe(self) -> list[PluginInfo]:
        """Every plugin offered so far, with the hooks it implements right now."""
        infos = []
        for info in self.plugin_infos:
            plugin = self.get_plugin(info.name) if info.kind != "pack" else None
            if plugin is not None:
                names = sorted(name for name, _declared in self.hooks.hook_names(plugin))
                info = attrs.evolve(info, hooks=names)
            if info.kind == "builtin":  # looked up when shown: a load that shows nothing never reads it
                info = attrs.evolve(info, version=_own_version())
            infos.append(info)
        return infos


def get_plugin_manager(
    settings: Settings | None = None, *, per_host: Mapping[str, Callable[[], object]] | None = None
) -> PluginManager:
    """Build a fresh plugin manager: built-ins, then ``ongrid_plugins`` entry points.

    :param per_host: For each of :data:`PER_HOST_PLUGINS` the host has, what makes its
        object (called once, unless ``ONGRID_DISABLE_PLUGINS`` blocks the name).
    """
    per_host = per_host or {}
    unknown = sorted(set(per_host) - PER_HOST_PLUGINS)
    if unknown:
        raise ValueError(f"not per-host built-in plugins: {', '.join(unknown)}; use PluginManager.add_plugin")
    settings = settings if settings is not None else Settings.from_env()
    pm = PluginManager()
    for name in settings.disable_plugins:
        if name in PROTECTED_PLUGINS:
            logger.warning("plugin %r cannot be disabled: it enforces the permission rules", name)
        else:
            pm.set_blocked(name)
    for name, module in BUILTIN_PLUGINS:
        if name not in PER_HOST_PLUGINS:
            load = functools.partial(importlib.import_module, module)
            _register(pm, settings, name, "builtin", module, load)
        elif name in per_host:
            _register(pm, settings, name, "builtin", module, per_host[name])
    if settings.otel:  # OpenTelemetry only when asked for: without it nothing of it is imported
        module = "ongrid_plugins.audit.telemetry"
        _register(pm, settings, "otel", "builtin", module, lambda: importlib.import_module(module).plugin())
    groups = _entry_points(ENTRY_POINT_GROUP, PACK_GROUP) if settings.load_entry_points else {}
    # Third-party code runs from here on: looking a pack up imports its parent package.
    with stdout_to_stderr() if any(groups.values()) else contextlib.nullcontext():
        packs = PackRoots(pm, settings, groups.get(PACK_GROUP, ()))
        for pack in packs.packs:
            info = PluginInfo(
                pack.name, "pack", pack.status, pack.value, pack.distribution, pack.version, error=pack.error
            )
            pm.plugin_infos.append(info)
        _register(pm, settings, "packs", "builtin", "ongrid_plugins.packs", lambda: packs)
        for ep in groups.get(ENTRY_POINT_GROUP, ()):
            _register(pm, settings, ep.name, "entrypoint", ep.value, ep.load, ep)
    if settings.trace_plugins:
        enable_tracing(pm)
    return pm


def _entry_points(*groups: str) -> dict[str, list[EntryPoint]]:
    """The entry points of ``groups``, each sorted by name, from one scan of the installed distributions."""
    from importlib.metadata import entry_points  # ~15 ms of imports: only when asked

    try:
        found = entry_points()  # every distribution's entry_points.txt is read once for all groups
        return {group: sorted(found.select(group=group), key=lambda ep: ep.name) for group in groups}
    except Exception as exc:  # a broken dist-info must not stop the host
        logger.warning("plugins: cannot read entry points of groups %s: %r", ", ".join(groups), exc)
        return {}


def _register(
    pm: PluginManager,
    settings: Settings,
    name: str,
    kind: str,
    module: str,
    load: Callable[[], Any],
    ep: EntryPoint | None = None,
) -> None:
    dist, version = _distribution(ep)
    base = PluginInfo(name, kind, "active", module, dist, version)
    where = f" (distribution {f'{dist} {version}'.strip()})" if dist else ""
    if pm.is_blocked(name):
        logger.info("plugins: %s is disabled by ONGRID_DISABLE_PLUGINS", name)
        pm.plugin_infos.append(attrs.evolve(base, status="blocked"))
        return
    plugin: Any = None
    try:
        plugin = _timed(load, name + where) if ep is not None else load()
        pm.register(plugin, name=name)
        _check_known_hooks(pm, plugin, name)
    except KeyboardInterrupt:
        raise  # the operator's Ctrl-C, not the plugin's fault: stop as asked
    except BaseException as exc:  # sys.exit() at import too: it must not end the host
        cause = f"{type(exc).__name__}: {exc}"
        power = _holds_power(plugin, name, module)
        logger.warning("plugins: cannot load plugin %s%s: %s", name, where, cause)
        if power:
            logger.error(
                "plugins: %s implements a permission or approval hook: mutating and dangerous calls are "
                "refused until it loads or is disabled with ONGRID_DISABLE_PLUGINS=%s",
                name,
                name,
            )
        info = attrs.evolve(base, status="failed", error=cause, fails_closed=power)
        pm.plugin_infos.append(info)
        if power:
            pm.failed_closed.append(info)
        if settings.strict:
            raise PluginLoadError(name, cause + where) from exc
        return
    pm.plugin_infos.append(base)


def _timed(load: Callable[[], Any], named: str) -> Any:
    """``load()``, with a warning when it takes over :data:`SLOW_IMPORT_SECONDS` (raising or not)."""
    started = time.perf_counter()
    try:
        return load()
    finally:
        seconds = time.perf_counter() - started
        if seconds > SLOW_IMPORT_SECONDS:
            logger.warning(
                "plugins: importing plugin %s took %.1f s, over %g s: it delays every start of the host",
                named,
                seconds,
                SLOW_IMPORT_SECONDS,
            )


def _check_known_hooks(pm: PluginManager, plugin: object, name: str) -> None:
    """Refuse a plugin implementing a hook that does not exist (a typo would be silent otherwise)."""
    unknown = [name for name, declared in hooks(pm).hook_names(plugin) if not declared]
    if not unknown:
        return
    pm.unregister(plugin)
    known = [n for n in dir(hookspecs) if n.startswith("ongrid_")]
    details = []
    for hook in unknown:
        close = difflib.get_close_matches(hook, known, n=1)
        details.append(f"unknown hook {hook!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
    raise pluggy.PluginValidationError(plugin, f"plugin {name}: " + "; ".join(details))


def _holds_power(plugin: object, name: str, module: str) -> bool:
    """Does a plugin that failed implement, or name, a permission or approval hook?

    Asked of the loaded object when there is one (a misspelt power hook counts), else of
    the entry point's text and of its module's source, read without importing it.
    """
    names = [n for n in dir(plugin) if n.startswith("ongrid_")] if plugin is not None else []
    if any(difflib.get_close_matches(n, POWER_HOOKS, n=1, cutoff=0.8) for n in names):
        return True
    text = f"{name} {module}"
    if any(hook in text for hook in POWER_HOOKS) or any(w in text.lower() for w in ("permission", "approv")):
        return True
    source = _module_source(module.partition(":")[0].strip())
    return any(hook in source for hook in POWER_HOOKS)


def _module_source(dotted: str) -> str:
    """The source text of a module found on sys.path, without importing anything."""
    import os

    parts = dotted.split(".")
    for entry in sys.path:
        base = os.path.join(entry or ".", *parts)
        for candidate in (base + ".py", os.path.join(base, "__init__.py")):
            try:
                with open(candidate, encoding="utf-8", errors="replace") as f:
                    return f.read(1_000_000)
            except OSError:
                continue
    return ""


def _distribution(ep: EntryPoint | None) -> tuple[str, str]:
    """A built-in's version is left out here and filled in by :meth:`PluginManager.describe`.

    Reading it lists every ``sys.path`` folder (~6 ms), a twentieth of a cold load of
    2,000 manifests, for a figure only ``ongrid-skills plugins`` shows.
    """
    if ep is None:
        return "ongrid-plugins", ""
    return dist_name_version(ep)


def _own_version() -> str:
    from .core.version import __version__

    return __version__


#: The form of a ``builtin:`` key.
NATIVE_KEY = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.:-]*")


def collect_native_tools(pm: pluggy.PluginManager) -> dict[str, Callable[..., Any]]:
    """Every ``builtin:`` key contributed by a plugin; on a clash the first registered wins.

    A plugin whose hook raises, or that contributes a bad key or a non-callable, is
    logged and skipped.
    """
    found: dict[str, Callable[..., Any]] = {}
    owners: dict[str, str] = {}
    for plugin, contributed, exc in hooks(pm).native_tools():
        if exc is not None:
            logger.warning("native tools: plugin %s failed to list its tools: %r", plugin, exc)
            continue
        if not isinstance(contributed, Mapping):
            if contributed is not None:
                logger.warning("native tools: plugin %s returned %r, not a mapping", plugin, contributed)
            continue
        for key, fn in contributed.items():
            if not isinstance(key, str) or not NATIVE_KEY.fullmatch(key) or not callable(fn):
                logger.warning("native tools: plugin %s: bad entry %r -> %r, skipped", plugin, key, fn)
            elif key in found:
                logger.warning(
                    "native tools: builtin:%s from %s ignored; %s provides it",
                    key,
                    plugin,
                    owners[key],
                )
            else:
                found[key] = fn
                owners[key] = plugin
    return found


def enable_tracing(pm: pluggy.PluginManager) -> None:
    """Write every hook call and its result to stderr (``ONGRID_TRACE_PLUGINS=1``)."""
    pm.trace.root.setwriter(lambda text: sys.stderr.write("ongrid trace: " + text))
    pm.enable_tracing()
