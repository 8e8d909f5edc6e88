"""``ongrid-skills new``: scaffold a working skill, or a pip-installable pack of one.

Every scaffold passes ``ongrid-skills validate`` as written and runs:

* ``--format json`` (default): ``skill.json`` and an entry ``run.sh`` / ``run.py``;
* ``--format md``: ``SKILL.md`` whose tool runs ``exec:run.sh`` / ``exec:run.py`` — or,
  for a ``--pack`` in Python, a native ``builtin:`` tool contributed by the pack's
  own plugin through ``ongrid_native_tools``;
* ``--pack``: a distribution ``ongrid-pack-<name>/`` with a ``pyproject.toml``
  (hatchling, which keeps the entries' execute bits in the wheel) declaring the
  ``ongrid_skills`` entry point, a README and a test that passes with pytest
  against the installed pack.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from ..core.echo import echo, printable
from ..errors import ConfigError

__all__ = ["FORMATS", "LANGS", "scaffold"]

FORMATS = ("json", "md")
LANGS = ("sh", "python")
_NAME = re.compile(r"[a-z][a-z0-9_]{0,63}")

SCHEMA = {
    "type": "object",
    "properties": {"who": {"type": "string", "description": "Who to greet.", "default": "world"}},
    "additionalProperties": False,
}

SANDBOX_MD = """\
    # What the tool needs beyond its class (docs/sandbox.md); a read-only tool needs
    # nothing. A tool that writes or talks to the network declares it, e.g.:
    # sandbox: {network: true, write: [~/.cache/myapp], limits: {memory_mb: 256}}
"""

RUN_SH = """#!/bin/sh
# Wire protocol: one JSON object (the arguments) on stdin, one JSON object on
# stdout, log lines on stderr, exit status != 0 on failure.
set -eu
args=""
while IFS= read -r line || [ -n "$line" ]; do args="$args$line"; done
[ -n "$args" ] || args='{{}}'
echo "{name}: called with $args" >&2
printf '{{"ok": true, "args": %s}}\\n' "$args"
"""

RUN_PY = '''#!/usr/bin/env python3
"""{name}: one JSON object (the arguments) on stdin, one JSON object on stdout."""
import json
import sys


def main() -> int:
    args = json.load(sys.stdin)
    who = args.get("who", "world")
    print(f"{name}: greeting {{who}}", file=sys.stderr)
    json.dump({{"greeting": f"hello, {{who}}"}}, sys.stdout)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
'''

NATIVE_PY = '''"""The native tools of {name}: contributed to ongrid through ``ongrid_native_tools``."""

from ongrid_plugins import hookimpl


def greet(args, ctx):
    """Return a greeting; ``args`` were checked against the tool's schema already."""
    ctx.emit("progress", {{"greeting": args["who"]}})
    return {{"greeting": f"hello, {{args['who']}}"}}


@hookimpl
def ongrid_native_tools():
    return {{"{name}.greet": greet}}
'''


def _expected(lang: str, native: bool) -> str:
    if lang == "python" or native:
        return '{"greeting": "hello, ada"}'
    return '{"ok": True, "args": {"who": "ada"}}'


def scaffold(name: str, dest: str, *, fmt: str = "json", lang: str = "sh", pack: bool = False) -> Path:
    """Write the scaffold for skill ``name`` under ``dest``; return the folder created.

    :raises ConfigError: a bad name, format or language; ``dest`` is a file, or cannot be
        written to (the message names the file and the reason). A missing ``dest`` is created.
    """
    if not _NAME.fullmatch(name):
        rule = "a letter, then letters, digits or _ (64 at most)"
        message = f"skill name {echo(name)} must be lower_snake: {rule}"
        raise ConfigError(message)
    if fmt not in FORMATS or lang not in LANGS:
        raise ConfigError(f"--format must be one of {FORMATS} and --lang one of {LANGS}")
    if os.path.lexists(dest) and not os.path.isdir(dest):  # a missing one is created
        message = f"--dir {printable(dest, 200)} is not a folder; give the folder to create the skill in"
        raise ConfigError(message)
    dist = "ongrid-pack-" + name.replace("_", "-")
    folder = Path(dest) / (dist if pack else name)
    if folder.exists():
        raise ConfigError(f"{folder} already exists; choose another name or --dir")
    try:
        _write_all(folder, name, fmt, lang, pack)
    except OSError as exc:
        where = printable(str(exc.filename or folder), 200)
        message = f"cannot write {where}: {exc.strerror or exc}; give a --dir you can write to"
        raise ConfigError(message) from None
    return folder


def _write_all(folder: Path, name: str, fmt: str, lang: str, pack: bool) -> None:
    dist = folder.name
    if not pack:
        _write_skill(folder, name, fmt, lang, native=False)
        _write(folder / "README.md", _skill_readme(name, fmt, lang))
        return
    package = dist.replace("-", "_")
    native = fmt == "md" and lang == "python"
    _write_skill(folder / package / name, name, fmt, lang, native)
    _write(
        folder / package / "__init__.py", f'"""The {name} skill pack: its skills live in this folder."""\n'
    )
    if native:
        _write(folder / package / "plugin.py", NATIVE_PY.format(name=name))
    _write(folder / "pyproject.toml", _pyproject(dist, package, name, native))
    _write(folder / "README.md", _pack_readme(dist, name, fmt))
    _write(folder / "tests" / f"test_{name}.py", _pack_test(dist, name, lang, native))


def _write(path: Path, text: str, mode: int = 0o644) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    os.chmod(path, mode)


def _write_skill(folder: Path, name: str, fmt: str, lang: str, native: bool) -> None:
    entry = "run.py" if lang == "python" else "run.sh"
    description = "Greets someone and returns a JSON object; changes nothing (from `ongrid-skills new`)."
    if not native:
        _write(folder / entry, (RUN_PY if lang == "python" else RUN_SH).format(name=name), 0o755)
    if fmt == "json":
        manifest = {
            "name": name,
            "description": description,
            "schema": SCHEMA,
            "entry": entry,
            "env_allow": ["PATH"],
            "timeout_seconds": 10,
            "class": "safe",
            "category": "example",
            # Needs nothing beyond its class; a tool that writes or uses the network says
            # so here (docs/sandbox.md), e.g. {"write": ["~/.cache/NAME"], "network": true}.
            "sandbox": {},
        }
        _write(folder / "skill.json", json.dumps(manifest, indent=2) + "\n")
        return
    impl = f"builtin:{name}.greet" if native else f"exec:{entry}"
    env = "" if native else "    env_allow: [PATH]\n"
    front = (
        f"---\nname: {name}\ndescription: {json.dumps(description)}\n"
        f"when_to_use: When someone should be greeted.\ntools:\n"
        f"  - name: {name}\n    description: {json.dumps(description)}\n    class: read\n"
        f"    impl: {impl}\n    timeout_seconds: 10\n{env}{SANDBOX_MD}    schema: {json.dumps(SCHEMA)}\n---\n"
    )
    _write(folder / "SKILL.md", front + f"\n# {name}\n\nCall `{name}` with `who` to greet someone.\n")


def _pyproject(dist: str, package: str, name: str, native: bool) -> str:
    plugin = f'\n[project.entry-points.ongrid_plugins]\n{name} = "{package}.plugin"\n' if native else ""
    return f"""[build-system]
# hatchling keeps the entries' execute bits in the wheel (setuptools drops them).
requires = ["hatchling>=1.18"]
build-backend = "hatchling.build"

[project]
name = "{dist}"
version = "0.1.0"
description = "The {name} skill pack for ongrid-plugins."
readme = "README.md"
requires-python = ">=3.11"
dependencies = ["ongrid-plugins>=0.1"]

[project.optional-dependencies]
test = ["pytest>=8"]

# The folder of this package is a trusted root of skills.
[project.entry-points.ongrid_skills]
{name} = "{package}"
{plugin}
[tool.hatch.build.targets.wheel]
packages = ["{package}"]
"""


def _pack_test(dist: str, name: str, lang: str, native: bool) -> str:
    return f'''"""Runs against the installed pack: `pip install . && pytest`."""

from ongrid_plugins.testing import assert_ok, pack_host, run_skill


def test_{name}_is_loaded_from_the_installed_distribution(tmp_path):
    host = pack_host(tmp_path, "{dist}")
    assert host.get("{name}").provenance.startswith("{dist} ")


def test_{name}_runs(tmp_path):
    host = pack_host(tmp_path, "{dist}")
    result, events = run_skill(host, "{name}", {{"who": "ada"}})
    assert assert_ok(result) == {_expected(lang, native)}
    assert events.kinds()[-1] == "exit"
'''


def _skill_readme(name: str, fmt: str, lang: str) -> str:
    manifest = "skill.json" if fmt == "json" else "SKILL.md"
    return f"""# {name}

A skill scaffolded by `ongrid-skills new` ({manifest}, {lang}). Try it:

```sh
ongrid-skills validate .
ongrid-skills --dirs "$(dirname "$PWD")" run {name} '{{"who": "ada"}}'
```

Copy the folder under a skills root (`ONGRID_SKILLS_EXTERNAL_DIRS`), or pack and
install it: `tar czf {name}.tar.gz {name} && ongrid-skills install {name}.tar.gz`.

The skill runs in a sandbox: as a `safe` tool it may read (but not the host's own
state or your secrets), write only its private `/tmp`, and has no network. If you
change it to use the network or to write files, declare what it needs in its
`sandbox` (`"network": true`, `"write": ["~/.cache/{name}"]`); a tool that changes
anything is `mutating`. See the project's docs/sandbox.md.
"""


def _pack_readme(dist: str, name: str, fmt: str) -> str:
    return f"""# {dist}

A pip-installable skill pack for ongrid-plugins, providing the `{name}` skill
({"skill.json" if fmt == "json" else "SKILL.md"}). Its package folder is a trusted skills root,
declared by the `ongrid_skills` entry point in `pyproject.toml`.

```sh
pip install .                            # where ongrid-plugins is installed already (see below)
ongrid-skills trust {name}               # shows what it may do; it loads once you consent
ongrid-skills list                       # {name} shows "{dist} 0.1.0" as its provenance
ongrid-skills run {name} '{{"who": "ada"}}'
ongrid-skills validate {dist}            # validate the installed distribution
pip install pytest && pytest             # the tests run against the installed copy
```

The pack depends on `ongrid-plugins`. Install it into an environment that has
ongrid-plugins already, or name where ongrid-plugins comes from in the same
command (`pip install /path/to/ongrid-plugins .`): if it is missing, pip looks for a
package of that name on your package index, which may not be the one you mean.
"""
