"""``export``: the tool list in a model API's function-calling shape.

OpenAI Chat Completions, OpenAI Responses, Anthropic, MCP and Gemini (see
:mod:`ongrid_plugins.host.export`).
"""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING

from ..errors import StrictSchemaError
from ..host.export import FORMATS, PROMPT_FORMATS
from .argtypes import Subcommands, non_empty, output_file

if TYPE_CHECKING:
    from ..cli import Context

__all__ = ["register"]


def register(sub: Subcommands) -> None:
    """Add the ``export`` sub-command."""
    p = sub.add_parser("export", help="print the tools a persona may call as model-API tool definitions")
    p.add_argument(
        "--format",
        required=True,
        choices=FORMATS + PROMPT_FORMATS,
        help="the model API's tool shape: openai (chat completions), responses (OpenAI Responses API), "
        "anthropic, mcp, gemini (function declarations); or skills-prompt, the <available_skills> "
        "block of the skills the persona may use, for a system prompt",
    )
    p.add_argument(
        "--persona",
        default="operator",
        metavar="NAME|PATH",
        help="only the tools it may call (default: operator)",
    )
    p.add_argument(
        "--strict",
        action="store_true",
        help="rewrite the schemas for OpenAI (chat or responses) / Anthropic strict mode, "
        "or say per tool why one cannot be",
    )
    p.add_argument(
        "-o",
        "--output",
        type=non_empty("give a file name, or leave -o out for standard output"),
        metavar="FILE",
        help="write to FILE instead of standard output",
    )
    p.add_argument("--compact", action="store_true", help="one line of JSON, no indentation")
    p.set_defaults(handler=cmd_export)


def cmd_export(ctx: Context) -> int:
    args = ctx.args
    try:
        tools = ctx.host.export(args.format, persona=args.persona, strict=args.strict)
    except StrictSchemaError as exc:
        count = len(exc.problems)
        print(f"ERROR: {count} tool(s) cannot be exported in {exc.target}:", file=sys.stderr)
        for name, reasons in exc.problems.items():
            for reason in reasons:
                print(f"  {'(all tools)' if name == '*' else name}: {reason}", file=sys.stderr)
        fix = "export without --strict, or fix those schemas"
        fix = "fix those schemas" if exc.format == "gemini" else fix
        print(fix, file=sys.stderr)
        return exc.exit_code
    if isinstance(tools, str):  # skills-prompt: text for a system prompt
        text = tools
    else:
        text = json.dumps(tools, ensure_ascii=False, indent=None if args.compact else 2)
    if args.output:
        with output_file(args.output) as f:
            f.write(text + "\n")
    else:
        print(text)
    return 0
