"""Install minimal distributions into a folder on sys.path: the files pip writes for a wheel.

Fast enough for unit tests of entry-point discovery; the tests that need the
real thing (wheels, pip, venvs) are in test_examples.py and test_scaffold.py.
"""

from __future__ import annotations

import importlib
import textwrap
from collections.abc import Mapping
from pathlib import Path


def install_dist(
    site: Path,
    dist: str,
    version: str,
    entry_points: Mapping[str, Mapping[str, str]],
    files: Mapping[str, str] | None = None,
) -> Path:
    """Write ``<dist>-<version>.dist-info`` with ``entry_points`` ({group: {name: value}}) and ``files``.

    ``files`` maps paths relative to ``site`` to their text; ``run.sh`` files are made executable.
    """
    info = site / f"{dist.replace('-', '_')}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n")
    lines = []
    for group, points in entry_points.items():
        lines += [f"[{group}]", *(f"{k} = {v}" for k, v in points.items()), ""]
    (info / "entry_points.txt").write_text("\n".join(lines))
    for relative, text in (files or {}).items():
        path = site / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
        if path.name == "run.sh":
            path.chmod(0o755)
    importlib.invalidate_caches()
    return info


ECHO = "#!/bin/sh\nread -r args\nprintf '%s\\n' \"$args\"\n"


def skill_files(package: str, *names: str, folder: str = "") -> dict[str, str]:
    """The files of a package holding one echo skill per name (under ``folder`` if given)."""
    files = {f"{package}/__init__.py": ""}
    base = f"{package}/{folder}/" if folder else f"{package}/"
    for name in names:
        manifest = f'{{"name": "{name}", "description": "Skill {name}.", "entry": "run.sh"}}'
        files[f"{base}{name}/skill.json"] = manifest
        files[f"{base}{name}/run.sh"] = ECHO
    return files
