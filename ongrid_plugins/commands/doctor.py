"""``doctor``: what this machine offers for confinement, and what it means for each loaded tool."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from .argtypes import Subcommands

if TYPE_CHECKING:
    from ..cli import Context
    from ..executors.confine import Profile
    from ..executors.confine.kernel import Support
    from ..models import Tool
    from ..settings import Settings

    #: One loaded tool as ``doctor`` sees it: the tool, its profile, its verdicts, refused, narrowed.
    Row = tuple[Tool, Profile, dict[str, str], bool, bool]

__all__ = ["register"]


def register(sub: Subcommands) -> None:
    """Add the ``doctor`` sub-command."""
    p = sub.add_parser(
        "doctor",
        help="what this machine offers for confinement and how each loaded tool would run",
        description=(
            "Probe Landlock, seccomp, cgroups and namespaces, show the sandbox mode in force "
            "(ONGRID_SANDBOX, ONGRID_SANDBOX_POLICY) and every loaded tool that would be "
            "refused under ONGRID_SANDBOX=require or narrowed under ONGRID_SANDBOX_POLICY=strict. "
            "Exit 0 when everything loaded can run as configured, 1 otherwise."
        ),
    )
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(handler=cmd_doctor)


def _facts(sup: Any) -> list[tuple[str, str]]:
    abi = sup.landlock_abi
    landlock = "missing" if abi == 0 else f"ABI {abi}: files" + (", TCP" if abi >= 4 else "")
    if abi >= 6:
        landlock += ", signal and abstract-socket scoping"
    return [
        ("Landlock", landlock),
        ("seccomp", "yes (syscall filter, network off)" if sup.seccomp else "missing"),
        (
            "cgroups",
            "per-call pids + memory groups: limits, every descendant killed"
            if sup.cgroups
            else "not writable: no process/memory limit; setsid escapes the kill",
        ),
        (
            "mount namespace",
            "private /tmp per call" if sup.mount_namespace else "no: private folder as TMPDIR",
        ),
        ("user namespaces", "available (not needed)" if sup.user_namespaces else "unavailable (not needed)"),
        ("pid namespace", "not used: the call's cgroup kills every descendant"),
        ("bwrap", f"{sup.bwrap} (not used)" if sup.bwrap else "not installed (not needed)"),
        ("host user", "root: every call drops all capabilities" if sup.root else "unprivileged"),
    ]


def _verdicts(ctx: Context, tool: Tool, missing: list[str]) -> dict[str, str]:
    from ..executors.confine import profile_for

    out = {"require": "", "strict": ""}
    if tool.kind != "subprocess":
        return out
    if missing:
        out["require"] = "refused under require: " + "; ".join(missing)
    settings = ctx.host.settings
    import attrs

    now = profile_for(tool, settings)
    strict = profile_for(tool, attrs.evolve(settings, sandbox_policy="strict", sandbox="auto"))
    if now.confined and (now.write_all or now.network) and not (strict.write_all or strict.network):
        out["strict"] = "narrowed under strict: no sandbox declaration, so no writes but /tmp and no network"
    return out


def cmd_doctor(ctx: Context) -> int:
    from ..executors.confine import support

    sup = support()
    host = ctx.host
    host.load()
    settings = host.settings
    missing = sup.missing()
    tools = host.tools(include_unavailable=True)
    rows: list[Row] = []
    problems = 0
    for tool in tools:
        profile = host.sandbox_profile(tool)
        verdict = _verdicts(ctx, tool, missing)
        blocked = settings.sandbox == "require" and bool(verdict["require"])
        narrowed = settings.sandbox_policy == "strict" and bool(verdict["strict"])
        problems += blocked
        rows.append((tool, profile, verdict, blocked, narrowed))
    if ctx.args.json:
        _print_json(settings, sup, rows, problems)
        return 0 if problems == 0 else 1
    _print_text(settings, sup, missing, rows)
    if problems:
        print(f"{problems} tool(s) cannot run as configured")
        return 1
    print("everything loaded can run as configured")
    return 0


def _print_json(settings: Settings, sup: Support, rows: list[Row], problems: int) -> None:
    data = {
        "mode": settings.sandbox,
        "policy": settings.sandbox_policy,
        "machine": sup.to_dict(),
        "tools": [
            {
                "name": t.name,
                "class": t.tool_class.value,
                "kind": t.kind,
                "sandbox": p.to_dict(),
                "under_require": v["require"] or "runs",
                "under_strict": v["strict"] or "unchanged",
                "runs_as_configured": not b,
            }
            for t, p, v, b, _n in rows
        ],
        "ok": problems == 0,
    }
    print(json.dumps(data, indent=2))


def _print_text(settings: Settings, sup: Support, missing: list[str], rows: list[Row]) -> None:
    print(f"sandbox: ONGRID_SANDBOX={settings.sandbox}, ONGRID_SANDBOX_POLICY={settings.sandbox_policy}")
    print("this machine:")
    for name, fact in _facts(sup):
        print(f"  {name:16} {fact}")
    if missing:
        print("missing for full confinement:")
        for item in missing:
            print(f"  - {item}")
    else:
        print("full confinement: yes")
    print(f"tools ({len(rows)}):")
    for tool, profile, verdict, blocked, _narrowed in rows:
        state = "confined" if profile.confined else "unconfined"
        if blocked:
            state = "REFUSED"
        print(f"  {tool.name:24} {tool.tool_class.value:9} {state}")
        if not profile.confined:
            print(f"    {profile.reason}")
        for key in ("require", "strict"):
            if verdict[key]:
                print(f"    {verdict[key]}")
