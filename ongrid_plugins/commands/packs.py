"""``install``, ``uninstall`` and ``installed``: packs in the user skills dir, and pip packs."""

from __future__ import annotations

import argparse
import json
import os
import signal
from typing import TYPE_CHECKING, Any

from ..core.echo import echo
from ..packs import PackInfo, installed_packs
from .argtypes import Subcommands
from .output import print_table, printable

if TYPE_CHECKING:
    from ..cli import Context
    from ..packs.install import InstallResult

# ..packs.install (tarfile, zipfile, hashlib, tempfile: ~10 ms) is imported by the
# handlers that need it, not whenever the CLI builds its parser.

__all__ = ["register"]


def register(sub: Subcommands) -> None:
    """Add the ``install``, ``uninstall`` and ``installed`` sub-commands."""
    p = sub.add_parser(
        "install",
        help="install a pack (folder, .tar.gz or .zip) into the user skills dir",
        description="Unpack, validate and atomically install a pack of skills into the user skills "
        "dir. Over an installed pack of the same name (only with --replace), the old one stays until "
        "the new one is valid.",
    )
    p.add_argument("path", metavar="PATH", help="a pack folder, or a .tar.gz / .tgz / .tar / .zip of one")
    p.add_argument(
        "--name",
        type=_pack_name,
        help="install under this name (default: pack.json's name, else the folder's)",
    )
    p.add_argument("--strict", action="store_true", help="refuse a pack with warnings too")
    p.add_argument(
        "--require-digest",
        metavar="SHA256",
        help="refuse the archive unless its sha256 is this one (hex, `sha256:` prefix allowed)",
    )
    p.add_argument("--replace", action="store_true", help="replace an installed pack of the same name")
    p.add_argument("--yes", action="store_true", help="consent to what the pack may do without asking")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(handler=cmd_install)

    p = sub.add_parser("uninstall", help="remove a pack installed with `install`")
    p.add_argument("name", metavar="NAME")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(handler=cmd_uninstall)

    p = sub.add_parser(
        "verify",
        help="check installed packs against skills.lock (exit 1 on drift or an unlocked pack)",
        description="Compare every file of the installed packs (or of PACK) with skills.lock and print "
        "what changed, was added or was removed. Exit 0 when all match, 1 on any drift or on an "
        "installed pack that skills.lock does not list (its skills are not loaded either).",
    )
    p.add_argument("pack", metavar="PACK", nargs="?", help="only this pack")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(handler=cmd_verify)

    p = sub.add_parser("installed", help="list installed packs: from `install` and from pip")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(handler=cmd_installed)


def _interrupt(signum: int, _frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def _pack_name(text: str) -> str:
    """``--name``: not empty (an empty one meant "the default" before), and shown cut when refused."""
    from ..packs.install import name_problem  # only when --name is given: the module is slow to import

    if not text.strip():
        raise argparse.ArgumentTypeError(
            "must not be empty: give a name, or leave --name out for the pack's own"
        )
    problem = name_problem(text)
    if problem:
        raise argparse.ArgumentTypeError(f"{echo(text)} {problem}")
    return text


def cmd_install(ctx: Context) -> int:
    from ..packs.consent import ConsentError
    from ..packs.install import install_pack
    from .packtrust import asker, audit_trust

    args = ctx.args
    host = ctx.host
    again = " ".join(["ongrid-skills install", *(["--replace"] if args.replace else []), args.path])
    # SIGTERM (kill, systemd, a CI timeout) unwinds like Ctrl-C, so the staging folder
    # is removed now rather than by the next install.
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        result = install_pack(
            args.path,
            host.pm,
            host.settings,
            name=args.name,
            strict=args.strict,
            require_digest=args.require_digest,
            replace=args.replace,
            consent=asker(args.yes, again, to_stderr=args.json),
        )
    except ConsentError as exc:
        audit_trust(ctx, "install_refused", args.name or os.path.basename(args.path.rstrip("/")), str(exc))
        raise
    finally:
        signal.signal(signal.SIGTERM, previous)
    review = result.review
    if review is not None:
        outcome = (
            "consent" if review.previous is None else "reconsent" if review.grown else "consent_narrowed"
        )
        facts = {"version": review.version, "capability_digest": review.capabilities.digest}
        audit_trust(ctx, outcome, result.pack.name, "installed", signer=review.verdict.signer, **facts)
    shadowed = _shadowed(ctx, result)
    if args.json:
        print(json.dumps({**result.to_dict(), "shadowed": shadowed}, indent=2, ensure_ascii=False))
        return 0
    pack = result.pack
    how = "new" if result.replaced is None else f"replacing {result.replaced or 'the unversioned pack'}"
    skills = ", ".join(pack.meta.get("skills", ())) or "none"
    # The version, the skills' names and the files' come from the pack: escaped, as `installed` does.
    line = f"installed {pack.name} {pack.version}".rstrip() + f" into {pack.path} ({how}; skills: {skills})"
    print(printable(line))
    for report in result.reports:
        for problem in report.problems:
            print(printable(f"  warning: {problem}"))
    for line in shadowed:
        print(printable(f"  warning: {line}"))
    return 0


def _shadowed(ctx: Context, result: InstallResult) -> list[str]:
    """Skills of the new pack that will not load because another root already provides the name."""
    ctx.host.reload()
    skills = ctx.host.registry.snapshot.skills
    lines = []
    for name in result.pack.meta.get("skills", ()):
        skill = skills.get(name)
        if skill is not None and not skill.path.startswith(result.pack.path + "/"):
            lines.append(f'skill "{name}" is not loaded: {skill.provenance} provides it first ({skill.path})')
    return lines


def cmd_uninstall(ctx: Context) -> int:
    from ..packs.install import InstallError, uninstall_pack

    name = ctx.args.name
    try:
        pack = uninstall_pack(name, ctx.host.settings)
    except InstallError as exc:
        pip = [p for p in _pip_packs(ctx) if name in (p.name, p.distribution)]
        if pip:
            raise InstallError(
                f"{exc}; {name} is a pip pack: run `pip uninstall {pip[0].distribution}`"
            ) from None
        raise
    if ctx.args.json:
        print(json.dumps({"uninstalled": pack.to_dict()}, indent=2, ensure_ascii=False))
    else:
        print(printable(f"uninstalled {pack.name} {pack.version}".rstrip() + f" from {pack.path}"))
    return 0


def cmd_verify(ctx: Context) -> int:
    from ..catalog.lock import installed_folders, read_lock, unlocked_message, verify_pack
    from ..errors import ConfigError

    user_dir = ctx.host.settings.user_skills_dir
    entries = read_lock(user_dir) or {}
    wanted = ctx.args.pack
    if wanted is not None and wanted not in entries:
        locked = ", ".join(sorted(entries)) or "none"
        raise ConfigError(f"pack {wanted!r} is not in {user_dir}/skills.lock (locked packs: {locked})")
    names = [wanted] if wanted is not None else sorted(entries)
    results = {name: verify_pack(entries[name], os.path.join(user_dir, name)) for name in names}
    trust = {name: _trust_state(ctx, entries[name]) for name, drift in results.items() if not drift}
    unlocked = [] if wanted else [n for n in installed_folders(user_dir) if n not in entries]
    # An unlocked pack is unchecked, a refused one does not load: neither is "ok".
    failed = any(results.values()) or bool(unlocked) or any(t["refused"] for t in trust.values())
    if ctx.args.json:
        packs = [
            {
                "name": n,
                "version": entries[n].version,
                "ok": not d and not trust[n]["refused"],
                "drift": [x.to_dict() for x in d],
                **({k: v for k, v in trust[n].items() if k != "words"} if n in trust else {}),
            }
            for n, d in results.items()
        ]
        print(json.dumps({"ok": not failed, "packs": packs, "unlocked": unlocked}, indent=2))
        return 1 if failed else 0
    if not names and not unlocked:
        print(f"no packs installed with `ongrid-skills install` in {user_dir}: nothing to verify")
    for name, drift in results.items():
        label = printable(f"{name} {entries[name].version}".rstrip())
        if not drift:
            words = trust[name]["words"]
            print(printable(f"{label}: ok, {len(entries[name].files)} files match skills.lock; {words}"))
        for item in drift:
            print(
                f"{label}: {item.change} {printable(item.path)}"
                if item.path
                else f"{label}: its folder is gone"
            )
    for name in unlocked:
        print(printable(unlocked_message(name)))
    return 1 if failed else 0


def _trust_state(ctx: Context, entry: Any) -> dict[str, Any]:
    """The signature and consent of a locked pack whose files match: what ``verify`` reports."""
    from ..catalog.lock import consent_key, consent_problem
    from ..catalog.trust import Policy, check_signature, pack_digest, read_policy
    from ..errors import ConfigError

    settings = ctx.host.settings
    folder = os.path.join(settings.user_skills_dir, entry.name)
    digest = pack_digest(entry.files)
    try:
        policy = read_policy(settings.config_dir, settings.require_signed)
    except ConfigError as exc:
        policy = Policy(require_signed=True, path=str(exc))
    verdict = check_signature(folder, entry.name, digest, policy)
    refusal = verdict.refused(policy, entry.name)
    problem = consent_problem(entry, consent_key(settings.state_dir), digest)
    signed = {"trusted": f"signed by {verdict.signer}", "unsigned": "unsigned"}.get(
        verdict.status, f"{verdict.status} signature ({verdict.reason})"
    )
    words = signed + ("; refused: " + refusal if refusal else "")
    words += "; consent: " + (
        "missing or broken (`ongrid-skills trust " + entry.name + "`)" if problem else "sealed"
    )
    return {
        "signature": verdict.to_dict(),
        "consent": None
        if problem
        else {k: entry.consent[k] for k in ("version", "by", "at", "capability_digest")},
        "consent_problem": problem,
        "refused": refusal or problem,
        "words": words,
    }


def _pip_packs(ctx: Context) -> list[PackInfo]:
    from ..packs.pipconsent import vet

    roots = vet(ctx.host.pm, ctx.host.settings)  # unconsented ones as such
    return roots.packs if roots is not None else []


def cmd_installed(ctx: Context) -> int:
    from ..catalog.lock import locked_versions

    host = ctx.host
    user_dir = host.settings.user_skills_dir
    # Broken ones too (marker unreadable, or missing while the lock lists the folder): their
    # folders are still there, and `uninstall` removes them.
    items: list[dict[str, Any]] = [p.to_dict() for p in installed_packs(user_dir, locked_versions(user_dir))]
    items += [info.to_dict() for info in _pip_packs(ctx)]
    if ctx.args.json:
        print(json.dumps({"items": items, "total": len(items)}, indent=2, ensure_ascii=False))
        return 0
    if not items:
        print(f"no packs installed (user skills dir: {host.settings.user_skills_dir})")
        return 0
    rows = [
        (
            item["provenance"],
            item["kind"],
            item.get("status", "active"),
            str(item.get("error") or item.get("path")),
        )
        for item in items
    ]
    print_table(("PACK", "KIND", "STATUS", "PATH"), rows)
    return 0
