"""ongrid-plugins: load LLM-agent skills from skill.json, SKILL.md and pip packs, run them safely.

The public API is what ``__all__`` lists; plugins write
``from ongrid_plugins import hookimpl``.
"""

from __future__ import annotations

from .catalog.instructions import Instructions, Resource
from .catalog.resolve import ResolvedSkill
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
    PackLoadError,
    PermissionDenied,
    PluginLoadError,
    ResourceRefused,
    SkillUnavailable,
    StrictSchemaError,
    UnknownPersona,
    UnknownSkill,
)
from .hookspecs import hookimpl, hookspec
from .host.facade import SkillHost
from .models import (
    Activation,
    CallRequest,
    CallResult,
    Decision,
    Event,
    LoadEvent,
    LoadReport,
    PermissionMode,
    Persona,
    Problem,
    Requirements,
    Skill,
    SkillRoot,
    Tool,
    ToolClass,
    Verdict,
)
from .plugins import PluginInfo, get_plugin_manager
from .settings import Settings

__all__ = [
    "Activation",
    "ApprovalError",
    "ApprovalRequired",
    "AuditError",
    "CallRequest",
    "CallResult",
    "ConfigError",
    "ConfirmationRequired",
    "Decision",
    "Event",
    "Instructions",
    "InvalidArguments",
    "LoadEvent",
    "LoadReport",
    "ManifestBuildError",
    "ManifestError",
    "ManifestParseError",
    "OngridError",
    "PackLoadError",
    "PermissionDenied",
    "PermissionMode",
    "Persona",
    "PluginInfo",
    "PluginLoadError",
    "Problem",
    "Requirements",
    "ResolvedSkill",
    "Resource",
    "ResourceRefused",
    "Settings",
    "Skill",
    "SkillHost",
    "SkillRoot",
    "SkillUnavailable",
    "StrictSchemaError",
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


def __getattr__(name: str) -> str:
    if name == "__version__":  # read from the package metadata on first use (see ``_version``)
        from .core import version as _version

        return _version.__version__
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
