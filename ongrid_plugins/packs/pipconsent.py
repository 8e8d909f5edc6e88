"""Pip packs wait for consent: :func:`vet` marks those without one ``unconsented`` before a load.

The plugin manager builds :class:`~.pack_roots.PackRoots` before anything of the catalog
exists (it may import only the core values), so the consents of pip packs, kept in
``skills.lock`` (``"pip"``), are checked here, once per :class:`PackRoots`, by the first
catalog load (and by the commands that list packs). A pip pack ran nothing when pip
installed it: ``ongrid-skills trust PACK`` is the first chance to show what it may do.
"""

from __future__ import annotations

import hmac
import logging
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import attrs

from ..catalog.lock import consent_key, pack_files, read_pip_consents, seal
from ..catalog.trust import Policy, check_signature, pack_digest, read_policy
from ..errors import ConfigError
from .pack_roots import PackInfo, PackRoots

if TYPE_CHECKING:
    import pluggy

    from ..settings import Settings

__all__ = ["pip_consent", "pip_files", "pip_signature_problem", "vet"]

logger = logging.getLogger("ongrid_plugins.packs")


def pip_files(folder: str) -> dict[str, dict[str, str]]:
    """The files of a pip pack's folder as a lock would pin them (``__pycache__`` aside)."""
    return {p: r for p, r in pack_files(folder).items() if "__pycache__" not in p.split("/")}


def pip_consent(
    record: Mapping[str, Any] | None, info: PackInfo, key: bytes | None
) -> Mapping[str, Any] | None:
    """The consent of pip pack ``info`` when its seal holds and it names the same distribution, else None."""
    if record is None or key is None or record.get("distribution") != info.distribution:
        return None
    consent = record["consent"]
    return consent if hmac.compare_digest(seal(key, info.name, consent), consent["mac"]) else None


def pip_signature_problem(info: PackInfo, settings: Settings, consent: Mapping[str, Any]) -> tuple[str, str]:
    """``(why the trust policy refuses pip pack info, its trusted signer)``; the files are hashed only
    when the pack carries a signature, the policy requires one, or it was consented as signed."""
    from ..catalog.trust import SIGNATURE

    try:
        policy = read_policy(settings.config_dir, settings.require_signed)
    except ConfigError as exc:
        policy = Policy(require_signed=True, path=str(exc))
    signed = os.path.lexists(os.path.join(info.path, SIGNATURE))
    if not (signed or policy.require_signed or policy.required_signers(info.name) or consent.get("signer")):
        return "", ""
    digest = pack_digest(pip_files(info.path))
    known = consent.get("signature_sha256", "") if digest == consent.get("pack_digest") else ""
    verdict = check_signature(info.path, info.name, digest, policy, str(known))
    why = verdict.refused(policy, info.name)
    if not why and consent.get("signer") and verdict.signer != consent["signer"]:
        why = f"it was consented as signed by {consent['signer']} and is now {verdict.signer or 'unsigned'}"
    return (f"refused by the trust policy: {why}; not loaded" if why else ""), (
        verdict.signer if verdict.status == "trusted" else ""
    )


def vet(pm: pluggy.PluginManager, settings: Settings) -> PackRoots | None:
    """Check the consents (and signatures) of the pip packs of ``pm`` once; return its :class:`PackRoots`.

    A pack without a sealed consent becomes ``unconsented``, one the trust policy refuses
    ``refused``; neither is a root. The plugin infos (``ongrid-skills plugins``) follow.
    """
    roots = pm.get_plugin("packs")
    if not isinstance(roots, PackRoots) or roots.vetted:
        return roots if isinstance(roots, PackRoots) else None
    roots.vetted = True
    if not any(info.status == "active" for info in roots.packs):
        return roots
    try:
        records = read_pip_consents(settings.user_skills_dir)
    except ConfigError as exc:
        logger.warning("skill packs: %s", exc)
        records = {}
    key = consent_key(settings.state_dir) if records else None
    roots.packs = [_vetted(roots, info, records, key, settings) for info in roots.packs]
    statuses = {info.name: info for info in roots.packs}
    infos = getattr(pm, "plugin_infos", None)
    if isinstance(infos, list):
        infos[:] = [
            attrs.evolve(i, status=statuses[i.name].status, error=statuses[i.name].error)
            if i.kind == "pack" and i.name in statuses and i.status == "active"
            else i
            for i in infos
        ]
    return roots


def _vetted(
    roots: PackRoots, info: PackInfo, records: Mapping[str, Any], key: bytes | None, settings: Settings
) -> PackInfo:
    if info.status != "active":
        return info
    consent = pip_consent(records.get(info.name), info, key)
    if consent is None:
        why = f"not loaded until you consent to what it may do: `ongrid-skills trust {info.name}`"
        logger.warning("skill packs: pack %s (distribution %s): %s", info.name, info.distribution, why)
        return attrs.evolve(info, status="unconsented", error=why)
    problem, signer = pip_signature_problem(info, settings, consent)
    if problem:
        logger.warning("skill packs: pack %s: %s", info.name, problem)
        return attrs.evolve(info, status="refused", error=problem)
    roots.grants[os.path.realpath(info.path)] = (info.name, consent["capabilities"])
    return attrs.evolve(info, signer=signer)
