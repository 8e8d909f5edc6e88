"""Skill-level views for ``list --skills``, ``show NAME`` (prompt skills) and ``show --body``."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

from ..models import Skill
from . import UsageError
from .output import first_line, for_terminal, print_field, print_json, print_table, printable

if TYPE_CHECKING:
    from ..cli import Context

__all__ = [
    "described",
    "hidden_note",
    "list_skills",
    "not_loaded",
    "print_prompt_skills",
    "prompt_skills",
    "show_instructions",
    "show_skill",
    "summary",
    "untrusted_note",
]


def described(description: str, unavailable: tuple[str, ...], stale: str = "") -> str:
    """The first line of a description, or why the thing is unavailable or stale."""
    if unavailable:
        return "UNAVAILABLE: " + "; ".join(unavailable)
    if stale:
        return "STALE (last good version): " + first_line(stale)
    return first_line(description)


def list_skills(ctx: Context) -> int:
    """``list --skills``: every skill, its tools (none for prompt skills) and where it is from."""
    if ctx.args.persona or ctx.args.category or ctx.args.tool_class:
        message = "--persona, --category and --class filter tools, not skills: drop --skills"
        message += " (or see `ongrid-skills resolve QUERY --persona P`)"
        raise UsageError(message)
    skills = [s for s in ctx.host.skills() if ctx.args.all or s.available]
    refused = not_loaded(ctx)
    if ctx.args.json:
        print_json({"items": [summary(s) for s in skills], "total": len(skills), "not_loaded": refused})
        return 0
    for item in refused:
        print(f"{item['path']}: not loaded: {item['reason']} (trust it with `{item['hint']}`)")
    if not skills:
        print(f"no skills registered (see `{ctx.command('-v', 'list', '--skills')}` for what the loader did)")
        return 0
    rows = [
        (
            s.name,
            ", ".join(t.name for t in s.tools) or "(prompt)",
            s.provenance,
            described(s.description, s.unavailable, s.stale),
        )
        for s in skills
    ]
    print_table(("SKILL", "TOOLS", "FROM", "DESCRIPTION"), rows)
    return 0


def not_loaded(ctx: Context) -> list[dict[str, str]]:
    """The SKILL.md files of an untrusted project's ``.agents/skills``, which do not load."""
    from ..discovery.agent_skills import project_folder, untrusted

    settings = ctx.host.settings
    hint = f"ongrid-skills trust-folder {project_folder(settings)}"
    return [{"path": path, "reason": "folder not trusted", "hint": hint} for path in untrusted(settings)]


def untrusted_note(ctx: Context) -> None:
    """Say on stderr that an untrusted project's skills were not loaded, and how to trust it."""
    refused = not_loaded(ctx)
    if refused and not ctx.args.json:
        print(
            f"{len(refused)} skill(s) in {refused[0]['path'].rsplit('/', 2)[0]} not loaded: "
            "folder not trusted "
            f"(trust it with `{refused[0]['hint']}`)",
            file=sys.stderr,
        )


def prompt_skills(ctx: Context) -> list[Skill]:
    """The skills without tools ``list`` shows in their own section (unavailable ones with ``--all``)."""
    return [s for s in ctx.host.skills() if not s.tools and (ctx.args.all or s.available)]


def print_prompt_skills(ctx: Context, skills: list[Skill], *, after_tools: bool) -> None:
    """The prompt-skill section of ``list``: they are not tools, so not in the tool table."""
    if not skills:
        return
    if after_tools:
        print()
    rows = [(s.name, s.provenance, described(s.description, s.unavailable)) for s in skills]
    print_table(("PROMPT SKILL", "FROM", "DESCRIPTION"), rows)
    print(
        f"read one with `{ctx.command('show', 'NAME', '--body')}`; "
        f"every skill: `{ctx.command('list', '--skills')}`",
        file=sys.stderr,
    )


def hidden_counts(ctx: Context) -> tuple[int, int]:
    """How many tools and prompt skills are registered but unavailable here."""
    snapshot = ctx.host.registry.snapshot
    tools = sum(1 for t in snapshot.tools.values() if not t.available)
    prompts = sum(1 for s in snapshot.skills.values() if not s.tools and not s.available)
    return tools, prompts


def nothing_listed(ctx: Context) -> None:
    """What ``list`` says when it shows no tool and no prompt skill: whether any are registered."""
    hidden = sum(hidden_counts(ctx))
    if hidden and not ctx.args.all:
        print(
            f"no tool or skill is available here: {hidden} registered but unavailable "
            f"(see `{ctx.command('list', '--all')}` for what they are missing)"
        )
    else:
        print(f"no tools or skills registered (see `{ctx.command('-v', 'list')}` for what the loader did)")


def hidden_note(ctx: Context) -> None:
    """Say on stderr how many unavailable tools and skills ``list`` left out, and how to see them."""
    if ctx.args.all or ctx.args.json:
        return
    tools, prompts = hidden_counts(ctx)
    if tools or prompts:
        print(
            f"{tools} unavailable tool(s) and {prompts} unavailable prompt skill(s) not shown: "
            f"see `{ctx.command('list', '--all')}` for what they are missing",
            file=sys.stderr,
        )


def show_skill(ctx: Context) -> int:
    """``show NAME`` for a skill that is not also a tool (a prompt skill, say)."""
    skill = ctx.host.skill(ctx.args.name)
    data = skill.to_dict()
    if ctx.args.json:
        print_json(data)
        return 0
    for key in (
        "name",
        "display_name",
        "description",
        "when_to_use",
        "format",
        "version",
        "path",
        "provenance",
        "digest",
    ):
        value = data.get(key)
        if value not in (None, "", []) and not (key == "display_name" and value == skill.name):
            print_field(key, value)  # a multi-line value (a YAML block description) stays in its column
    print_field("tools", ", ".join(data["tools"]) or "(none: a prompt skill)")
    print_field("activation", _activation(skill))
    if skill.stale:
        print_field("stale", f"{skill.stale} (the last good version is registered)")
    if skill.unavailable:
        print_field("unavailable", "; ".join(skill.unavailable))
    for warning in skill.warnings:
        print_field("warning", warning.message)
    print(f"see `{ctx.command('show', skill.name, '--body')}` for its instructions")
    return 0


def show_instructions(ctx: Context) -> int:
    """``show NAME --body`` / ``--file PATH``: read the instructions or one file now."""
    instructions = ctx.host.instructions(ctx.args.name)
    if ctx.args.file:
        text = instructions.read_text(ctx.args.file)
        if ctx.args.json:
            print_json({"skill": instructions.skill, "path": ctx.args.file, "text": text})
        else:
            sys.stdout.write(for_terminal(text, sys.stdout))
        return 0
    if ctx.args.json:
        print_json(instructions.to_dict())
        return 0
    body = instructions.body if instructions.body.endswith("\n") else instructions.body + "\n"
    sys.stdout.write(for_terminal(body, sys.stdout))
    if instructions.resources:
        print("\nfiles:", file=sys.stderr)
        for res in instructions.resources:
            state = f"REFUSED: {res.refused}" if res.refused else f"{res.size} bytes"
            print(f"  {printable(res.path)}  ({printable(state)})", file=sys.stderr)
    return 0


def _activation(skill: Skill) -> str:
    activation = skill.activation
    if activation.mode == "keyword":
        return "keyword: " + ", ".join(activation.keywords)
    return activation.mode


def summary(skill: Skill) -> dict[str, Any]:
    """A skill as one ``list --json`` item."""
    return {
        "name": skill.name,
        "display_name": skill.display_name or skill.name,
        "description": skill.description,
        "when_to_use": skill.when_to_use,
        "format": skill.format,
        "tools": [t.name for t in skill.tools],
        "provenance": skill.provenance,
        "available": skill.available,
        "unavailable": list(skill.unavailable),
        "digest": skill.digest,
        "stale": skill.stale,
    }
