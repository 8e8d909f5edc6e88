"""Build hook: compile the C hot paths, the runner's and the canonical JSON's.

* ``ongrid_plugins/executors/_fastrun.c``: the compiled runner. Without it every call
  goes through the Python runner, which does the same things more slowly
  (``ongrid_plugins/executors/_fast.py``); it needs Linux with glibc >= 2.25.
* ``ongrid_plugins/_speedups.c``: canonical JSON, SHA-256, the audit journal's write, the
  builders of the per-call value objects, and a load's folder listing, schema walk,
  duplicate-key check and manifest field checks.
  Without it the modules that use them run their Python code or hashlib (same results).

Both are optional. Where one cannot be built (no C compiler, no Python headers, another
platform) the package installs without it and says so. ``ONGRID_BUILD_NATIVE=0`` skips
the build; ``CC`` names the compiler (default: the one Python was built with).

An editable install (``pip install -e .``) compiles it next to its source, where the
import system finds it; a wheel gets it as a platform-specific file.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import sysconfig
import tempfile
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

#: (source, module, what it is, what is used without it, whether it needs Linux)
EXTENSIONS = (
    (
        os.path.join("ongrid_plugins", "executors", "_fastrun.c"),
        os.path.join("ongrid_plugins", "executors", "_fastrun"),
        "the compiled runner",
        "the Python runner will be used",
        True,
    ),
    (
        os.path.join("ongrid_plugins", "_speedups.c"),
        os.path.join("ongrid_plugins", "_speedups"),
        "the compiled canonical JSON",
        "the Python encoder will be used",
        False,
    ),
)


class NativeRunnerHook(BuildHookInterface):  # type: ignore[type-arg,unused-ignore]
    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if self.target_name != "wheel" or os.environ.get("ONGRID_BUILD_NATIVE", "1") == "0":
            return
        for source, module, what, without, linux_only in EXTENSIONS:
            if linux_only and not sys.platform.startswith("linux"):
                _say("not Linux: the compiled runner is left out (the Python runner is used)")
                continue
            name = module + str(sysconfig.get_config_var("EXT_SUFFIX") or ".so")
            if version == "editable":
                target = os.path.join(self.root, name)
            else:
                target = os.path.join(tempfile.mkdtemp(prefix="ongrid-native-"), os.path.basename(name))
            if not compile_extension(os.path.join(self.root, source), target, what, without):
                continue
            if version != "editable":
                build_data["force_include"][target] = name
                build_data["pure_python"] = False
                build_data["infer_tag"] = True


def compile_extension(
    source: str,
    target: str,
    what: str = "the compiled runner",
    without: str = "the Python runner will be used",
) -> bool:
    """Compile ``source`` (``what``) into the extension module ``target``; False, and why, on failure."""
    compiler = shlex.split(os.environ.get("CC") or str(sysconfig.get_config_var("CC") or "cc"))
    include = sysconfig.get_paths()["include"]
    command = [
        *compiler,
        "-shared",
        "-fPIC",
        "-O2",
        "-Wall",
        "-Wextra",
        f"-I{include}",
        source,
        "-lm",  # llround, nearbyint: not every Python binary links libm for its extensions
        "-o",
        target + ".tmp",
    ]
    try:
        done = subprocess.run(command, capture_output=True, text=True, check=False)
    except OSError as exc:
        _say(f"no C compiler ({compiler[0]}: {exc.strerror}); {without}")
        return False
    if done.returncode != 0:
        detail = (done.stderr or done.stdout).strip().splitlines()[-5:]
        _say(f"{what} did not build; {without}:\n  " + "\n  ".join(detail))
        return False
    os.replace(target + ".tmp", target)
    return True


def _say(message: str) -> None:
    print(f"ongrid-plugins build: {message}", file=sys.stderr)
