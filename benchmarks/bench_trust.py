#!/usr/bin/env python3
"""Host start with and without the trust checks, side by side: 100 packs of 10 skills.

Every pack is installed the way ``ongrid-skills install --yes`` installs it (consent
sealed in skills.lock) and, for the ``signed`` rows, signed with an Ed25519 SSH key
(``ssh-keygen -Y sign``) named in the trust policy. Each run is a new Python process
that builds a ``SkillHost`` and loads it (what ``ongrid-skills list`` does before it
prints), timed from inside the process around the load, in wall-clock time and in the
process's CPU time (which a busy shared machine inflates less):

* ``off``: the same tree with the trust checks switched off in the child (no consent
  seal, no signature, no growth check): what a start cost before them;
* ``consent``: the seals checked and every tool compared with its grant;
* ``signed``: the same plus every pack's signature verified against the policy, and
  ``ONGRID_REQUIRE_SIGNED=1``.

The runs of the three modes are interleaved (off, consent, signed, off, ...), so a
busy machine slows all of them alike.

    python benchmarks/bench_trust.py --packs 100 --skills 10 --runs 7

Target (issue 37): ``signed`` costs at most 20% more than ``off``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

CHILD = r"""
import json, sys, time
mode = sys.argv[1]
if mode == "off":
    import ongrid_plugins.catalog.build as build
    build.consent_problem = lambda *a: ""
    build._signature_problem = lambda *a: ""
    build.withhold_grown = lambda *a: []
from ongrid_plugins import SkillHost
from ongrid_plugins.settings import Settings
started, cpu = time.perf_counter(), time.process_time()
host = SkillHost(Settings.from_env())
report = host.load()
took, cpu = time.perf_counter() - started, time.process_time() - cpu
print(json.dumps({"seconds": took, "cpu": cpu, "registered": report.registered}))
"""


def build_tree(base: Path, packs: int, skills: int) -> dict[str, str]:
    """Install ``packs`` signed packs; return the environment of a host that sees them."""
    from ongrid_plugins.catalog.trust import signed_message
    from ongrid_plugins.packs.install import install_pack
    from ongrid_plugins.packs.trusted import source_digest
    from ongrid_plugins.plugins import get_plugin_manager
    from ongrid_plugins.settings import Settings
    from ongrid_plugins.testing import make_skill

    # Every folder named outright: nothing of the user's is read or written.
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("ONGRID_")},
        "XDG_DATA_HOME": str(base / "data"),
        "XDG_STATE_HOME": str(base / "state"),
        "XDG_CONFIG_HOME": str(base / "config"),
        "ONGRID_CACHE_DIR": "off",
        "ONGRID_SYSTEM_SKILLS_DIR": str(base / "etc"),
        "ONGRID_USER_SKILLS_DIR": str(base / "data" / "skills"),
        "ONGRID_STATE_DIR": str(base / "state"),
        "ONGRID_CONFIG_DIR": str(base / "config"),
    }
    key = base / "signer"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "bench", "-f", str(key)], check=True)
    settings = Settings.from_env(env)
    pm = get_plugin_manager(settings)
    for p in range(packs):
        pack = base / "src" / f"pack{p:03d}"
        for s in range(skills):
            make_skill(pack, f"p{p:03d}_s{s:02d}", sandbox={"network": False, "write": ["~/.cache/bench"]})
        (pack / "pack.json").write_text(json.dumps({"name": pack.name, "version": "1.0"}))
        name, digest = source_digest(str(pack))
        signed = subprocess.run(
            ["ssh-keygen", "-Y", "sign", "-n", "ongrid-pack", "-f", str(key)],
            input=signed_message(name, digest),
            capture_output=True,
            check=True,
        )
        (pack / "ongrid-pack.sig").write_bytes(signed.stdout)
        install_pack(str(pack), pm, settings)
    policy = Path(settings.config_dir) / "trust.json"
    policy.parent.mkdir(parents=True, exist_ok=True)
    policy.write_text(json.dumps({"signers": {"bench": {"key": Path(f"{key}.pub").read_text().strip()}}}))
    return env


def start(env: dict[str, str], mode: str) -> tuple[float, float, int]:
    extra = {"ONGRID_REQUIRE_SIGNED": "1"} if mode == "signed" else {}
    done = subprocess.run(
        [sys.executable, "-c", CHILD, mode], env={**env, **extra}, capture_output=True, text=True, check=True
    )
    out = json.loads(done.stdout.strip().splitlines()[-1])
    return out["seconds"], out["cpu"], out["registered"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--packs", type=int, default=100)
    parser.add_argument("--skills", type=int, default=10)
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-trust-", dir="/var/tmp") as tmp:
        env = build_tree(Path(tmp), args.packs, args.skills)
        times: dict[str, list[float]] = {"off": [], "consent": [], "signed": []}
        cpus: dict[str, list[float]] = {mode: [] for mode in times}
        counts: dict[str, int] = {}
        for _ in range(args.runs):
            for mode in times:
                seconds, cpu, registered = start(env, mode)
                times[mode].append(seconds)
                cpus[mode].append(cpu)
                counts[mode] = registered
    base, base_cpu = statistics.median(times["off"]), statistics.median(cpus["off"])
    least = min(cpus["off"])
    print(f"{args.packs} packs x {args.skills} skills, {args.runs} runs each, load inside a new process")
    head = f"{'mode':<9} {'skills':>6} {'wall med ms':>11} {'wall min':>8} {'vs off':>7}"
    print(head + f" {'cpu med ms':>10} {'vs off':>7} {'cpu min ms':>10} {'vs off':>7}")
    for mode, values in times.items():
        median, cpu = statistics.median(values), statistics.median(cpus[mode])
        low = min(cpus[mode])
        print(
            f"{mode:<9} {counts[mode]:>6} {median * 1000:>11.1f} {min(values) * 1000:>8.1f} "
            f"{(median / base - 1) * 100:>+6.1f}% {cpu * 1000:>10.1f} {(cpu / base_cpu - 1) * 100:>+6.1f}% "
            f"{low * 1000:>10.1f} {(low / least - 1) * 100:>+6.1f}%"
        )


if __name__ == "__main__":
    main()
