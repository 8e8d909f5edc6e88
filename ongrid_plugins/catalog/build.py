"""One catalog load: verify the locked packs, walk the roots, digest every skill, keep the last good.

::

    drifted = packs whose files differ from skills.lock     # one log line each, never read
    snapshot = loader.load(skip=drifted)                    # the walker, unchanged
    every skill and tool gets its digest                    # Skill.digest, Tool.entry_digest
    a manifest that broke since the previous snapshot       # its last good version stays,
                                                            # marked stale with the diagnostic
"""

from __future__ import annotations

import logging
import os
from types import MappingProxyType
from typing import TYPE_CHECKING

import attrs

from ..core.echo import printable
from ..discovery.registry import Snapshot, spelling
from ..errors import ConfigError
from ..models import LoadEvent, LoadReport, Skill
from ..packs.pipconsent import vet
from . import loader
from .capabilities import PackCapabilities, growth, tool_capabilities
from .digest import partial_warning, skill_digest
from .lock import consent_key, consent_problem, installed_folders, read_lock, unlocked_message, verify_pack
from .trust import Policy, check_signature, pack_digest, read_policy

if TYPE_CHECKING:
    import pluggy

    from ..settings import Settings

__all__ = ["catalog_dirs", "drifted_packs", "load_catalog", "with_digest"]

logger = logging.getLogger(__name__)

_BROKEN = ("parse_error", "build_error")


def load_catalog(
    pm: pluggy.PluginManager, settings: Settings, previous: Snapshot | None = None
) -> tuple[Snapshot, LoadReport]:
    """Load every root into a snapshot whose skills carry their digests.

    ``previous`` is the snapshot being replaced: a skill of it whose manifest
    now fails to load is kept, marked ``stale``. Never raises for a bad pack,
    root or manifest.
    """
    skip, drift_events, grants = _checked_packs(settings) if settings.include_defaults else ({}, [], {})
    roots = vet(pm, settings)  # pip packs without a consent are not roots
    for folder, (pack, caps) in (roots.grants if roots is not None else {}).items():
        grants[folder] = (pack, PackCapabilities.from_dict(caps))
    snapshot, report = loader.load(pm, settings, frozenset(skip), announce=previous is None)
    skills: dict[str, Skill] = {}
    events = list(drift_events) + list(report.events)
    for name, skill in snapshot.skills.items():
        skills[name] = digested = with_digest(skill)
        if digested.warnings and digested.warnings[-1].code == "digest_partial":
            warning = digested.warnings[-1]
            logger.warning('catalog: skill "%s": %s', name, warning.message)
            events.append(LoadEvent(skill.path, "warning", warning.message, name))
    if grants:
        events += withhold_grown(skills, grants)
    if previous is not None:
        events += _keep_last_good(previous, skills, report)
    tools = {tool.name: tool for skill in skills.values() for tool in skill.tools}
    aliases = {spelling(name): name for name in skills if spelling(name) != name}
    new = Snapshot(MappingProxyType(skills), MappingProxyType(tools), MappingProxyType(aliases))
    return new, LoadReport(len(skills), events, report.roots)


def catalog_dirs(dirs: list[str]) -> list[Skill]:
    """Load exactly these roots as the host does (digests included); the benchmark entry point."""
    from ..plugins import get_plugin_manager
    from ..settings import Settings

    settings = Settings(skill_dirs=tuple(dirs), include_defaults=False, load_entry_points=False)
    snapshot, _report = load_catalog(get_plugin_manager(settings), settings)
    return list(snapshot.skills.values())


def with_digest(skill: Skill) -> Skill:
    """``skill`` with :attr:`Skill.digest` and every tool's digests set from its files now."""
    digest = skill_digest(skill)
    files = {f.path: f.sha256 for f in digest.files if f.mode != "link" and f.sha256 != "missing"}
    folder = os.path.dirname(skill.path)
    tools = []
    for tool in skill.tools:
        entry = files.get(os.path.relpath(tool.entry, folder), "") if tool.entry else ""
        tools.append(attrs.evolve(tool, digest=digest.digest, entry_digest=entry))
    warnings = (*skill.warnings, partial_warning(skill, digest)) if digest.partial else skill.warnings
    return attrs.evolve(skill, digest=digest.digest, tools=tools, warnings=warnings)


def _keep_last_good(previous: Snapshot, skills: dict[str, Skill], report: LoadReport) -> list[LoadEvent]:
    """Put back the previous version of every skill whose manifest now fails; return their events."""
    by_path = {skill.path: skill for skill in previous.skills.values()}
    taken = {tool.name for skill in skills.values() for tool in skill.tools} | set(skills)
    events = []
    for event in report.events:
        old = by_path.get(event.path)
        if event.outcome not in _BROKEN or old is None or old.name in skills:
            continue
        names = {old.name, *(t.name for t in old.tools)}
        if names & taken:
            continue
        skills[old.name] = attrs.evolve(old, stale=event.message or event.outcome)
        taken |= names
        events.append(LoadEvent(old.path, "stale", event.message, old.name))
    return events


def drifted_packs(settings: Settings) -> tuple[dict[str, str], list[LoadEvent]]:
    """The installed packs that may not load: ``{canonical folder: pack}`` and their events.

    Each gets one warning: its files differ from ``skills.lock`` (naming the first
    differing file), it has no entry there (deleting the lock, or renaming a pack
    folder, must not turn the check off), its consent is missing or does not match
    its seal, or the trust policy refuses its signature. With an unreadable lock,
    every installed pack is refused (the lock cannot vouch for any).
    """
    skip, events, _grants = _checked_packs(settings)
    return skip, events


Grants = dict[str, tuple[str, PackCapabilities]]


def _checked_packs(settings: Settings) -> tuple[dict[str, str], list[LoadEvent], Grants]:
    packs_dir = settings.user_skills_dir
    try:
        entries = read_lock(packs_dir)
    except ConfigError as exc:
        refused, why = _refuse_all(packs_dir, str(exc))
        return refused, why, {}
    skip: dict[str, str] = {}
    events: list[LoadEvent] = []
    grants: Grants = {}
    entries = entries or {}

    def refuse(name: str, folder: str, message: str) -> None:
        logger.warning("catalog: %s", message)
        skip[os.path.realpath(folder)] = name
        events.append(LoadEvent(folder, "drift", message))

    for name in installed_folders(packs_dir):
        if name not in entries:
            refuse(name, os.path.join(packs_dir, name), unlocked_message(name))
    key = consent_key(settings.state_dir) if entries else None
    policy: Policy | None = None
    for name, entry in entries.items():
        folder = os.path.join(packs_dir, name)
        if not os.path.isdir(folder):
            continue
        drift = verify_pack(entry, folder)
        if drift:
            first = drift[0]
            more = f" (and {len(drift) - 1} more)" if len(drift) > 1 else ""
            refuse(
                name,
                folder,
                f"pack {name} does not match skills.lock: {first.change} file "
                f"{printable(os.path.join(folder, first.path))}"  # a name from the pack: no forged line
                f"{more}; its skills are not loaded (`ongrid-skills verify {name}` lists the drift, "
                "reinstalling the pack accepts it)",
            )
            continue
        digest = pack_digest(entry.files)
        problem = consent_problem(entry, key, digest)
        if not problem:
            if policy is None:
                policy = _policy(settings)
            problem = _signature_problem(folder, name, digest, policy, entry.consent)
        if problem:
            refuse(name, folder, printable(problem))
            continue
        assert entry.consent is not None
        grants[os.path.realpath(folder)] = (name, PackCapabilities.from_dict(entry.consent["capabilities"]))
    return skip, events, grants


def _policy(settings: Settings) -> Policy:
    try:
        return read_policy(settings.config_dir, settings.require_signed)
    except ConfigError as exc:
        # A policy that cannot be read trusts nobody: signed packs fail, and every pack
        # fails when signatures are required (the broken file may have asked for that).
        logger.warning("catalog: %s; no signer is trusted until it is fixed", exc)
        return Policy(require_signed=True, path=str(exc).split(":", 1)[0])


def _signature_problem(folder: str, name: str, digest: str, policy: Policy, consent: object) -> str:
    """Why the trust policy refuses the pack now ("" when it does not)."""
    known = consent.get("signature_sha256", "") if isinstance(consent, dict) else ""
    verdict = check_signature(folder, name, digest, policy, known if isinstance(known, str) else "")
    why = verdict.refused(policy, name)
    signer = consent.get("signer") if isinstance(consent, dict) else ""
    if not why and signer and verdict.signer != signer:
        why = f"it was consented as signed by {signer} and is now {verdict.signer or 'unsigned'}"
    return f"pack {name} is refused by the trust policy: {why}; its skills are not loaded" if why else ""


def withhold_grown(skills: dict[str, Skill], grants: Grants) -> list[LoadEvent]:
    """Make every tool that may do more than its pack's consent unavailable, saying what grew."""
    events = []
    home = os.path.expanduser("~").rstrip("/") + "/"
    for sname, skill in list(skills.items()):
        folder = skill.root.real or os.path.realpath(skill.root.path)
        granted = grants.get(folder)
        if granted is None:
            continue
        pack, caps = granted
        tools = list(skill.tools)
        for i, tool in enumerate(tools):
            now = tool_capabilities(tool, folder, home)
            before = caps.tools.get(tool.name)
            if now == before:  # the common case: what was consented, exactly
                continue
            grown = growth(
                PackCapabilities({tool.name: before} if before else {}), PackCapabilities({tool.name: now})
            )
            if tool.name not in grown:
                continue  # narrower than consented
            more = "; ".join(grown[tool.name])
            why = (  # packs.trusted.GROWN finds these words
                f"pack {pack} consented to less than tool {tool.name} now asks ({more}): "
                f"`ongrid-skills inspect {pack}` shows the diff, `ongrid-skills trust {pack}` consents"
            )
            logger.warning("catalog: %s", printable(why))
            events.append(LoadEvent(skill.path, "unavailable", why, sname))
            tools[i] = attrs.evolve(tool, unavailable=(*tool.unavailable, why))
        if any(a is not b for a, b in zip(tools, skill.tools, strict=True)):
            skills[sname] = attrs.evolve(skill, tools=tools)
    return events


def _refuse_all(packs_dir: str, why: str) -> tuple[dict[str, str], list[LoadEvent]]:
    skip: dict[str, str] = {}
    events = []
    for name in installed_folders(packs_dir):
        folder = os.path.join(packs_dir, name)
        message = f"pack {name} is not loaded: {why}"
        logger.warning("catalog: %s", message)
        skip[os.path.realpath(folder)] = name
        events.append(LoadEvent(folder, "drift", message))
    return skip, events
