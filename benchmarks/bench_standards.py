"""What the 2026-standards surfaces cost (a script, not a test): MCP's Skills extension,
the ``<available_skills>`` export and the OpenTelemetry plugin.

1. ``skills/list`` (every page), one ``skills/get`` and ``export("skills-prompt")`` over
   N SKILL.md skills of four files each, in-process (the answers the MCP handlers send,
   without the transport), the catalog's file hashes warm as in a running server.
2. The ``otel`` plugin's cost per call: ``ongrid_before_call`` + ``ongrid_after_call``
   with the OpenTelemetry SDK recording (an in-memory exporter and metric reader).

Usage: ``python benchmarks/bench_standards.py [--skills 100 500] [--repeat 5] [--hooks 5000]``
"""

from __future__ import annotations

import argparse
import functools
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ongrid_plugins import SkillHost
from ongrid_plugins.testing import isolated_settings, make_skill_md


def best_ms(fn, repeat: int) -> float:  # type: ignore[no-untyped-def]
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1000)
    return min(times)


def skills_rows(counts: list[int], repeat: int) -> None:
    from ongrid_plugins.server.mcp_skills import get_skill, list_skills

    print("| skills | skills/list, all pages ms | skills/get ms | skills-prompt export ms |")
    print("|---:|---:|---:|---:|")
    for count in counts:
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp) / "skills"
            for n in range(count):
                files = {
                    "references/a.md": "# A\n" * 50,
                    "scripts/run.py": "print(1)\n",
                    "assets/x.bin": b"\0" * 512,
                }
                make_skill_md(root, f"skill-{n:04d}", description=f"Skill {n}.", files=files, license="MIT")
            host = SkillHost(isolated_settings(tmp, root))
            skills = [s for s in host.skills() if s.format == "SKILL.md"]

            def every_page(skills: list[Any] = skills) -> None:
                cursor = None
                while True:
                    page = list_skills(skills, cursor)
                    cursor = page.get("nextCursor")
                    if cursor is None:
                        return

            listing = best_ms(every_page, repeat)
            one = best_ms(functools.partial(get_skill, skills, "skill://skill-0000/SKILL.md"), repeat)
            prompt = best_ms(functools.partial(host.export, "skills-prompt"), repeat)
            print(f"| {count} | {listing:.1f} | {one:.1f} | {prompt:.1f} |")


def otel_row(calls: int) -> None:
    from opentelemetry import metrics, trace
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from ongrid_plugins.audit.telemetry import plugin
    from ongrid_plugins.models import CallResult

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    metrics.set_meter_provider(MeterProvider(metric_readers=[InMemoryMetricReader()]))
    with tempfile.TemporaryDirectory() as tmp:
        from ongrid_plugins.testing import make_skill

        make_skill(Path(tmp) / "skills", "echo")
        host = SkillHost(isolated_settings(tmp, Path(tmp) / "skills"))
        otel = plugin()
        host.tools()
        tool = host.registry.snapshot.tools["echo"]
        from ongrid_plugins.models import CallRequest

        persona = host.persona("operator")
        requests = [CallRequest(tool, {}, persona, f"c{i}", "d") for i in range(calls)]
        result = CallResult("echo", True, {}, duration=0.01, status="ok")
        start = time.perf_counter()
        for request in requests:
            otel.ongrid_before_call(request)
            otel.ongrid_after_call(request, result)
        per_call = (time.perf_counter() - start) / calls * 1e6
    print()
    print("| otel plugin, SDK recording | µs per call (before + after hook) | spans |")
    print("|---|---:|---:|")
    print(f"| {calls} calls | {per_call:.1f} | {len(exporter.get_finished_spans())} |")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--skills", type=int, nargs="+", default=[100, 500])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--hooks", type=int, default=5000)
    args = parser.parse_args()
    skills_rows(args.skills, args.repeat)
    otel_row(args.hooks)


if __name__ == "__main__":
    main()
