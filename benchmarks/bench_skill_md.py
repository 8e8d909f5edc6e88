"""Loading 1k SKILL.md files beside 1k skill.json files, in the same run (a script, not a test).

Builds two trees in a temporary folder:

* ``skill.json``: ``/work/shared/bench/gen_tree.py`` (``ROOT/<category>/<bucket>/<skill>/``,
  ~5% broken manifests), as the loader baselines use; its ``go-equiv`` mode (from
  ``load_bench.py``: the original Go loader's checks in plain Python) is timed too;
* ``SKILL.md``: the 55 real files of ``tests/fixtures/skillmd-corpus`` copied round-robin
  into the same layout, each ``name:`` given a numbered suffix so that every copy is a
  distinct skill (the two files without front matter get distinct folder names). The
  real mix is kept: inline-JSON openclaw metadata, two files that need the quoting
  retry, three darwin-only skills (skipped on Linux), bodies from 1 to 74 KB.

Then times ``ongrid_plugins.loader:load_dirs`` (the whole pipeline: walk, read, parse,
build, availability, validation hooks, registry) on each tree, plus a breakdown of the
SKILL.md cost (walk only; walk + read + split; + YAML), in interleaved rounds with a
rotating order, after warm-up runs (warm page cache, warm verdict cache, PyYAML
imported). Medians are printed with the per-file cost and the ratio to skill.json.

Usage: ``python benchmarks/bench_skill_md.py [--files 1000] [--rounds 7]``
"""

from __future__ import annotations

import argparse
import importlib.util
import logging
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from ongrid_plugins.frontmatter import parse_yaml  # noqa: E402
from ongrid_plugins.loader import iter_manifests, load_dirs  # noqa: E402
from ongrid_plugins.loaders.skill_md import read_document  # noqa: E402

CORPUS = REPO / "tests" / "fixtures" / "skillmd-corpus"
GEN_TREE = Path("/work/shared/bench/gen_tree.py")
NAMES = frozenset({"SKILL.md", "skill.md"})
_NAME_LINE = re.compile(r"^name:[ \t]*(.+?)[ \t]*$", re.MULTILINE)


def make_skill_md_tree(root: Path, count: int) -> int:
    """``count`` SKILL.md files from the corpus, round-robin, each a distinct skill."""
    sources = sorted(CORPUS.rglob("SKILL.md"))
    for index in range(count):
        source = sources[index % len(sources)]
        text = source.read_text(encoding="utf-8")
        suffix = f"-{index:04d}"
        text = _NAME_LINE.sub(r"name: \g<1>" + suffix, text, count=1)
        category = source.relative_to(CORPUS).parts[0]
        folder = root / category / f"b{index % 10:02d}" / (source.parent.name + suffix)
        folder.mkdir(parents=True)
        (folder / "SKILL.md").write_text(text, encoding="utf-8")
    return count


def load_script(path: Path) -> Any:
    """A benchmark script of /work/shared/bench, imported as a module."""
    spec = importlib.util.spec_from_file_location(path.stem, path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def make_skill_json_tree(root: Path, count: int, gen_tree: Path) -> None:
    load_script(gen_tree).generate(str(root), count)


def walk_only(root: str) -> int:
    return sum(1 for _ in iter_manifests(root, NAMES))


def walk_read_split(root: str) -> int:
    return sum(1 for path, _link in iter_manifests(root, NAMES) if read_document(path) is not None)


def walk_read_split_yaml(root: str) -> int:
    parsed = 0
    for path, _link in iter_manifests(root, NAMES):
        document = read_document(path)
        if document.front is not None:
            try:
                parse_yaml(document.front)
            except ValueError:
                continue
        parsed += 1
    return parsed


def full_load(root: str) -> int:
    return len(load_dirs([root]))


def time_rounds(
    modes: dict[str, tuple[Callable[[str], int], str]], rounds: int, warm: int
) -> dict[str, float]:
    """Median seconds per mode, rounds interleaved in a rotating order."""
    for _ in range(warm):
        for function, root in modes.values():
            function(root)
    samples: dict[str, list[float]] = {name: [] for name in modes}
    names = list(modes)
    for index in range(rounds):
        shift = index % len(names)
        for name in names[shift:] + names[:shift]:
            function, root = modes[name]
            started = time.perf_counter()
            function(root)
            samples[name].append(time.perf_counter() - started)
    return {name: statistics.median(values) for name, values in samples.items()}


def import_ms(module: str) -> float | None:
    """Best-of-three cumulative import time of ``module`` in a fresh interpreter (-X importtime)."""
    best: float | None = None
    with tempfile.TemporaryDirectory() as pycache:
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env["PYTHONPYCACHEPREFIX"] = pycache
        for run in range(4):
            result = subprocess.run(
                [sys.executable, "-X", "importtime", "-c", f"import {module}"],
                cwd=REPO,
                env=env,
                capture_output=True,
                text=True,
                check=False,
            )
            for line in result.stderr.splitlines():
                parts = [p.strip() for p in line.split("|")]
                if run and len(parts) == 3 and parts[2] == module:
                    ms = int(parts[1]) / 1000
                    best = ms if best is None or ms < best else best
    return best


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--files", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--warm", type=int, default=2)
    parser.add_argument("--gen-tree", type=Path, default=GEN_TREE)
    args = parser.parse_args()
    # Log records are still made (a host would handle them); they just go nowhere.
    package = logging.getLogger("ongrid_plugins")
    package.addHandler(logging.NullHandler())
    package.propagate = False

    base = Path(tempfile.mkdtemp(prefix="ongrid-bench-md-"))
    try:
        md_root, json_root = base / "skillmd", base / "skilljson"
        make_skill_md_tree(md_root, args.files)
        make_skill_json_tree(json_root, args.files, args.gen_tree)
        md, js = str(md_root), str(json_root)
        registered_md, registered_json = full_load(md), full_load(js)
        go_equiv = load_script(args.gen_tree.with_name("load_bench.py")).load_go_equiv
        modes: dict[str, tuple[Callable[[str], int], str]] = {
            "skill.json: load_dirs (full pipeline)": (full_load, js),
            "skill.json: go-equiv baseline": (lambda root: len(go_equiv([root])), js),
            "SKILL.md: load_dirs (full pipeline)": (full_load, md),
            "SKILL.md: walk only": (walk_only, md),
            "SKILL.md: walk + read + split": (walk_read_split, md),
            "SKILL.md: walk + read + split + YAML": (walk_read_split_yaml, md),
        }
        times = time_rounds(modes, args.rounds, args.warm)
    finally:
        shutil.rmtree(base)

    reference = times["skill.json: load_dirs (full pipeline)"]
    print(
        f"{args.files} files per tree, median of {args.rounds} interleaved rounds after {args.warm} warm-up, "
        f"Python {sys.version.split()[0]}, {os.cpu_count()} CPUs"
    )
    print(f"registered: skill.json {registered_json}, SKILL.md {registered_md}")
    print()
    print(f"| {'what':<40} | {'ms / tree':>10} | {'µs / file':>10} | {'vs skill.json':>13} |")
    print(f"|{'-' * 42}|{'-' * 11}:|{'-' * 11}:|{'-' * 14}:|")
    for name, seconds in times.items():
        per_file = seconds / args.files * 1e6
        print(f"| {name:<40} | {seconds * 1e3:>10.1f} | {per_file:>10.1f} | {seconds / reference:>12.2f}x |")
    print()
    cost = import_ms("yaml")
    print(f"import yaml (paid once, on the first SKILL.md): {'n/a' if cost is None else f'{cost:.1f} ms'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
