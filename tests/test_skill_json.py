"""The skill.json loader: every field rule of the specification, and the hostile cases."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

import pytest

from ongrid_plugins import SkillHost, ToolClass
from ongrid_plugins.testing import make_skill

LOADER = "ongrid_plugins.loader"


def load(make_host: Any, root: Path) -> SkillHost:
    host = make_host(root)
    host.load()
    return host


def build_errors(host: SkillHost) -> list[str]:
    return [e.message for e in host.report.errors]


def test_valid_manifest_registers_with_the_spec_defaults(make_host: Any, root: Path) -> None:
    folder = make_skill(root, "echo")
    host = load(make_host, root)
    tool = host.get("echo")
    assert host.report.registered == 1
    assert tool.description == "Test skill echo."
    assert tool.tool_class is ToolClass.SAFE
    assert tool.category == "external"
    assert tool.env_allow == ()
    assert tool.timeout == 30.0
    assert tool.schema == {"type": "object", "properties": {}}
    assert tool.entry == os.path.realpath(folder / "run.sh")
    assert tool.cwd == os.path.realpath(folder)
    assert tool.kind == "subprocess"


def test_the_spec_example_manifest_loads_field_for_field(make_host: Any, root: Path) -> None:
    manifest = {
        "name": "disk_cleaner",
        "description": "Free up disk by clearing stale build caches and journals.",
        "schema": {
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "Root path to clean."},
                "dry_run": {"type": "boolean", "default": True},
            },
            "required": ["path"],
        },
        "entry": "run.sh",
        "env_allow": ["PATH", "HOME"],
        "timeout_seconds": 60,
        "class": "mutating",
        "category": "ops",
    }
    make_skill(root, "disk_cleaner", folder="disk-cleaner", manifest=manifest)
    tool = load(make_host, root).get("disk_cleaner")
    assert tool.schema == manifest["schema"]
    assert tool.env_allow == ("PATH", "HOME")
    assert tool.timeout == 60.0
    assert tool.tool_class is ToolClass.MUTATING
    assert tool.category == "ops"


def test_log_lines_are_the_specifications_exact_strings(
    make_host: Any, root: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    make_skill(root, "disk_cleaner", folder="disk-cleaner")
    make_skill(root, "disk_cleaner", folder="disk-cleaner-copy")
    make_skill(root, "typo", raw='{"name": "typo",, }')
    outside = tmp_path / "escape.sh"
    outside.write_text("#!/bin/sh\n")
    outside.chmod(0o755)
    make_skill(root, "bad_path", script=None, entry=str(outside))
    caplog.set_level(logging.INFO, logger=LOADER)
    load(make_host, root)
    real = os.path.realpath(root)
    lines = [(r.levelname, r.getMessage()) for r in caplog.records if r.name == LOADER]
    assert lines == [
        (
            "WARNING",
            f'skill loader: build "bad_path": entry {os.path.realpath(outside)} '
            f"escapes allowlist root {real}",
        ),
        (
            "INFO",
            f'skill loader: registered subprocess skill "disk_cleaner" from {real}/disk-cleaner/skill.json',
        ),
        (
            "WARNING",
            f'skill loader: skill "disk_cleaner" already registered, skipping '
            f"{real}/disk-cleaner-copy/skill.json",
        ),
        (
            "WARNING",
            f"skill loader: parse {real}/typo/skill.json: Expecting property name enclosed "
            "in double quotes: line 1 column 17 (char 16)",
        ),
    ]


def test_load_report_has_one_event_per_manifest_with_outcome(make_host: Any, root: Path) -> None:
    make_skill(root, "a")
    make_skill(root, "a", folder="a2")
    make_skill(root, "b", raw="[]")
    make_skill(root, "c", manifest={"name": 7, "description": "d", "entry": "run.sh"})
    host = load(make_host, root)
    outcomes = sorted((Path(e.path).parent.name, e.outcome) for e in host.report.events)
    assert outcomes == [("a", "registered"), ("a2", "duplicate"), ("b", "parse_error"), ("c", "build_error")]
    assert host.report.registered == 1


BAD_FIELDS: list[tuple[str, dict[str, Any], str]] = [
    ("name_missing", {"name": None}, 'missing required field "name"'),
    ("name_number", {"name": 42}, '"name" must be a string (got a number 42)'),
    ("name_uppercase", {"name": "Disk-Cleaner"}, '"name" must match [a-z0-9_]+ (got "Disk-Cleaner")'),
    ("name_space", {"name": "disk cleaner"}, '"name" must match [a-z0-9_]+'),
    ("name_empty", {"name": ""}, '"name" must not be empty'),
    ("name_newline", {"name": "abc\n"}, '"name" must match [a-z0-9_]+'),
    ("name_too_long", {"name": "a" * 65}, "model APIs accept at most 64"),
    ("description_missing", {"description": None}, 'missing required field "description"'),
    ("description_blank", {"description": "   "}, '"description" must not be empty'),
    ("description_list", {"description": ["x"]}, '"description" must be a string (got an array'),
    ("entry_missing", {"entry": None}, 'missing required field "entry"'),
    ("entry_number", {"entry": 1}, '"entry" must be a string'),
    ("entry_nul", {"entry": "run\u0000.sh"}, "cannot be resolved"),
    ("entry_not_there", {"entry": "nope.sh"}, "cannot be resolved: No such file or directory"),
    ("schema_array", {"schema": []}, '"schema" must be a JSON object schema (got an array []'),
    ("schema_bool", {"schema": True}, '"schema" must be a JSON object schema (got a boolean true'),
    ("schema_string_type", {"schema": {"type": "string"}}, '"schema" must describe an object'),
    (
        "schema_invalid",
        {"schema": {"type": "object", "properties": {"a": {"type": "strng"}}}},
        '"schema" is not a valid JSON Schema',
    ),
    (
        "schema_bad_required",
        {"schema": {"type": "object", "required": "path"}},
        '"schema" is not a valid JSON Schema',
    ),
    (
        "schema_bad_default",
        {"schema": {"type": "object", "properties": {"n": {"type": "integer", "default": "x"}}}},
        "\"schema/properties/n/default\" does not validate: 'x' is not of type 'integer'",
    ),
    ("env_string", {"env_allow": "PATH"}, '"env_allow" must be an array of variable names (got a string'),
    ("env_null", {"env_allow": None}, '"env_allow" must be an array of variable names (got null'),
    ("env_number_item", {"env_allow": ["PATH", 3]}, '"env_allow[1]" is not a valid variable name (got 3)'),
    ("env_dash", {"env_allow": ["MY-VAR"]}, '"env_allow[0]" is not a valid variable name (got "MY-VAR")'),
    ("env_assignment", {"env_allow": ["A=B"]}, '"env_allow[0]" is not a valid variable name'),
    ("env_leading_digit", {"env_allow": ["1A"]}, '"env_allow[0]" is not a valid variable name'),
    (
        "timeout_string",
        {"timeout_seconds": "30"},
        '"timeout_seconds" must be a whole number of seconds (got a string "30")',
    ),
    (
        "timeout_bool",
        {"timeout_seconds": True},
        '"timeout_seconds" must be a whole number of seconds (got a boolean true)',
    ),
    ("timeout_negative", {"timeout_seconds": -1}, '"timeout_seconds" must be between 0 and 86400 (got -1)'),
    (
        "timeout_float",
        {"timeout_seconds": 30.5},
        '"timeout_seconds" must be a whole number of seconds (got a number 30.5)',
    ),
    ("timeout_huge", {"timeout_seconds": 10**30}, '"timeout_seconds" must be between 0 and 86400'),
    ("class_capital", {"class": "Safe"}, '"class" must be safe, mutating or dangerous (got "Safe")'),
    ("class_unknown", {"class": "admin"}, '"class" must be safe, mutating or dangerous (got "admin")'),
    ("class_number", {"class": 1}, '"class" must be safe, mutating or dangerous (got 1)'),
    ("category_number", {"category": 5}, '"category" must be a string (got a number 5)'),
]


@pytest.mark.parametrize(("case", "fields", "message"), BAD_FIELDS, ids=[c[0] for c in BAD_FIELDS])
def test_bad_field_is_rejected_with_a_precise_message(
    make_host: Any, root: Path, case: str, fields: dict[str, Any], message: str
) -> None:
    manifest: dict[str, Any] = {"name": "tool", "description": "A tool.", "entry": "run.sh"}
    for key, value in fields.items():
        if value is None and key in ("name", "description", "entry") and case.endswith("missing"):
            manifest.pop(key)
        else:
            manifest[key] = value
    make_skill(root, "tool", manifest=manifest)
    host = load(make_host, root)
    assert host.report.registered == 0
    [error] = build_errors(host)
    assert message in error


def test_every_problem_of_a_manifest_is_named_in_one_line(
    make_host: Any, root: Path, caplog: pytest.LogCaptureFixture
) -> None:
    make_skill(root, "multi", timeout_seconds="30", class_="Safe", env_allow=["A-B"])
    caplog.set_level(logging.WARNING, logger=LOADER)
    load(make_host, root)
    [line] = [r.getMessage() for r in caplog.records if "build" in r.getMessage()]
    assert line.startswith('skill loader: build "multi": ')
    assert '"env_allow[0]"' in line and '"timeout_seconds"' in line and '"class"' in line


def test_timeout_zero_falls_back_to_the_default(make_host: Any, root: Path) -> None:
    make_skill(root, "zero", timeout_seconds=0)
    assert load(make_host, root).get("zero").timeout == 30.0


def test_empty_class_means_safe_and_empty_category_means_external(make_host: Any, root: Path) -> None:
    make_skill(root, "plain", class_="", category="")
    tool = load(make_host, root).get("plain")
    assert (tool.tool_class, tool.category) == (ToolClass.SAFE, "external")


@pytest.mark.parametrize("description", ["\u200b\u200b", "\u2060", "\ufeff \u200d", "\x01"])
def test_a_description_of_only_invisible_characters_is_refused(
    make_host: Any, root: Path, description: str
) -> None:
    make_skill(root, "ghost", description=description)
    make_skill(root, "seen", description="\u200bShows\u200b up.")
    host = load(make_host, root)
    assert [s.name for s in host.skills()] == ["seen"]
    [message] = build_errors(host)
    assert message.startswith('"description" has no visible character (got "\\u')
    assert message.endswith("say what the skill does")


def test_env_allow_duplicates_are_dropped_in_order(make_host: Any, root: Path) -> None:
    make_skill(root, "envy", env_allow=["PATH", "HOME", "PATH"])
    assert load(make_host, root).get("envy").env_allow == ("PATH", "HOME")


def test_an_env_allow_of_many_names_is_refused_quickly_naming_the_limit(make_host: Any, root: Path) -> None:
    import time

    from ongrid_plugins.loaders.skill_json import MAX_ENV_ALLOW

    names = [f"V{i}" for i in range(30_000)]  # ~300 KB, within the manifest size limit
    make_skill(root, "many", env_allow=names)
    make_skill(root, "most", env_allow=[*names[: MAX_ENV_ALLOW - 1], "V0", names[MAX_ENV_ALLOW - 1]])
    started = time.monotonic()
    host = load(make_host, root)
    assert time.monotonic() - started < 2  # checking each name against all before it took seconds
    assert host.get("most").env_allow == tuple(names[:MAX_ENV_ALLOW])  # the cap counts distinct names
    [message] = build_errors(host)
    assert f'"env_allow" lists 30000 names; at most {MAX_ENV_ALLOW} are allowed' in message


def test_schema_without_type_is_read_as_an_object_schema(make_host: Any, root: Path) -> None:
    make_skill(root, "loose", schema={"properties": {"a": {"type": "string"}}})
    assert load(make_host, root).get("loose").schema["type"] == "object"


def test_unknown_fields_are_kept_and_warned_with_the_closest_known_key(
    make_host: Any, root: Path, caplog: pytest.LogCaptureFixture
) -> None:
    make_skill(root, "typo", timeout=5, owner="ops-team")
    caplog.set_level(logging.WARNING, logger=LOADER)
    host = load(make_host, root)
    tool = host.get("typo")
    assert tool.extra == {"timeout": 5, "owner": "ops-team"}
    messages = [w.message for w in host.skills()[0].warnings]
    assert 'unknown field "timeout" — did you mean "timeout_seconds"?' in messages
    assert 'unknown field "owner"' in messages
    assert any(
        'unknown field "timeout" — did you mean "timeout_seconds"?' in r.getMessage() for r in caplog.records
    )


def test_dollar_schema_key_is_not_an_unknown_field(make_host: Any, root: Path) -> None:
    make_skill(root, "editor", **{"$schema": "https://ongrid.dev/schemas/skill.schema.json"})
    assert load(make_host, root).skills()[0].warnings == ()


# ---------------------------------------------------------------- the file itself


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (b"", "Expecting value: line 1 column 1 (char 0)"),
        (b"[1, 2]", "the manifest must be a JSON object, got an array"),
        (b'"text"', "the manifest must be a JSON object, got a string"),
        (b'{"name": "x", "name": "y"}', 'duplicate key "name"'),
        (b'{"name": NaN}', "NaN is not valid JSON"),
        (b'{"name": "caf\xe9"}', "invalid UTF-8 at byte 13: invalid continuation byte"),
        (b'{"a": 1} {"b": 2}', "Extra data"),
    ],
    ids=["empty", "array", "string", "duplicate_key", "nan", "latin1", "two_objects"],
)
def test_unparseable_manifest_is_a_parse_error(make_host: Any, root: Path, raw: bytes, message: str) -> None:
    make_skill(root, "x", raw=raw)
    host = load(make_host, root)
    [event] = host.report.errors
    assert event.outcome == "parse_error"
    assert message in event.message


@pytest.mark.parametrize("depth", [1000, 100_000])
def test_a_manifest_nested_too_deeply_is_a_parse_error_that_says_so(
    make_host: Any, root: Path, caplog: pytest.LogCaptureFixture, depth: int
) -> None:
    schema = "[" * depth + "]" * depth
    make_skill(
        root, "deep", raw='{"name": "deep", "description": "d", "entry": "run.sh", "schema": ' + schema + "}"
    )
    caplog.set_level(logging.WARNING, logger=LOADER)
    host = load(make_host, root)
    path = f"{os.path.realpath(root)}/deep/skill.json"
    message = "the manifest is nested too deeply to read: a schema may nest at most 64 levels"
    assert [(e.outcome, e.message) for e in host.report.errors] == [("parse_error", message)]
    assert [r.getMessage() for r in caplog.records if r.name == LOADER] == [
        f"skill loader: parse {path}: {message}"
    ]


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        # a key repeated inside a nested object, beside strings holding colons
        (b'{"a": "x:y", "s": {"k": 1, "k": ":"}}', 'duplicate key "k"'),
        # the first member's colon is in the text, its value is dropped for the second's
        (b'{"k": "a:b:c", "k": "z"}', 'duplicate key "k"'),
        # a repeated key before a syntax error: the duplicate is what is reported
        (b'{"o": {"k": 1, "k": 2}, "x": }', 'duplicate key "k"'),
        # with a backslash in the text: the duplicate-key parser reads it all
        (b'{"d": "\\u0041", "d": 1}', 'duplicate key "d"'),
    ],
    ids=["nested", "colon_in_dropped_value", "before_syntax_error", "escaped"],
)
def test_a_repeated_key_is_found_wherever_it_is(raw: bytes, message: str) -> None:
    from ongrid_plugins.errors import ManifestParseError
    from ongrid_plugins.loaders.skill_json_parse import parse_manifest

    with pytest.raises(ManifestParseError) as raised:
        parse_manifest(raw, "/p/skill.json")
    assert raised.value.message.startswith(message)


@pytest.mark.parametrize(
    ("raw", "where"),
    [
        (rb'{"name": "sur", "description": "bad \ud800 here", "entry": "run.sh"}', "/description"),
        (rb'{"name": "sur", "description": "d", "entry": "run.sh", "category": "\uDFFF"}', "/category"),
        (rb'{"name": "sur", "description": "d", "entry": "run.sh", "k\ud800": 1}', "/k\\ud800"),
        (
            rb'{"name": "sur", "description": "d", "entry": "run.sh",'
            rb' "schema": {"properties": {"a": {"enum": ["x", "\udc00"]}}}}',
            "/schema/properties/a/enum/1",
        ),
    ],
    ids=["description", "category", "key", "schema_string"],
)
def test_a_lone_surrogate_escape_is_a_parse_error_naming_the_field(
    make_host: Any, root: Path, caplog: pytest.LogCaptureFixture, raw: bytes, where: str
) -> None:
    # "\ud800" is valid JSON but no UTF-8 text: list, show and export could not print it.
    make_skill(root, "sur", raw=raw)
    make_skill(root, "fine")
    caplog.set_level(logging.WARNING, logger=LOADER)
    host = load(make_host, root)
    assert [s.name for s in host.skills()] == ["fine"]
    [event] = host.report.errors
    assert event.outcome == "parse_error"
    assert f"at {where}:" in event.message
    assert "lone surrogate" in event.message
    assert "surrogate pair" in event.message  # what to do
    host.export("openai")[0]  # the other skill still exports
    for record in caplog.records:
        record.getMessage().encode("utf-8")  # the log line itself is UTF-8


def test_a_surrogate_pair_escape_is_one_character_and_loads(make_host: Any, root: Path) -> None:
    raw = rb'{"name": "pair", "description": "smile \ud83d\ude00 and \\ud800", "entry": "run.sh"}'
    make_skill(root, "pair", raw=raw)
    assert load(make_host, root).get("pair").description == "smile \U0001f600 and \\ud800"


def test_utf8_bom_is_tolerated(make_host: Any, root: Path) -> None:
    text = json.dumps({"name": "bom", "description": "d", "entry": "run.sh"})
    make_skill(root, "bom", raw=b"\xef\xbb\xbf" + text.encode())
    assert load(make_host, root).get("bom").name == "bom"


def test_manifest_over_one_mebibyte_is_refused_unread(make_host: Any, root: Path) -> None:
    big = {"name": "big", "description": "x" * (1024 * 1024), "entry": "run.sh"}
    make_skill(root, "big", manifest=big)
    [event] = load(make_host, root).report.errors
    assert event.message == "manifest is larger than the limit of 1048576 bytes"


def test_a_fifo_named_skill_json_does_not_hang_the_loader(make_host: Any, root: Path) -> None:
    make_skill(root, "good")
    (root / "fifo").mkdir()
    os.mkfifo(root / "fifo" / "skill.json")
    host = load(make_host, root)
    assert host.report.registered == 1
    fifo = [e for e in host.report.events if "/fifo/" in e.path]  # reported, never opened to block
    assert [e.outcome for e in fifo] == ["parse_error"] and "not a regular file" in fifo[0].message


def test_symlinked_manifest_inside_root_is_read(make_host: Any, root: Path) -> None:
    real = make_skill(root, "linked", folder="real")
    other = root / "other"
    other.mkdir()
    (other / "skill.json").symlink_to(real / "skill.json")
    host = load(make_host, root)
    assert host.report.registered == 1
    assert [e.outcome for e in host.report.events] == ["registered", "duplicate"]
    assert {e.path for e in host.report.events} == {str((real / "skill.json").resolve())}


def test_symlinked_manifest_escaping_root_is_refused(make_host: Any, root: Path, tmp_path: Path) -> None:
    outside = make_skill(tmp_path / "elsewhere", "sneaky")
    (root / "s").mkdir()
    (root / "s" / "skill.json").symlink_to(outside / "skill.json")
    [event] = load(make_host, root).report.errors
    assert "escapes allowlist root" in event.message


# ---------------------------------------------------------------- the entry


def test_entry_with_dotdot_escaping_the_root_is_refused(make_host: Any, root: Path, tmp_path: Path) -> None:
    target = tmp_path / "outside.sh"
    target.write_text("#!/bin/sh\n")
    target.chmod(0o755)
    make_skill(root, "dots", script=None, entry="../../outside.sh")
    [error] = build_errors(load(make_host, root))
    assert error == f"entry {os.path.realpath(target)} escapes allowlist root {os.path.realpath(root)}"


def test_entry_symlinked_file_escaping_the_root_is_refused(make_host: Any, root: Path) -> None:
    folder = make_skill(root, "link", script=None)
    (folder / "run.sh").symlink_to("/bin/sh")
    [error] = build_errors(load(make_host, root))
    assert "escapes allowlist root" in error and os.path.realpath("/bin/sh") in error


def test_entry_through_a_symlinked_folder_escaping_the_root_is_refused(
    make_host: Any, root: Path, tmp_path: Path
) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "tool.sh").write_text("#!/bin/sh\n")
    (bin_dir / "tool.sh").chmod(0o755)
    folder = make_skill(root, "viafolder", script=None, entry="bin/tool.sh")
    (folder / "bin").symlink_to(bin_dir)
    [error] = build_errors(load(make_host, root))
    assert f"entry {bin_dir.resolve()}/tool.sh escapes allowlist root" in error


def test_entry_symlink_that_stays_inside_the_root_is_allowed(make_host: Any, root: Path) -> None:
    shared = root / "shared"
    shared.mkdir()
    (shared / "common.sh").write_text("#!/bin/sh\necho '{}'\n")
    (shared / "common.sh").chmod(0o755)
    folder = make_skill(root, "inside", script=None)
    (folder / "run.sh").symlink_to(shared / "common.sh")
    assert load(make_host, root).get("inside").entry == str((shared / "common.sh").resolve())


def test_absolute_entry_under_the_root_is_allowed(make_host: Any, root: Path) -> None:
    shared = root / "bin"
    shared.mkdir()
    (shared / "x.sh").write_text("#!/bin/sh\n")
    (shared / "x.sh").chmod(0o755)
    make_skill(root, "abs", script=None, entry=str(shared / "x.sh"))
    assert load(make_host, root).get("abs").entry == str((shared / "x.sh").resolve())


def test_dangling_entry_symlink_is_refused(make_host: Any, root: Path) -> None:
    folder = make_skill(root, "dangling", script=None)
    (folder / "run.sh").symlink_to(folder / "nowhere.sh")
    [error] = build_errors(load(make_host, root))
    assert "cannot be resolved: No such file or directory" in error


def test_entry_that_is_a_directory_is_refused(make_host: Any, root: Path) -> None:
    folder = make_skill(root, "dir", script=None)
    (folder / "run.sh").mkdir()
    [error] = build_errors(load(make_host, root))
    assert error.endswith("run.sh is not a regular file")


def test_entry_that_is_not_executable_is_refused_with_the_fix(make_host: Any, root: Path) -> None:
    folder = make_skill(root, "noexec")
    (folder / "run.sh").chmod(0o644)
    host = load(make_host, root)
    [error] = build_errors(host)
    entry = (folder / "run.sh").resolve()
    assert error == f"entry {entry} is not executable — chmod +x {entry}"


# ---------------------------------------------------------------- every load checks again

SCHEMA = {"type": "object", "properties": {"n": {"type": "integer", "default": 3}}}


def test_every_load_checks_the_schema_again(
    make_host: Any, root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ongrid_plugins.schema import check

    make_skill(root, "checked", schema=SCHEMA)
    host = make_host(root)
    host.load()
    calls: list[object] = []
    real = check.check_schema_finding_defaults
    monkeypatch.setattr(check, "check_schema_finding_defaults", lambda s: calls.append(s) or real(s))
    host.reload()
    host.reload()
    assert calls == [SCHEMA, SCHEMA]


def test_a_changed_manifest_is_checked_again(make_host: Any, root: Path) -> None:
    make_skill(root, "changes", schema=SCHEMA)
    assert load(make_host, root).report.registered == 1
    bad = {"type": "object", "properties": {"n": {"type": "integer", "default": "three"}}}
    make_skill(root, "changes", schema=bad)
    [error] = build_errors(load(make_host, root))
    assert "does not validate" in error


def test_duplicate_keys_are_refused_after_a_clean_twin_loaded(make_host: Any, root: Path) -> None:
    make_skill(root, "twin", raw='{"name": "twin", "description": "d", "entry": "run.sh"}')
    assert load(make_host, root).report.registered == 1
    make_skill(root, "twin", raw='{"name": "twin", "description": "d", "entry": "run.sh", "name": "x"}')
    [event] = load(make_host, root).report.errors
    assert 'duplicate key "name"' in event.message


# The loader skips the RE2/$ref and defaults walks when the manifest's text cannot
# hold their keywords; a keyword spelled with a \u escape must still be checked.
ESCAPED_KEYWORDS = [
    (
        "escaped_pattern",
        '{"type": "object", "properties": {"p": {"type": "string", "\\u0070attern": "(a)\\\\1"}}}',
        "RE2",
    ),
    (
        "escaped_default",
        '{"type": "object", "properties": {"n": {"type": "integer", "d\\u0065fault": "x"}}}',
        "does not validate",
    ),
    (
        "escaped_ref",
        '{"type": "object", "properties": {"r": {"\\u0024ref": "https://example.com/s"}}}',
        "$ref",
    ),
    (
        "plain_pattern",
        '{"type": "object", "properties": {"p": {"type": "string", "pattern": "(a)\\\\1"}}}',
        "RE2",
    ),
    (  # JSON whitespace around the colon: still the keyword
        "spaced_pattern",
        '{"type": "object", "properties": {"p": {"type": "string", "pattern" \n:\t "(a)\\\\1"}}}',
        "RE2",
    ),
    (  # a property named "pattern" (no walk needed for it) holding the keyword
        "pattern_in_a_property_named_pattern",
        '{"type": "object", "properties": {"pattern": {"type": "string", "pattern": "(a)\\\\1"}}}',
        "RE2",
    ),
    (  # the first "pattern" of the text is a property (an object value), the second the keyword
        "pattern_keyword_after_a_property_named_pattern",
        '{"type": "object", "properties": {"pattern": {"type": "string"}, "q": {"pattern": "(a)\\\\1"}}}',
        "RE2",
    ),
    (  # "pattern" as a string value first, then as the keyword
        "pattern_keyword_after_the_word_as_a_value",
        '{"type": "object", "title": "pattern", "properties": {"q": {"pattern": "(a)\\\\1"}}}',
        "RE2",
    ),
    (
        "pattern_properties",
        '{"type": "object", "patternProperties": {"(a)\\\\1": {"type": "string"}}}',
        "RE2",
    ),
]


@pytest.mark.parametrize(
    ("case", "schema", "message"), ESCAPED_KEYWORDS, ids=[c[0] for c in ESCAPED_KEYWORDS]
)
def test_a_keyword_spelled_with_an_escape_is_still_checked(
    make_host: Any, root: Path, case: str, schema: str, message: str
) -> None:
    text = f'{{"name": "tool", "description": "A tool.", "entry": "run.sh", "schema": {schema}}}'
    make_skill(root, "tool", raw=text)
    host = load(make_host, root)
    assert host.report.registered == 0
    [error] = build_errors(host)
    assert message in error


# ---------------------------------------------------------------- one home for the field rules

FIELD_SAMPLES = [
    ({"name": "a" * 64}, True),
    ({"name": "a" * 65}, False),
    ({"name": "Bad-Name"}, False),
    ({"name": "ok\n"}, False),
    ({"timeout_seconds": 86400}, True),
    ({"timeout_seconds": 86401}, False),
    ({"timeout_seconds": -1}, False),
    ({"class": ""}, True),
    ({"class": "dangerous"}, True),
    ({"class": "Safe"}, False),
    ({"env_allow": ["PATH", "_X1"]}, True),
    ({"env_allow": ["1X"]}, False),
    ({"env_allow": ["A-B"]}, False),
    ({"unknown_field": 1}, True),
]


@pytest.mark.parametrize(("fields", "loads"), FIELD_SAMPLES, ids=[repr(f)[:40] for f, _ in FIELD_SAMPLES])
def test_the_published_schema_and_the_loader_agree_on_each_field_rule(
    make_host: Any, root: Path, fields: dict[str, Any], loads: bool
) -> None:
    from ongrid_plugins.loaders.skill_json import SCHEMA_FILE
    from ongrid_plugins.schema.safe import safe_validator

    # RE2, as ECMA-262: "$" is the end of the text (Python's re also matches before a final "\n")
    schema = safe_validator(json.loads(Path(SCHEMA_FILE).read_text()))
    manifest = {"name": "probe", "description": "d", "entry": "run.sh", **fields}
    assert schema.is_valid(manifest) is loads
    make_skill(root, "probe", manifest=manifest)
    assert (load(make_host, root).report.registered == 1) is loads


def test_misspelled_schema_keywords_are_warned_with_the_closest_keyword(make_host: Any, root: Path) -> None:
    schema = {
        "type": "object",
        "properties": {"path": {"type": "string", "x-widget": "file", "$comment": "kept"}, "requried": {}},
        "requried": ["path"],
        "additonalProperties": False,
        "x-ui-order": ["path"],
    }
    make_skill(root, "req", schema=schema)
    messages = [w.message for w in load(make_host, root).skills()[0].warnings]
    assert messages == [
        '"schema/requried": unknown JSON Schema keyword "requried" — did you mean "required"? '
        '(an extension must start with "x-")',
        '"schema/additonalProperties": unknown JSON Schema keyword "additonalProperties" — did you mean '
        '"additionalProperties"? (an extension must start with "x-")',
    ]


def test_annotation_keywords_of_draft_2020_12_are_known(make_host: Any, root: Path) -> None:
    prop = {
        "type": "string",
        "title": "T",
        "description": "D",
        "default": "a@example.org",
        "examples": ["a@example.org"],
        "deprecated": False,
        "readOnly": False,
        "writeOnly": False,
        "format": "email",
        "contentMediaType": "text/plain",
        "contentEncoding": "base64",
    }
    make_skill(root, "annotated", schema={"type": "object", "properties": {"a": prop}})
    assert load(make_host, root).skills()[0].warnings == ()


def test_a_crlf_shebang_is_a_load_warning_with_the_fix(make_host: Any, root: Path) -> None:
    make_skill(root, "crlf", script="#!/usr/bin/env python3\r\nprint('{}')\r\n")
    [warning] = load(make_host, root).skills()[0].warnings
    entry = root / "crlf" / "run.sh"
    assert (warning.code, warning.pointer) == ("entry_crlf_shebang", "/entry")
    assert warning.hint == f"sed -i 's/\\r$//' {entry} (or: dos2unix {entry})"


def test_a_load_warning_carries_the_same_fix_as_validate(
    make_host: Any,
    root: Path,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from clirun import run

    make_skill(root, "locked")
    entry = root / "locked" / "run.sh"
    entry.chmod(0o644)
    caplog.set_level(logging.WARNING, logger=LOADER)
    load(make_host, root)
    said = f"entry {entry} is not executable — chmod +x {entry}"
    assert any(said in r.getMessage() for r in caplog.records), [r.getMessage() for r in caplog.records]
    _code, out, _err = run(capsys, "validate", str(root))
    assert f"  error at /entry: {said}" in out
