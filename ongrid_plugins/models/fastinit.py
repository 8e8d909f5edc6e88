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
    # The generated function's own names start with _fastinit_, which no field may.
    space: dict[str, Any] = {"_fastinit_new": object.__new__, "_fastinit_cls": cls}
    lines = [f"def build({', '.join(names)}):", "    _fastinit_self = _fastinit_new(_fastinit_cls)"]
    for index, field in enumerate(fields):
        if field.validator is not None:
            raise TypeError(f"{cls.__qualname__}.{field.name}: fast_init skips validators")
        space[f"_fastinit_set_{index}"] = _slot(cls, field.name).__set__
        lines.append(f"    _fastinit_set_{index}(_fastinit_self, {_value(cls, field, index, names, space)})")
    lines.append("    return _fastinit_self")
    code = compile("\n".join(lines), f"<fast_init {cls.__module__}.{cls.__qualname__}>", "exec")
    exec(code, space)  # generated from the class's own field list, as attrs makes its __init__
    build: Callable[..., Any] = space["build"]
    return build


def _value(cls: type, field: Any, index: int, names: tuple[str, ...], space: dict[str, Any]) -> str:
    """The expression of ``field``'s value in the generated function (its default when not named)."""
    value: str
    if field.name in names:
        value = field.name
    elif isinstance(field.default, attrs.Factory):  # type: ignore[arg-type]  # Factory is a class
        if field.default.takes_self:
            raise TypeError(f"{cls.__qualname__}.{field.name}: a factory taking self needs the real __init__")
        space[f"_fastinit_factory_{index}"] = field.default.factory
        value = f"_fastinit_factory_{index}()"
    elif field.default is attrs.NOTHING:
        raise TypeError(f"{cls.__qualname__}.{field.name} has no default: name it")
    else:
        space[f"_fastinit_default_{index}"] = field.default
        value = f"_fastinit_default_{index}"
    if field.converter is not None:
        if _CONVERTER is not None and isinstance(field.converter, _CONVERTER):
            raise TypeError(f"{cls.__qualname__}.{field.name}: an attrs.Converter needs the real __init__")
        space[f"_fastinit_convert_{index}"] = field.converter
        value = f"_fastinit_convert_{index}({value})"
    return value


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
