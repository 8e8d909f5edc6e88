"""``skills-prompt``: the ``<available_skills>`` block for agents without MCP.

The Agent Skills client guide has a client put the skills a model may activate in its
system prompt, and the reference tool (``skills-ref to-prompt``, the ``agentskills``
command) writes this block::

    <available_skills>
    <skill>
    <name>
    pdf-processing
    </name>
    <description>
    Extract, fill, and assemble PDF documents.
    </description>
    <location>
    /home/me/.agents/skills/pdf-processing/SKILL.md
    </location>
    </skill>
    </available_skills>

:func:`skills_prompt` writes the same, line for line (name and description
HTML-escaped), for the skills a persona may use: prompt skills and tool skills both,
each with the manifest a model (or its file-read tool) reads to activate it. Left
out, as the guide says to hide filtered skills: skills whose every tool the persona
is denied, skills unavailable here, and skills with ``disable-model-invocation``.
"""

from __future__ import annotations

import html
from typing import TYPE_CHECKING

from ..models import Skill, Verdict

if TYPE_CHECKING:
    from ..gate.persona_lookup import PersonaLike
    from .hostlike import ExportingHost

__all__ = ["FORMAT", "skills_prompt", "usable_skills"]

FORMAT = "skills-prompt"


def usable_skills(host: ExportingHost, persona: PersonaLike) -> list[Skill]:
    """The skills ``persona`` may use: a prompt skill, or one with a tool it may call."""
    who = host.persona(persona)
    found = []
    for skill in host.skills():
        if not skill.model_invocable or not skill.available:
            continue
        tools = [t for t in skill.tools if t.available]
        if not skill.tools or any(host.decide(t, who).verdict is not Verdict.DENY for t in tools):
            found.append(skill)
    return found


def skills_prompt(host: ExportingHost, persona: PersonaLike = "operator") -> str:
    """The ``<available_skills>`` block of the skills ``persona`` may use, as
    ``skills-ref to-prompt`` writes it."""
    lines = ["<available_skills>"]
    for skill in usable_skills(host, persona):
        lines += ["<skill>", "<name>", html.escape(skill.name), "</name>"]
        lines += ["<description>", html.escape(skill.description), "</description>"]
        lines += ["<location>", skill.path, "</location>", "</skill>"]
    lines.append("</available_skills>")
    return "\n".join(lines)
