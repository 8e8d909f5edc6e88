"""Compare our SKILL.md verdicts with the Agent Skills reference validator (``skills-ref``).

    python scripts/compare_skills_ref.py [--all] FOLDER...

For every folder holding a ``SKILL.md`` under the FOLDERs: the reference's verdict
(``skills_ref.validator.validate``: valid, or its errors), whether our loader registers
it (lenient), and whether ``ongrid-skills validate --strict`` passes it. Prints a count
of each combination, then every skill where the reference and ``--strict`` disagree,
with both sides' reasons (``--all``: every skill). Needs ``pip install skills-ref``.
"""

from __future__ import annotations

import collections
import os
import sys
from pathlib import Path

from skills_ref.validator import validate as reference

from ongrid_plugins import Settings
from ongrid_plugins.catalog.validate import validate_paths
from ongrid_plugins.plugins import get_plugin_manager


def folders(tops: list[str]) -> list[Path]:
    found = []
    for top in tops:
        for folder, dirs, files in os.walk(top):
            dirs[:] = sorted(d for d in dirs if not d.startswith(".git"))
            if "SKILL.md" in files or "skill.md" in files:
                found.append(Path(folder))
    return sorted(found)


def main(tops: list[str]) -> int:
    every = "--all" in tops
    tops = [t for t in tops if t != "--all"]
    settings = Settings(include_defaults=False, load_entry_points=False, cache_dir=None)
    pm = get_plugin_manager(settings)
    counts: collections.Counter[tuple[str, str, str]] = collections.Counter()
    differ = []
    for folder in folders(tops):
        ref_errors = reference(folder)
        manifest = folder / ("SKILL.md" if (folder / "SKILL.md").exists() else "skill.md")
        [report] = validate_paths([str(manifest)], pm, settings)
        loads = report.ok
        strict = loads and not [p for p in report.problems if p.level == "warning"]
        key = (
            "valid" if not ref_errors else "invalid",
            "loads" if loads else "skipped",
            "strict ok" if strict else "strict fails",
        )
        counts[key] += 1
        if every or (not ref_errors) != strict:
            ours = [f"{p.level} {p.code}" for p in report.problems] or ["-"]
            ours.insert(0, f"{key[1]}, {key[2]}:")
            differ.append(
                (
                    str(folder),
                    [e.splitlines()[0] + (" " + e.splitlines()[-1] if "\n" in e else "") for e in ref_errors]
                    or ["valid"],
                    ours,
                )
            )
    print("| skills-ref | loader | validate --strict | skills |")
    print("|---|---|---|---|")
    for (ref, load, strict), n in sorted(counts.items()):
        print(f"| {ref} | {load} | {strict} | {n} |")
    print()
    for folder, ref, ours in differ:
        print(f"{folder}\n  skills-ref: {'; '.join(ref)}\n  ours:       {' '.join(ours)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
