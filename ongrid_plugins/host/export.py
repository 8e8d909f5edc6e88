"""The tool list in each model API's function-calling shape: OpenAI, Anthropic, MCP, Gemini.

::

    tools = host.export("openai", persona="operator")          # what the model may call
    response = client.chat.completions.create(model=..., messages=..., tools=tools)

The shapes, as each provider documents them:

* ``openai`` (Chat Completions ``tools``): ``{"type": "function", "function": {"name",
  "description", "parameters"}}``, plus ``"strict": true`` in strict mode;
* ``anthropic`` (Messages ``tools``): ``{"name", "description", "input_schema"}``, plus
  ``"strict": true`` in strict mode;
* ``mcp`` (``tools/list`` result items): ``{"name", "title", "description",
  "inputSchema", "annotations"}`` where ``readOnlyHint`` is true for ``safe`` tools and
  ``destructiveHint`` true for ``dangerous`` ones. MCP has no strict mode;
* ``responses`` (OpenAI Responses API ``tools``): ``{"type": "function", "name",
  "description", "parameters", "strict"}``, flat, with ``strict`` always written:
  the Responses API turns strict mode *on* when it is left out, and a schema not
  made strict would then be refused;
* ``gemini`` (function declarations, for ``tools=[{"functionDeclarations": [...]}]``):
  ``{"name", "description", "parameters"}`` with ``parameters`` rewritten to the
  OpenAPI subset Gemini reads (:mod:`ongrid_plugins.schema.export_gemini`); a schema it cannot
  express is a problem, like a strict-mode one. Gemini has no strict mode.

A tool's ``when_to_use`` is folded into its description; so is what the persona will
need to call it (a confirmation, a two-person approval), so the model can tell the user.
Every schema is a deep copy: changing an exported dict never changes the registry.

Layering: a surface over the host. :func:`export_for_host` takes any
:class:`~ongrid_plugins.host.hostlike.ExportingHost` (``SkillHost`` is one) and this module
never imports the host, not even for a type, so ``SkillHost.export`` can forward here
without a circle.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

import attrs

from ..errors import ConfigError, StrictSchemaError
from ..models import Tool, ToolClass, Verdict
from ..schema.export_gemini import gemini_schema
from ..schema.strict import make_strict

if TYPE_CHECKING:
    from ..gate.persona_lookup import PersonaLike
    from .hostlike import ExportingHost

__all__ = [
    "FORMATS",
    "PROMPT_FORMATS",
    "ExportResult",
    "describe",
    "export_for_host",
    "export_tools",
    "raise_for_problems",
]

FORMATS = ("openai", "anthropic", "mcp", "responses", "gemini")
#: ``host.export`` formats that are text for a system prompt, not a tool list.
PROMPT_FORMATS = ("skills-prompt",)
#: The formats without a strict mode.
_NOT_STRICT = {"mcp": "MCP", "gemini": "Gemini"}

#: Tool names the APIs accept (OpenAI and Anthropic: 64 characters; MCP: 128 and dots).
_NAMES = {
    "openai": re.compile(r"[A-Za-z0-9_-]{1,64}"),
    "anthropic": re.compile(r"[A-Za-z0-9_-]{1,64}"),
    "mcp": re.compile(r"[A-Za-z0-9_.-]{1,128}"),
    "responses": re.compile(r"[A-Za-z0-9_-]{1,64}"),
    "gemini": re.compile(r"[A-Za-z_][A-Za-z0-9_.:-]{0,63}"),
}
#: Anthropic's strict tool use: per request, across every strict tool.
ANTHROPIC_MAX_OPTIONAL = 24
ANTHROPIC_MAX_UNIONS = 16


@attrs.frozen
class ExportResult:
    """The exported tools, and the tools that could not be exported as asked."""

    format: str
    tools: tuple[dict[str, Any], ...]
    problems: Mapping[str, tuple[str, ...]] = attrs.field(factory=dict)
    """Tool name -> why it could not be exported (strict) as asked; ``*`` for the whole request."""

    @property
    def ok(self) -> bool:
        """True when every tool was exported as asked."""
        return not self.problems


def describe(tool: Tool, note: str = "") -> str:
    """The description a model reads: the tool's, its ``when_to_use``, and ``note``."""
    text = tool.description.strip()
    when = tool.when_to_use.strip()
    if when and when not in text:
        text = f"{text}\n\nWhen to use: {when}"
    if note:
        text = f"{text}\n\n{note}"
    return text


def export_tools(
    tools: Iterable[Tool],
    fmt: str,
    *,
    strict: bool = False,
    notes: Mapping[str, str] | None = None,
) -> ExportResult:
    """``tools`` in the shape of ``fmt``; with ``strict``, schemas rewritten for strict mode.

    A tool whose schema cannot be made strict is left out of ``tools`` and named in
    ``problems`` with every reason; so is a name the API would refuse.
    """
    if fmt not in FORMATS:
        message = f"unknown export format {fmt!r}; use one of {', '.join(FORMATS)}"
        raise ConfigError(message)
    if strict and fmt in _NOT_STRICT:
        message = f"{_NOT_STRICT[fmt]} has no strict mode: export --format {fmt} without --strict"
        raise ConfigError(message)
    notes = notes or {}
    out: list[dict[str, Any]] = []
    problems: dict[str, tuple[str, ...]] = {}
    optional = unions = 0
    for tool in tools:
        schema: dict[str, Any] = copy.deepcopy(dict(tool.schema))
        if not _NAMES[fmt].fullmatch(tool.name):
            problems[tool.name] = (f"the name {tool.name!r} is not a valid {fmt} tool name",)
            continue
        if fmt == "gemini":
            schema, reasons = gemini_schema(schema)
            if reasons:
                problems[tool.name] = reasons
                continue
        if strict:
            converted = make_strict(schema, "openai" if fmt == "responses" else fmt)
            if not converted.ok:
                problems[tool.name] = converted.problems
                continue
            schema, optional, unions = (
                converted.schema,
                optional + converted.optional,
                unions + converted.unions,
            )
        schema.setdefault("type", "object")
        out.append(_SHAPES[fmt](tool, describe(tool, notes.get(tool.name, "")), schema, strict))
    if strict and fmt == "anthropic":
        problems.update(_anthropic_limits(optional, unions))
    return ExportResult(fmt, tuple(out), problems)


def export_for_host(
    host: ExportingHost, fmt: str, *, persona: PersonaLike = "operator", strict: bool = False
) -> list[dict[str, Any]]:
    """What :meth:`SkillHost.export <ongrid_plugins.host.facade.SkillHost.export>` returns.

    The tools ``persona`` may call, each described with what it will need to call them;
    for ``skills-prompt``, the ``<available_skills>`` text (:mod:`.export_prompt`).
    """
    if fmt == "skills-prompt":
        if strict:
            raise ConfigError(
                "skills-prompt has no strict mode: export --format skills-prompt without --strict"
            )
        from .export_prompt import skills_prompt

        return skills_prompt(host, persona)  # type: ignore[return-value]
    who = host.persona(persona)
    tools = host.tools(who)
    notes = {t.name: call_note(host.decide(t, who).verdict) for t in tools}
    return raise_for_problems(export_tools(tools, fmt, strict=strict, notes=notes))


def call_note(verdict: Verdict) -> str:
    """What a model is told about calling a tool, beyond its description."""
    if verdict is Verdict.CONFIRM:
        return "Each call needs the user's confirmation before it runs."
    if verdict is Verdict.DUAL_SIGN:
        return "Each call needs two-person approval: the first call returns a ticket for people to approve."
    return ""


def raise_for_problems(result: ExportResult) -> list[dict[str, Any]]:
    """The tools of ``result``, or :class:`StrictSchemaError` naming every problem."""
    if result.problems:
        raise StrictSchemaError(result.format, result.problems)
    return list(result.tools)


def _openai(tool: Tool, description: str, schema: dict[str, Any], strict: bool) -> dict[str, Any]:
    function: dict[str, Any] = {"name": tool.name, "description": description, "parameters": schema}
    if strict:
        function["strict"] = True
    return {"type": "function", "function": function}


def _anthropic(tool: Tool, description: str, schema: dict[str, Any], strict: bool) -> dict[str, Any]:
    out: dict[str, Any] = {"name": tool.name, "description": description, "input_schema": schema}
    if strict:
        out["strict"] = True
    return out


def _mcp(tool: Tool, description: str, schema: dict[str, Any], strict: bool) -> dict[str, Any]:
    title = tool.display_name or ""
    read_only = tool.tool_class is ToolClass.SAFE
    annotations: dict[str, Any] = {"readOnlyHint": read_only}
    if not read_only:  # the spec: meaningful only when readOnlyHint is false
        annotations["destructiveHint"] = tool.tool_class is ToolClass.DANGEROUS
    out: dict[str, Any] = {"name": tool.name}
    if title:
        out["title"] = title
        annotations["title"] = title
    out.update(description=description, inputSchema=schema, annotations=annotations)
    return out


def _responses(tool: Tool, description: str, schema: dict[str, Any], strict: bool) -> dict[str, Any]:
    return {
        "type": "function",
        "name": tool.name,
        "description": description,
        "parameters": schema,
        "strict": strict,
    }


def _gemini(tool: Tool, description: str, schema: dict[str, Any], strict: bool) -> dict[str, Any]:
    return {"name": tool.name, "description": description, "parameters": schema}


_SHAPES = {
    "openai": _openai,
    "anthropic": _anthropic,
    "mcp": _mcp,
    "responses": _responses,
    "gemini": _gemini,
}


def _anthropic_limits(optional: int, unions: int) -> dict[str, tuple[str, ...]]:
    reasons = []
    if optional > ANTHROPIC_MAX_OPTIONAL:
        reasons.append(
            f"the strict tools have {optional} optional properties in all; Anthropic accepts "
            f"{ANTHROPIC_MAX_OPTIONAL} per request (export fewer tools, or mark properties required)"
        )
    if unions > ANTHROPIC_MAX_UNIONS:
        reasons.append(
            f"the strict tools have {unions} union-typed properties in all; Anthropic accepts "
            f"{ANTHROPIC_MAX_UNIONS} per request"
        )
    return {"*": tuple(reasons)} if reasons else {}
