"""ongrid-plugins: load LLM-agent skills from skill.json, SKILL.md and pip packs, run them safely.

The public API is what ``__all__`` lists; plugins write
``from ongrid_plugins import hookimpl``.
"""

from __future__ import annotations

from .errors import (
    ApprovalError,
    ApprovalRequired,
    AuditError,
    ConfigError,
    ConfirmationRequired,
    InvalidArguments,
    ManifestBuildError,
    ManifestError,
    ManifestParseError,
    OngridError,
    PermissionDenied,
    PluginLoadError,
    SkillUnavailable,
    UnknownPersona,
    UnknownSkill,
)
from .hookspecs import hookimpl, hookspec
from .host import SkillHost
from .models import (
    CallRequest,
    CallResult,
    Decision,
    Event,
    LoadEvent,
    LoadReport,
    PermissionMode,
    Persona,
    Problem,
    Skill,
    SkillRoot,
    Tool,
    ToolClass,
    Verdict,
)
from .plugins import PluginInfo, get_plugin_manager
from .settings import Settings

__version__ = "0.1.0"

__all__ = [
    "ApprovalError",
    "ApprovalRequired",
    "AuditError",
    "CallRequest",
    "CallResult",
    "ConfigError",
    "ConfirmationRequired",
    "Decision",
    "Event",
    "InvalidArguments",
    "LoadEvent",
    "LoadReport",
    "ManifestBuildError",
    "ManifestError",
    "ManifestParseError",
    "OngridError",
    "PermissionDenied",
    "PermissionMode",
    "Persona",
    "PluginInfo",
    "PluginLoadError",
    "Problem",
    "Settings",
    "Skill",
    "SkillHost",
    "SkillRoot",
    "SkillUnavailable",
    "Tool",
    "ToolClass",
    "UnknownPersona",
    "UnknownSkill",
    "Verdict",
    "__version__",
    "get_plugin_manager",
    "hookimpl",
    "hookspec",
]
