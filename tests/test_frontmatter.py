"""Front matter: splitting tolerant of real files, YAML parsed safely, bombs refused unexpanded."""

from __future__ import annotations

import time

import pytest

from ongrid_plugins.loaders.frontmatter import (
    MAX_ALIAS_NODES,
    FrontMatterError,
    first_paragraph,
    parse_yaml,
    quote_colon_values,
    split,
)


def test_split_returns_front_matter_and_the_body_after_the_first_closing_fence() -> None:
    doc = split("---\nname: x\n---\n# Title\n\n---\n\nmore\n")
    assert doc.front == "name: x\n"
    assert doc.body == "# Title\n\n---\n\nmore\n"
    assert (doc.front_line, doc.bom, doc.blank_lines_before) == (2, False, 0)


def test_split_tolerates_bom_crlf_blank_lines_and_trailing_blanks_on_fences() -> None:
    doc = split("\ufeff\r\n \r\n---  \r\nname: x\r\ndescription: d\r\n--- \t\r\nbody\r\n")
    assert doc.front == "name: x\ndescription: d\n"
    assert doc.body == "body\n"
    assert (doc.bom, doc.blank_lines_before, doc.front_line) == (True, 2, 4)


def test_split_normalises_lone_cr_line_endings() -> None:
    assert split("---\rname: x\r---\rbody\r").body == "body\n"


def test_a_file_without_an_opening_fence_has_no_front_matter() -> None:
    doc = split("# Canvas\n\nDisplay things.\n")
    assert doc.front is None
    assert doc.body == "# Canvas\n\nDisplay things.\n"


@pytest.mark.parametrize("text", ["---\nname: x\n", "\n\n---\nname: x\n----\n", "---"])
def test_an_opening_fence_that_never_closes_is_an_error_naming_its_line(text: str) -> None:
    with pytest.raises(FrontMatterError) as info:
        split(text)
    line = text.count("\n", 0, text.index("---")) + 1
    assert (
        str(info.value) == f"the front matter opened on line {line} is never closed (no '---' line after it)"
    )


def test_empty_front_matter_and_a_closing_fence_at_end_of_file() -> None:
    assert split("---\n---\n").front == ""
    doc = split("---\nname: x\n---")
    assert (doc.front, doc.body) == ("name: x\n", "")


def test_yaml_is_parsed_with_timestamps_kept_as_strings() -> None:
    data, quoted = parse_yaml("name: x\nreleased: 2024-01-02\nversion: 1.0.0\nflag: yes\ncount: 3\n")
    assert data == {"name": "x", "released": "2024-01-02", "version": "1.0.0", "flag": True, "count": 3}
    assert quoted == []


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "a: !!python/object/apply:os.system ['touch /tmp/pwned']\n",
            "the YAML tag !!python/object/apply:os.system would build a Python object; "
            "such tags are refused, never run (line 5, column 4)",
        ),
        (
            "a: !!set {x, y}\n",
            "the YAML tag !!set is not allowed (front matter must be plain JSON-like data)",
        ),
        ("a: !!binary aGk=\n", "the YAML tag !!binary is not allowed"),
        ("a: !!timestamp 2024-01-01\n", "the YAML tag !!timestamp is not allowed"),
        ("a: !custom x\n", "unknown YAML tag !custom"),
    ],
)
def test_tags_that_build_objects_are_refused_with_their_name(text: str, message: str) -> None:
    with pytest.raises(FrontMatterError) as info:
        parse_yaml(text, first_line=5)
    assert str(info.value).startswith("invalid YAML front matter: ")
    assert message in str(info.value)


def test_a_billion_laughs_is_refused_without_being_expanded() -> None:
    lines = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for level in range(1, 10):
        prev, name = chr(ord("a") + level - 1), chr(ord("a") + level)
        lines.append(f"{name}: &{name} [" + ",".join([f"*{prev}"] * 9) + "]")
    started = time.perf_counter()
    with pytest.raises(FrontMatterError) as info:
        parse_yaml("\n".join(lines))
    assert time.perf_counter() - started < 0.5  # 9**10 nodes were never built
    assert "YAML aliases would expand the front matter by" in str(info.value)
    assert f"more than the {MAX_ALIAS_NODES} allowed" in str(info.value)


def test_an_alias_to_its_own_container_is_refused() -> None:
    with pytest.raises(FrontMatterError) as info:
        parse_yaml("name: x\nloop: &l [1, *l]\n", first_line=2)
    assert str(info.value) == (
        "invalid YAML front matter: an alias refers to the node that contains it (line 3)"
    )


def test_modest_aliases_and_merge_keys_are_fine() -> None:
    data, _ = parse_yaml("base: &b {x: 1}\nc: {<<: *b, y: 2}\ntools: 'Bash(git:*)'\nd: *b\n")
    assert data == {"base": {"x": 1}, "c": {"x": 1, "y": 2}, "tools": "Bash(git:*)", "d": {"x": 1}}


def test_tabs_used_for_indentation_get_a_hint_and_the_file_line() -> None:
    with pytest.raises(FrontMatterError) as info:
        parse_yaml("metadata:\n\tos: [linux]\n", first_line=2)
    assert str(info.value) == (
        "invalid YAML front matter: found character that cannot start any token "
        "(YAML does not allow tabs for indentation: indent with spaces) (line 3, column 1)"
    )


def test_a_value_with_an_unquoted_colon_is_retried_quoted() -> None:
    text = "name: discord\ndescription: Use the tool: send messages\nmetadata: {a: 1}\n"
    data, quoted = parse_yaml(text)
    assert data == {"name": "discord", "description": "Use the tool: send messages", "metadata": {"a": 1}}
    assert quoted == ["description"]


def test_the_quoting_retry_folds_continuation_lines_and_drops_comments() -> None:
    text = 'description: Triggers: order food, "reorder" # note\n  and track ETA\nname: x\n'
    fixed, keys = quote_colon_values(text) or ("", [])
    assert keys == ["description"]
    assert fixed == 'description: "Triggers: order food, \\"reorder\\" and track ETA"\nname: x\n'
    assert parse_yaml(text)[0] == {
        "description": 'Triggers: order food, "reorder" and track ETA',
        "name": "x",
    }


def test_the_retry_leaves_quoted_and_structured_values_alone() -> None:
    assert quote_colon_values("a: 'x: y'\nb: {c: d}\nc: plain\n") is None


def test_an_error_the_retry_cannot_fix_reports_the_original_error() -> None:
    with pytest.raises(FrontMatterError) as info:
        parse_yaml("description: a: b\nlist: [1,\n", first_line=2)
    assert "mapping values are not allowed" in str(info.value)
    assert "(line 2, column 15)" in str(info.value)


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("# Canvas Skill\n\nDisplay HTML content.\nOn nodes.\n\n## More", "Display HTML content. On nodes."),
        ("<!--\ncomment\n-->\n\n```\ncode\n```\nReal paragraph.\n", "Real paragraph."),
        ("Title\n=====\n\nText.", "Text."),
        ("# Only a heading\n", ""),
        ("", ""),
    ],
)
def test_first_paragraph_skips_headings_comments_and_code(body: str, expected: str) -> None:
    assert first_paragraph(body) == expected


def test_first_paragraph_is_cut_to_the_limit() -> None:
    assert first_paragraph("x" * 50, limit=10) == "x" * 9 + "…"


@pytest.mark.parametrize(
    ("text", "key", "lines"),
    [
        ("name: dupkey\ndescription: d\nname: other\n", "name", (4, 2)),
        ("name: x\n'name': y\n", "name", (3, 2)),  # a quoted spelling is the same key
        ("name: x\nmetadata:\n  a: 1\n  b: 2\n  a: 3\n", "a", (6, 4)),
        ("name: x\nmetadata: {a: 1, a: 2}\n", "a", (3, 3)),
        ("tools:\n  - name: t\n    name: u\n", "name", (4, 3)),
    ],
)
def test_a_key_given_twice_at_any_level_is_refused(text: str, key: str, lines: tuple[int, int]) -> None:
    """PyYAML keeps the last value; skill.json refuses duplicates, and so does front matter."""
    with pytest.raises(FrontMatterError) as caught:
        parse_yaml(text, first_line=2)
    assert str(caught.value) == (
        f'invalid YAML front matter: duplicate key "{key}" (line {lines[0]}, first at line {lines[1]}): '
        "two parsers could read two different manifests; keep one"
    )


@pytest.mark.parametrize(
    ("text", "key", "first"),
    [
        ("metadata:\n  yes: first\n  true: second\n", "true", "yes"),  # both the boolean true
        ("metadata:\n  1: first\n  '1': second\n", "'1'", "1"),  # the same JSON object key
        ("metadata:\n  1: first\n  0x1: second\n", "0x1", "1"),
        ("metadata:\n  ~: first\n  null: second\n", "null", "~"),
        ("metadata:\n  1: first\n  true: second\n", "true", "1"),  # one Python dict key
        ("metadata:\n  1.0: first\n  '1.0': second\n", "'1.0'", "1.0"),
    ],
)
def test_keys_spelled_differently_that_read_as_one_key_are_refused(text: str, key: str, first: str) -> None:
    # PyYAML keeps the last silently, or JSON output would hold one key twice.
    with pytest.raises(FrontMatterError) as caught:
        parse_yaml(text, first_line=2)
    assert str(caught.value) == (
        f'invalid YAML front matter: duplicate key "{key}" (line 4, first at line 3 as "{first}",'
        " the same key once read): two parsers could read two different manifests; keep one"
    )


def test_keys_that_only_look_alike_are_kept() -> None:
    data, _quoted = parse_yaml("metadata:\n  'yes': a\n  true: b\n  '02': c\n  2: d\n  Null: e\n  'x': f\n")
    assert data["metadata"] == {"yes": "a", True: "b", "02": "c", 2: "d", None: "e", "x": "f"}


def test_the_same_key_in_two_mappings_and_merge_keys_are_fine() -> None:
    text = "a: {k: 1}\nb: {k: 2}\nbase: &b {x: 1}\nc:\n  <<: *b\n  y: 2\n"
    data, _quoted = parse_yaml(text)
    assert data["a"] == {"k": 1} and data["b"] == {"k": 2} and data["c"] == {"x": 1, "y": 2}


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        # corpus/skillmd/clawdbot-clawdbot/lobster/SKILL.md
        (
            "# Lobster\n\nLobster executes multi-step workflows with approval checkpoints."
            " Use it when:\n\n- a\n",
            "Lobster executes multi-step workflows with approval checkpoints.",
        ),
        ("Runs checks! Options:\n\n- a", "Runs checks!"),
        ("Use it for:\n\n- a", "Use it for:"),  # nothing before it to keep
        ("Version 1.2: ratio 3:1 stays.", "Version 1.2: ratio 3:1 stays."),
    ],
)
def test_first_paragraph_drops_a_last_sentence_that_only_leads_into_a_list(body: str, expected: str) -> None:
    assert first_paragraph(body) == expected
