#!/usr/bin/env python3
"""system_info: describe the machine (OS, CPU, load, memory, swap, uptime, processes), read-only.

Wire protocol: one JSON object on stdin (the arguments), one JSON object on
stdout (the result), log lines on stderr, non-zero exit status on failure
(2: bad arguments, with ``{"error": "..."}`` on stdout).

Standard library only, and compatible with Python >= 3.8: the interpreter is
whatever ``python3`` is first on PATH, which may be older than the host's.
Facts come from /proc and /etc/os-release on Linux, with portable fallbacks;
any single fact that cannot be read is ``null``, never a crash.
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import socket
import sys
import time
from typing import TYPE_CHECKING, Any, NoReturn

if TYPE_CHECKING:
    from collections.abc import Callable

PROG = "system_info"
SECTIONS = ("os", "cpu", "load", "memory", "swap", "uptime", "processes")


class UsageError(Exception):
    """The arguments are unusable (exit status 2)."""


def fail(message: str, status: int = 2) -> NoReturn:
    print(f"{PROG}: {message}", file=sys.stderr, flush=True)
    sys.stdout.write(json.dumps({"error": message}) + "\n")
    sys.stdout.flush()
    sys.exit(status)


def parse_args(raw: str) -> list[str]:
    """The sections asked for, in their canonical order."""
    try:
        data = json.loads(raw) if raw.strip() else {}
    except ValueError as exc:
        raise UsageError(f"stdin is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise UsageError("stdin must be a JSON object")
    unknown = sorted(set(data) - {"include"})
    if unknown:
        raise UsageError("unknown argument(s): " + ", ".join(unknown))
    include = data.get("include", list(SECTIONS))
    if not isinstance(include, list) or not include:
        raise UsageError("'include' must be a non-empty list of section names")
    bad = [name for name in include if name not in SECTIONS]
    if bad:
        raise UsageError(f"unknown section(s) in 'include': {bad!r}; choose from {', '.join(SECTIONS)}")
    return [name for name in SECTIONS if name in include]


def safe(read: Callable[[], Any]) -> Any:
    """``read()``, or ``None`` when the fact is not available here."""
    try:
        return read()
    except Exception:
        return None


def read_text(path: str) -> str:
    with open(path, encoding="utf-8", errors="replace") as handle:
        return handle.read()


def percent(part: int | None, whole: int | None) -> float | None:
    if part is None or not whole:
        return None
    return round(part * 100.0 / whole, 1)


# -- os ---------------------------------------------------------------------


def os_release() -> dict[str, str] | None:
    """The ``KEY=value`` pairs of os-release(5), unquoted."""
    for path in ("/etc/os-release", "/usr/lib/os-release"):
        try:
            text = read_text(path)
        except OSError:
            continue
        values: dict[str, str] = {}
        for line in text.splitlines():
            line = line.strip()
            if not line or line.startswith("#") or "=" not in line:
                continue
            key, _, value = line.partition("=")
            value = value.strip()
            if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
                value = value[1:-1].replace('\\"', '"').replace("\\\\", "\\")
            values[key.strip()] = value
        return values
    return None


def uname() -> tuple[str, str, str, str, str]:
    """(system, node, release, version, machine), from the kernel when possible."""
    if hasattr(os, "uname"):
        u = os.uname()
        return (u.sysname, u.nodename, u.release, u.version, u.machine)
    p = platform.uname()
    return (p.system, p.node, p.release, p.version, p.machine)


def os_section() -> dict[str, Any]:
    system, node, release, version, machine = safe(uname) or ("", "", "", "", "")
    values = safe(os_release) or {}
    distro = None
    if values:
        distro = {
            "name": values.get("NAME"),
            "version": values.get("VERSION") or values.get("VERSION_ID"),
            "id": values.get("ID"),
            "pretty_name": values.get("PRETTY_NAME"),
        }
    return {
        "system": system or None,
        "release": release or None,
        "version": version or None,
        "machine": machine or None,
        "hostname": safe(socket.gethostname) or node or None,
        "distro": distro,
    }


# -- cpu --------------------------------------------------------------------


def cpuinfo() -> list[dict[str, str]]:
    """One dict per processor block of /proc/cpuinfo (plus trailing global blocks)."""
    blocks: list[dict[str, str]] = []
    current: dict[str, str] = {}
    for line in read_text("/proc/cpuinfo").splitlines():
        if not line.strip():
            if current:
                blocks.append(current)
                current = {}
            continue
        key, _, value = line.partition(":")
        current[key.strip()] = value.strip()
    if current:
        blocks.append(current)
    return blocks


def cpu_section() -> dict[str, Any]:
    blocks = safe(cpuinfo) or []
    model = None
    # x86: "model name"; ARM: "Hardware"/"Model"; POWER: "cpu"; MIPS: "cpu model".
    for key in ("model name", "Hardware", "Model", "cpu model", "cpu", "Processor"):
        model = next((b[key] for b in blocks if b.get(key)), None)
        if model:
            break
    cores = {(b.get("physical id"), b.get("core id")) for b in blocks if "core id" in b}
    usable = safe(lambda: len(os.sched_getaffinity(0)))
    return {
        "count": safe(os.cpu_count),
        "usable": usable,
        "physical_cores": len(cores) or None,
        "model": model or None,
    }


# -- load -------------------------------------------------------------------


def load_section() -> dict[str, Any]:
    loads = safe(os.getloadavg)
    if not loads:
        return {"1min": None, "5min": None, "15min": None}
    return {"1min": round(loads[0], 2), "5min": round(loads[1], 2), "15min": round(loads[2], 2)}


# -- memory and swap --------------------------------------------------------


def meminfo() -> dict[str, int]:
    """/proc/meminfo in bytes."""
    values: dict[str, int] = {}
    for line in read_text("/proc/meminfo").splitlines():
        key, _, rest = line.partition(":")
        fields = rest.split()
        if not fields:
            continue
        try:
            number = int(fields[0])
        except ValueError:
            continue
        values[key.strip()] = number * 1024 if fields[1:2] == ["kB"] else number
    return values


def sysconf_total() -> int | None:
    pages = os.sysconf("SC_PHYS_PAGES")
    size = os.sysconf("SC_PAGE_SIZE")
    return pages * size if pages > 0 and size > 0 else None


def memory_section(info: dict[str, int]) -> dict[str, Any]:
    total = info.get("MemTotal") or safe(sysconf_total)
    available = info.get("MemAvailable")
    if available is None and "MemFree" in info:  # kernels before 3.14
        available = info["MemFree"] + info.get("Buffers", 0) + info.get("Cached", 0)
    used = total - available if total is not None and available is not None else None
    return {
        "total_bytes": total,
        "available_bytes": available,
        "used_bytes": used,
        "used_percent": percent(used, total),
    }


def swap_section(info: dict[str, int]) -> dict[str, Any]:
    total = info.get("SwapTotal")
    free = info.get("SwapFree")
    used = total - free if total is not None and free is not None else None
    return {
        "total_bytes": total,
        "free_bytes": free,
        "used_bytes": used,
        "used_percent": percent(used, total) if total else (0.0 if total == 0 else None),
    }


# -- uptime and processes ---------------------------------------------------


def uptime_seconds() -> float:
    return float(read_text("/proc/uptime").split()[0])


def boot_epoch() -> int:
    for line in read_text("/proc/stat").splitlines():
        if line.startswith("btime "):
            return int(line.split()[1])
    raise LookupError("no btime in /proc/stat")


def uptime_section() -> dict[str, Any]:
    seconds = safe(uptime_seconds)
    boot = safe(boot_epoch)
    if boot is None and seconds is not None:
        boot = int(time.time() - seconds)
    if seconds is None and boot is not None:
        seconds = max(0.0, time.time() - boot)
    iso = None
    if boot is not None:
        moment = datetime.datetime.fromtimestamp(boot, datetime.timezone.utc)  # noqa: UP017 - py3.8
        iso = moment.strftime("%Y-%m-%dT%H:%M:%SZ")
    return {
        "seconds": round(seconds, 2) if seconds is not None else None,
        "boot_time": iso,
        "boot_time_epoch": boot,
    }


def process_count() -> int:
    return sum(1 for name in os.listdir("/proc") if name.isdigit())


def running_count() -> int:
    for line in read_text("/proc/stat").splitlines():
        if line.startswith("procs_running "):
            return int(line.split()[1])
    raise LookupError("no procs_running in /proc/stat")


def processes_section() -> dict[str, Any]:
    return {"count": safe(process_count), "running": safe(running_count)}


# -- main -------------------------------------------------------------------


def collect(sections: list[str]) -> dict[str, Any]:
    info: dict[str, int] = {}
    if "memory" in sections or "swap" in sections:
        info = safe(meminfo) or {}
    builders: dict[str, Callable[[], dict[str, Any]]] = {
        "os": os_section,
        "cpu": cpu_section,
        "load": load_section,
        "memory": lambda: memory_section(info),
        "swap": lambda: swap_section(info),
        "uptime": uptime_section,
        "processes": processes_section,
    }
    return {name: safe(builders[name]) for name in sections}


def main() -> int:
    try:
        sections = parse_args(sys.stdin.read())
    except UsageError as exc:
        fail(str(exc))
    sys.stdout.write(json.dumps(collect(sections)) + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
