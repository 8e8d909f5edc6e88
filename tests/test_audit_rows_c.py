"""The audit row made in C (``_speedups.audit_finisher``) is the Python row, byte for byte.

``audit.rows.finish_row`` makes the common row in C: a decision, no error, stderr, remote
run or approvers, and values canonical JSON has text for. Its values go into the chain
and its texts into the hash and the journal, so a single character of difference is a
chain that no longer verifies. Each generated result is made both ways and compared
(the C function answers None for the rows it leaves to Python, and those rows must be
ones the Python function can make); a log written through the C rows must verify.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ongrid_plugins import SkillHost
from ongrid_plugins.audit import log as audit_log
from ongrid_plugins.audit import rows
from ongrid_plugins.models import CallResult, Decision, Outcome, RemoteRun, Verdict
from ongrid_plugins.testing import isolated_settings, make_skill

pytest.importorskip("ongrid_plugins._speedups")


@pytest.fixture(scope="module")
def captured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, Any, CallResult, float]]:
    """A real call's start, request, result and duration, as the audit log's hook gets them."""
    tmp = tmp_path_factory.mktemp("rows")
    make_skill(tmp / "skills", "echo_args", class_="safe")
    host = SkillHost(isolated_settings(tmp, tmp / "skills"))
    seen: list[tuple[Any, Any, CallResult, float]] = []
    original = audit_log.finish_row

    def spy(start: Any, request: Any, result: CallResult, duration: float) -> Any:
        seen.append((start, request, result, duration))
        return original(start, request, result, duration)

    audit_log.finish_row = spy  # type: ignore[assignment]
    try:
        assert host.call("echo_args", {"a": 1}).ok
    finally:
        audit_log.finish_row = original
    yield seen[0]


def both(start: Any, request: Any, result: CallResult, duration: float) -> tuple[Any, Any]:
    """(the C row or None, the Python row or the exception it raised)."""
    assert rows._FINISH is not None
    tail = start.tail
    texts = (start.head, start.head_text, tail.values, tail.hashed)
    made = rows._FINISH(*texts, request.ticket, request.approvers, result, duration)
    try:
        python: Any = rows._finish_row(start, request, result, duration)
    except Exception as exc:  # the C function must then have left it to Python
        python = exc
    return made, python


def test_a_plain_call_row_is_made_in_c_and_is_the_python_row(captured: Any) -> None:
    start, request, result, duration = captured
    made, python = both(start, request, result, duration)
    assert made is not None, "the common row must be made in C"
    assert repr(made) == repr(python)
    (values, middle), line = made
    assert type(values) is list and type(middle) is str and type(line) is str
    assert [type(v) for v in values] == [type(v) for v in python[0][0]]  # plain str, not an enum
    assert rows.finish_row(start, request, result, duration) == made


JSON_LEAVES = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=30)
    | st.sampled_from(["\udcff lone", 'é\n"\\\u2028', "😀", "\x00\x1f"])
)
VALUES = st.recursive(
    JSON_LEAVES,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.text(max_size=8), inner, max_size=4)
        | st.tuples(inner, inner)
        | st.dictionaries(st.integers(), inner, max_size=2)
    ),
    max_leaves=12,
) | st.sampled_from([object(), {1, 2}, b"bytes", Outcome.OK])

PLUGINS = st.sampled_from(["ongrid.gate", "plug\u00e9"])
DECISIONS = st.none() | st.builds(Decision, st.sampled_from(list(Verdict)), st.text(max_size=40), PLUGINS)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    value=VALUES,
    decision=DECISIONS,
    error=st.none() | st.just("") | st.text(max_size=40),
    stderr=st.just(()) | st.lists(st.text(max_size=20), max_size=3).map(tuple),
    remote=st.none() | st.just(RemoteRun("qa", "t1", "w-a", "d")),
    status=st.sampled_from(["", *list(Outcome)]),
    ok=st.booleans(),
    timed_out=st.booleans(),
    exit_code=st.none() | st.integers(-(2**40), 2**40),
    signal=st.none() | st.integers(0, 64),
    duration=st.floats(allow_nan=True, allow_infinity=True) | st.integers(0, 10**6),
    ticket=st.none() | st.text(max_size=12),
    approvers=st.just(()) | st.lists(st.text(max_size=8), max_size=2).map(tuple),
)
def test_any_result_gives_the_python_row_or_is_left_to_python(
    captured: Any,
    value: Any,
    decision: Decision | None,
    error: str | None,
    stderr: tuple[str, ...],
    remote: RemoteRun | None,
    status: str,
    ok: bool,
    timed_out: bool,
    exit_code: int | None,
    signal: int | None,
    duration: float,
    ticket: str | None,
    approvers: tuple[str, ...],
) -> None:
    start, request, result, _ = captured
    result = attrs.evolve(
        result,
        ok=ok,
        value=value,
        decision=decision,
        error=error,
        stderr_tail=stderr,
        remote=remote,
        status=status,
        timed_out=timed_out,
        exit_code=exit_code,
        signal=signal,
    )
    request = attrs.evolve(request, ticket=ticket, approvers=approvers)
    made, python = both(start, request, result, duration)
    if made is None:
        return  # left to Python, which made it (or raised) above
    assert not isinstance(python, Exception), f"C made a row Python refuses: {python!r}"
    assert repr(made) == repr(python)
    common = decision is not None and not error and not stderr and remote is None and not approvers
    assert common and not (isinstance(duration, float) and not math.isfinite(duration))


def test_rows_c_leaves_to_python_are_left_to_python(captured: Any) -> None:
    """A head or tail without canonical text, or approvers: Python makes those rows."""
    start, _request, result, duration = captured
    head, text, values, hashed = start.head, start.head_text, start.tail.values, start.tail.hashed
    finish = rows._FINISH
    assert finish is not None
    assert finish(head, text, values, hashed, None, (), result, duration) is not None
    assert finish(head, None, values, hashed, None, (), result, duration) is None
    assert finish(head, text, values, None, None, (), result, duration) is None
    assert finish(head, text, values, hashed, None, ("ada",), result, duration) is None
    assert finish(tuple(head), text, values, hashed, None, (), result, duration) is None
    assert finish(head, text, tuple(values), hashed, None, (), result, duration) is None
    with pytest.raises(TypeError, match="finish\\(head"):
        finish(start.head)
    with pytest.raises(AttributeError):
        finish(head, text, values, hashed, None, (), object(), duration)
    from ongrid_plugins import _speedups

    with pytest.raises(TypeError, match="audit_finisher\\(fallback\\): fallback must be callable"):
        _speedups.audit_finisher(1)  # type: ignore[arg-type]


def test_a_log_of_rows_made_in_c_verifies(tmp_path: Path) -> None:
    make_skill(tmp_path / "skills", "echo_args", class_="safe")
    host = SkillHost(isolated_settings(tmp_path, tmp_path / "skills"))
    made: list[Any] = []
    finish = rows._FINISH

    def counting(*args: Any) -> Any:
        answer = finish(*args)  # type: ignore[misc]
        made.append(answer)
        return answer

    rows._FINISH = counting
    try:
        for n in range(5):
            assert host.call("echo_args", {"n": n, "text": "é" * n}).ok
    finally:
        rows._FINISH = finish
    assert len(made) == 5 and all(answer is not None for answer in made)
    assert host.audit.flush()
    report = host.audit.verify()
    assert report.ok, report
    assert [e.outcome for e in host.audit.entries()] == ["ok"] * 5


def test_a_value_holding_a_lone_surrogate_still_gets_its_row(captured: Any) -> None:
    """An executor that does not refuse one (a native tool, a plugin's) must not lose the row."""
    import hashlib

    start, request, result, duration = captured
    odd = attrs.evolve(result, value={"x": "\udcff"})
    made, python = both(start, request, odd, duration)
    assert made is None  # left to Python, which makes it
    assert not isinstance(python, Exception)
    values = python[0][0]
    text = '{"x":"\udcff"}'.encode("utf-8", "surrogatepass")
    size_at = 9 + 9  # after the head's nine columns, result_size is the body's tenth
    assert values[size_at : size_at + 2] == [len(text), hashlib.sha256(text).hexdigest()]


# ------------------------------------------------------------------ the head, at the call's start


def test_a_plain_call_head_is_made_in_c_and_is_the_python_head(captured: Any) -> None:
    _start, request, _result, _duration = captured
    assert rows._START is not None
    made = rows._START(1796000000.25, request)
    assert made is not None, "the common head must be made in C"
    assert repr(made) == repr(rows._head(request, 1796000000.25, False))
    assert [type(v) for v in made[0]] == [float, str, str, str, str, str, str, str, str]


ASCII_TEXT = st.text(st.characters(min_codepoint=32, max_codepoint=126), max_size=60)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    args_text=ASCII_TEXT | st.text(max_size=40) | st.sampled_from(["", '{"API-Key":1}', '{"db_PassWord":2}']),
    caller=st.text(max_size=12),
    call_id=st.text(max_size=12),
    started=st.floats(allow_nan=True, allow_infinity=True),
)
def test_any_head_is_the_python_head_or_is_left_to_python(
    captured: Any, args_text: str, caller: str, call_id: str, started: float
) -> None:
    _start, request, _result, _duration = captured
    request = attrs.evolve(request, args_json=args_text, caller=caller, call_id=call_id)
    assert rows._START is not None
    made = rows._START(started, request)
    if (
        made is None
    ):  # left to Python: a text that is empty, not ASCII or may name a secret; no canonical time
        assert (
            not args_text
            or not args_text.isascii()
            or rows._may_name_secret(args_text)
            or not math.isfinite(started)
        )
        return
    assert args_text.isascii() and not rows._may_name_secret(args_text)
    assert repr(made) == repr(rows._head(request, started, False))


def test_the_secret_name_search_in_c_is_the_python_one(captured: Any) -> None:
    _start, request, _result, _duration = captured
    assert rows._START is not None
    for text in [
        '{"token":1}',
        '{"ToKeN":1}',
        '{"to-ken":1}',
        '{"t_o-k_e-n":1}',
        '{"pass":"wd"}',
        "x" * 5000 + "secret",
    ]:
        folded_hit = rows._may_name_secret(text)
        assert folded_hit is (rows._START(1.0, attrs.evolve(request, args_json=text)) is None), text


def test_a_call_with_a_secret_argument_is_redacted_in_its_row(tmp_path: Path) -> None:
    """The C head leaves such calls to Python: the secret never reaches the row, whether the
    schema marks it (``writeOnly``) or only its name says so."""
    pin = {"type": "object", "properties": {"pin": {"type": "string", "writeOnly": True}}}
    make_skill(tmp_path / "skills", "unlock", class_="safe", schema=pin)
    make_skill(tmp_path / "skills", "login", class_="safe")
    host = SkillHost(isolated_settings(tmp_path, tmp_path / "skills"))
    assert host.call("unlock", {"pin": "4711-secret-pin"}).ok
    assert host.call("login", {"user": "ada", "api_key": "hunter2-very-secret"}).ok
    assert host.audit.flush()
    args = {entry.tool: entry.args for entry in host.audit.entries()}
    assert args["unlock"] == {"pin": "[redacted]"}
    assert args["login"] == {"api_key": "[redacted]", "user": "ada"}
