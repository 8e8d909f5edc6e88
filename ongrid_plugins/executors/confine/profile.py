"""The profile of a call: what the kernel will let one tool call see and do.

Computed from three things and nothing else:

1. the tool's class (``safe`` reads only; ``mutating`` / ``dangerous`` may write),
2. its ``sandbox`` declaration (:class:`~ongrid_plugins.models.SandboxDecl`),
3. the operator's policy (:class:`~ongrid_plugins.settings.Settings`: ``sandbox``,
   ``sandbox_policy``, ``sandbox_caps``).

=================================  =====================  ======================  =============
                                   reads                  writes                  network
=================================  =====================  ======================  =============
always (every class)               everything but hidden  private temp folder     --
``safe``                           + declared ``read``    nothing else            if declared
mutating/dangerous, declared       + declared ``read``    + declared ``write``    if declared
mutating/dangerous, undeclared     (as above)             everything but hidden   yes
... under ``strict`` policy        (as above)             nothing else            no
=================================  =====================  ======================  =============

"Hidden" is the host's own state, config and cache folders, the system and user
skill roots (but the skill's own folder: its top folder below the root), the secrets of
the invoking user's home (``~/.ssh``, ``~/.gnupg``, ``~/.aws``, ``~/.config``,
``~/.netrc``, ``~/.docker``, ``~/.kube``) and of the system (``/etc/shadow``,
``/etc/gshadow``, ``/etc/sudoers``, SSH host keys) unless a declared ``read`` path
names them. A profile is a value: the host binds it into the call request,
the audit row and the approval ticket (:attr:`Profile.digest`).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import attrs

from ...models import LIMIT_NAMES, SandboxDecl, ToolClass
from ...settings import DEFAULT_SANDBOX_LIMITS

if TYPE_CHECKING:
    from ...models import Tool
    from ...settings import Settings

__all__ = [
    "HOME_SECRETS",
    "SYSTEM_SECRETS",
    "Profile",
    "hidden_paths",
    "profile_for",
    "secret_paths",
    "system_secrets",
]

logger = logging.getLogger("ongrid_plugins.sandbox")
_warned_off = False

HOME_SECRETS = (".ssh", ".gnupg", ".aws", ".config", ".netrc", ".docker", ".kube")
"""Entries of the invoking user's home a skill never reads unless it declares them."""
SYSTEM_SECRETS = (
    "/etc/shadow",
    "/etc/shadow-",
    "/etc/gshadow",
    "/etc/gshadow-",
    "/etc/sudoers",
    "/etc/sudoers.d",
    "/etc/security/opasswd",
)
"""System files a skill never reads unless it declares them (with SSH host keys)."""


def system_secrets() -> list[str]:
    """The :data:`SYSTEM_SECRETS` and SSH host keys present on this machine."""
    return [p for p in secret_paths() if os.path.lexists(p)]


def secret_paths() -> list[str]:
    """Where system secrets are or may appear: :data:`SYSTEM_SECRETS`, whether present or
    not, and the SSH host keys present (``/etc/ssh/ssh_host_*key``, as ``glob`` matches
    them). One listing and no ``stat``: the spawning thread checks them on every call."""
    try:
        names = os.listdir(_SSH)
    except OSError:
        return list(SYSTEM_SECRETS)
    keys = [f"{_SSH}/{n}" for n in names if n.startswith("ssh_host_") and n.endswith("key") and len(n) >= 12]
    keys.sort()
    return [*SYSTEM_SECRETS, *keys]


_SSH = "/etc/ssh"


def _tuple(value: Any) -> tuple[str, ...]:
    return tuple(value)


@attrs.frozen
class Profile:
    """What one call of one tool may do, as the kernel will enforce it."""

    confined: bool
    """False under ``ONGRID_SANDBOX=off`` (then ``reason`` says so)."""
    tool_class: str
    network: bool = False
    write_all: bool = False
    """Writes anywhere but the hidden folders (undeclared mutating tools, default policy)."""
    read: tuple[str, ...] = attrs.field(default=(), converter=_tuple)
    """Declared read paths, granted on top of the read-everything-but-hidden base."""
    write: tuple[str, ...] = attrs.field(default=(), converter=_tuple)
    hidden: tuple[str, ...] = attrs.field(default=(), converter=_tuple)
    skill_dir: str = ""
    limits: Mapping[str, int] = attrs.field(factory=dict)
    declared: bool = False
    reason: str = ""
    """Why the call runs unconfined, when it does."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (``show --json``, the audit row, the ticket binding)."""
        if not self.confined:
            return {"confined": False, "reason": self.reason}
        return {
            "confined": True,
            "class": self.tool_class,
            "declared": self.declared,
            "network": self.network,
            "read": ["(everything but the hidden folders)", *self.read],
            "write": ["(everything but the hidden folders)"]
            if self.write_all
            else ["(private temp)", *self.write],
            "hidden": list(self.hidden),
            "limits": dict(self.limits),
        }

    @property
    def digest(self) -> str:
        """sha256 of the canonical profile: a ticket approved for one profile covers no other."""
        text = json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()

    def describe(self) -> list[str]:
        """The profile in words, one line per rule (``ongrid-skills show``)."""
        if not self.confined:
            return [f"unconfined: {self.reason}"]
        lines = [
            "reads: everything except the host's state, config, cache, other skill roots and home secrets"
        ]
        lines += [f"reads also: {path}" for path in self.read]
        if self.write_all:
            lines.append(
                "writes: anywhere except the hidden folders (undeclared mutating tool, default policy)"
            )
        else:
            lines.append("writes: only its private /tmp" + (", and:" if self.write else ""))
            lines += [f"  {path}" for path in self.write]
        lines.append("network: " + ("allowed" if self.network else "none (no socket of any family)"))
        lines.append("limits: " + ", ".join(f"{k}={v}" for k, v in self.limits.items()))
        lines.append("every process it starts dies with the call; no capabilities, no new privileges")
        return lines


def _within(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def hidden_paths(settings: Settings, home: str | None = None) -> tuple[str, ...]:
    """The host's own folders a skill must never see, canonical where they exist."""
    home = home if home is not None else os.path.expanduser("~")
    candidates = [
        settings.state_dir,
        settings.config_dir,
        settings.cache_dir or "",
        settings.user_skills_dir,
        settings.system_skills_dir,
        getattr(settings, "audit_key_file", None) or "",  # the audit log's HMAC key
        getattr(settings, "approvals_token_file", "") or "",  # the bearer token for shared approvals
        getattr(settings, "remote_key_file", "") or "",  # signs remote tasks and results
        *getattr(settings, "persona_dirs", ()),  # who may do what: a skill that wrote there would decide
    ]
    if home and home != "/":
        candidates += [os.path.join(home, name) for name in HOME_SECRETS]
        candidates += system_secrets()
    seen: list[str] = []
    for path in candidates:
        if not path or not os.path.isabs(path):
            continue
        for form in {os.path.normpath(path), os.path.realpath(path)}:
            if form != "/" and form not in seen:
                seen.append(form)
    return tuple(seen)


def _own_folder(tool: Tool) -> str:
    """The folder a skill may always read: its top folder below its root.

    For ``root/pack/skill/`` that is ``root/pack``, so the helpers a pack keeps beside
    its skills stay readable while the other packs of a shared root stay hidden. A root
    that is a Python package (a pip-installed pack: ``ongrid_pack_disk/``) is one pack,
    whose helpers sit beside its skill folders (``ongrid_pack_disk/_walk.py``): the
    root itself. (Under a private ``/tmp`` nothing else of it would be there.)
    """
    if not tool.cwd:
        return ""
    folder = os.path.realpath(tool.cwd)
    root = tool.root.rstrip("/")
    if root and folder.startswith(root + "/"):
        if os.path.isfile(os.path.join(root, "__init__.py")):
            return root
        top = folder[len(root) + 1 :].split("/", 1)[0]
        return f"{root}/{top}"
    return folder


def _limits(decl: SandboxDecl | None, settings: Settings) -> dict[str, int]:
    declared = decl.limits.to_dict() if decl is not None else {}
    caps = settings.sandbox_caps
    out = {}
    for name in LIMIT_NAMES:
        value = declared.get(name, DEFAULT_SANDBOX_LIMITS[name])
        out[name] = min(value, caps.get(name, value))
    return out


def profile_for(tool: Tool, settings: Settings) -> Profile:
    """The profile of every call of ``tool`` under ``settings``."""
    if settings.sandbox == "off":
        global _warned_off
        if not _warned_off:
            _warned_off = True
            logger.warning(
                "sandbox: ONGRID_SANDBOX=off: skills run with the host's full authority "
                "(they can read its approvals, audit log and tokens); see docs/sandbox.md"
            )
        return Profile(False, tool.tool_class.value, reason="ONGRID_SANDBOX=off")
    decl = tool.sandbox
    safe = tool.tool_class is ToolClass.SAFE
    undeclared_reach = not safe and decl is None and settings.sandbox_policy == "default"
    network = undeclared_reach or bool(decl is not None and decl.network)
    skill_dir = _own_folder(tool)
    hidden = hidden_paths(settings)
    read = tuple(decl.read) if decl is not None else ()
    write = tuple(decl.write) if decl is not None and not safe else ()
    # A declaration may reach into the home secrets, never into the host's own state
    # (the loader refuses such paths; this is the second line). A declared folder that
    # holds a hidden one is granted without it (see plan.py).
    state = hidden_paths(attrs.evolve(settings, skill_dirs=(), env_dirs=()), home="")
    read = tuple(p for p in read if not any(_within(p, h) for h in state))
    write = tuple(p for p in write if not any(_within(p, h) for h in state))
    return Profile(
        True,
        tool.tool_class.value,
        network=network,
        write_all=undeclared_reach,
        read=read,
        write=write,
        hidden=hidden,
        skill_dir=skill_dir,
        limits=_limits(decl, settings),
        declared=decl is not None,
    )
