"""The SKILL.md loader: the walk and its log lines, leniency and its warnings, every field we model."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

import pytest

from ongrid_plugins import ManifestBuildError, ManifestParseError, Skill, SkillRoot, ToolClass, Verdict
from ongrid_plugins.cli import main
from ongrid_plugins.loaders.skill_md import load_skill_md
from ongrid_plugins.testing import ECHO_SH, make_skill, make_skill_md

LOADER = "ongrid_plugins.loader"


def loader_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == LOADER]


def root_of(path: Path) -> SkillRoot:
    return SkillRoot(str(path), real=os.path.realpath(path))


def load_text(root: Path, text: str | bytes, folder: str = "skill") -> Skill:
    """Load one SKILL.md with this exact content."""
    skill_dir = make_skill_md(root, None, folder=folder, raw=text)
    return load_skill_md(str(skill_dir / "SKILL.md"), root_of(root))


def codes(skill: Skill) -> list[str]:
    return [w.code for w in skill.warnings]


# -- the walk --------------------------------------------------------------------


def test_skill_md_files_are_registered_in_the_same_walk_with_the_spec_log_line(
    make_host: Any, root: Path, caplog: pytest.LogCaptureFixture
) -> None:
    folder = make_skill_md(root, "hello", description="Say hello.")
    make_skill(root, "from_json")
    caplog.set_level(logging.INFO, logger=LOADER)
    host = make_host(root)
    report = host.load()
    real = os.path.realpath(folder)
    assert f'skill loader: registered SKILL.md skill "hello" from {real}/SKILL.md' in loader_lines(caplog)
    assert report.registered == 2
    assert [s.name for s in host.skills()] == ["from_json", "hello"]
    assert host.skill("hello").format == "SKILL.md"


def test_lowercase_skill_md_is_claimed_too(make_host: Any, root: Path) -> None:
    make_skill_md(root, "lower", filename="skill.md")
    assert [s.name for s in make_host(root).skills()] == ["lower"]


def test_skill_md_and_skill_json_share_one_namespace_first_wins(
    make_host: Any, root: Path, caplog: pytest.LogCaptureFixture
) -> None:
    make_skill(root, "clash", folder="a-json")
    later = make_skill_md(root, "clash", folder="b-md")
    caplog.set_level(logging.INFO, logger=LOADER)
    host = make_host(root)
    assert host.skill("clash").format == "skill.json"
    real = os.path.realpath(later)
    assert f'skill loader: skill "clash" already registered, skipping {real}/SKILL.md' in loader_lines(caplog)
    assert [e.outcome for e in host.report.events] == ["registered", "duplicate"]


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ("---\nname: x\ndescription: d\n", "the front matter opened on line 1 is never closed"),
        ("---\nname: x\nmetadata:\n\tos: [linux]\n---\n", "YAML does not allow tabs for indentation"),
        ("---\na: !!python/object/apply:os.system [id]\n---\n", "would build a Python object"),
        ("---\n- a\n- b\n---\n", "the front matter must be a mapping of keys to values, not a list"),
        (b"---\nname: \xff\n---\n", "invalid UTF-8 at byte 10"),
    ],
    ids=["unclosed", "tabs", "python-tag", "not-a-mapping", "bad-utf8"],
)
def test_unreadable_files_are_logged_with_the_parse_line_and_skipped(
    make_host: Any, root: Path, caplog: pytest.LogCaptureFixture, raw: str | bytes, message: str
) -> None:
    folder = make_skill_md(root, None, folder="broken", raw=raw)
    make_skill_md(root, "fine")
    caplog.set_level(logging.WARNING, logger=LOADER)
    host = make_host(root)
    assert [s.name for s in host.skills()] == ["fine"]
    [line] = [x for x in loader_lines(caplog) if "parse" in x]
    assert line.startswith(f"skill loader: parse {os.path.realpath(folder)}/SKILL.md: ")
    assert message in line
    [event] = host.report.errors
    assert event.outcome == "parse_error" and message in event.message


def test_a_file_over_one_mebibyte_is_refused_without_reading_past_the_limit(root: Path) -> None:
    text = "---\nname: big\ndescription: d\n---\n" + "x" * (1024 * 1024)
    with pytest.raises(ManifestParseError) as info:
        load_text(root, text)
    assert info.value.message == "manifest is larger than the limit of 1048576 bytes"


def test_an_alias_bomb_is_refused_by_the_loader(root: Path) -> None:
    bomb = ['a: &a ["l","l","l","l","l","l","l","l","l"]']
    bomb += [f"{chr(98 + i)}: &{chr(98 + i)} [" + ",".join([f"*{chr(97 + i)}"] * 9) + "]" for i in range(8)]
    with pytest.raises(ManifestParseError) as info:
        load_text(root, "---\nname: bomb\ndescription: d\n" + "\n".join(bomb) + "\n---\n")
    assert "an alias bomb?" in info.value.message


# -- lenient reading ----------------------------------------------------------------


def test_a_bom_crlf_and_blank_lines_before_the_fence_load_with_warnings(root: Path) -> None:
    text = "\ufeff\r\n\r\n---\r\nname: crlf\r\ndescription: Windows file.\r\n---\r\n# Body\r\n"
    skill = load_text(root, text.encode("utf-8"), folder="crlf")
    assert (skill.name, skill.description) == ("crlf", "Windows file.")
    assert codes(skill) == ["utf8_bom", "blank_before_fence"]


def test_a_description_with_an_unquoted_colon_is_read_quoted_with_a_warning(root: Path) -> None:
    skill = load_text(root, "---\nname: x\ndescription: Use the tool: send messages\n---\n", folder="x")
    assert skill.description == "Use the tool: send messages"
    [warning] = skill.warnings
    assert (warning.code, warning.pointer) == ("yaml_retried_quoted", "/description")


def test_a_file_without_front_matter_is_a_prompt_skill_named_after_its_folder(root: Path) -> None:
    skill = load_text(root, "# Canvas Skill\n\nDisplay HTML on nodes.\n\n## How\n", folder="canvas")
    assert (skill.name, skill.description, skill.tools) == ("canvas", "Display HTML on nodes.", ())
    assert codes(skill) == ["no_front_matter"]


def test_a_missing_name_falls_back_to_the_folder(root: Path) -> None:
    skill = load_text(root, "---\ndescription: Named by its folder.\n---\n", folder="my-tool")
    assert (skill.name, skill.display_name) == ("my-tool", "")
    assert codes(skill) == ["name_missing"]


def test_a_missing_description_falls_back_to_the_first_paragraph(root: Path) -> None:
    skill = load_text(root, "---\nname: para\n---\n# Para\n\nFirst paragraph\nhere.\n", folder="para")
    assert skill.description == "First paragraph here."
    assert codes(skill) == ["description_from_body"]


def test_no_description_and_no_paragraph_skips_the_file_with_the_build_line(
    make_host: Any, root: Path, caplog: pytest.LogCaptureFixture
) -> None:
    make_skill_md(root, None, folder="empty", raw="---\nname: empty\n---\n# Only a title\n")
    caplog.set_level(logging.WARNING, logger=LOADER)
    host = make_host(root)
    assert host.skills() == []
    assert loader_lines(caplog) == [
        'skill loader: build "empty": "description" is missing and the body has no paragraph to use instead'
        " — add description: saying what it does and when to use it"
    ]


@pytest.mark.parametrize(
    ("declared", "folder", "name", "display"),
    [
        ("hello-world", "hello-world", "hello-world", ""),
        ("Hello-World", "x", "hello_world", "Hello-World"),
        ("Hello World", "x", "hello_world", "Hello World"),
        ("Ünïcode Tool", "x", "unicode_tool", "Ünïcode Tool"),
        ("技能", "cjk-skill", "cjk_skill", "技能"),
        ("1password", "1password", "1password", ""),
        ("query_promql", "query_promql", "query_promql", ""),
    ],
)
def test_agent_skills_names_are_kept_and_others_become_lower_snake_keys_keeping_the_original(
    root: Path, declared: str, folder: str, name: str, display: str
) -> None:
    skill = load_text(root, f"---\nname: {declared}\ndescription: d\n---\n", folder=folder)
    assert (skill.name, skill.display_name) == (name, display)
    assert ("name_normalized" in codes(skill)) == bool(display)


def test_a_cjk_name_in_a_cjk_folder_still_gets_a_stable_key(root: Path) -> None:
    first = load_text(root, "---\nname: 技能\ndescription: d\n---\n", folder="技能")
    again = load_text(root, "---\nname: 技能\ndescription: d\n---\n", folder="技能")
    assert first.name == again.name
    assert first.name.startswith("skill_") and len(first.name) == len("skill_") + 8


@pytest.mark.parametrize(
    ("front", "code"),
    [
        ("name: Big Name\ndescription: d\n", "spec_name"),
        ("name: other\ndescription: d\n", "spec_name_folder"),
        ("name: lint\ndescription: " + "d" * 1025 + "\n", "spec_description_length"),
        ("name: lint\ndescription: d\ncompatibility: " + "c" * 501 + "\n", "spec_compatibility_length"),
        ("name: lint\ndescription: d\nnmae: typo\n", "unknown_field"),
    ],
)
def test_agent_skills_spec_violations_are_warnings(root: Path, front: str, code: str) -> None:
    skill = load_text(root, f"---\n{front}---\n", folder="lint")
    assert code in codes(skill)


def test_a_long_body_is_a_spec_warning(root: Path) -> None:
    skill = load_text(root, "---\nname: long\ndescription: d\n---\n" + "line\n" * 600, folder="long")
    assert codes(skill) == ["spec_body_length"]


def test_unknown_keys_get_the_closest_known_key_as_a_hint(root: Path) -> None:
    skill = load_text(root, "---\nname: t\ndescription: d\nwhen-to-us: soon\n---\n", folder="t")
    [warning] = skill.warnings
    assert warning.message == 'unknown field "when-to-us" — did you mean "when_to_use"?'
    assert warning.pointer == "/when-to-us"


def test_keys_are_read_in_any_client_spelling(root: Path) -> None:
    front = "name: s\ndescription: d\nwhenToUse: camel\nallowed_tools: [Read]\nuser-invocable: no\n"
    skill = load_text(root, f"---\n{front}---\n", folder="s")
    assert skill.when_to_use == "camel"
    assert skill.warnings == ()


def test_empty_optional_keys_are_as_good_as_absent(root: Path) -> None:
    skill = load_text(root, "---\nname: e\ndescription: d\nmetadata:\nactivation:\ntools:\n---\n", folder="e")
    assert (skill.warnings, skill.tools, skill.activation.mode) == ((), (), "always")


def test_numbers_are_coerced_to_strings_with_a_warning(root: Path) -> None:
    skill = load_text(root, "---\nname: 123\ndescription: 4.5\nversion: 1.0\n---\n", folder="123")
    assert (skill.name, skill.description, skill.version) == ("123", "4.5", "1.0")
    assert codes(skill) == ["coerced", "coerced", "coerced"]


def test_a_description_that_is_a_list_is_an_error(root: Path) -> None:
    with pytest.raises(ManifestBuildError) as info:
        load_text(root, "---\nname: bad\ndescription: [a, b]\n---\n", folder="bad")
    assert info.value.message == '"description" must be a string (got a list)'


# -- fields --------------------------------------------------------------------------


def test_every_front_matter_key_is_kept_verbatim_in_extra(root: Path) -> None:
    front = {
        "name": "keep",
        "description": "d",
        "license": "Complete terms in LICENSE.txt",
        "allowed-tools": "Bash(git add:*) Read",
        "argument-hint": "[file]",
        "metadata": {"author": "me", "moltbot": {"emoji": "🦞", "future": {"deep": [1, 2]}}},
        "x-custom": {"nested": {"deeper": True}},
    }
    skill_dir = make_skill_md(root, None, folder="keep", front=front)
    skill = load_skill_md(str(skill_dir / "SKILL.md"), root_of(root))
    assert dict(skill.extra) == {k: v for k, v in front.items() if k not in ("name", "description")}
    assert codes(skill) == ["unknown_field", "unknown_field"]  # metadata.moltbot.future, x-custom


def test_activation_keyword_mode_and_keywords(root: Path) -> None:
    skill = load_text(
        root, "---\nname: a\ndescription: d\nactivation: {mode: keyword, keywords: [disk, df]}\n---\n", "a"
    )
    assert (skill.activation.mode, skill.activation.keywords) == ("keyword", ("disk", "df"))
    assert skill.activation.match("Is the DISK full?") == 'keyword "disk"'
    assert skill.activation.match("hello") is None


@pytest.mark.parametrize("strict", [False, True])
def test_metadata_json_text_nested_too_deeply_refuses_that_file_alone_even_in_strict_mode(
    make_host: Any, root: Path, caplog: pytest.LogCaptureFixture, strict: bool
) -> None:
    deep = '{"a":' * 3000 + "1" + "}" * 3000
    make_skill_md(
        root, None, folder="deep", raw=f"---\nname: deep\ndescription: d\nmetadata: '{deep}'\n---\n"
    )
    make_skill_md(root, "good", description="d")
    caplog.set_level(logging.WARNING, logger=LOADER)
    host = make_host(root, strict=strict)  # strict is for plugin and pack failures, not one file
    report = host.load()
    assert [s.name for s in host.skills()] == ["good"]
    [event] = report.errors
    assert "RecursionError" not in event.message
    assert '"metadata" is JSON text nested too deeply to read' in event.message
    assert "flatten it" in event.message
    assert loader_lines(caplog) == [f'skill loader: build "deep": {event.message}']


def test_metadata_ongrid_activation_wins_with_a_conflict_warning(root: Path) -> None:
    front = (
        "name: a\ndescription: d\nactivation: {mode: always}\n"
        "metadata:\n  ongrid:\n    activation: {mode: keyword, keywords: [prom]}\n"
    )
    skill = load_text(root, f"---\n{front}---\n", folder="a")
    assert skill.activation.mode == "keyword"
    [warning] = skill.warnings
    assert (warning.code, warning.pointer) == ("activation_conflict", "/metadata/ongrid/activation")


def test_an_unknown_activation_mode_behaves_as_always(root: Path) -> None:
    skill = load_text(root, "---\nname: a\ndescription: d\nactivation: {mode: sometimes}\n---\n", folder="a")
    assert skill.activation.match("anything") == "always"
    assert codes(skill) == ["unknown_activation_mode"]


OPENCLAW = {
    "os": ["linux", "darwin"],
    "requires": {"bins": ["curl"], "anyBins": ["a", "b"], "env": ["TOKEN"]},
}


@pytest.mark.parametrize("key", ["openclaw", "clawdbot", "clawdis", "moltbot"])
@pytest.mark.parametrize("style", ["yaml-block", "inline-json", "json-string", "metadata-json-string"])
def test_openclaw_metadata_is_read_under_every_legacy_key_in_json_or_yaml(
    root: Path, key: str, style: str
) -> None:
    block = json.dumps(OPENCLAW)
    metadata = {
        "yaml-block": f"metadata:\n  {key}:\n    os: [linux, darwin]\n    requires:\n      bins: [curl]\n"
        "      anyBins: [a, b]\n      env: [TOKEN]\n",
        "inline-json": f'metadata: {{"{key}": {block}}}\n',
        "json-string": f"metadata:\n  {key}: '{block}'\n",
        "metadata-json-string": f"metadata: '{json.dumps({key: OPENCLAW})}'\n",
    }[style]
    skill = load_text(root, f"---\nname: claw\ndescription: d\n{metadata}---\n", folder="claw")
    requires = skill.requires
    assert (requires.os, requires.bins, requires.any_bins, requires.env) == (
        ("linux", "darwin"),
        ("curl",),
        (("a", "b"),),
        ("TOKEN",),
    )
    assert skill.warnings == ()


def test_ongrid_and_openclaw_requirements_are_merged_and_win32_means_windows(root: Path) -> None:
    front = (
        "name: m\ndescription: d\nmetadata:\n  requires: {bins: [jq], config: [a.b]}\n"
        '  moltbot: {"os": ["win32"], "requires": {"bins": ["jq", "gh"], "config": "c.d,e.f"},'
        ' "install": [{"kind": "brew", "formula": "gh", "bins": ["gh"], "label": "Install gh (brew)"}]}\n'
        "  ongrid: {min_ongrid_version: '0.1'}\n"
    )
    skill = load_text(root, f"---\n{front}---\n", folder="m")
    requires = skill.requires
    assert requires.os == ("windows",)
    assert requires.bins == ("jq", "gh")
    assert requires.config == ("a.b", "c.d", "e.f")
    assert requires.min_version == "0.1"
    assert dict(requires.hints) == {"gh": "Install gh (brew)"}


def test_claude_code_extras_are_modelled(root: Path) -> None:
    front = (
        "name: c\ndescription: d\ndisable-model-invocation: true\nargument-hint: [file]\n"
        "hooks: {PreToolUse: []}\nmodel: sonnet\n"
    )
    skill = load_text(root, f"---\n{front}---\n", folder="c")
    assert skill.model_invocable is False
    assert skill.extra["argument-hint"] == ["file"]  # kept as written
    assert sorted(codes(skill)) == ["coerced", "unsupported"]


# -- tools ---------------------------------------------------------------------------------


def tool_entry(**fields: Any) -> dict[str, Any]:
    entry = {"name": "t", "impl": "builtin:test.echo", "description": "A tool."}
    entry.update(fields)
    return entry


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("read", ToolClass.SAFE),
        ("write", ToolClass.MUTATING),
        ("destructive", ToolClass.DANGEROUS),
        ("safe", ToolClass.SAFE),
        ("mutating", ToolClass.MUTATING),
        ("dangerous", ToolClass.DANGEROUS),
        ("", ToolClass.SAFE),
    ],
)
def test_tool_classes_in_both_dialects(root: Path, given: str, expected: ToolClass) -> None:
    skill_dir = make_skill_md(root, "k", tools=[tool_entry(**{"class": given})])
    [tool] = load_skill_md(str(skill_dir / "SKILL.md"), root_of(root)).tools
    assert tool.tool_class is expected


def test_a_tool_entry_becomes_a_tool_with_every_field(root: Path) -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer", "default": 1}}}
    entry = tool_entry(
        name="Count-Things",
        when_to_use="When counting.",
        input_schema=schema,
        confirmation="required",
        timeout_seconds=2.5,
        category="ops",
        x_extra={"kept": True},
    )
    skill_dir = make_skill_md(root, "k", tools=[entry])
    skill = load_skill_md(str(skill_dir / "SKILL.md"), root_of(root))
    [tool] = skill.tools
    assert (tool.name, tool.display_name, tool.kind, tool.impl) == (
        "count_things",
        "Count-Things",
        "native",
        "builtin:test.echo",
    )
    assert (tool.when_to_use, tool.confirmation_required, tool.timeout, tool.category) == (
        "When counting.",
        True,
        2.5,
        "ops",
    )
    assert dict(tool.schema) == schema
    assert dict(tool.extra) == {"x_extra": {"kept": True}}
    assert tool.skill == "k" and tool.cwd == os.path.realpath(skill_dir)
    assert sorted(codes(skill)) == ["name_normalized", "unknown_field"]


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        (
            tool_entry(impl="python:mod.fn"),
            '"impl" must be builtin:<key> or exec:<path relative to the skill',
        ),
        (
            tool_entry(impl=None),
            '"impl" must be builtin:<key> or exec:<path relative to the skill folder> (missing)',
        ),
        (tool_entry(**{"class": "harmless"}), '"class" must be one of dangerous, destructive, mutating'),
        (tool_entry(schema={"type": "array"}), '"schema" must describe an object'),
        (tool_entry(schema={"type": "object", "properties": {"a": {"type": 7}}}), "not a valid JSON Schema"),
        (tool_entry(timeout_seconds="30s"), '"timeout_seconds" must be a number of seconds'),
        (tool_entry(confirmation="maybe"), '"confirmation" must be "required"'),
        (tool_entry(name="技能"), "has no ASCII letter or digit"),
        (tool_entry(name="x" * 65), "model APIs accept at most 64"),
        (tool_entry(impl="exec:missing.sh"), "cannot be resolved"),
    ],
)
def test_broken_tool_entries_reject_the_skill_naming_the_problem(
    root: Path, entry: dict[str, Any], message: str
) -> None:
    skill_dir = make_skill_md(root, "k", tools=[entry])
    with pytest.raises(ManifestBuildError) as info:
        load_skill_md(str(skill_dir / "SKILL.md"), root_of(root))
    assert message in info.value.message


def test_two_tools_of_one_name_are_an_error(root: Path) -> None:
    skill_dir = make_skill_md(root, "k", tools=[tool_entry(), tool_entry()])
    with pytest.raises(ManifestBuildError) as info:
        load_skill_md(str(skill_dir / "SKILL.md"), root_of(root))
    assert info.value.message == 'tool "t" is declared twice (tools[0] and tools[1])'


def test_an_exec_entry_escaping_the_root_is_an_error(root: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside.sh"
    outside.write_text(ECHO_SH)
    outside.chmod(0o755)
    skill_dir = make_skill_md(root, "k", tools=[tool_entry(impl="exec:run.sh")])
    (skill_dir / "run.sh").symlink_to(outside)
    with pytest.raises(ManifestBuildError) as info:
        load_skill_md(str(skill_dir / "SKILL.md"), root_of(root))
    assert info.value.message == f"entry {outside} escapes allowlist root {os.path.realpath(root)}"


def test_confirmation_required_makes_a_safe_tool_ask_first(make_host: Any, root: Path) -> None:
    make_skill_md(
        root, "k", tools=[tool_entry(impl="exec:run.sh", confirmation="required")], files={"run.sh": ECHO_SH}
    )
    host = make_host(root)
    decision = host.decide(host.get("t"), "viewer")
    assert decision.verdict is Verdict.CONFIRM
    assert decision.reason == "tool t asks for a confirmation before every call"


def test_validate_strict_fails_on_forgiven_warnings_and_shows_them_with_pointers(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = make_skill_md(root, "Hello-World", folder="hello", description="Greets.")
    code = main(["--no-defaults", "validate", str(folder)])
    assert code == 0
    strict = main(["--no-defaults", "validate", "--strict", "--json", str(folder)])
    out = capsys.readouterr().out
    assert strict == 1
    report = json.loads(out[out.index("{") :])
    problems = {(p["level"], p["code"], p["pointer"]) for p in report["files"][0]["problems"]}
    assert ("warning", "name_normalized", "/name") in problems


def test_validate_strict_passes_a_spec_conforming_hyphenated_skill(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = make_skill_md(root, "mcp-builder", description="Builds MCP servers.")
    assert main(["--no-defaults", "validate", "--strict", str(folder)]) == 0
    out = capsys.readouterr().out
    assert out.endswith("ok\n1 manifest(s) checked, 0 with problems\n")


def test_a_skill_md_giving_name_twice_is_refused_like_a_skill_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "dupkey"
    folder.mkdir()
    (folder / "SKILL.md").write_text("---\nname: dupkey\ndescription: Says hi.\nname: other\n---\nHi.\n")
    assert main(["--no-defaults", "validate", str(folder)]) == 1
    out = capsys.readouterr().out
    expected = 'duplicate key "name" (line 4, first at line 2): two parsers could read two different'
    assert expected in out


def test_metadata_keys_that_read_as_one_are_refused_by_the_loader_and_validate(
    make_host: Any, root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    make_skill_md(
        root, None, folder="a", raw="---\nname: a\ndescription: d\nmetadata:\n  yes: 1\n  true: 2\n---\n"
    )
    make_skill_md(
        root, None, folder="b", raw="---\nname: b\ndescription: d\nmetadata:\n  1: x\n  '1': y\n---\n"
    )
    host = make_host(root)
    assert [(e.outcome, "the same key once read" in e.message) for e in host.load().errors] == [
        ("parse_error", True),
        ("parse_error", True),
    ]
    assert main(["--no-defaults", "validate", str(root)]) == 1
    assert capsys.readouterr().out.count("the same key once read") == 2


def test_an_integer_too_long_for_python_is_said_to_be_too_long_in_skill_md_and_persona_files(
    make_host: Any, root: Path, tmp_path: Path
) -> None:
    from ongrid_plugins.gate.personas import PersonaFileError, read_persona

    digits = "9" * 5000
    make_skill_md(
        root, None, folder="big", raw=f"---\nname: big\ndescription: d\nmetadata:\n  n: {digits}\n---\n"
    )
    [event] = make_host(root).load().errors
    expected = "the number at line 5 column 6 is too long (5000 digits; at most 4300)"
    assert event.message == f"invalid YAML front matter: {expected}"
    persona = tmp_path / "p.md"
    persona.write_text(f"---\nname: p\nlimit: {digits}\n---\n")
    with pytest.raises(PersonaFileError) as caught:
        read_persona(persona)
    assert "the number at line 3 column 8 is too long (5000 digits; at most 4300)" in caught.value.message
    assert "set_int_max_str_digits" not in caught.value.message
