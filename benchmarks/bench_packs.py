#!/usr/bin/env python3
"""Skill packs: start-up with many installed packs, install time, refused archives, doc examples.

1. ``ongrid-skills list`` wall time in a fresh venv holding this tree's wheel and
   0, 10 and 50 pip-installed pack distributions (real wheels, installed by real
   pip; two skills each), interleaved with ``python -c pass`` as the floor.
2. ``ongrid-skills install`` of a 10-skill pack as a folder, a .tar.gz and a .zip
   (CLI wall time, which includes start-up and the reload that checks for
   shadowed skills), and ``install_pack()`` in-process.
3. Every hostile archive case: refused, with the reason, and how long refusing took.
4. The number of documentation examples the test suite executes.

    python benchmarks/bench_packs.py --runs 7
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import io
import os
import re
import shutil
import stat
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PIP = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
RUN_SH = b"#!/bin/sh\nread -r args\nprintf '%s\\n' \"$args\"\n"


def pack_wheel(out: Path, index: int) -> Path:
    """A real wheel of a pack distribution with two skill.json skills."""
    dist, package = f"ongrid-bench-pack-{index:03d}", f"ongrid_bench_pack_{index:03d}"
    info = f"{package}-1.0.dist-info"
    files: dict[str, tuple[bytes, int]] = {f"{package}/__init__.py": (b"", 0o644)}
    for n in range(2):
        name = f"bench_{index:03d}_{n}"
        manifest = f'{{"name": "{name}", "description": "Bench skill {name}.", "entry": "run.sh"}}'
        files[f"{package}/{name}/skill.json"] = (manifest.encode(), 0o644)
        files[f"{package}/{name}/run.sh"] = (RUN_SH, 0o755)
    files[f"{info}/METADATA"] = (f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0\n".encode(), 0o644)
    files[f"{info}/WHEEL"] = (
        b"Wheel-Version: 1.0\nGenerator: bench\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        0o644,
    )
    files[f"{info}/entry_points.txt"] = (f"[ongrid_skills]\npack{index:03d} = {package}\n".encode(), 0o644)
    record = [f"{path},sha256={_digest(data)},{len(data)}" for path, (data, _m) in files.items()]
    files[f"{info}/RECORD"] = ("\n".join([*record, f"{info}/RECORD,,"]).encode() + b"\n", 0o644)
    wheel = out / f"{package}-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as zf:
        for path, (data, mode) in files.items():
            entry = zipfile.ZipInfo(path)
            entry.external_attr = (stat.S_IFREG | mode) << 16
            zf.writestr(entry, data)
    return wheel


def _digest(data: bytes) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


# Run inside the venv, in a fresh interpreter as the CLI is: where the time goes
# once the package is imported (first calls: cold metadata and finder caches).
BREAKDOWN = """
import time
from ongrid_plugins import Settings, SkillHost
from ongrid_plugins.plugins import _entry_points, PACK_GROUP, ENTRY_POINT_GROUP
t0 = time.perf_counter()
_entry_points(ENTRY_POINT_GROUP, PACK_GROUP)
t1 = time.perf_counter()
host = SkillHost(Settings.from_env())
host.pm
t2 = time.perf_counter()
host.load()
t3 = time.perf_counter()
print(f"entry points {(t1 - t0) * 1e3:.1f} ms, manager with packs {(t2 - t1) * 1e3:.1f} ms, "
      f"load {(t3 - t2) * 1e3:.1f} ms")
"""


def wall(cmd: list[str], env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return (time.perf_counter() - t0) * 1e3


def user_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ONGRID_", "XDG_", "PYTHON"))}
    for var in ("DATA", "CACHE", "STATE", "CONFIG"):
        env[f"XDG_{var}_HOME"] = str(home / var.lower())
    env["ONGRID_SYSTEM_SKILLS_DIR"] = str(home / "etc")
    return env


def startup(work: Path, runs: int) -> None:
    wheel_dir = work / "wheels"
    subprocess.run([*PIP, "wheel", "--no-deps", "-w", str(wheel_dir), str(REPO)], check=True)
    [ours] = wheel_dir.glob("ongrid_plugins-*.whl")
    venv = work / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python, cli = str(venv / "bin" / "python"), str(venv / "bin" / "ongrid-skills")
    subprocess.run([*PIP, "--python", python, "install", str(ours)], check=True)
    packs = [pack_wheel(wheel_dir, i) for i in range(50)]
    env = user_env(work / "home")
    header = f"{'installed packs':>15} {'skills':>7} {'list ms':>9} {'min':>7} {'max':>7}"
    print(f"\n{header}  {'python -c pass':>14}")
    installed = 0
    for count in (0, 10, 50):
        if count > installed:
            t0 = time.perf_counter()
            subprocess.run(
                [*PIP, "--python", python, "install", "--no-deps", *map(str, packs[installed:count])],
                check=True,
            )
            pip_s = time.perf_counter() - t0
            installed = count
            print(f"{'':>15} (pip installed {count} packs so far; the last batch took {pip_s:.1f} s)")
        subprocess.run([python, "-m", "compileall", "-q", str(venv / "lib")], check=True)
        times: dict[str, list[float]] = {"list": [], "floor": []}
        for i in range(runs + 1):
            for key, cmd in (("floor", [python, "-c", "pass"]), ("list", [cli, "list"])):
                elapsed = wall(cmd, env)
                if i:
                    times[key].append(elapsed)
        out = subprocess.run(
            [cli, "list", "--json"], env=env, capture_output=True, text=True, check=True
        ).stdout
        skills = out.count('"name": "bench_')
        lst = times["list"]
        parts = subprocess.run([python, "-c", BREAKDOWN], env=env, capture_output=True, text=True, check=True)
        print(
            f"{count:>15} {skills:>7} {statistics.median(lst):>9.1f} {min(lst):>7.1f} {max(lst):>7.1f}"
            f"  {statistics.median(times['floor']):>14.1f}   in-process: {parts.stdout.strip()}"
        )


def make_pack(base: Path, skills: int = 10, payload: int = 1 << 20) -> Path:
    pack = base / "bench-pack"
    for n in range(skills):
        folder = pack / f"tool_{n}"
        folder.mkdir(parents=True)
        (folder / "skill.json").write_text(
            f'{{"name": "tool_{n}", "description": "Tool {n}.", "entry": "run.sh"}}'
        )
        (folder / "run.sh").write_bytes(RUN_SH)
        (folder / "run.sh").chmod(0o755)
    (pack / "tool_0" / "data.bin").write_bytes(os.urandom(payload))
    (pack / "pack.json").write_text('{"name": "bench-pack", "version": "1.0"}')
    return pack


def install_times(work: Path, runs: int) -> None:
    from ongrid_plugins import Settings, SkillHost
    from ongrid_plugins.packs.install import install_pack, uninstall_pack

    pack = make_pack(work / "src")
    sources = {"folder": pack}
    with tarfile.open(work / "bench-pack.tar.gz", "w:gz") as tf:
        tf.add(pack, arcname="bench-pack")
    sources["tar.gz"] = work / "bench-pack.tar.gz"
    shutil.make_archive(str(work / "bench-pack"), "zip", pack.parent, "bench-pack")
    sources["zip"] = work / "bench-pack.zip"
    env = user_env(work / "home2")
    cli = str(Path(sys.executable).with_name("ongrid-skills"))
    print(f"\n{'install (10 skills, 1 MiB)':28} {'CLI ms':>8} {'API ms':>8}")
    settings = Settings(
        include_defaults=True,
        load_entry_points=False,
        user_skills_dir=str(work / "api-user"),
        system_skills_dir=str(work / "etc"),
        cache_dir=None,
    )
    pm = SkillHost(settings).pm
    for kind, source in sources.items():
        cli_ms, api_ms = [], []
        for _ in range(runs):
            cli_ms.append(wall([cli, "install", str(source)], env))
            wall([cli, "uninstall", "bench-pack"], env)  # untimed: installing over a pack needs --replace
            t0 = time.perf_counter()
            install_pack(str(source), pm, settings)
            api_ms.append((time.perf_counter() - t0) * 1e3)
            uninstall_pack("bench-pack", settings)
        print(f"{kind:28} {statistics.median(cli_ms):>8.1f} {statistics.median(api_ms):>8.1f}")


def _tar(
    path: Path, members: list[tuple[str, bytes, str]], fmt: int = tarfile.GNU_FORMAT, pax: dict | None = None
) -> Path:
    kinds = {
        "file": tarfile.REGTYPE,
        "dir": tarfile.DIRTYPE,
        "sym": tarfile.SYMTYPE,
        "hard": tarfile.LNKTYPE,
        "chr": tarfile.CHRTYPE,
        "fifo": tarfile.FIFOTYPE,
    }
    with tarfile.open(path, "w:gz", format=fmt) as tf:
        for name, data, kind in members:
            info = tarfile.TarInfo(name)
            info.type = kinds[kind.split(":")[0]]
            if kind.startswith(("sym:", "hard:")):
                info.linkname = kind.split(":", 1)[1]
            info.size = len(data) if kind == "file" else 0
            if pax:
                info.pax_headers = pax
            tf.addfile(info, io.BytesIO(data) if kind == "file" else None)
    return path


def _zip(path: Path, members: list[tuple[str, bytes, int]]) -> Path:
    with zipfile.ZipFile(path, "w") as zf:
        for name, data, mode in members:
            info = zipfile.ZipInfo(name)
            info.create_system = 3
            info.external_attr = mode << 16
            zf.writestr(info, data)
    return path


def refusals(work: Path) -> None:
    from ongrid_plugins.packs.archive import Limits, UnsafeArchive, unpack

    small = Limits(max_file_bytes=1 << 20, max_total_bytes=2 << 20, max_members=100)
    cases = {
        "tar: ../ member (tar-slip)": _tar(work / "a.tgz", [("../evil.sh", b"x", "file")]),
        "tar: absolute member": _tar(work / "b.tgz", [("/etc/cron.d/evil", b"x", "file")]),
        "tar: link to an absolute path": _tar(work / "c.tgz", [("l", b"", "sym:/etc/passwd")]),
        "tar: link escaping with ..": _tar(work / "d.tgz", [("l", b"", "sym:../../etc")]),
        "tar: link escaping via another link": _tar(
            work / "e.tgz",
            [("a/b/c", b"", "dir"), ("a/b/c/up", b"", "sym:../../.."), ("esc", b"", "sym:a/b/c/up/..")],
        ),
        "tar: member written through a link": _tar(
            work / "f.tgz", [("d", b"", "sym:sub"), ("d/evil", b"x", "file")]
        ),
        "tar: hard link": _tar(work / "g.tgz", [("a", b"x", "file"), ("h", b"", "hard:a")]),
        "tar: character device": _tar(work / "h.tgz", [("null", b"", "chr")]),
        "tar: FIFO": _tar(work / "i.tgz", [("pipe", b"", "fifo")]),
        "tar: same name twice": _tar(work / "j.tgz", [("run.sh", b"1", "file"), ("run.sh", b"2", "file")]),
        "tar: file over the per-file cap": _tar(work / "k.tgz", [("big", b"\0" * (2 << 20), "file")]),
        "tar: pack over the total cap": _tar(
            work / "l.tgz", [(f"f{i}", b"\0" * (900 << 10), "file") for i in range(3)]
        ),
        "tar: more members than the cap": _tar(work / "m.tgz", [(f"f{i}", b"", "file") for i in range(150)]),
        "tar.gz: stream expanding past the cap": _tar(
            work / "n.tgz", [("s", b"x", "file")], tarfile.PAX_FORMAT, {"comment": "A" * (4 << 20)}
        ),
        "zip: ../ member (zip-slip)": _zip(work / "a.zip", [("../../evil.sh", b"x", 0o100644)]),
        "zip: absolute member": _zip(work / "b.zip", [("/etc/evil", b"x", 0o100644)]),
        "zip: drive letter": _zip(work / "c.zip", [("C:/evil", b"x", 0o100644)]),
        "zip: escaping symlink": _zip(work / "d.zip", [("l", b"../..", 0o120777)]),
        "zip: FIFO": _zip(work / "e.zip", [("p", b"", 0o010644)]),
        "zip: more members than the cap": _zip(
            work / "f.zip", [(f"f{i}", b"", 0o100644) for i in range(150)]
        ),
    }
    print(f"\n{'hostile archive':40} {'refused':>8} {'ms':>7}  reason")
    refused = 0
    for n, (label, path) in enumerate(cases.items()):
        t0 = time.perf_counter()
        try:
            unpack(str(path), str(work / f"out{n}"), small)
            verdict, reason = "NO", "unpacked!"
        except UnsafeArchive as exc:
            verdict, reason = "yes", f"{exc.member + ': ' if exc.member else ''}{exc.reason}"
            refused += 1
        ms = (time.perf_counter() - t0) * 1e3
        print(f"{label:40} {verdict:>8} {ms:>7.2f}  {reason[:90]}")
    print(f"{refused} of {len(cases)} refused")


def doc_examples() -> None:
    files = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
    py = sh = 0
    for path in files:
        text = path.read_text()
        py += len(re.findall(r"^```python\n", text, re.MULTILINE))
        sh += len(re.findall(r"^<!-- test: sh -->\n```sh\n", text, re.MULTILINE))
    print(
        f"\ndoc examples executed by tests/test_readme.py: {py} Python blocks + {sh} shell blocks = {py + sh}"
    )


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--only", help="comma-separated: startup,install,refusals,docs")
    args = parser.parse_args()
    wanted = set((args.only or "startup,install,refusals,docs").split(","))
    with tempfile.TemporaryDirectory(prefix="bench-packs-") as tmp:
        work = Path(tmp)
        if "startup" in wanted:
            startup(work / "startup", args.runs)
        if "install" in wanted:
            (work / "install").mkdir()
            install_times(work / "install", args.runs)
        if "refusals" in wanted:
            (work / "refusals").mkdir()
            refusals(work / "refusals")
        if "docs" in wanted:
            doc_examples()
    return 0


if __name__ == "__main__":
    sys.exit(main())
