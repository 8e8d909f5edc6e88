"""The typed hook facade: one method per hook of :mod:`~ongrid_plugins.hookspecs`.

Core code never writes ``pm.hook.ongrid_*(...)`` with unchecked keyword arguments, as
tox 4's ``Plugin`` does for its own hooks: it asks :func:`hooks` for the manager's
:class:`Hooks` and calls a typed method, which says what the hook gives back (a list
flattened once, the first answer, or each plugin's answer on its own)::

    calls = hooks(pm)
    names = calls.manifest_names()
    skill = calls.load_manifest(path=path, root=root, settings=settings)

This module is the only one that touches the manager's hook callers; it uses pluggy's
public API only: ``pm.hook.NAME(...)``, ``pm.subset_hook_caller``,
``HookCaller.get_hookimpls()`` and the attributes of the :class:`pluggy.HookImpl` it
returns (``tests/test_hooks.py`` fails on any other module touching them,
``tests/test_public_apis.py`` on any private name of pluggy). A hook is called through
``pm.hook``, so ``ONGRID_TRACE_PLUGINS`` (or any ``add_hookcall_monitoring``) sees every
hook call.

The discovery and validation hooks check what each plugin returns: an answer of the
wrong type (``"/tmp"`` for a list of roots, a dict for a skill) is dropped with a
WARNING naming the hook and the plugin (:func:`_dropped`), and the rest of the load
goes on. To name the plugin, those hooks call one implementation at a time
(:func:`_answers`), in pluggy's order. While the manager's calls are monitored (tracing,
:class:`~ongrid_plugins.testing.HookRecorder`) they make one call through pluggy
instead, so a monitor sees one call per hook call; the hooks that must hear each plugin
on its own (:func:`call_each`) then go through ``pm.subset_hook_caller``, which the
monitor sees too. Whether a manager is monitored is what
:class:`~ongrid_plugins.plugins.PluginManager` counts (``hook_monitors``); another
manager is taken as monitored.

May import: :mod:`.hookspecs`, :mod:`.models` (the checks of the answers), :mod:`.echo`
and pluggy (a values module; other hook argument types only under ``TYPE_CHECKING``).
"""

from __future__ import annotations

import logging
import os
import types
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

import pluggy

from ..models import Problem, Skill, SkillRoot
from .echo import printable

if TYPE_CHECKING:
    from ..executors import Executor
    from ..gate.tickets import Approval, Ticket
    from ..models import CallRequest, CallResult, Persona, Tool
    from ..settings import Settings

__all__ = ["Contribution", "Hooks", "Implementation", "call_each", "hooks", "plugin_label"]

logger = logging.getLogger("ongrid_plugins.hooks")


class Contribution(NamedTuple):
    """One plugin's answer to a hook called one implementation at a time."""

    plugin: str
    """The name the plugin is registered under."""
    result: Any
    """What it returned (None when it raised)."""
    error: Exception | None
    """What it raised, or None."""


class Implementation(NamedTuple):
    """One plugin's implementation of a hook, as the loader and the load cache inspect it."""

    plugin_name: str
    plugin: object
    """The registered object (a module for the built-ins)."""
    wrapper: bool
    """A wrapper or old-style hook wrapper."""
    tryfirst: bool
    trylast: bool


class Hooks:
    """Typed calls of every hook, for one plugin manager (get it with :func:`hooks`)."""

    __slots__ = ("_hook", "_pm")

    def __init__(self, pm: pluggy.PluginManager) -> None:
        self._pm = pm
        self._hook = pm.hook

    def __repr__(self) -> str:
        return f"<Hooks of {self._pm.project_name}>"

    # ------------------------------------------------------------------ discovery

    def skill_roots(self, *, settings: Settings) -> list[SkillRoot]:
        """``ongrid_skill_roots``: every plugin's roots, in the order they came back (others dropped)."""
        name = "ongrid_skill_roots"
        answers = _answers(self._pm, name, {"settings": settings})
        return [root for plugin, answer in answers for root in _listed(name, plugin, answer, _ROOT)]

    def manifest_names(self) -> frozenset[str]:
        """``ongrid_manifest_names``: every file name some loader claims (other answers dropped)."""
        name = "ongrid_manifest_names"
        answers = _answers(self._pm, name, {})
        return frozenset(file for plugin, answer in answers for file in _listed(name, plugin, answer, _FILE))

    def load_manifest(
        self, *, path: str, root: SkillRoot, settings: Settings, manifest_name: str = ""
    ) -> Skill | None:
        """``ongrid_load_manifest``: the first loader's skill, or None (a loader's error propagates).

        ``manifest_name`` defaults to ``path``'s own name (a manifest that is not a symlink).
        An answer that is not a :class:`~ongrid_plugins.models.Skill` is dropped with a warning
        and the file goes on to the next loader, as if that plugin had declined it.
        """
        name = manifest_name or path.rpartition("/")[2]
        kwargs = {"path": path, "root": root, "settings": settings, "manifest_name": name}
        for plugin, answer in _answers(self._pm, "ongrid_load_manifest", kwargs):
            if isinstance(answer, Skill):
                return answer
            _dropped("ongrid_load_manifest", plugin, answer, "a Skill or None", f" for {path}")
        return None

    # ------------------------------------------------------------------ validation and registration

    def validate_skill(self, *, skill: Skill, root: SkillRoot) -> list[Problem]:
        """``ongrid_validate_skill``: every plugin's problems, flattened (anything else dropped)."""
        name = "ongrid_validate_skill"
        problems: list[Problem] = []
        for plugin, answer in _answers(self._pm, name, {"skill": skill, "root": root}):
            problems += _listed(name, plugin, answer, _PROBLEM, skill)
        return problems

    def skill_registered(self, *, skill: Skill) -> None:
        """``ongrid_skill_registered``: tell every listener."""
        self._hook.ongrid_skill_registered(skill=skill)

    # ------------------------------------------------------------------ permissions

    def check_permission(
        self, *, tool: Tool, persona: Persona, request: CallRequest | None
    ) -> list[Contribution]:
        """``ongrid_check_permission``: every vote that is not None with its plugin, unchecked.

        The gate checks them. The plugin is ``""`` when it cannot be named for certain (a
        monitored manager or a wrapper make one call through pluggy). A vote that raises
        ends the hook call: it is the last contribution, with its error and its plugin.
        """
        name = "ongrid_check_permission"
        votes: list[Contribution] = []
        try:
            kwargs = {"tool": tool, "persona": persona, "request": request}
            for plugin, vote in _answers(self._pm, name, kwargs):
                votes.append(Contribution(plugin, vote, None))
        except Exception as exc:
            votes.append(Contribution(self.raised_by(name, exc), None, exc))
        return votes

    def verify_approval(self, *, ticket: Ticket, approval: Approval) -> Iterator[Contribution]:
        """``ongrid_verify_approval``: each plugin's vote on its own, newest first; a raise is its answer."""
        return _each(self._pm, "ongrid_verify_approval", {"ticket": ticket, "approval": approval}, True)

    # ------------------------------------------------------------------ execution

    def native_tools(self) -> Iterator[Contribution]:
        """``ongrid_native_tools``: each plugin's mapping on its own, in registration order."""
        return _each(self._pm, "ongrid_native_tools", {}, False)

    def executor(self, *, tool: Tool, settings: Settings) -> Executor | None:
        """``ongrid_executor``: the first plugin's executor for ``tool``, or None."""
        executor: Executor | None = self._hook.ongrid_executor(tool=tool, settings=settings)
        return executor

    def before_call(self, *, request: CallRequest) -> None:
        """``ongrid_before_call``: every implementation; the first that raises aborts the call."""
        self._hook.ongrid_before_call(request=request)

    def after_call(self, *, request: CallRequest, result: CallResult) -> None:
        """``ongrid_after_call``: every implementation (the caller logs an exception)."""
        self._hook.ongrid_after_call(request=request, result=result)

    # ------------------------------------------------------------------ what is registered

    def raised_by(self, name: str, exc: BaseException) -> str:
        """The plugin whose implementation of hook ``name`` raised ``exc`` (its traceback), or ``""``."""
        codes = {}
        for impl in getattr(self._hook, name).get_hookimpls():
            code = getattr(impl.function, "__code__", None)
            if code is not None:
                codes[code] = impl.plugin_name
        found = ""
        tb = exc.__traceback__
        while tb is not None:  # the innermost implementation's frame names it
            found = codes.get(tb.tb_frame.f_code, found)
            tb = tb.tb_next
        return found

    def owner(self, obj: object) -> str:
        """The plugin whose module defines ``obj``'s class (an executor), or ``""``."""
        module = type(obj).__module__
        for plugin_name, plugin in self._pm.list_name_plugin():
            module_type = isinstance(plugin, types.ModuleType)
            own = getattr(plugin, "__name__", None) if module_type else type(plugin).__module__
            if own and (module == own or module.startswith(own + ".")):
                return plugin_name
        return ""

    def who_raised(self, name: str, exc: BaseException) -> str:
        """``plugin NAME (distribution ...)`` whose hook ``name`` raised ``exc``, or ``a plugin``."""
        plugin = self.raised_by(name, exc)
        return self.label(plugin) if plugin else "a plugin"

    def label(self, plugin: str) -> str:
        """How a message names plugin ``plugin``: ``plugin NAME (distribution DIST VERSION)``."""
        return plugin_label(self._pm, plugin)

    @property
    def monitored(self) -> bool:
        """True when hook calls are traced or monitored: then every call must reach pluggy."""
        return _monitored(self._pm)

    def implemented(self, name: str) -> bool:
        """True when some plugin implements hook ``name`` (wrappers included)."""
        return bool(getattr(self._hook, name).get_hookimpls())

    def implementations(self, name: str) -> tuple[Implementation, ...]:
        """The implementations of hook ``name``, in registration order (pluggy calls them newest first)."""
        return tuple(
            Implementation(i.plugin_name, i.plugin, i.hookwrapper or i.wrapper, i.tryfirst, i.trylast)
            for i in getattr(self._hook, name).get_hookimpls()
        )

    def hook_names(self, plugin: object) -> list[tuple[str, bool]]:
        """The hooks ``plugin`` implements, each with whether :mod:`.hookspecs` declares it."""
        return [(caller.name, caller.spec is not None) for caller in self._pm.get_hookcallers(plugin) or ()]


def hooks(pm: pluggy.PluginManager) -> Hooks:
    """The :class:`Hooks` of ``pm``, made on first use and kept on the manager."""
    found: Hooks | None = getattr(pm, "_ongrid_hooks", None)
    if found is None:
        found = Hooks(pm)
        pm._ongrid_hooks = found  # type: ignore[attr-defined]  # one per manager
    return found


def plugin_label(pm: pluggy.PluginManager, plugin: str) -> str:
    """``plugin NAME (distribution DIST VERSION)``; the distribution when the manager knows it."""
    for info in getattr(pm, "plugin_infos", ()):
        if info.name == plugin and info.distribution:
            return f"plugin {plugin} (distribution {f'{info.distribution} {info.version}'.strip()})"
    return f"plugin {plugin}"


def _monitored(pm: pluggy.PluginManager) -> bool:
    """True unless ``pm`` counts its monitors (``hook_monitors``) and has none.

    pluggy has no public "is this manager monitored"; our
    :class:`~ongrid_plugins.plugins.PluginManager` counts the monitors added through its
    ``add_hookcall_monitoring`` (``enable_tracing`` adds one). A manager that does not
    count is taken as monitored: its hooks are then always called through pluggy.
    """
    count = getattr(pm, "hook_monitors", None)
    return not isinstance(count, int) or count > 0


def _answers(pm: pluggy.PluginManager, name: str, kwargs: dict[str, Any]) -> Iterator[tuple[str, Any]]:
    """``(plugin name, answer)`` of each implementation of hook ``name`` that answers (not None).

    In pluggy's call order, each implementation called as pluggy would call it
    (:func:`_call_one`); a raise propagates as from pluggy's own call, and a caller that
    stops early (a ``firstresult`` hook's first answer) calls no more. A monitored
    manager (a :class:`HookRecorder <ongrid_plugins.testing.HookRecorder>` expects one
    call per hook call) and a hook with
    a wrapper (which may rewrite the answers) get one call through pluggy instead
    (:func:`_answered_once`).
    """
    caller = getattr(pm.hook, name)
    impls = caller.get_hookimpls()
    if _monitored(pm) or any(impl.hookwrapper or impl.wrapper for impl in impls):
        yield from _answered_once(caller, impls, kwargs)
        return
    for impl in impls[::-1]:  # pluggy calls the last registered first
        answer = _call_one(impl, kwargs)
        if answer is not None:
            yield impl.plugin_name, answer


def _call_one(impl: pluggy.HookImpl, kwargs: Mapping[str, Any]) -> Any:
    """What pluggy does with one plain implementation: call it with the arguments it names.

    Only while nothing monitors the manager (a monitor would miss the call); a raise
    comes out unchanged, as from pluggy.
    """
    return impl.function(*[kwargs[arg] for arg in impl.argnames])


def _answered_once(caller: Any, impls: list[Any], kwargs: dict[str, Any]) -> Iterator[tuple[str, Any]]:
    """The answers of one pluggy call, each named only when certain (else ``""``: "a plugin").

    Certain when no wrapper could rewrite them and every implementation answered (pluggy
    keeps only the answers that are not None, in its call order); a ``firstresult``
    answer, when there is one implementation.
    """
    answer = caller(**kwargs)
    if caller.spec is not None and caller.spec.opts.get("firstresult"):
        answer = [] if answer is None else [answer]
    plain = [impl for impl in impls[::-1] if not (impl.hookwrapper or impl.wrapper)]
    certain = len(plain) == len(impls) == len(answer)
    for index, one in enumerate(answer):
        yield (plain[index].plugin_name if certain else ""), one


class _Check(NamedTuple):
    """What each item of a list-answering hook must be."""

    ok: Callable[[Any], bool]
    item: str
    """What an item should be, for the log line."""
    answer: str
    """What the whole answer should be, for the log line."""


def _file_name(value: object) -> bool:
    return type(value) is str and value not in ("", ".", "..") and "/" not in value and "\0" not in value


def _root(value: object) -> bool:
    return isinstance(value, SkillRoot) and isinstance(value.path, str | os.PathLike)  # a Path works too


_ROOT = _Check(_root, "a SkillRoot with a str path", "a list of SkillRoot")
_FILE = _Check(_file_name, "a file name", "a list of file names")
_PROBLEM = _Check(lambda value: isinstance(value, Problem), "a Problem", "a list of Problem")


def _listed(hook: str, plugin: str, answer: object, check: _Check, skill: Skill | None = None) -> list[Any]:
    """The items of a hook's list ``answer`` that pass ``check``; the rest are dropped with a warning."""
    if not isinstance(answer, list | tuple):
        _dropped(hook, plugin, answer, check.answer, _about(skill))
        return []
    ok = check.ok
    if all(ok(item) for item in answer):
        return list(answer)
    kept = []
    for item in answer:
        if ok(item):
            kept.append(item)
        else:
            _dropped(hook, plugin, item, check.item, " in its list" + _about(skill))
    return kept


def _about(skill: Skill | None) -> str:
    return f' for skill "{printable(skill.name, 64)}"' if skill is not None else ""


def _dropped(hook: str, plugin: str, value: object, expected: str, where: str = "") -> None:
    """The one log line for a hook answer of the wrong type (``docs/writing-plugins.md`` shows it)."""
    try:
        shown = printable(repr(value), 60)
    except Exception:  # a plugin's own __repr__ may fail too
        shown = "<unprintable>"
    who = f"plugin {plugin}" if plugin else "a plugin"
    line = "hook %s: %s returned %s (%s)%s, expected %s; dropped"
    logger.warning(line, hook, who, shown, type(value).__name__, printable(where), expected)


def _each(
    pm: pluggy.PluginManager, name: str, kwargs: Mapping[str, Any], newest_first: bool
) -> Iterator[Contribution]:
    for impl, result, exc in call_each(pm, name, kwargs, newest_first=newest_first):
        yield Contribution(impl.plugin_name, result, exc)


def call_each(
    pm: pluggy.PluginManager, name: str, kwargs: Mapping[str, Any], *, newest_first: bool = True
) -> Iterator[tuple[pluggy.HookImpl, Any, Exception | None]]:
    """Call each implementation of hook ``name`` on its own: ``(impl, result, exception)``.

    For hooks where one plugin's failure must be isolated and attributed (a vote
    that fails closed naming its plugin, a contribution skipped with a warning)
    rather than abort the whole hook call. While the manager is monitored each call goes
    through ``pm.subset_hook_caller`` (the hook with every other plugin left out), so
    ``ONGRID_TRACE_PLUGINS`` traces it like any other hook call. Wrappers are skipped;
    ``newest_first`` is pluggy's own call order, ``False`` is registration order.
    """
    every = getattr(pm.hook, name).get_hookimpls()
    impls = [impl for impl in every if not (impl.hookwrapper or impl.wrapper)]
    monitored = _monitored(pm)
    for impl in reversed(impls) if newest_first else impls:
        alone = _alone(pm, name, impl, every) if monitored else None
        try:
            if alone is not None:
                results = alone(**kwargs)
                result = results[0] if results else None  # firstresult=False: the non-None answers
            else:
                result = _call_one(impl, kwargs)
        except Exception as exc:
            yield impl, None, exc
        else:
            yield impl, result, None


def _alone(pm: pluggy.PluginManager, name: str, impl: pluggy.HookImpl, every: list[pluggy.HookImpl]) -> Any:
    """Hook ``name`` with every plugin but ``impl``'s left out, or None when pluggy cannot make it.

    pluggy keeps the plugins to leave out in a set: a plugin object that cannot be hashed
    (a class defining ``__eq__`` without ``__hash__``) makes it refuse, and that one
    implementation is then called directly, unseen by the monitor.
    """
    others = [other.plugin for other in every if other.plugin is not impl.plugin]
    try:
        return pm.subset_hook_caller(name, others)
    except TypeError:
        return None
