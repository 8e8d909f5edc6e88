"""``trust``, ``inspect`` and ``sign``: consent to what a pack may do, and who made it.

(``trust-folder``, for a project's Agent Skills folders, is :mod:`.trust`.)

* ``inspect PACK`` prints what an installed (or pip) pack may do, its signer and consent;
* ``trust PACK`` consents to it again (after growth, for a pip pack, or a lost seal);
* ``trust --add-signer NAME --key KEY.pub [--packs PATTERN]`` / ``--remove-signer NAME``
  change the trust policy (``<config dir>/trust.json``);
* ``sign FOLDER --key KEY`` signs a pack folder with ``ssh-keygen -Y sign``.

Every consent, refusal and policy change is a row of the audit log.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import TYPE_CHECKING, Any

from ..errors import ConfigError
from .argtypes import Subcommands
from .output import printable

if TYPE_CHECKING:
    from ..cli import Context
    from ..packs.consent import Review

__all__ = ["asker", "audit_trust", "inspect_if_pack", "register"]


def register(sub: Subcommands) -> None:
    """Add the ``inspect``, ``trust`` and ``sign`` sub-commands."""
    p = sub.add_parser(
        "inspect", help="what an installed or pip pack may do, who signed it, what was consented"
    )
    p.add_argument("pack", metavar="PACK")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(handler=cmd_inspect)

    p = sub.add_parser(
        "trust",
        help="consent to a pack (pip packs load only once trusted), or change the trust policy",
        description="Show what PACK may do and record your consent in skills.lock. A pip pack "
        "(ongrid_skills entry point) is not loaded until trusted; an installed pack whose tools "
        "grew loads without those tools until trusted again.",
    )
    p.add_argument("pack", metavar="PACK", nargs="?")
    p.add_argument("--yes", action="store_true", help="consent without asking")
    p.add_argument("--add-signer", metavar="NAME", help="add (or replace) a signer in the trust policy")
    p.add_argument("--key", metavar="KEY.pub", help="the signer's OpenSSH Ed25519 public key file")
    p.add_argument("--packs", metavar="PATTERN", action="append", help="pack names the signer may sign")
    p.add_argument("--remove-signer", metavar="NAME", help="remove a signer from the trust policy")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(handler=cmd_trust)

    p = sub.add_parser(
        "sign", help="sign a pack folder's content digest with an SSH key (ssh-keygen -Y sign)"
    )
    p.add_argument("folder", metavar="FOLDER")
    p.add_argument("--key", metavar="KEY", required=True, help="the private key (or its .pub with an agent)")
    p.add_argument("--name", help="the pack's name (default: pack.json's, else the folder's)")
    p.set_defaults(handler=cmd_sign)


def asker(yes: bool, command: str, *, to_stderr: bool = False) -> Any:
    """The ``consent`` callback of the CLI: print the review, then ``--yes``, a TTY's answer, or refuse."""
    from ..packs.consent import ConsentError

    def ask(review: Review) -> bool:
        out = sys.stderr if to_stderr else sys.stdout
        for line in review.lines():
            print(printable(line), file=out)
        if yes or not review.needs_consent:  # narrowing is recorded without asking
            return True
        if not (sys.stdin.isatty() and out.isatty()):
            message = f"pack {review.name} needs your consent to what it may do (above) and this is not "
            raise ConsentError(
                message + f"a terminal: nothing was changed; to consent, run `{command} --yes`"
            )
        print("Consent to this? [y/N] ", end="", file=out, flush=True)
        return sys.stdin.readline().strip().lower() in ("y", "yes")

    return ask


def audit_trust(ctx: Context, outcome: str, pack: str, note: str = "", **facts: Any) -> None:
    """Chain a trust row, unless the ``audit`` plugin is disabled."""
    from ..audit import PLUGIN_NAME

    if ctx.host.pm.is_blocked(PLUGIN_NAME):
        return
    from ..packs.consent import who

    ctx.host.audit.record_trust(outcome, pack, who(), note, **facts)


def cmd_inspect(ctx: Context) -> int:
    from ..packs.trusted import pack_state

    _print_state(ctx, pack_state(ctx.host, ctx.args.pack))
    return 0


def _print_state(ctx: Context, state: dict[str, Any]) -> None:
    if getattr(ctx.args, "json", False):
        print(json.dumps(state, indent=2, ensure_ascii=False))
    else:
        for line in state["lines"]:
            print(printable(line))


def inspect_if_pack(ctx: Context, name: str) -> bool:
    """Print ``inspect NAME`` when NAME is an installed or pip pack; False when it is neither."""
    from ..packs.consent import ConsentError

    try:
        from ..packs.trusted import pack_state

        state = pack_state(ctx.host, name)
    except (ConsentError, ConfigError):
        return False
    _print_state(ctx, state)
    return True


def cmd_trust(ctx: Context) -> int:
    args = ctx.args
    if args.add_signer or args.remove_signer:
        return _change_policy(ctx)
    if not args.pack:
        raise ConfigError("give a PACK to trust, or --add-signer / --remove-signer")
    from ..packs.consent import ConsentError
    from ..packs.trusted import trust_pack

    ask = asker(args.yes, f"ongrid-skills trust {args.pack}", to_stderr=args.json)
    try:
        review, outcome = trust_pack(ctx.host, args.pack, ask)
    except ConsentError as exc:
        audit_trust(ctx, "consent_refused", args.pack, str(exc))
        raise
    facts = {"version": review.version, "capability_digest": review.capabilities.digest}
    audit_trust(ctx, outcome, args.pack, "; ".join(review.lines()[:1]), signer=review.verdict.signer, **facts)
    if args.json:
        print(json.dumps({"trusted": review.to_dict(), "outcome": outcome}, indent=2, ensure_ascii=False))
    else:
        print(printable(f"trusted {review.name} {review.version}".rstrip() + f" ({outcome})"))
    return 0


def _change_policy(ctx: Context) -> int:
    import attrs

    from ..catalog.trust import Signer, parse_public_key, read_policy, write_policy

    args = ctx.args
    policy = read_policy(ctx.host.settings.config_dir)
    if args.remove_signer:
        kept = tuple(s for s in policy.signers if s.name != args.remove_signer)
        if len(kept) == len(policy.signers):
            raise ConfigError(f"no signer {args.remove_signer!r} in {policy.path}")
        policy, what, name = attrs.evolve(policy, signers=kept), "removed", args.remove_signer
    else:
        if not args.key:
            raise ConfigError("--add-signer needs --key KEY.pub (an OpenSSH Ed25519 public key file)")
        try:
            with open(args.key, encoding="utf-8") as f:
                key = parse_public_key(f.read(4096))
        except (OSError, ValueError) as exc:
            raise ConfigError(f"{args.key}: {exc}") from None
        signer = Signer(args.add_signer, key, tuple(args.packs or ("*",)))
        kept = tuple(s for s in policy.signers if s.name != signer.name)
        policy, what, name = attrs.evolve(policy, signers=(*kept, signer)), "added", signer.name
    write_policy(policy)
    audit_trust(ctx, "trust_policy", "*", f"signer {name} {what}", signer=name, change=what)
    print(printable(f"signer {name} {what} in {policy.path}"))
    return 0


def cmd_sign(ctx: Context) -> int:
    from ..catalog.trust import SIGNATURE
    from ..packs.trusted import source_digest

    folder = os.path.abspath(ctx.args.folder)
    name, digest = source_digest(folder, ctx.args.name)
    from ..catalog.trust import signed_message

    target = os.path.join(folder, SIGNATURE)
    if os.path.islink(target):
        raise ConfigError(f"{target} is a symlink; remove it first")
    cmd = ["ssh-keygen", "-Y", "sign", "-n", "ongrid-pack", "-f", ctx.args.key]
    try:
        done = subprocess.run(cmd, input=signed_message(name, digest), capture_output=True, timeout=120)
    except FileNotFoundError:
        raise ConfigError("ssh-keygen is not installed (Debian: apt-get install openssh-client)") from None
    if done.returncode != 0:
        raise ConfigError(f"ssh-keygen could not sign: {done.stderr.decode(errors='replace').strip()}")
    with open(target, "wb") as f:
        f.write(done.stdout)
    print(printable(f"signed {name} (content sha256:{digest}) into {target}"))
    return 0
