"""Callables for ``baselines/exec_bench.py --callable``: run an entry through SkillHost.

``exec_bench`` calls ``func(entry_path, payload_bytes)``. The first call for an
entry copies it into a fresh skill root (entries outside the root are refused,
as they should be) and loads a host; every call then goes through the whole
pipeline: lookup, argument validation, the gate, the hooks and the executor.
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import tempfile
import time
from typing import Any

from ongrid_plugins import CallResult, SkillHost
from ongrid_plugins.testing import isolated_settings

_HOSTS: dict[str, tuple[SkillHost, str]] = {}
#: Plugins to leave out, from ONGRID_BENCH_DISABLE (e.g. "audit" to time the call without the audit log).
DISABLED = tuple(p for p in os.environ.get("ONGRID_BENCH_DISABLE", "").split(",") if p)


def _host_for(entry: str) -> tuple[SkillHost, str]:
    known = _HOSTS.get(entry)
    if known is not None:
        return known
    base = tempfile.mkdtemp(prefix="ongrid-bench-")
    atexit.register(shutil.rmtree, base, ignore_errors=True)
    name = "bench_" + "".join(c if c.isalnum() else "_" for c in os.path.basename(entry)).lower()
    folder = os.path.join(base, "skills", name)
    os.makedirs(folder)
    shutil.copy2(entry, os.path.join(folder, "entry"))
    manifest = {"name": name, "description": "benchmark entry", "entry": "entry", "timeout_seconds": 30}
    with open(os.path.join(folder, "skill.json"), "w") as f:
        json.dump(manifest, f)
    skills = os.path.join(base, "skills")
    # The sandbox mode from ONGRID_BENCH_SANDBOX ("auto", the default of Settings, or "off").
    sandbox = os.environ.get("ONGRID_BENCH_SANDBOX", "auto")
    settings = isolated_settings(base, skills, disable_plugins=DISABLED, sandbox=sandbox)
    host = SkillHost(settings)
    host.load()
    # An entry changed in the last 2 s is hashed again on every call (its timestamps
    # could still hide a change: git's "racily clean" rule, catalog.digest); deployed
    # entries are older than that, so the calls timed here start once it is.
    time.sleep(max(0.0, 2.05 - (time.time() - os.stat(os.path.join(folder, "entry")).st_ctime)))
    _HOSTS[entry] = (host, name)
    return host, name


def _check(result: CallResult) -> Any:
    if not result.ok:
        raise RuntimeError(f"{result.tool}: {result.error}")
    return result.value


def call(entry: str, payload: bytes) -> Any:
    """One ``SkillHost.call`` of ``entry`` with ``payload`` as the arguments."""
    host, name = _host_for(entry)
    return _check(host.call(name, json.loads(payload)))


async def acall(entry: str, payload: bytes) -> Any:
    """One ``await SkillHost.acall`` of ``entry`` with ``payload`` as the arguments."""
    host, name = _host_for(entry)
    return _check(await host.acall(name, json.loads(payload)))
