"""``models.fastinit``'s builders, compiled (``_speedups.slot_builder``) and generated Python.

Every call builds four values through them (the request, the process spec, the runner's
outcome, the result) and a load one or two per skill, so each implementation must give
the object the class's own ``__init__`` gives, field for field, and refuse what it
cannot build; the compiled one must also survive a hostile plan and leak nothing.
"""

from __future__ import annotations

import gc
import sys
from collections.abc import Iterator
from typing import Any

import attrs
import pytest

from ongrid_plugins.executors._spec import ProcessOutcome, ProcessSpec
from ongrid_plugins.models import CallResult, Skill, SkillRoot, fastinit
from ongrid_plugins.models.fastinit import fast_init

_speedups = pytest.importorskip("ongrid_plugins._speedups")


@pytest.fixture(params=["compiled", "python"])
def kind(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Each test runs with the builders fast_init makes compiled, then as Python functions."""
    monkeypatch.setattr(fastinit, "USE_COMPILED", request.param == "compiled")
    yield request.param


def _fields(value: Any) -> list[Any]:
    return [getattr(value, field.name) for field in attrs.fields(type(value))]


@attrs.frozen
class Point:
    x: int
    y: int = 0
    tags: tuple[str, ...] = attrs.field(default=(), converter=tuple)
    seen: list[int] = attrs.field(factory=list)


@attrs.frozen
class Point3(Point):
    z: int = 9


def test_the_builder_is_the_one_asked_for(kind: str) -> None:
    build = fast_init(Point, "x", "y")
    if kind == "compiled":
        assert type(build) is _speedups.SlotBuilder
        assert "Point" in repr(build) and "'x', 'y'" in repr(build)
    else:
        assert build.__code__.co_filename.startswith("<fast_init")  # type: ignore[attr-defined]


def test_a_built_value_is_what_the_class_builds_field_for_field(kind: str) -> None:
    build = fast_init(Point, "x", "tags")
    one, two = build(1, ["a", "b"]), build(1, ["a", "b"])
    assert one == Point(1, tags=["a", "b"]) and _fields(one) == [1, 0, ("a", "b"), []]
    assert type(one.tags) is tuple  # the converter ran
    assert one.seen is not two.seen  # a factory is called for every value
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        one.x = 2  # type: ignore[misc]
    sub = fast_init(Point3, "x", "z")(4, 5)  # slots inherited from the base class
    assert sub == Point3(4, z=5) and type(sub) is Point3


def test_the_per_call_classes_are_built_as_their_init_builds_them(kind: str) -> None:
    skill_build = fast_init(Skill, "name", "description", "format", "path", "root", "warnings")
    root = SkillRoot("/r")
    assert _fields(skill_build("n", "d", "f", "/p", root, iter(["w"]))) == _fields(
        Skill(name="n", description="d", format="f", path="/p", root=root, warnings=["w"])
    )
    names = ("tool", "ok", "value", "error", "exit_code", "signal", "stderr_tail", "duration")
    values = ("echo", False, {"a": [1]}, "boom", 3, None, ["x", "y"], 0.25)
    result = fast_init(CallResult, *names)(*values)
    assert result == CallResult(**dict(zip(names, values, strict=True)))
    assert result.stderr_tail == ("x", "y")
    spec = fast_init(ProcessSpec, "argv", "cwd", "env", "stdin", "timeout", checked=True)
    assert spec(("/bin/true",), "/", {}, b"{}", 5.0) == ProcessSpec(
        argv=("/bin/true",), cwd="/", env={}, stdin=b"{}", timeout=5.0
    )
    outcome_names = [f.name for f in attrs.fields(ProcessOutcome) if f.default is attrs.NOTHING]
    outcome_values = [b"out", 0, None, False, True, ("t",), 1.5][: len(outcome_names)]
    built = fast_init(ProcessOutcome, *outcome_names)(*outcome_values)
    assert built == ProcessOutcome(**dict(zip(outcome_names, outcome_values, strict=True)))


def test_keywords_are_matched_to_the_names_as_a_function_matches_them(kind: str) -> None:
    build = fast_init(Point, "x", "y")
    assert build(1, y=2) == build(y=2, x=1) == Point(1, 2)
    for args, kwargs, words in [
        ((1,), {}, "2 positional arguments but 1 were given|missing 1 required positional argument: 'y'"),
        ((1, 2, 3), {}, "2 positional arguments but 3"),
        ((1,), {"z": 2}, "unexpected keyword argument 'z'"),
        ((1, 2), {"x": 3}, "multiple values for argument 'x'"),
        ((), {"x": 1}, "missing .*'y'"),
    ]:
        with pytest.raises(TypeError, match=words):
            build(*args, **kwargs)


def test_a_failing_converter_or_factory_fails_the_build_and_keeps_nothing(kind: str) -> None:
    class Boom(Exception):
        pass

    def refuse(_value: Any) -> Any:
        raise Boom("converter")

    def broken() -> Any:
        raise Boom("factory")

    @attrs.frozen
    class Picky:
        a: object
        b: object = attrs.field(converter=refuse, default=1)

    @attrs.frozen
    class Lazy:
        a: object
        b: object = attrs.field(factory=broken)

    marker = object()
    before = sys.getrefcount(marker)
    for cls in (Picky, Lazy):
        build = fast_init(cls, "a")
        for _ in range(200):
            with pytest.raises(Boom):
                build(marker)
    gc.collect()
    assert sys.getrefcount(marker) == before  # neither the half-built values nor the argument leak


def test_building_many_values_leaks_no_reference(kind: str) -> None:
    build = fast_init(Point, "x", "tags")
    arg, tags = object(), ("t",)
    before = sys.getrefcount(arg), sys.getrefcount(tags)
    for _ in range(5000):
        build(arg, tags)
    for _ in range(5000):
        build(x=arg, tags=tags)
    assert (sys.getrefcount(arg), sys.getrefcount(tags)) == before


def test_a_class_with_a_new_of_its_own_gets_the_python_builder() -> None:
    @attrs.frozen
    class Counted:
        x: int
        made: list[int] = attrs.field(factory=list)

        def __new__(cls, *args: Any, **kwargs: Any) -> Counted:
            return super().__new__(cls)

    build = fast_init(Counted, "x")
    assert type(build) is not _speedups.SlotBuilder
    assert build(3) == Counted(3)


def test_fast_init_refuses_a_field_named_twice(kind: str) -> None:
    with pytest.raises(TypeError, match="named twice"):
        fast_init(Point, "x", "x")


def test_slot_builder_refuses_a_hostile_plan_without_crashing() -> None:
    slot_x, slot_y = Point.__dict__["x"], Point.__dict__["y"]

    @attrs.frozen
    class Other:
        q: int

    good = (slot_x, 0, 0, None)
    for cls, names, fields, error, words in [
        (Point, ("x",), (good, (slot_y, 1, 0, None)), None, ""),
        (int, ("x",), (good,), TypeError, "object's"),
        ("Point", ("x",), (good,), TypeError, "object's"),
        (Point, ["x"], (good,), TypeError, "tuples"),
        (Point, ("x",), [good], TypeError, "tuples"),
        (Point, (1,), (good,), TypeError, "str"),
        (Point, ("x",), ((slot_x, 0, 0),), TypeError, "descriptor, kind"),
        (Point, ("x",), ((property(), 0, 0, None),), TypeError, "slot of the class"),
        (Point, ("x",), ((Other.__dict__["q"], 0, 0, None),), TypeError, "slot of the class"),
        (Point, ("x",), ((slot_x, 7, 0, None),), ValueError, "kind"),
        (Point, ("x",), ((slot_x, "0", 0, None),), TypeError, ""),
        (Point, ("x",), ((slot_x, 0, 1, None),), ValueError, "out of range"),
        (Point, ("x",), ((slot_x, 0, -1, None),), ValueError, "out of range"),
        (Point, ("x",), ((slot_x, 0, 2**80, None),), OverflowError, ""),
        (Point, ("x",), ((slot_x, 2, "not callable", None),), TypeError, "factory"),
        (Point, ("x",), ((slot_x, 0, 0, "not callable"),), TypeError, "converter"),
    ]:
        if error is None:
            partial = _speedups.slot_builder(cls, names, fields)(5)  # the fields it was given
            assert (type(partial), partial.x, partial.y) == (Point, 5, 0)
            continue
        with pytest.raises(error, match=words or None):
            _speedups.slot_builder(cls, names, fields)
    with pytest.raises(TypeError, match="3 arguments"):
        _speedups.slot_builder(Point, ("x",))  # type: ignore[call-arg]


def test_a_builder_shows_the_collector_what_it_holds() -> None:
    def factory() -> list[int]:
        return []

    @attrs.frozen
    class Held:
        a: object = attrs.field(factory=factory)

    build = _speedups.slot_builder(Held, (), ((Held.__dict__["a"], 2, factory, None),))
    assert Held in gc.get_referents(build) and factory in gc.get_referents(build)
    assert build() == Held()
