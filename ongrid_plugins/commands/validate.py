"""``validate``: lint manifests without registering them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from .argtypes import Subcommands, non_empty
from .output import print_json, printable

if TYPE_CHECKING:
    from ..catalog.validate import FileReport
    from ..cli import Context

__all__ = ["register"]


def register(sub: Subcommands) -> None:
    """Add the ``validate`` sub-command."""
    p = sub.add_parser(
        "validate",
        help="check manifests without registering them",
        description="Check skill folders, pack folders, manifest files, pack archives (.tar.gz, "
        ".zip) and installed distributions (by name; ./NAME for a folder of the same name). Exit 1 "
        "if any has an error (or, with --strict, a warning). What this machine lacks for a skill "
        "(its OS, a binary, a variable) is said as a warning about the machine, which --strict "
        "does not count.",
    )
    p.add_argument(
        "paths",
        nargs="+",
        type=non_empty("give a folder, a manifest, an archive or a distribution name"),
        metavar="PATH",
        help="a skill or pack folder, a manifest file, a pack archive, or an installed distribution's name",
    )
    p.add_argument("--json", action="store_true", help="print JSON")
    p.add_argument("--strict", action="store_true", help="warnings fail too")
    p.set_defaults(handler=cmd_validate)


def cmd_validate(ctx: Context) -> int:
    host = ctx.host
    from ..packs.sources import validate_sources  # archives and distributions: imported only when validating

    reports = validate_sources(ctx.args.paths, host.pm, host.settings)
    failed = [r for r in reports if not r.ok or (ctx.args.strict and r.problems)]
    if ctx.args.json:
        data = {"ok": not failed, "files": [r.to_dict() for r in reports]}
        print_json(data)
    else:
        for report in reports:
            _print_report(report, ctx.args.strict)
        total, bad = len(reports), len(failed)
        print(f"{total} manifest(s) checked, {bad} with {'problems' if ctx.args.strict else 'errors'}")
    return 1 if failed else 0


def _print_report(report: FileReport, strict: bool) -> None:
    # Paths, keys and messages come from the files checked: escaped as list and show
    # escape them, so a manifest cannot drive the terminal or add a line of its own.
    for line in _report_lines(report, strict):
        print(printable(line))


def _report_lines(report: FileReport, strict: bool) -> list[str]:
    name = f" ({report.skill})" if report.skill else ""
    verdict = "ok" if report.ok else "FAILED"
    if strict and report.ok and report.problems:  # the summary counts it: never "ok" and then failed
        verdict = f"FAILED (--strict: {len(report.problems)} warning(s))"
    lines = [f"{report.path}{name}: {verdict}"]
    for problem in report.problems:
        where = f" at {problem.pointer}" if problem.pointer else ""
        lines.append(f"  {problem.level}{where}: {problem.said}")
    lines.extend(f"  warning (this machine, not the manifest): {line}" for line in report.machine)
    lines.extend(
        f"  sandbox of {tool}: {_describe(declared)}"
        for tool, declared in report.sandbox.items()
        if declared is not None
    )
    return lines


def _describe(declared: Mapping[str, Any]) -> str:
    """A declaration in one line: ``network, write /var/cache/x, limits memory_mb=64``."""
    parts = []
    if "network" in declared:
        parts.append("network" if declared["network"] else "no network")
    for key in ("read", "write"):
        if declared.get(key):
            parts.append(f"{key} " + ", ".join(declared[key]))
    if declared.get("limits"):
        parts.append("limits " + ", ".join(f"{k}={v}" for k, v in declared["limits"].items()))
    return "; ".join(parts) or "nothing beyond its class"
