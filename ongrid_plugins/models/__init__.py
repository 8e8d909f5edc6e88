"""Value objects shared by the loaders, the registry, the gate and the executors.

All of them are frozen attrs classes built from checked data (loaders check raw
input first, then build these); none is ever built with ``Model(**raw)``, and none
holds a memo (what a stage remembers about one sits in a
:class:`~ongrid_plugins.models.sidetable.SideTable`). Import them from here; the modules
are split by job:

* :mod:`.base`: the JSON type, canonical JSON and the argument digests;
* :mod:`.permissions`: tool classes, permission modes, verdicts, decisions, personas;
* :mod:`.tools`: a tool and the sandbox it declares;
* :mod:`.skills`: roots, skills, problems and load reports;
* :mod:`.calls`: a call's request, events and result;

May import: nothing of the package outside this folder (the values stage).

Also here: :mod:`.sidetable`, the memos kept beside value objects (keyed by
identity, never inside them).
"""

from __future__ import annotations

from .base import JSON as JSON  # shared by most modules, not public API
from .base import args_digest, canonical_json, digest_json, sha256_hex
from .calls import CallRequest, CallResult, Event, Outcome, RemoteRun
from .calls import EventCallback as EventCallback
from .permissions import Decision, PermissionMode, Persona, ToolClass, Verdict
from .skills import Activation, LoadEvent, LoadReport, Problem, Requirements, Skill, SkillRoot
from .tools import LIMIT_NAMES as LIMIT_NAMES
from .tools import SandboxDecl, SandboxLimits, Tool

__all__ = [
    "Activation",
    "CallRequest",
    "CallResult",
    "Decision",
    "Event",
    "LoadEvent",
    "LoadReport",
    "Outcome",
    "PermissionMode",
    "Persona",
    "Problem",
    "RemoteRun",
    "Requirements",
    "SandboxDecl",
    "SandboxLimits",
    "Skill",
    "SkillRoot",
    "Tool",
    "ToolClass",
    "Verdict",
    "args_digest",
    "canonical_json",
    "digest_json",
    "sha256_hex",
]
