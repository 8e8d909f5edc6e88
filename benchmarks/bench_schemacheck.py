"""Per-schema cost of the schema check (ongrid_plugins.schema) against jsonschema (a script, not a test).

Builds the argument schemas of /work/shared/bench/gen_tree.py (``make_manifest``: 3-5
properties drawn from its PROP_POOL, some with defaults, ``required`` and
``additionalProperties: false``) and times, interleaved in rounds with a rotating order
so drift hits every method alike, the median per-schema wall time of:

* ``schema.check.check_schema`` (the fast path: these schemas never reach jsonschema);
* what a DEFER costs on a verdict-cache hit (canonical JSON, blake2b, set lookup);
* ``Draft202012Validator.check_schema``, a reused 2020-12 metaschema validator's
  ``is_valid``, and ``Draft7Validator.check_schema`` for scale;
* ``schema.defaults.check_defaults`` against building a ``Draft202012Validator`` (with the
  format checker) for every default-carrying node and validating its default.

It also prints the import cost of jsonschema and of the schema check (``-X importtime``, with
bytecode cached in a temporary PYTHONPYCACHEPREFIX).

Usage: ``python benchmarks/bench_schemacheck.py [--schemas 200] [--rounds 15]``
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import random
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

from jsonschema import Draft7Validator, Draft202012Validator  # noqa: E402

from ongrid_plugins.schema import check, defaults, verdicts  # noqa: E402

GEN_TREE = Path("/work/shared/bench/gen_tree.py")


def load_gen_tree(path: Path) -> Any:
    spec = importlib.util.spec_from_file_location("gen_tree", path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def build_schemas(gen_tree: Any, count: int, seed: int) -> list[dict[str, Any]]:
    """Argument schemas exactly as gen_tree.make_manifest writes them."""
    rng = random.Random(seed)
    schemas = []
    for index in range(count):
        name = f"{rng.choice(gen_tree.VERBS)}_{rng.choice(gen_tree.NOUNS)}_{index:05d}"
        manifest = gen_tree.make_manifest(rng, name, rng.choice(gen_tree.CATEGORIES))
        schemas.append(manifest["schema"])
    return schemas


def default_nodes(schema: dict[str, Any]) -> list[dict[str, Any]]:
    return [node for node in schema["properties"].values() if "default" in node]


def jsonschema_defaults(schema: dict[str, Any]) -> bool:
    """The straightforward way: one validator per default-carrying node."""
    ok = True
    for node in default_nodes(schema):
        alone = {key: value for key, value in node.items() if key != "default"}
        validator = Draft202012Validator(alone, format_checker=Draft202012Validator.FORMAT_CHECKER)
        ok = validator.is_valid(node["default"]) and ok
    return ok


def cache_hit(cache: verdicts.VerdictCache) -> Callable[[object], object]:
    def run(schema: object) -> object:
        key = verdicts._cache_key(schema)
        return key is not None and key in cache

    return run


def time_rounds(
    methods: dict[str, Callable[[Any], object]], schemas: list[dict[str, Any]], rounds: int
) -> dict[str, float]:
    """Median per-schema µs of each method, rounds interleaved in a rotating order."""
    samples: dict[str, list[float]] = {name: [] for name in methods}
    names = list(methods)
    for round_index in range(rounds):
        shift = round_index % len(names)
        for name in names[shift:] + names[:shift]:
            method = methods[name]
            started = time.perf_counter()
            for schema in schemas:
                method(schema)
            samples[name].append((time.perf_counter() - started) / len(schemas) * 1e6)
    return {name: statistics.median(values) for name, values in samples.items()}


def import_ms(module: str) -> tuple[float, float] | None:
    """(self, cumulative) ms of importing `module` in a fresh interpreter (-X importtime):
    the best of three runs after a warm-up run.

    The bytecode goes to a private PYTHONPYCACHEPREFIX: this environment sets
    PYTHONDONTWRITEBYTECODE, which would otherwise charge compiling the source to every
    import (8 ms for the schema check).
    """
    best: tuple[float, float] | None = None
    with tempfile.TemporaryDirectory() as pycache:
        env = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
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
                parts = [part.strip() for part in line.split("|")]
                if run and len(parts) == 3 and parts[2] == module:
                    found = (int(parts[0].split()[-1]) / 1000, int(parts[1]) / 1000)
                    best = found if best is None or found[1] < best[1] else best
    return best


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--schemas", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--gen-tree", type=Path, default=GEN_TREE)
    args = parser.parse_args()

    schemas = build_schemas(load_gen_tree(args.gen_tree), args.schemas, args.seed)
    # Sanity: the fast path vouches for all of them and jsonschema agrees.
    for schema in schemas:
        assert check.fast_verdict(schema) is check.FastVerdict.VALID
        assert check.check_schema(schema) is None
        assert defaults.check_defaults(schema) == [] and jsonschema_defaults(schema)
        Draft202012Validator.check_schema(schema)

    warm = verdicts.VerdictCache(None)
    for schema in schemas:
        key = verdicts._cache_key(schema)
        assert key is not None
        warm.add(key)
    metaschema = Draft202012Validator(
        Draft202012Validator.META_SCHEMA, format_checker=Draft202012Validator.FORMAT_CHECKER
    )

    schema_methods: dict[str, Callable[[Any], object]] = {
        "schemacheck.check_schema (fast path)": check.check_schema,
        "DEFER on a verdict-cache hit": cache_hit(warm),
        "Draft202012Validator.check_schema": Draft202012Validator.check_schema,
        "2020-12 metaschema validator .is_valid (reused)": metaschema.is_valid,
        "Draft7Validator.check_schema": Draft7Validator.check_schema,
    }
    default_methods: dict[str, Callable[[Any], object]] = {
        "schemacheck.check_defaults": defaults.check_defaults,
        "jsonschema: a validator per default node": jsonschema_defaults,
    }
    schema_times = time_rounds(schema_methods, schemas, args.rounds)
    default_times = time_rounds(default_methods, schemas, args.rounds)

    default_count = sum(len(default_nodes(schema)) for schema in schemas)
    print(
        f"{len(schemas)} schemas from {args.gen_tree.name} (seed {args.seed}), "
        f"{default_count} defaults, median of {args.rounds} interleaved rounds, "
        f"Python {sys.version.split()[0]}"
    )
    print()
    print(f"| {'method':<50} | {'µs/schema':>10} | {'vs fast':>8} |")
    print(f"|{'-' * 52}|{'-' * 12}:|{'-' * 9}:|")
    for times in (schema_times, default_times):
        base = next(iter(times.values()))
        for name, micros in times.items():
            print(f"| {name:<50} | {micros:>10.1f} | {micros / base:>7.0f}x |")
    print()
    for module in ("jsonschema", "ongrid_plugins.schema.check"):
        cost = import_ms(module)
        shown = "n/a" if cost is None else f"{cost[0]:.1f} ms self, {cost[1]:.1f} ms cumulative"
        print(f"import {module}: {shown}")
    print("(the schema check's cumulative time includes the ongrid_plugins package __init__)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
