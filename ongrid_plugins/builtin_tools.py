"""Built-in plugin ``builtin_tools``: the Python implementations of the built-in skills.

The skills themselves are SKILL.md files under ``ongrid_plugins/skills/`` whose tools
say ``impl: builtin:ongrid.<name>``; this plugin contributes those keys through
``ongrid_native_tools``. ``disk_usage`` and ``system_info`` reuse the logic of the
scripts next to their SKILL.md (``run.py``, still runnable on their own), imported
as modules; ``host_files`` (``tail_file``, ``find_large_files``) lives here.

Every tool here is read-only. Files are opened with ``O_NONBLOCK`` and checked to be
regular files before anything is read, so a FIFO or a device can never block a call.
"""

from __future__ import annotations

import datetime
import importlib
import json
import os
import stat
from collections.abc import Callable
from types import ModuleType
from typing import TYPE_CHECKING, Any

from .hookspecs import hookimpl

if TYPE_CHECKING:
    from .executors.native import NativeContext

__all__ = ["disk_usage", "find_large_files", "system_info", "tail_file"]

_BLOCK = 65536


def _script(name: str) -> ModuleType:
    """The ``run.py`` of a built-in skill, imported as a module (its ``main`` does not run)."""
    return importlib.import_module(f"ongrid_plugins.skills.{name}.run")


def _time_budget(requested: float, ctx: NativeContext) -> float:
    """The scan budget: what was asked, but ending before the call's own timeout."""
    left = ctx.remaining()
    return min(float(requested), max(left - min(1.0, left / 4), 1e-3))


def disk_usage(args: dict[str, Any], ctx: NativeContext) -> dict[str, Any]:
    """``du``-like size of a tree, its largest entries and files, and its filesystem's space."""
    du = _script("disk_usage")
    parsed = du.parse_args(json.dumps(args))
    parsed["time_budget_seconds"] = _time_budget(parsed["time_budget_seconds"], ctx)
    result: dict[str, Any] = du.measure(parsed, log_line=ctx.log, stop=lambda: ctx.cancelled)
    return result


def system_info(args: dict[str, Any], ctx: NativeContext) -> dict[str, Any]:
    """OS, CPU, load, memory, swap, uptime and process count of this machine."""
    si = _script("system_info")
    result: dict[str, Any] = si.collect(si.parse_args(json.dumps(args)))
    return result


def tail_file(args: dict[str, Any], ctx: NativeContext) -> dict[str, Any]:
    """The last ``lines`` lines of a regular file, reading at most ``max_bytes`` from its end."""
    path = _absolute(args["path"])
    want = int(args.get("lines", 50))
    limit = int(args.get("max_bytes", 1024 * 1024))
    fd = _open_regular(path)
    try:
        st = os.fstat(fd)
        data, start = _read_tail(fd, st.st_size, want, limit)
        cut = start > 0 and os.pread(fd, 1, start - 1) != b"\n"
    finally:
        os.close(fd)
    lines = data.decode("utf-8", errors="replace").split("\n") if data else []
    if data.endswith(b"\n"):
        lines.pop()
    if cut:
        lines = lines[1:]  # the first line began before what was read
    kept = lines[-want:]
    return {
        "path": os.path.realpath(path),
        "size_bytes": st.st_size,
        "modified": _iso(st.st_mtime),
        "lines": kept,
        "line_count": len(kept),
        "truncated": len(kept) < want and start > 0,
    }


def _read_tail(fd: int, size: int, want: int, limit: int) -> tuple[bytes, int]:
    """Bytes from the end of the file holding ``want`` full lines (or ``limit`` bytes), and their offset."""
    chunks: list[bytes] = []
    end = size
    newlines = 0
    while end > 0 and size - end < limit and newlines <= want:
        start = max(0, end - _BLOCK, size - limit)
        chunk = os.pread(fd, end - start, start)
        if not chunk:
            break
        chunks.append(chunk)
        newlines += chunk.count(b"\n")
        end = start
    return b"".join(reversed(chunks)), end


def find_large_files(args: dict[str, Any], ctx: NativeContext) -> dict[str, Any]:
    """The largest regular files under a path, at least ``min_bytes`` each (bounded scan)."""
    du = _script("disk_usage")
    root = _absolute(args["path"])
    try:
        st = os.stat(root)
    except OSError as exc:
        raise FileNotFoundError(f"cannot access {root}: {exc.strerror or exc}") from None
    if not stat.S_ISDIR(st.st_mode):
        raise NotADirectoryError(f"{root} is not a directory")
    scan_args = {
        "top": int(args.get("top", 20)),
        "max_depth": 1,
        "one_filesystem": bool(args.get("one_filesystem", True)),
        "follow_symlinks": False,
        "apparent_size": True,
        "max_entries": int(args.get("max_entries", 2_000_000)),
        "time_budget_seconds": _time_budget(float(args.get("time_budget_seconds", 40)), ctx),
    }
    canonical = os.path.realpath(root)
    scanner = du.Scanner(canonical, st, scan_args, ctx.log, lambda: ctx.cancelled)
    scanner.run()
    minimum = int(args.get("min_bytes", 100 * 1024 * 1024))
    files = [
        dict(item, modified=_mtime(item["path"]))
        for item in scanner.largest_files()
        if item["bytes"] >= minimum
    ]
    return {
        "path": canonical,
        "min_bytes": minimum,
        "files": files,
        "count": len(files),
        "entries_scanned": scanner.entries,
        "errors": scanner.errors,
        "error_samples": scanner.error_samples,
        "skipped_mounts": scanner.skipped_mounts,
        "truncated": scanner.truncated_reason is not None,
        "truncated_reason": scanner.truncated_reason,
    }


def _absolute(raw: str) -> str:
    path = os.path.expanduser(raw)
    if not os.path.isabs(path):
        raise ValueError(f"path must be absolute (or start with ~), got {raw!r}")
    return path


def _open_regular(path: str) -> int:
    """A read-only descriptor on a regular file; never blocks on a FIFO or device."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise FileNotFoundError(f"cannot open {path}: {exc.strerror or exc}") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise ValueError(f"{path} is not a regular file")
    return fd


def _iso(epoch: float) -> str:
    moment = datetime.datetime.fromtimestamp(epoch, datetime.UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def _mtime(path: str) -> str | None:
    try:
        return _iso(os.lstat(path).st_mtime)
    except OSError:
        return None


TOOLS: dict[str, Callable[..., Any]] = {
    "ongrid.disk_usage": disk_usage,
    "ongrid.system_info": system_info,
    "ongrid.tail_file": tail_file,
    "ongrid.find_large_files": find_large_files,
}


@hookimpl
def ongrid_native_tools() -> dict[str, Callable[..., Any]]:
    """The built-in skills' tools: ``builtin:ongrid.<tool name>``."""
    return dict(TOOLS)
