"""Consent after install: ``ongrid-skills trust PACK`` and ``inspect PACK``, for installed and pip packs.

An installed pack's consent lives in its ``skills.lock`` entry; a pip pack's (an
``ongrid_skills`` entry point, not loaded until consented) in the lock's ``pip``
object, by entry point name, with its distribution and version. Both are sealed
(:func:`~ongrid_plugins.catalog.lock.seal`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from ..catalog.capabilities import PackCapabilities, describe, diff_lines, growth
from ..catalog.lock import (
    consent_key,
    consent_problem,
    pack_files,
    read_lock,
    read_pip_consents,
    verify_pack,
    write_entry,
    write_pip_consent,
)
from ..catalog.trust import check_signature, pack_digest, read_policy
from ..errors import ConfigError
from .archive import SKIP_SOURCE
from .consent import ConsentError, Review, consent_record, review_pack, who
from .pack_roots import PackInfo
from .pipconsent import pip_consent, pip_files, vet

if TYPE_CHECKING:
    from ..host.facade import SkillHost

#: The entry-point group of pluggy plugins (``ongrid_plugins.plugins.ENTRY_POINT_GROUP``; this
#: module comes before the plugin manager's in the pipeline, so it names it again).
PLUGIN_GROUP = "ongrid_plugins"

__all__ = ["dist_plugins", "pack_of_tool", "pack_state", "pack_states", "source_digest", "trust_pack"]


def source_digest(folder: str, name: str | None = None) -> tuple[str, str]:
    """``(pack name, content digest)`` of a pack folder as ``install`` would lock it (what ``sign`` signs)."""
    from .install import pack_identity

    if not os.path.isdir(folder):
        raise ConfigError(f"{folder} is not a pack folder")
    files = {p: r for p, r in pack_files(folder).items() if not SKIP_SOURCE & set(p.split("/"))}
    if name is None:
        name = pack_identity(folder, None, os.path.basename(folder.rstrip("/")))[0]
    return name, pack_digest(files)


def dist_plugins(distribution: str) -> tuple[str, ...]:
    """The ``ongrid_plugins`` entry points (pluggy plugins) ``distribution`` ships."""
    from importlib.metadata import entry_points

    found = []
    for ep in entry_points(group=PLUGIN_GROUP):
        dist = getattr(ep, "dist", None)
        if dist is not None and distribution and _norm(dist.name) == _norm(distribution):
            found.append(f"{ep.name} = {ep.value}")
    return tuple(found)


def _norm(name: str) -> str:
    return name.lower().replace("_", "-").replace(".", "-")


def _pip_info(host: SkillHost, name: str) -> PackInfo | None:
    roots = vet(host.pm, host.settings)
    packs = roots.packs if roots is not None else []
    return next((p for p in packs if p.name == name and p.path), None)


def trust_pack(host: SkillHost, name: str, ask: Callable[[Review], bool]) -> tuple[Review, str]:
    """Review pack ``name`` (installed, else pip), ask when it needs a yes, record the consent.

    Returns the review and the audit outcome (``consent``, ``reconsent`` or ``consent_narrowed``).

    :raises ConsentError: unknown pack, drifted files, refused by the policy, or no consent.
    """
    from .install import _locked  # the install lock: one writer of skills.lock at a time

    settings = host.settings
    user_dir = settings.user_skills_dir
    os.makedirs(user_dir, 0o755, exist_ok=True)
    with _locked(user_dir):
        entry = (read_lock(user_dir) or {}).get(name)
        info = None if entry is not None else _pip_info(host, name)
        if entry is None and info is None:
            raise ConsentError(
                f"no installed or pip pack named {name!r} (`ongrid-skills installed` lists them)"
            )
        key = consent_key(settings.state_dir)
        if entry is not None:
            folder = os.path.join(user_dir, name)
            drift = verify_pack(entry, folder)
            if drift:
                raise ConsentError(f"{drift[0]}: the pack does not match skills.lock; reinstall it instead")
            digest = pack_digest(entry.files)
            previous = entry.consent if not consent_problem(entry, key, digest) else None
            review = review_pack(folder, name, entry.version, entry.files, host.pm, settings, previous)
        else:
            assert info is not None
            previous = pip_consent(read_pip_consents(user_dir).get(name), info, key)
            files = pip_files(info.path)
            plugins = dist_plugins(info.distribution)
            review = review_pack(info.path, name, info.version, files, host.pm, settings, previous, plugins)
        if not ask(review) and review.needs_consent:
            raise ConsentError(f"pack {name}: consent was not given; nothing was changed")
        record = consent_record(review, settings, who())
        if entry is not None:
            import attrs

            write_entry(user_dir, name, attrs.evolve(entry, consent=record))
        else:
            assert info is not None
            body = {
                "distribution": info.distribution,
                "version": info.version,
                "path": info.path,
                "consent": record,
            }
            write_pip_consent(user_dir, name, body)
    outcome = "consent" if previous is None else "reconsent" if review.grown else "consent_narrowed"
    return review, outcome


def pack_state(host: SkillHost, name: str) -> dict[str, Any]:
    """What ``inspect`` shows: capabilities now, the recorded consent, what grew, the signature."""
    settings = host.settings
    user_dir = settings.user_skills_dir
    entry = (read_lock(user_dir) or {}).get(name)
    info = None if entry is not None else _pip_info(host, name)
    key = consent_key(settings.state_dir)
    if entry is not None:
        folder, version = os.path.join(user_dir, name), entry.version
        files: Mapping[str, Mapping[str, str]] = entry.files
        problem = consent_problem(entry, key, pack_digest(entry.files))
        consent = entry.consent if not problem else None
        plugins: tuple[str, ...] = ()
    elif info is not None:
        folder, version = info.path, info.version
        files = pip_files(folder)
        consent = pip_consent(read_pip_consents(user_dir).get(name), info, key)
        problem = (
            ""
            if consent
            else f"pip pack {name} is not loaded until you consent: `ongrid-skills trust {name}`"
        )
        plugins = dist_plugins(info.distribution)
    else:
        raise ConsentError(f"no installed or pip pack named {name!r} (`ongrid-skills installed` lists them)")
    from ..catalog.capabilities import folder_capabilities

    caps = folder_capabilities(folder, host.pm, settings, plugins)
    verdict = check_signature(
        folder, name, pack_digest(files), read_policy(settings.config_dir, settings.require_signed)
    )
    grown = growth(PackCapabilities.from_dict(consent["capabilities"]), caps) if consent else {}
    label = f"{name} {version}".rstrip()
    lines = [f"pack {label} ({'installed' if entry is not None else 'pip'}) in {folder}"]
    lines.append(f"  signature: {verdict.status}" + (f", signer {verdict.signer}" if verdict.signer else ""))
    if consent:
        given = f"{consent['by']} at {consent['at']} for {consent['version'] or '(unversioned)'}"
        lines.append(f"  consent: given by {given}")
    else:
        lines.append(f"  consent: none ({problem})")
    lines += [f"  {line}" for line in describe(caps)]
    if grown:
        lines.append(f"  asks for more than was consented (`ongrid-skills trust {name}` to consent):")
        lines += [f"    + {line}" for line in diff_lines(grown)]
    return {
        "name": name,
        "version": version,
        "kind": "installed" if entry is not None else "pip",
        "path": folder,
        "signature": verdict.to_dict(),
        "consent": dict(consent) if consent else None,
        "consent_problem": problem,
        "capabilities": caps.to_dict(),
        "grown": diff_lines(grown),
        "lines": lines,
    }


GROWN = "consented to less than tool"
"""The words :func:`~ongrid_plugins.catalog.build.withhold_grown` puts in a grown tool's reason."""


def pack_states(host: SkillHost) -> dict[str, dict[str, Any]]:
    """Every loaded pack's signer and consent, by canonical folder: what REST and the console show.

    Only packs that loaded are here, and a pack loads only with a sealed consent and a
    signature its policy accepts, so the lock's record is what was checked.
    """
    settings = host.settings
    states: dict[str, dict[str, Any]] = {}
    try:
        entries = read_lock(settings.user_skills_dir) or {}
        pip = read_pip_consents(settings.user_skills_dir)
    except ConfigError:
        return states
    for name, entry in entries.items():
        if entry.consent is not None:
            folder = os.path.realpath(os.path.join(settings.user_skills_dir, name))
            states[folder] = _state(name, "installed", entry.consent.get("signer") or "", entry.consent)
    roots = vet(host.pm, host.settings)
    for info in roots.packs if roots is not None else []:
        record = pip.get(info.name)
        if info.status == "active" and record is not None:
            states[os.path.realpath(info.path)] = _state(info.name, "pip", info.signer, record["consent"])
    return states


def _state(name: str, kind: str, signer: str, consent: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "name": name,
        "kind": kind,
        "signer": signer,
        "signed": bool(signer),
        "consent": "given",
        "consent_version": consent.get("version", ""),
        "consented_by": consent.get("by", ""),
        "consented_at": consent.get("at", ""),
    }


def pack_of_tool(
    host: SkillHost, states: Mapping[str, Mapping[str, Any]], tool: Any
) -> dict[str, Any] | None:
    """The pack state of ``tool`` (None when it comes from no pack); ``consent`` is ``needed`` for
    a tool withheld because it grew since the consent."""
    skill = host.registry.snapshot.skills.get(tool.skill)
    if skill is None:
        return None
    state = states.get(skill.root.real or os.path.realpath(skill.root.path))
    if state is None:
        return None
    grown = any(GROWN in reason for reason in tool.unavailable)
    return {**state, "consent": "needed" if grown else "given"}
