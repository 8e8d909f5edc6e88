"""ongrid_plugins.schema.safe: schema regexes in linear time, references never fetched.

Every attack runs in a child process (tests/hostile.py) and is held to 1 s, measured in
the child: a regression fails the test instead of hanging the suite.
"""

from __future__ import annotations

import json
import re
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hostile import CATASTROPHIC, bounded
from jsonschema import Draft202012Validator

from ongrid_plugins import InvalidArguments, SkillHost
from ongrid_plugins.schema.safe import pattern_problem, regex_search, safe_validator, schema_problems
from ongrid_plugins.schema.subschemas import (
    SUBSCHEMA_ARRAY_KEYWORDS,
    SUBSCHEMA_KEYWORDS,
    SUBSCHEMA_MAP_KEYWORDS,
)
from ongrid_plugins.testing import isolated_settings, make_skill

BOUND = 5.0
"""Seconds an attack may take in its child: the backtracking it guards against takes hours, and
a loaded machine can spend a second on the timed part's first imports and plugin discovery."""


def messages(report: Any) -> str:
    return "\n".join(event.message for event in report.events)


# ------------------------------------------------------------------- the regex dialect

# Ordinary patterns from real schemas, and strings around their edges: RE2 and Python's
# re (what jsonschema uses) must give the same answer on every pair.
ORDINARY = [
    "^[a-z0-9_]+$",
    "^[A-Za-z][-A-Za-z0-9._]*$",
    "^\\S+@\\S+\\.\\S+$",
    "^(https?|ftp)://[^\\s/$.?#].[^\\s]*$",
    "^\\d{4}-\\d{2}-\\d{2}$",
    "^[0-9a-f]{64}$",
    "^#?([a-f0-9]{6}|[a-f0-9]{3})$",
    "^/[^\\0]*$",
    "^(?:[01]\\d|2[0-3]):[0-5]\\d$",
    "^v?(\\d+)\\.(\\d+)\\.(\\d+)(-[0-9A-Za-z.-]+)?$",
    "^[^/\\\\]+$",
    "(?i)^yes|no$",
    "^\\p{Lu}",  # RE2 reads \\p{..}; Python re refuses it (so does the metaschema check)
    "^x-",
    "é+",
    "\\u00e9",
    "^.{1,8}\\Z",
]
SAMPLES = [
    "",
    "a",
    "abc_1",
    "Abc",
    "user@example.com",
    "http://x.y/z",
    "2024-01-31",
    "0" * 64,
    "#a0f",
    "/etc/x",
    "23:59",
    "v1.2.3-rc.1",
    "a/b",
    "YES",
    "x-y",
    "é",
    "ééé",
    "12345678",
    "123456789",
    "😀",
]


def python_answer(pattern: str, text: str) -> bool | None:
    try:
        return re.search(pattern, text) is not None
    except re.error:
        return None


@pytest.mark.parametrize("pattern", ORDINARY)
def test_ordinary_patterns_answer_as_jsonschema_does(pattern: str) -> None:
    for text in SAMPLES:
        expected = python_answer(pattern, text)
        if expected is None:  # \\p{..}: not a pattern for Python, so never loaded
            assert pattern_problem(pattern) is None
            continue
        assert regex_search(pattern, text) is expected, (pattern, text)
        validator = Draft202012Validator({"pattern": pattern})
        assert validator.is_valid(text) is expected
        assert safe_validator({"pattern": pattern}).is_valid(text) is expected


@pytest.mark.parametrize(
    ("pattern", "text", "python", "re2"),
    [
        ("^a$", "a\n", True, False),  # "$": end of text only (ECMA-262), not before a final "\n"
        ("^\\d$", "\u0661", True, False),  # \\d is [0-9] (ECMA-262), not every Unicode digit
        ("^\\w$", "é", True, False),  # \\w is [0-9A-Za-z_] (ECMA-262)
        ("^\\s$", "\u00a0", True, False),  # \\s is ASCII whitespace only (ECMA-262 has more)
        ("\\bx", "éx", False, True),  # \\b: word boundaries are ASCII too
    ],
)
def test_documented_dialect_differences(pattern: str, text: str, python: bool, re2: bool) -> None:
    assert python_answer(pattern, text) is python
    assert regex_search(pattern, text) is re2


@pytest.mark.parametrize(
    "pattern",
    ["(a)\\1", "(?=a)b", "(?!a)b", "(?<=a)b", "(?<!a)b", "a++", "(?>a)", "a{1001}", "(?P=n)"],
)
def test_constructs_that_need_backtracking_are_refused_by_name(pattern: str) -> None:
    problem = pattern_problem(pattern)
    assert problem is not None
    assert repr(pattern) in problem and "RE2" in problem


def test_format_regex_arguments_must_be_re2() -> None:
    validator = safe_validator({"type": "string", "format": "regex"})
    assert validator.is_valid("^[a-z]+$")
    assert not validator.is_valid("(?=a)")  # Python's re would accept it


def test_a_lone_surrogate_in_the_text_does_not_raise() -> None:
    assert regex_search("^.+$", "a\ud800") is True


# ----------------------------------------------------------- catastrophic patterns


def schema_for(pattern: str) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {"p": {"type": "string", "pattern": pattern}},
        "patternProperties": {pattern: {"type": "integer"}},
        "additionalProperties": {"type": "integer"},
        "unevaluatedProperties": False,
        "propertyNames": {"pattern": pattern + "|^p$"},
    }


@pytest.mark.parametrize(("pattern", "text"), CATASTROPHIC)
def test_every_keyword_matches_in_linear_time(pattern: str, text: str) -> None:
    found = bounded(
        f"""
        import json, time
        from ongrid_plugins.schema.safe import safe_validator
        validator = safe_validator({schema_for(pattern)!r})
        start = time.perf_counter()
        errors = [e.message for e in validator.iter_errors({{"p": {text!r}, {text!r}: 1}})]
        print(json.dumps({{"elapsed": time.perf_counter() - start, "errors": errors}}))
        """
    )
    assert found["elapsed"] < BOUND
    assert any("does not match" in message for message in found["errors"])


@pytest.mark.parametrize(("pattern", "text"), CATASTROPHIC)
def test_loading_a_manifest_with_a_catastrophic_default_stays_fast(
    tmp_path: Path, pattern: str, text: str
) -> None:
    root = tmp_path / "skills"
    schema = {"type": "object", "properties": {"p": {"type": "string", "pattern": pattern, "default": text}}}
    make_skill(root, "evil", schema=schema)
    make_skill(root, "fine")
    found = bounded(
        f"""
        import json, time
        from ongrid_plugins import SkillHost
        from ongrid_plugins.testing import isolated_settings
        host = SkillHost(isolated_settings({str(tmp_path)!r}, {str(root)!r}))
        start = time.perf_counter()
        report = host.load()
        elapsed = time.perf_counter() - start
        names = sorted(tool.name for tool in host.tools())
        text = "\\n".join(event.message for event in report.events)
        print(json.dumps({{"elapsed": elapsed, "names": names, "report": text}}))
        """
    )
    assert found["elapsed"] < BOUND
    assert "evil" not in found["names"] and "fine" in found["names"]
    assert "does not match" in found["report"]


@pytest.mark.parametrize(("pattern", "text"), CATASTROPHIC[:3])
def test_a_call_with_catastrophic_arguments_is_refused_fast(tmp_path: Path, pattern: str, text: str) -> None:
    root = tmp_path / "skills"
    make_skill(
        root, "evil", schema={"type": "object", "properties": {"p": {"type": "string", "pattern": pattern}}}
    )
    found = bounded(
        f"""
        import json, time
        from ongrid_plugins import SkillHost, InvalidArguments
        from ongrid_plugins.testing import isolated_settings
        host = SkillHost(isolated_settings({str(tmp_path)!r}, {str(root)!r}))
        host.load()
        start = time.perf_counter()
        try:
            host.call("evil", {{"p": {text!r}}})
            outcome = "ran"
        except InvalidArguments as exc:
            outcome = str(exc)
        print(json.dumps({{"elapsed": time.perf_counter() - start, "outcome": outcome}}))
        """
    )
    assert found["elapsed"] < BOUND
    assert "does not match" in found["outcome"]


@pytest.mark.parametrize("command", ["list", "validate", "install"])
def test_cli_list_validate_and_install_stay_fast(tmp_path: Path, command: str) -> None:
    pattern, text = CATASTROPHIC[0]
    root = tmp_path / "skills"
    pack = root / "pack"
    schema = {"type": "object", "properties": {"p": {"type": "string", "pattern": pattern, "default": text}}}
    make_skill(pack, "evil", schema=schema)
    (pack / "pack.json").write_text(json.dumps({"name": "pack", "version": "1.0"}))
    install = ["install", "--yes", str(pack)]
    argv = {"list": ["list"], "validate": ["validate", str(pack)], "install": install}[command]
    user = tmp_path / "user"
    found = bounded(
        f"""
        import contextlib, io, json, os, time
        os.environ["ONGRID_USER_SKILLS_DIR"] = {str(user)!r}
        from ongrid_plugins.cli import main
        out = io.StringIO()
        start = time.perf_counter()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            code = main(["--no-defaults", "--dirs", {str(root)!r}, *{argv!r}])
        print(json.dumps({{"elapsed": time.perf_counter() - start, "code": code, "out": out.getvalue()}}))
        """
    )
    assert found["elapsed"] < BOUND, found
    assert "does not match" in found["out"], found["out"]
    if command != "list":
        assert found["code"] != 0
    if command == "install":  # refused: no staging folder left, and the lock is free again
        assert sorted(p.name for p in user.iterdir()) == [".ongrid-install.lock"]


def test_a_pattern_re2_cannot_compile_is_a_load_error_naming_it(tmp_path: Path) -> None:
    root = tmp_path / "skills"
    schema = {"type": "object", "properties": {"p": {"type": "string", "pattern": "(?<=a)b"}}}
    make_skill(root, "lookbehind", schema=schema)
    host = SkillHost(isolated_settings(tmp_path, root))
    report = host.load()
    assert "lookbehind" not in {tool.name for tool in host.tools()}
    assert "\"schema/properties/p/pattern\": pattern '(?<=a)b' is not supported" in messages(report)


@pytest.mark.parametrize(
    ("defs", "cycle"),
    [
        ({"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}}, "/$defs/a -> /$defs/b -> /$defs/a"),
        (
            {"a": {"type": "string", "allOf": [{"$ref": "#/$defs/a"}]}},
            "/$defs/a -> /$defs/a/allOf/0 -> /$defs/a",
        ),
        ({"a": {"anyOf": [{"type": "string"}, {"not": {"$ref": "#/$defs/a"}}]}}, "/$defs/a/anyOf/1/not"),
    ],
    ids=["ref_to_ref", "through_allof", "through_anyof_not"],
)
def test_a_ref_cycle_that_never_reaches_a_value_is_a_load_error_naming_it(
    tmp_path: Path, defs: dict[str, Any], cycle: str
) -> None:
    # Checking any value against it recursed until "arguments are nested too deeply".
    root = tmp_path / "skills"
    schema = {"type": "object", "$defs": defs, "properties": {"x": {"$ref": "#/$defs/a"}}}
    make_skill(root, "loop", schema=schema)
    make_skill(root, "fine")
    host = SkillHost(isolated_settings(tmp_path, root))
    report = host.load()
    assert {tool.name for tool in host.tools()} == {"fine"}
    message = messages(report)
    assert "refers back to itself without reaching a value" in message
    assert cycle in message
    assert "give" in message  # what to do


def test_a_recursive_schema_that_descends_into_the_value_is_fine(tmp_path: Path) -> None:
    root = tmp_path / "skills"
    node = {"type": "object", "properties": {"next": {"$ref": "#/$defs/node"}, "v": {"type": "string"}}}
    tree = {"type": "array", "items": {"anyOf": [{"type": "string"}, {"$ref": "#/$defs/tree"}]}}
    schema = {
        "type": "object",
        "$defs": {"node": node, "tree": tree},
        "properties": {"n": {"$ref": "#/$defs/node"}},
    }
    schema["properties"]["t"] = {"$ref": "#/$defs/tree"}
    make_skill(root, "tree", schema=schema)
    host = SkillHost(isolated_settings(tmp_path, root))
    host.load()
    assert host.get("tree").schema["$defs"] == schema["$defs"]


def test_argument_checks_that_are_not_certainly_light_run_off_the_event_loop(tmp_path: Path) -> None:
    import asyncio

    root = tmp_path / "skills"
    make_skill(root, "echo", schema={"type": "object", "properties": {"p": {"type": "string"}}})
    host = SkillHost(isolated_settings(tmp_path, root))
    host.load()
    seen: list[int] = []
    import ongrid_plugins.host.pipeline as pipeline_module

    real = pipeline_module.check_schema

    def spy(tool: Any, args: object) -> Any:
        seen.append(threading.get_ident())
        return real(tool, args)

    pipeline_module.check_schema = spy  # type: ignore[assignment]
    try:
        loop_thread: list[int] = []

        async def main() -> None:
            loop_thread.append(threading.get_ident())
            await host.acall("echo", {"p": "x"})  # first call: the schema's cost is not known yet
            await host.acall("echo", {"p": "x"})  # light: microseconds, checked where it arrives
            await host.acall("echo", {"p": "x" * 100_000})  # big: a worker thread
            await host.acall("echo", {"p": "x", **{f"k{i}": i for i in range(5000)}})

        asyncio.run(main())
    finally:
        pipeline_module.check_schema = real
    loop = loop_thread[0]
    assert [ident != loop for ident in seen] == [True, False, True, True]


def test_rest_server_answers_others_during_a_hostile_call(tmp_path: Path) -> None:
    pattern, text = CATASTROPHIC[0]
    root = tmp_path / "skills"
    make_skill(
        root, "evil", schema={"type": "object", "properties": {"p": {"type": "string", "pattern": pattern}}}
    )
    found = bounded(
        f"""
        import json, socket, threading, time
        import httpx, uvicorn
        from ongrid_plugins import SkillHost
        from ongrid_plugins.server.rest import create_app
        from ongrid_plugins.server.tokens import TokenStore, add_token
        from ongrid_plugins.testing import isolated_settings
        host = SkillHost(isolated_settings({str(tmp_path)!r}, {str(root)!r}))
        tokens = {str(tmp_path / "tokens.json")!r}
        token = add_token(tokens, "vic", "viewer")
        app = create_app(host, TokenStore.from_file(tokens))
        sock = socket.socket(); sock.bind(("127.0.0.1", 0))
        server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
        threading.Thread(target=server.run, kwargs={{"sockets": [sock]}}, daemon=True).start()
        while not server.started:
            time.sleep(0.01)
        url = "http://127.0.0.1:%d" % sock.getsockname()[1]
        headers = {{"Authorization": "Bearer " + token}}
        results = {{}}
        def attack():
            start = time.perf_counter()
            body = {{"params": {{"p": {text!r}}}}}
            r = httpx.post(url + "/v1/skills/evil/execute", json=body, headers=headers, timeout=30)
            results["attack"] = (r.status_code, time.perf_counter() - start)
        threads = [threading.Thread(target=attack) for _ in range(4)]
        for t in threads: t.start()
        start = time.perf_counter()
        health = httpx.get(url + "/healthz", timeout=30).status_code
        results["health"] = (health, time.perf_counter() - start)
        for t in threads: t.join(30)
        server.should_exit = True
        print(json.dumps(results))
        """
    )
    assert found["health"][0] == 200 and found["health"][1] < BOUND
    assert found["attack"][0] == 422 and found["attack"][1] < BOUND  # invalid_arguments, promptly


# ------------------------------------------------------------------------- references


class Listener:
    """A real HTTP server on 127.0.0.1 that counts requests (and may never answer)."""

    def __init__(self, answer: bool = True) -> None:
        self.requests: list[str] = []
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.sock.settimeout(0.1)
        self.answer = answer
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.sock.getsockname()[1]}/schema.json"

    def _serve(self) -> None:
        held = []
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            self.requests.append("connection")
            if self.answer:
                conn.sendall(b'HTTP/1.0 200 OK\r\nContent-Type: application/json\r\n\r\n{"type": "string"}')
                conn.close()
            else:
                held.append(conn)  # never answer
        for conn in held:
            conn.close()

    def close(self) -> None:
        self.stop.set()
        self.thread.join(5)
        self.sock.close()


@pytest.fixture
def listener() -> Iterator[Listener]:
    server = Listener()
    yield server
    server.close()


@pytest.fixture
def silent_listener() -> Iterator[Listener]:
    server = Listener(answer=False)
    yield server
    server.close()


def ref_schema(ref: str) -> dict[str, Any]:
    return {"type": "object", "properties": {"a": {"$ref": ref}}}


def test_a_remote_ref_is_a_load_error_and_nothing_is_fetched(tmp_path: Path, listener: Listener) -> None:
    root = tmp_path / "skills"
    make_skill(root, "ssrf", schema=ref_schema(listener.url))
    host = SkillHost(isolated_settings(tmp_path, root))
    report = host.load()
    assert "ssrf" not in {tool.name for tool in host.tools()}
    assert '"schema/properties/a/$ref": $ref' in messages(report)
    assert "points outside this schema" in messages(report)
    assert listener.requests == []


def test_a_server_that_never_answers_cannot_hang_loading(tmp_path: Path, silent_listener: Listener) -> None:
    root = tmp_path / "skills"
    make_skill(root, "slow", schema=ref_schema(silent_listener.url))
    found = bounded(
        f"""
        import json, time
        from ongrid_plugins import SkillHost
        from ongrid_plugins.testing import isolated_settings
        host = SkillHost(isolated_settings({str(tmp_path)!r}, {str(root)!r}))
        start = time.perf_counter()
        host.load()
        print(json.dumps({{"elapsed": time.perf_counter() - start, "names": [t.name for t in host.tools()]}}))
        """
    )
    assert found["elapsed"] < BOUND and "slow" not in found["names"]
    assert silent_listener.requests == []


def test_a_file_ref_reads_nothing_and_leaks_nothing(tmp_path: Path) -> None:
    secret = tmp_path / "secret.json"
    secret.write_text(json.dumps({"const": "hunter2-top-secret"}))
    root = tmp_path / "skills"
    make_skill(root, "leak", schema=ref_schema(secret.as_uri()))
    host = SkillHost(isolated_settings(tmp_path, root))
    report = host.load()
    assert "leak" not in {tool.name for tool in host.tools()}
    assert "hunter2" not in messages(report) and "points outside" in messages(report)


def test_validating_a_pack_archive_sends_no_request(tmp_path: Path, listener: Listener) -> None:
    import tarfile

    from clitools import cmd  # noqa: F401  (imported for the same CLI environment)

    from ongrid_plugins.cli import main

    pack = tmp_path / "pack"
    make_skill(pack, "ssrf", schema=ref_schema(listener.url))
    (pack / "pack.json").write_text(json.dumps({"name": "pack", "version": "1.0"}))
    archive = tmp_path / "pack.tgz"
    with tarfile.open(archive, "w:gz") as tf:
        tf.add(pack, arcname="pack")
    assert main(["--no-defaults", "validate", str(archive)]) != 0
    assert listener.requests == []


def test_a_call_never_fetches_even_when_a_tool_was_built_by_hand(listener: Listener) -> None:
    validator = safe_validator(ref_schema(listener.url))
    with pytest.raises(Exception, match="Unresolvable"):
        validator.is_valid({"a": 1})
    assert listener.requests == []


@pytest.mark.parametrize(
    ("schema", "pointer"),
    [
        (ref_schema("#/$defs/missing"), "/properties/a/$ref"),
        (ref_schema("#nowhere"), "/properties/a/$ref"),
        (ref_schema("https://json-schema.org/draft/2020-12/schema"), "/properties/a/$ref"),
        (ref_schema("other.json#/x"), "/properties/a/$ref"),
        ({"$dynamicRef": "file:///etc/passwd"}, "/$dynamicRef"),
        ({"$schema": "http://json-schema.org/draft-07/schema#"}, "/$schema"),
        ({"$defs": {"x": {"$ref": "urn:elsewhere"}}}, "/$defs/x/$ref"),
    ],
)
def test_references_outside_the_document_are_named_by_pointer(schema: dict[str, Any], pointer: str) -> None:
    problems = schema_problems(schema)
    assert [where for where, _message in problems] == [pointer]


_OUTSIDE = {"$ref": "urn:elsewhere"}
_EVERY_PLACE = [
    *((key, {key: _OUTSIDE}, f"/{key}/$ref") for key in sorted(SUBSCHEMA_KEYWORDS)),
    *((key, {key: {"x": _OUTSIDE}}, f"/{key}/x/$ref") for key in sorted(SUBSCHEMA_MAP_KEYWORDS)),
    *((key, {key: [_OUTSIDE]}, f"/{key}/0/$ref") for key in sorted(SUBSCHEMA_ARRAY_KEYWORDS)),
    ("additionalItems", {"additionalItems": _OUTSIDE}, "/additionalItems/$ref"),
    ("dependencies", {"dependencies": {"x": _OUTSIDE}}, "/dependencies/x/$ref"),
]


@pytest.mark.parametrize(("keyword", "schema", "pointer"), _EVERY_PLACE, ids=[row[0] for row in _EVERY_PLACE])
def test_a_reference_is_checked_wherever_the_one_subschema_table_says_subschemas_sit(
    keyword: str, schema: dict[str, Any], pointer: str
) -> None:
    # schema/subschemas.py is the one table; the metaschema check and this check both read it.
    assert [where for where, _message in schema_problems(schema)] == [pointer]


@pytest.mark.parametrize(
    "schema",
    [
        {"$defs": {"port": {"type": "integer"}}, "properties": {"a": {"$ref": "#/$defs/port"}}},
        {"$defs": {"port": {"$anchor": "port"}}, "properties": {"a": {"$ref": "#port"}}},
        {"$id": "urn:tool", "$defs": {"p": {"$id": "urn:port"}}, "properties": {"a": {"$ref": "urn:port"}}},
        {"$id": "https://example.com/t", "$defs": {"p": {"$id": "p"}}, "properties": {"a": {"$ref": "p"}}},
        {"properties": {"a": {"$ref": "#"}}},
        {"$schema": "https://json-schema.org/draft/2020-12/schema"},
    ],
)
def test_in_document_references_are_allowed_and_resolve(schema: dict[str, Any]) -> None:
    assert schema_problems(schema) == []
    safe_validator(schema).is_valid({"a": 1})


def test_invalid_arguments_error_for_a_ref_call(tmp_path: Path) -> None:
    root = tmp_path / "skills"
    make_skill(
        root, "ok", schema={"$defs": {"n": {"type": "integer"}}, "properties": {"a": {"$ref": "#/$defs/n"}}}
    )
    host = SkillHost(isolated_settings(tmp_path, root))
    host.load()
    with pytest.raises(InvalidArguments, match="is not of type 'integer'"):
        host.call("ok", {"a": "x"})


def test_cancelling_acall_during_a_threaded_check_records_the_attempt(tmp_path: Path) -> None:
    import asyncio

    root = tmp_path / "skills"
    make_skill(root, "echo", schema={"type": "object", "properties": {"p": {"type": "string"}}})
    host = SkillHost(isolated_settings(tmp_path, root))
    host.load()
    import ongrid_plugins.host.pipeline as pipeline_module

    real = pipeline_module.check_schema
    entered = threading.Event()

    def slow_check(tool: Any, args: object) -> Any:
        entered.set()
        import time

        time.sleep(0.3)
        return real(tool, args)

    pipeline_module.check_schema = slow_check  # type: ignore[assignment]
    try:

        async def main() -> None:
            task = asyncio.create_task(host.acall("echo", {"p": "x" * 10_000}))
            while not entered.is_set():
                await asyncio.sleep(0.01)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task

        asyncio.run(main())
    finally:
        pipeline_module.check_schema = real
    row = host.audit.tail(1)[0]
    assert (row.tool, row.outcome) == ("echo", "cancelled")
    assert host.audit.verify().inflight == ()
