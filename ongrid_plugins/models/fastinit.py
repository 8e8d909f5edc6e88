"""A second, cheaper way into a frozen slotted value class, for a loader's hot loop.

Calling a frozen attrs class costs more than most of what a loader does with a
manifest: the class call packs its keywords into a dict and unpacks them again,
and the generated ``__init__`` sets each field through ``object.__setattr__``
(a lookup on the class every time). :func:`fast_init` builds a function that
takes the named fields positionally and sets every slot through the slot's own
descriptor, in one straight line, as attrs generates its ``__init__``: the same
object, field for field (fields not named get their defaults, a factory's is
called, converters are applied), without the detours. It refuses a class it
could not build exactly so: one with validators, ``__attrs_pre_init__`` or
``__attrs_post_init__``, ``cache_hash``, an ``__init__`` of its own (not attrs'), or a
factory that takes ``self``.

The builder is ``_speedups.slot_builder`` where the extension was built (a C loop
over the same plan: every call builds four values this way, a load one or two per
skill), else a generated Python function; ``tests/test_fastinit.py`` holds both to the
class's own ``__init__``.

The public constructors are untouched: everything else builds values with them,
and a loader uses this only for values it checked itself.

May import: ``attrs``.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

import attrs

__all__ = ["evolver", "fast_init", "slot_setter"]


def fast_init(cls: type, *names: str, checked: bool = False) -> Callable[..., Any]:
    """``build(*values)``: a new ``cls`` whose fields ``names`` are ``values``, the rest defaults.

    Equal, field for field, to ``cls(**dict(zip(names, values)))``. Raises
    ``TypeError`` at once for a class the shortcut cannot build exactly, an
    unknown name, or a field with no default that is not named.

    :param checked: The caller checks every value as the class's
        ``__attrs_post_init__`` would (a check, not a change of the fields), and the
        builder then does not run it; without this, such a class is refused.
    """
    fields = attrs.fields(cls)
    known = {field.name for field in fields}
    if unknown := [name for name in names if name not in known]:
        raise TypeError(f"{cls.__qualname__} has no field {unknown[0]!r}")
    for hook in ("__attrs_pre_init__",) if checked else ("__attrs_pre_init__", "__attrs_post_init__"):
        if getattr(cls, hook, None) is not None:
            raise TypeError(f"{cls.__qualname__}: fast_init cannot run its {hook}")
    if _caches_hash(cls):
        raise TypeError(f"{cls.__qualname__}: fast_init cannot fill its cache_hash")
    init = getattr(next(vars(k)["__init__"] for k in cls.__mro__ if "__init__" in vars(k)), "__code__", None)
    if init is None or not init.co_filename.startswith("<attrs generated"):
        raise TypeError(f"{cls.__qualname__}: its __init__ is its own, not attrs': fast_init would skip it")
    if clash := [name for name in known if name.startswith("_fastinit_")]:
        raise TypeError(f"{cls.__qualname__}.{clash[0]}: a name fast_init keeps for itself")
    if len(set(names)) != len(names):
        raise TypeError(f"{cls.__qualname__}: a field is named twice in {names}")
    plan = tuple(_field_plan(cls, field, names) for field in fields)
    compiled = _compiled_builder()
    if compiled is not None and vars(object)["__new__"] is getattr(cls, "__new__", None):
        built: Callable[..., Any] = compiled(cls, names, plan)
        return built
    python: Callable[..., Any] = _python_builder(cls, names, plan)
    return python


#: How a field gets its value: ``(kind, payload, converter)``, as ``_speedups.slot_builder`` reads it.
_ARG, _CONSTANT, _FACTORY = 0, 1, 2


def _field_plan(cls: type, field: Any, names: tuple[str, ...]) -> tuple[Any, int, Any, Any]:
    """``(slot descriptor, kind, payload, converter)``: how the builder sets ``field``."""
    kind, payload, converter = _source(cls, field, names)
    return (_slot(cls, field.name), kind, payload, converter)


def _source(cls: type, field: Any, names: tuple[str, ...]) -> tuple[int, Any, Any]:
    """Where ``field``'s value comes from: an argument, its default or its factory; and its converter."""
    if field.validator is not None:
        raise TypeError(f"{cls.__qualname__}.{field.name}: fast_init skips validators")
    source: tuple[int, Any]
    if field.name in names:
        source = (_ARG, names.index(field.name))
    elif isinstance(field.default, attrs.Factory):  # type: ignore[arg-type]  # Factory is a class
        if field.default.takes_self:
            raise TypeError(f"{cls.__qualname__}.{field.name}: a factory taking self needs the real __init__")
        source = (_FACTORY, field.default.factory)
    elif field.default is attrs.NOTHING:
        raise TypeError(f"{cls.__qualname__}.{field.name} has no default: name it")
    else:
        source = (_CONSTANT, field.default)
    if field.converter is not None and _CONVERTER is not None and isinstance(field.converter, _CONVERTER):
        raise TypeError(f"{cls.__qualname__}.{field.name}: an attrs.Converter needs the real __init__")
    return (*source, field.converter)


def _python_builder(cls: type, names: tuple[str, ...], plan: tuple[tuple[Any, int, Any, Any], ...]) -> Any:
    """The builder as a generated function: one straight line, as attrs makes its ``__init__``."""
    # The generated function's own names start with _fastinit_, which no field may.
    space: dict[str, Any] = {"_fastinit_new": object.__new__, "_fastinit_cls": cls}
    lines = [f"def build({', '.join(names)}):", "    _fastinit_self = _fastinit_new(_fastinit_cls)"]
    for index, (slot, kind, payload, converter) in enumerate(plan):
        space[f"_fastinit_set_{index}"] = slot.__set__
        if kind == _ARG:
            value = names[payload]
        elif kind == _FACTORY:
            space[f"_fastinit_factory_{index}"] = payload
            value = f"_fastinit_factory_{index}()"
        else:
            space[f"_fastinit_default_{index}"] = payload
            value = f"_fastinit_default_{index}"
        if converter is not None:
            space[f"_fastinit_convert_{index}"] = converter
            value = f"_fastinit_convert_{index}({value})"
        lines.append(f"    _fastinit_set_{index}(_fastinit_self, {value})")
    lines.append("    return _fastinit_self")
    code = compile("\n".join(lines), f"<fast_init {cls.__module__}.{cls.__qualname__}>", "exec")
    exec(code, space)  # generated from the class's own field list, as attrs makes its __init__
    return space["build"]


def _compiled_builder() -> Any:
    """``_speedups.slot_builder`` where the extension was built (and enabled), else None."""
    if not USE_COMPILED:
        return None
    try:
        from .. import _speedups
    except ImportError:  # not built (no compiler at install time)
        return None
    return _speedups.slot_builder


USE_COMPILED = True
"""False: builders made from now on are generated Python functions (tests compare the two)."""


#: attrs >= 24.1 wraps converters that take the instance or the field in this class.
_CONVERTER: Any = getattr(attrs, "Converter", None)


def _slot(cls: type, name: str) -> Any:
    """The slot descriptor of ``name`` (a subclass may hide it behind a property)."""
    for klass in cls.__mro__:
        found = klass.__dict__.get(name)
        if found is not None and type(found).__name__ == "member_descriptor":
            return found
    raise TypeError(f"{cls.__qualname__}.{name} is not a slot: fast_init needs a slotted class")


def slot_setter(cls: type, name: str) -> Callable[[Any, Any], None]:
    """``set(value, new)``: field ``name`` of a ``cls`` set in place, past ``frozen``.

    Only for a value that its maker hands over before anyone else holds it (a
    builder's second step); refuses a class whose hash is cached (it would go stale).
    """
    if _caches_hash(cls):
        raise TypeError(f"{cls.__qualname__}: its cached hash would not follow a field set in place")
    setter: Callable[[Any, Any], None] = _slot(cls, name).__set__
    return setter


def _caches_hash(cls: type) -> bool:
    return any(name.startswith("_attrs_cached_hash") for name in getattr(cls, "__slots__", ()))


def evolver(fast: type) -> Callable[..., Any]:
    """``evolve(value, **changes)``: ``attrs.evolve``, each class's init fields looked up once.

    A value of class ``fast`` itself is rebuilt positionally through :func:`fast_init`;
    any other class (a subclass of ``fast`` too: it may have an ``__init__`` of its
    own) is called with keywords, as ``attrs.evolve`` calls it.
    """
    plans: dict[type, tuple[Any, ...]] = {}

    def evolve(value: Any, **changes: Any) -> Any:
        cls = type(value)
        plan = plans.get(cls)
        if plan is None:
            fields = [a for a in attrs.fields(cls) if a.init]  # several: attrgetter gives a tuple
            aliases = tuple(a.alias for a in fields)
            build = fast_init(cls, *(a.name for a in fields)) if cls is fast else None
            values = operator.attrgetter(*(a.name for a in fields))
            plan = plans[cls] = (aliases, values, build, {alias: i for i, alias in enumerate(aliases)})
        aliases, values, build, index = plan
        if build is None:
            kwargs = dict(zip(aliases, values(value), strict=True))  # in C: no loop here
            kwargs.update(changes)
            return cls(**kwargs)
        current = list(values(value))
        for alias, new in changes.items():
            position = index.get(alias)
            if position is None:
                raise TypeError(f"{cls.__qualname__}.__init__() got an unexpected keyword argument {alias!r}")
            current[position] = new
        return build(*current)

    return evolve
