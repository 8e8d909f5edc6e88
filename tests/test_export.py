"""Export: the tool list in OpenAI, Anthropic and MCP shapes, checked against each provider's format."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from clirun import run

from ongrid_plugins import ConfigError, SkillHost, StrictSchemaError
from ongrid_plugins.host.export import export_tools
from ongrid_plugins.testing import make_skill, make_skill_md

SCHEMAS = Path(__file__).parent / "provider_schemas"


def provider(name: str) -> dict[str, Any]:
    return json.loads((SCHEMAS / f"{name}.json").read_text())


SEARCH_SCHEMA = {
    "type": "object",
    "properties": {
        "query": {"type": "string", "minLength": 1, "description": "What to look for."},
        "limit": {"type": "integer", "minimum": 1, "default": 10},
        "where": {"type": "object", "properties": {"path": {"type": "string"}}},
    },
    "required": ["query"],
    "additionalProperties": False,
}


@pytest.fixture
def host(root: Path, make_host: Any) -> SkillHost:
    make_skill(root, "search", schema=SEARCH_SCHEMA)
    make_skill(
        root,
        "restart",
        class_="mutating",
        schema={"type": "object", "properties": {"unit": {"type": "string"}}},
    )
    make_skill(root, "wipe", class_="dangerous")
    make_skill(root, "tagger", schema={"type": "object", "additionalProperties": {"type": "string"}})
    make_skill_md(
        root,
        "notes",
        description="Take notes.",
        tools=[
            {
                "name": "Note Add",
                "description": "Add a note.",
                "when_to_use": "When the user wants something remembered.",
                "class": "write",
                "impl": "exec:scripts/add.sh",
            }
        ],
        files={"scripts/add.sh": "#!/bin/sh\necho '{}'\n"},
    )
    return make_host(root)


@pytest.mark.parametrize(
    ("fmt", "schema"),
    [
        ("openai", "openai_tool"),
        ("anthropic", "anthropic_tool"),
        ("mcp", "mcp_tool"),
        ("responses", "openai_responses_tool"),
        ("gemini", "gemini_function_declaration"),
    ],
)
def test_every_exported_tool_matches_the_provider_format(host: SkillHost, fmt: str, schema: str) -> None:
    tools = host.export(fmt, persona="admin")
    assert len(tools) == 5
    for tool in tools:
        jsonschema.validate(tool, provider(schema))


def test_openai_shape(host: SkillHost) -> None:
    [search] = [t for t in host.export("openai", persona="viewer") if t["function"]["name"] == "search"]
    assert search == {
        "type": "function",
        "function": {"name": "search", "description": "Test skill search.", "parameters": SEARCH_SCHEMA},
    }


def test_anthropic_shape(host: SkillHost) -> None:
    [search] = [t for t in host.export("anthropic", persona="viewer") if t["name"] == "search"]
    assert search == {"name": "search", "description": "Test skill search.", "input_schema": SEARCH_SCHEMA}


def test_mcp_annotations_follow_the_class(host: SkillHost) -> None:
    tools = {t["name"]: t for t in host.export("mcp", persona="admin")}
    assert tools["search"]["annotations"] == {"readOnlyHint": True}
    assert tools["restart"]["annotations"] == {"readOnlyHint": False, "destructiveHint": False}
    assert tools["wipe"]["annotations"] == {"readOnlyHint": False, "destructiveHint": True}
    assert (
        tools["note_add"]["title"] == "Note Add" and tools["note_add"]["annotations"]["title"] == "Note Add"
    )


def test_mcp_tools_are_valid_for_the_official_sdk(host: SkillHost) -> None:
    import mcp.types as types

    for data in host.export("mcp", persona="admin"):
        tool = types.Tool.model_validate(data)
        assert tool.model_dump(by_alias=True, exclude_none=True) == data


def test_only_what_the_persona_may_call(host: SkillHost) -> None:
    def names(persona: str) -> list[str]:
        return [t["name"] for t in host.export("anthropic", persona=persona)]

    assert names("viewer") == ["search", "tagger"]
    assert names("operator") == ["note_add", "restart", "search", "tagger"]
    assert names("admin") == ["note_add", "restart", "search", "tagger", "wipe"]


def test_descriptions_carry_when_to_use_and_what_a_call_needs(host: SkillHost) -> None:
    tools = {t["name"]: t["description"] for t in host.export("anthropic", persona="admin")}
    assert "When to use: When the user wants something remembered." in tools["note_add"]
    assert "needs the user's confirmation" in tools["restart"]
    assert "two-person approval" in tools["wipe"]
    assert tools["search"] == "Test skill search."


def test_exported_schemas_are_copies(host: SkillHost) -> None:
    tool = host.export("openai", persona="viewer")[0]
    tool["function"]["parameters"]["properties"]["query"]["type"] = "integer"
    assert host.get("search").schema["properties"]["query"]["type"] == "string"


def test_strict_openai(host: SkillHost) -> None:
    with pytest.raises(StrictSchemaError) as caught:
        host.export("openai", persona="viewer", strict=True)
    assert list(caught.value.problems) == ["tagger"]
    assert "open map" in caught.value.problems["tagger"][0]
    result = export_tools([host.get("search")], "openai", strict=True)
    [tool] = result.tools
    assert result.ok and tool["function"]["strict"] is True
    parameters = tool["function"]["parameters"]
    jsonschema.validate(tool, provider("openai_tool"))
    jsonschema.validate(parameters, provider("openai_strict_schema"))
    assert parameters["required"] == ["query", "limit", "where"]
    assert parameters["properties"]["where"]["type"] == ["object", "null"]
    assert parameters["properties"]["where"]["additionalProperties"] is False


def test_strict_anthropic_and_its_request_limits(host: SkillHost, root: Path, make_host: Any) -> None:
    [tool] = export_tools([host.get("search")], "anthropic", strict=True).tools
    jsonschema.validate(tool, provider("anthropic_tool"))
    jsonschema.validate(tool["input_schema"], provider("anthropic_strict_schema"))
    assert tool["strict"] is True and tool["input_schema"]["required"] == ["query"]
    many = root / "many"
    for i in range(3):
        props = {f"p{j}": {"type": "string"} for j in range(10)}
        make_skill(many, f"wide{i}", schema={"type": "object", "properties": props})
    wide = make_host(many)
    result = export_tools(wide.tools(), "anthropic", strict=True)
    assert "30 optional properties" in result.problems["*"][0]
    assert len(result.tools) == 3  # each tool is fine alone: the limit is per request


def test_bad_requests_are_config_errors(host: SkillHost) -> None:
    with pytest.raises(ConfigError, match="unknown export format"):
        host.export("bard")
    with pytest.raises(ConfigError, match="MCP has no strict mode"):
        host.export("mcp", strict=True)


def test_cli_export(host: SkillHost, root: Path, tmp_path: Path) -> None:
    base = [sys.executable, "-m", "ongrid_plugins", "--no-defaults", "--dirs", str(root), "export"]
    env = {"ONGRID_STATE_DIR": str(tmp_path / "state"), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    done = subprocess.run(
        [*base, "--format", "mcp", "--persona", "viewer"], capture_output=True, text=True, env=env
    )
    assert done.returncode == 0, done.stderr
    assert [t["name"] for t in json.loads(done.stdout)] == ["search", "tagger"]
    done = subprocess.run([*base, "--format", "openai", "--strict"], capture_output=True, text=True, env=env)
    assert done.returncode == 2
    assert "ERROR: 1 tool(s) cannot be exported in openai strict mode:" in done.stderr
    assert "  tagger: $: an open map" in done.stderr
    out = tmp_path / "tools.json"
    args = ["--format", "anthropic", "--persona", "admin", "-o", str(out), "--compact"]
    done = subprocess.run([*base, *args], capture_output=True, text=True, env=env)
    assert done.returncode == 0 and done.stdout == ""
    assert len(out.read_text().splitlines()) == 1 and len(json.loads(out.read_text())) == 5


@pytest.mark.parametrize(
    ("target", "reason"),
    [
        ("{tmp}", "Is a directory"),  # was IsADirectoryError
        ("{tmp}/missing/tools.json", "No such file or directory"),  # was FileNotFoundError
        ("/dev/full", "No space left on device"),  # was OSError ENOSPC, raised at close
    ],
)
def test_cli_export_names_an_output_it_cannot_write(
    root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], target: str, reason: str
) -> None:
    make_skill(root, "echo")
    target = target.format(tmp=tmp_path)
    code, out, err = run(
        capsys, "--no-defaults", "--dirs", str(root), "export", "--format", "openai", "-o", target
    )
    assert (code, out) == (2, "")
    expected = f"ERROR: cannot write {target} (-o): {reason}; "
    assert err == expected + "give -o a file in a folder you can write to, on a disk with room\n"


def test_cli_export_refuses_an_empty_output_instead_of_printing(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    make_skill(root, "echo")
    code, out, err = run(
        capsys, "--no-defaults", "--dirs", str(root), "export", "--format", "openai", "-o", ""
    )
    assert (code, out) == (2, "")
    assert err.startswith("usage: ongrid-skills export ")
    expected = "error: argument -o/--output: must not be empty: "
    assert err.endswith(expected + "give a file name, or leave -o out for standard output\n")


# ---------------------------------------------------------------------- Responses API and Gemini


def test_responses_shape_is_flat_and_always_says_strict(host: SkillHost) -> None:
    [search] = [t for t in host.export("responses", persona="admin") if t["name"] == "search"]
    assert set(search) == {"type", "name", "description", "parameters", "strict"}
    assert search["type"] == "function" and search["strict"] is False
    assert search["parameters"] == SEARCH_SCHEMA
    strict_result = export_tools(host.tools("admin"), "responses", strict=True)
    assert list(strict_result.problems) == ["tagger"]  # an open map: the same rule as chat completions
    strict = {t["name"]: t for t in strict_result.tools}
    assert strict["search"]["strict"] is True
    jsonschema.validate(strict["search"]["parameters"], provider("openai_strict_schema"))
    assert strict["search"]["parameters"]["required"] == ["query", "limit", "where"]


def test_gemini_shape_rewrites_the_schema_to_the_openapi_subset(host: SkillHost) -> None:
    tools = {t["name"]: t for t in host.export("gemini", persona="admin")}
    assert set(tools["search"]) == {"name", "description", "parameters"}
    params = tools["search"]["parameters"]
    assert "additionalProperties" not in params
    assert params["properties"]["limit"] == {"type": "integer", "minimum": 1, "default": 10}
    assert params["required"] == ["query"]
    assert "additionalProperties" not in tools["tagger"]["parameters"]


@pytest.mark.parametrize(
    ("schema", "expected"),
    [
        (
            {"type": "object", "properties": {"a": {"type": ["string", "null"]}}},
            {"type": "object", "properties": {"a": {"type": "string", "nullable": True}}},
        ),
        (
            {"type": "object", "properties": {"m": {"const": "fast"}}},
            {"type": "object", "properties": {"m": {"enum": ["fast"], "type": "string", "format": "enum"}}},
        ),
        (
            {
                "type": "object",
                "properties": {"p": {"$ref": "#/$defs/point"}},
                "$defs": {"point": {"type": "object", "properties": {"x": {"type": "number"}}}},
            },
            {
                "type": "object",
                "properties": {"p": {"type": "object", "properties": {"x": {"type": "number"}}}},
            },
        ),
        (
            {"type": "object", "properties": {"v": {"oneOf": [{"type": "string"}, {"type": "integer"}]}}},
            {"type": "object", "properties": {"v": {"anyOf": [{"type": "string"}, {"type": "integer"}]}}},
        ),
        # a null branch makes the value nullable; the one branch left is the value's type
        (
            {"type": "object", "properties": {"v": {"anyOf": [{"type": "string"}, {"type": "null"}]}}},
            {"type": "object", "properties": {"v": {"type": "string", "nullable": True}}},
        ),
        # `false` matches nothing: such a property may never be sent, such an array is empty
        (
            {"type": "object", "properties": {"gone": False, "none": {"type": "array", "items": False}}},
            {"type": "object", "properties": {"none": {"type": "array", "maxItems": 0}}},
        ),
        # an enum of other values than strings is named in the description, as JSON
        (
            {"type": "object", "properties": {"e": {"enum": [1, "a", None, True]}}},
            {"type": "object", "properties": {"e": {"description": 'One of: 1, "a", null, true.'}}},
        ),
    ],
)
def test_gemini_rewrites_what_has_an_equivalent(schema: dict, expected: dict) -> None:
    from ongrid_plugins.schema.export_gemini import gemini_schema

    converted, problems = gemini_schema(schema)
    assert (converted, problems) == (expected, ())
    jsonschema.validate({"name": "t", "parameters": converted}, provider("gemini_function_declaration"))


@pytest.mark.parametrize(
    ("schema", "fragment"),
    [
        ({"type": "object", "allOf": [{"required": ["a"]}]}, "no 'allOf'"),
        (
            {
                "type": "object",
                "properties": {"n": {"$ref": "#/$defs/node"}},
                "$defs": {"node": {"type": "object", "properties": {"next": {"$ref": "#/$defs/node"}}}},
            },
            "is recursive",
        ),
        # A remote $ref never gets this far: the loader refuses it (tests/test_hostile_input.py).
    ],
)
def test_gemini_names_what_it_cannot_express_and_leaves_the_tool_out(
    root: Path, make_host: Any, schema: dict, fragment: str
) -> None:
    make_skill(root, "odd", schema=schema)
    make_skill(root, "fine")
    host = make_host(root)
    with pytest.raises(StrictSchemaError) as info:
        host.export("gemini")
    assert list(info.value.problems) == ["odd"]
    assert fragment in " ".join(info.value.problems["odd"])
    assert "Gemini function declarations" in str(info.value)


def test_gemini_refuses_a_name_starting_with_a_digit() -> None:
    from ongrid_plugins.models import Tool, ToolClass

    tool = Tool(
        name="1password",
        description="d",
        schema={"type": "object"},
        tool_class=ToolClass.SAFE,
        skill="1password",
        source="/x",
        kind="subprocess",
    )
    result = export_tools([tool], "gemini")
    assert result.tools == () and "not a valid gemini tool name" in result.problems["1password"][0]


def test_gemini_has_no_strict_mode(host: SkillHost) -> None:
    with pytest.raises(ConfigError, match="Gemini has no strict mode"):
        host.export("gemini", strict=True)


def _ref_dag(levels: int) -> dict[str, Any]:
    """A small schema whose $defs form a DAG: each def refers twice to the next (2**levels leaves)."""
    defs: dict[str, Any] = {
        f"d{i}": {
            "type": "object",
            "properties": {"l": {"$ref": f"#/$defs/d{i + 1}"}, "r": {"$ref": f"#/$defs/d{i + 1}"}},
        }
        for i in range(levels)
    }
    defs[f"d{levels}"] = {"type": "string"}
    return {"type": "object", "$defs": defs, "properties": {"x": {"$ref": "#/$defs/d0"}}}


def test_gemini_refuses_a_ref_dag_that_would_inline_too_large_instead_of_growing_without_bound(
    root: Path, make_host: Any
) -> None:
    import time

    make_skill(root, "dag", schema=_ref_dag(30))  # 2 KB that would inline to 2**30 nodes
    make_skill(root, "small", schema=_ref_dag(3))  # a DAG that inlines small stays exportable
    make_skill(root, "fine")
    host = make_host(root)
    started = time.monotonic()
    with pytest.raises(StrictSchemaError) as info:
        host.export("gemini")
    assert time.monotonic() - started < 5
    assert list(info.value.problems) == ["dag"]
    [reason] = info.value.problems["dag"]
    assert "too large" in reason and "$defs" in reason
    for fmt in ("openai", "mcp"):  # formats that keep $defs are not affected
        assert {t.get("name") or t["function"]["name"] for t in host.export(fmt)} >= {"dag"}


@pytest.mark.parametrize(
    ("schema", "expected"),
    [
        # a pointer into a def's properties is that property, not the def of the same last name
        (
            {
                "type": "object",
                "$defs": {"bar": {"type": "integer"}, "foo": {"properties": {"bar": {"type": "string"}}}},
                "properties": {"x": {"$ref": "#/$defs/foo/properties/bar"}},
            },
            {"type": "string"},
        ),
        # definitions/k and $defs/k are two schemas
        (
            {
                "type": "object",
                "definitions": {"k": {"type": "boolean"}},
                "$defs": {"k": {"type": "integer"}},
                "properties": {"x": {"$ref": "#/definitions/k"}},
            },
            {"type": "boolean"},
        ),
        # ~1 and ~0 in a pointer stand for / and ~; %25 for % (the URI fragment's encoding)
        (
            {
                "type": "object",
                "$defs": {"a/b": {"type": "number"}, "c~d": {"type": "boolean"}, "e%f": {"type": "null"}},
                "properties": {
                    "x": {"$ref": "#/$defs/a~1b"},
                    "y": {"$ref": "#/$defs/c~0d"},
                    "z": {"$ref": "#/$defs/e%25f"},
                },
            },
            None,
        ),
    ],
    ids=["into_properties", "definitions_vs_defs", "escapes"],
)
def test_gemini_inlines_the_schema_the_whole_ref_pointer_names(
    root: Path, make_host: Any, schema: dict, expected: dict | None
) -> None:
    make_skill(root, "refp", schema=schema)
    host = make_host(root)
    [tool] = host.export("gemini")
    properties = tool["parameters"]["properties"]
    if expected is not None:
        assert properties["x"] == expected
    else:
        assert properties == {"x": {"type": "number"}, "y": {"type": "boolean"}, "z": {"nullable": True}}
