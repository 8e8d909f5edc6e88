"""The trust step of ``install`` and ``trust``: check the signature, show the capabilities, ask, seal.

:func:`review_pack` builds the :class:`Review` of a pack about to be installed (or
trusted): its signature verdict under the operator's policy, what its tools may do,
and, over an earlier consent, what grew. A refusal by the policy raises
:class:`~ongrid_plugins.packs.install.InstallError` before anything is asked.
:func:`consent_record` is the sealed record ``skills.lock`` keeps.
"""

from __future__ import annotations

import getpass
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import attrs

from ..catalog.capabilities import PackCapabilities, describe, diff_lines, folder_capabilities, growth
from ..catalog.lock import consent_key, seal, utc_now
from ..catalog.trust import Verdict, check_signature, pack_digest, read_policy
from ..errors import OngridError

if TYPE_CHECKING:
    import pluggy

    from ..settings import Settings

__all__ = ["ConsentError", "Review", "consent_record", "review_pack", "who"]


class ConsentError(OngridError):
    """A pack was refused by its trust policy or not consented; nothing was changed."""

    exit_code = 1


@attrs.frozen
class Review:
    """What a person is asked to consent to for one pack."""

    name: str
    version: str
    capabilities: PackCapabilities
    pack_digest: str
    verdict: Verdict
    previous: Mapping[str, Any] | None = None
    """The consent recorded before (a new version, or a changed entry-point pack), if any."""
    grown: Mapping[str, list[str]] = attrs.field(factory=dict)
    """What grew since :attr:`previous` (see :func:`..catalog.capabilities.growth`)."""

    @property
    def needs_consent(self) -> bool:
        """A first consent, or growth since the last one (narrowing is recorded without asking)."""
        return self.previous is None or bool(self.grown)

    def lines(self) -> list[str]:
        """The review in plain words: who signed it, what it may do, what grew."""
        label = f"{self.name} {self.version}".rstrip()
        signer = {
            "trusted": f"signed by {self.verdict.signer} (trusted)",
            "unsigned": "unsigned",
            "untrusted": f"signed by {self.verdict.signer}, who is not in your trust policy",
        }.get(self.verdict.status, self.verdict.status)
        out = [f"pack {label}: {signer}; content sha256:{self.pack_digest}"]
        out += [f"  {line}" for line in describe(self.capabilities)]
        if self.previous is not None:
            was = self.previous.get("version") or "(unversioned)"
            out.append(
                f"  since the consent for {was}: " + ("it asks for more:" if self.grown else "nothing grew")
            )
            out += [f"    + {line}" for line in diff_lines(self.grown)]
        return out

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {
            "name": self.name,
            "version": self.version,
            "pack_digest": self.pack_digest,
            "signature": self.verdict.to_dict(),
            "capabilities": self.capabilities.to_dict(),
            "capability_digest": self.capabilities.digest,
            "previous_version": None if self.previous is None else self.previous.get("version"),
            "grown": diff_lines(self.grown),
            "needs_consent": self.needs_consent,
        }


def who() -> str:
    """The person consenting: the login name (``getpass.getuser()``)."""
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "unknown"


def review_pack(
    top: str,
    name: str,
    version: str,
    files: Mapping[str, Mapping[str, str]],
    pm: pluggy.PluginManager,
    settings: Settings,
    previous: Mapping[str, Any] | None,
    plugins: tuple[str, ...] = (),
) -> Review:
    """The review of the pack in ``top`` (``files`` as the lock would pin them).

    :raises ConsentError: the trust policy refuses it (a bad signature, an unsigned pack where
        signatures are required, a pack named like another signer's), or it was signed by a
        trusted signer before and is not now.
    """
    digest = pack_digest(files)
    policy = read_policy(settings.config_dir, settings.require_signed)
    verdict = check_signature(top, name, digest, policy)
    refusal = verdict.refused(policy, name)
    if refusal:
        raise ConsentError(f"pack {name} is refused: {refusal}; nothing was changed")
    before = (previous or {}).get("signer") or ""
    if before and verdict.signer != before:
        message = f"pack {name} was signed by {before}; this one is {verdict.signer or 'unsigned'}"
        raise ConsentError(
            message
            + f": refused, nothing was changed (`ongrid-skills uninstall {name}` first if you mean it)"
        )
    caps = folder_capabilities(top, pm, settings, plugins)
    grown: dict[str, list[str]] = {}
    if previous is not None:
        grown = growth(PackCapabilities.from_dict(previous["capabilities"]), caps)
    return Review(name, version, caps, digest, verdict, previous, grown)


def consent_record(review: Review, settings: Settings, by: str) -> dict[str, Any]:
    """The sealed consent ``skills.lock`` keeps for ``review``."""
    record = {
        "version": review.version,
        "capabilities": review.capabilities.to_dict(),
        "capability_digest": review.capabilities.digest,
        "pack_digest": review.pack_digest,
        "signer": review.verdict.signer if review.verdict.status == "trusted" else "",
        "signature_sha256": review.verdict.sha256,
        "by": by,
        "at": utc_now(),
    }
    key = consent_key(settings.state_dir, create=True)
    if key is None:
        raise ConsentError(
            f"{settings.state_dir}/consent.key cannot be made or is not private (mode 0600); fix it"
        )
    record["mac"] = seal(key, review.name, record)
    return record
