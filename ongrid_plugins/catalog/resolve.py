"""Resolve: which skills to mount for one user message.

For every registered skill, in name order:

* unavailable skills (a missing binary, variable, config key) are left out, and so
  are skills only a user may invoke (``disable-model-invocation: true``);
* activation ``always`` (the default, and what an unknown mode means) keeps the
  skill; ``keyword`` keeps it when one of its keywords is a case-insensitive
  substring of the message;
* its tools are narrowed to the available ones the persona may call (the gate's
  verdict is not ``deny``); a skill that had tools and has none left is dropped,
  a prompt skill (no tools at all) is kept.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import attrs

from ..models import Skill, Tool

__all__ = ["ResolvedSkill", "resolve"]


def _tools(value: Iterable[Tool]) -> tuple[Tool, ...]:
    return tuple(value)


@attrs.frozen
class ResolvedSkill:
    """A skill to mount for a message, with the tools the persona may call."""

    skill: Skill
    tools: tuple[Tool, ...] = attrs.field(converter=_tools)
    reason: str
    """Why it was kept: ``always`` or ``keyword "disk"``."""

    @property
    def name(self) -> str:
        """The skill's name."""
        return self.skill.name

    def to_dict(self) -> dict[str, Any]:
        """What a host shows a model: no body, no paths (see ``SkillHost.instructions``)."""
        skill = self.skill
        return {
            "name": skill.name,
            "display_name": skill.display_name or skill.name,
            "description": skill.description,
            "when_to_use": skill.when_to_use,
            "reason": self.reason,
            "prompt_only": not skill.tools,
            "tools": [
                {
                    "name": tool.name,
                    "description": tool.description,
                    "when_to_use": tool.when_to_use,
                    "class": tool.tool_class.value,
                    "schema": tool.schema,
                }
                for tool in self.tools
            ],
        }


def resolve(
    skills: Iterable[Skill], query: str, allowed: Callable[[Tool], bool] | None = None
) -> list[ResolvedSkill]:
    """The skills to mount for ``query``; ``allowed`` says which tools the persona may call."""
    mounted: list[ResolvedSkill] = []
    for skill in sorted(skills, key=_name):
        if not skill.available or not skill.model_invocable:
            continue
        reason = skill.activation.match(query)
        if reason is None:
            continue
        tools = [t for t in skill.tools if t.available and (allowed is None or allowed(t))]
        if skill.tools and not tools:
            continue
        mounted.append(ResolvedSkill(skill, tools, reason))
    return mounted


def _name(skill: Skill) -> str:
    return skill.name
