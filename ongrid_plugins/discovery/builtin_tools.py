"""Built-in plugin ``builtin_tools``: the Python implementations of the built-in skills.

The skills themselves are SKILL.md files under ``ongrid_plugins/skills/`` whose tools
say ``impl: builtin:ongrid.<name>``; this plugin contributes those keys through
``ongrid_native_tools``. ``disk_usage`` and ``system_info`` reuse the logic of the
scripts next to their SKILL.md (``run.py``, still runnable on their own), imported
as modules; ``host_files`` (``tail_file``, ``find_large_files``) lives here.

Every tool here is read-only. Files are opened with ``O_NONBLOCK`` and checked to be
regular files before anything is read, so a FIFO or a device can never block a call.

Native tools run inside the host process, so no kernel sandbox can narrow them: the
``host_files`` tools confine themselves. They read only beneath the folders of
``Settings.host_files_dirs`` (``ONGRID_HOST_FILES_DIRS``, default ``/var/log``), and
decide it with descriptors, not path strings: the requested path must lie lexically
in one allowed folder; that folder is opened (``O_PATH | O_DIRECTORY``) and the rest of
the path is opened beneath it with :func:`~ongrid_plugins.discovery.roots.open_beneath` (no
symlink in any component, no ``..``), and ``find_large_files`` opens every folder it
walks the same way, beneath the descriptor of the folder it was asked about. A path
outside, a symlink on the way, or a file or folder swapped for a symlink while the
call runs is refused or skipped; nothing outside is ever read or listed.
"""

from __future__ import annotations

import contextlib
import errno
import importlib
import json
import os
import stat
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import TYPE_CHECKING, Any, NamedTuple

from ..hookspecs import hookimpl
from .roots import open_beneath

if TYPE_CHECKING:
    from ..executors.native import NativeContext

__all__ = ["disk_usage", "find_large_files", "system_info", "tail_file"]

_O_PATH = getattr(os, "O_PATH", 0)  # Linux; elsewhere a plain read-only open

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
    want = int(args.get("lines", 50))
    limit = int(args.get("max_bytes", 1024 * 1024))
    with _placed(args["path"], ctx) as place:
        fd = _open_regular(place)
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
        "path": place.shown,
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
    scan_args = {
        "top": int(args.get("top", 20)),
        "max_depth": 1,
        "one_filesystem": bool(args.get("one_filesystem", True)),
        "follow_symlinks": False,
        "apparent_size": True,
        "max_entries": int(args.get("max_entries", 2_000_000)),
        "time_budget_seconds": _time_budget(float(args.get("time_budget_seconds", 40)), ctx),
    }
    minimum = int(args.get("min_bytes", 100 * 1024 * 1024))
    with _placed(args["path"], ctx) as place:
        fd = _open_folder(place)
    try:
        du = _script("disk_usage")
        beneath = _Beneath(fd, place.shown)
        scanner = du.Scanner(
            place.shown, os.fstat(fd), scan_args, ctx.log, lambda: ctx.cancelled, beneath.open
        )
        scanner.run()
        files = [
            dict(item, modified=beneath.modified(item["path"]))
            for item in scanner.largest_files()
            if item["bytes"] >= minimum
        ]
    finally:
        os.close(fd)
    return {
        "path": place.shown,
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


class _Beneath:
    """Opens the paths a scan shows beneath the descriptor of the scanned folder.

    The scanner's paths are for display only: each one is turned back into a path
    relative to the scanned folder and opened with ``open_beneath``, so a folder
    swapped for a symlink (to anywhere) after it was listed is refused, never entered.
    """

    def __init__(self, root_fd: int, root: str) -> None:
        self.root_fd = root_fd
        self.root = root
        self.prefix = root.rstrip("/") + "/"

    def relative(self, path: str) -> str:
        if path == self.root:
            return ""
        if not path.startswith(self.prefix):  # the scanner only joins names under the root
            raise OSError(errno.EXDEV, "not beneath the scanned folder", path)
        return path[len(self.prefix) :]

    def open(self, path: str, flags: int) -> int:
        """The scanner's ``opener``: a folder beneath the root, with no symlink on the way."""
        relative = self.relative(path)
        if not relative:
            return os.open(".", flags, dir_fd=self.root_fd)
        return open_beneath(self.root_fd, relative, flags)

    def modified(self, path: str) -> str | None:
        """The mtime of a file found, looked up beneath the root again (never by path)."""
        try:
            fd = open_beneath(self.root_fd, self.relative(path), _O_PATH)
        except OSError:
            return None
        try:
            return _iso(os.fstat(fd).st_mtime)
        finally:
            os.close(fd)


# -- the folders host_files may read --------------------------------------------------

_WIDEN = "ONGRID_HOST_FILES_DIRS"
_FOLDER_FLAGS = _O_PATH | os.O_DIRECTORY | os.O_CLOEXEC
_READ_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY
_SCAN_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NONBLOCK | os.O_NOFOLLOW


class _Place(NamedTuple):
    """Where a requested path lies: an allowed folder's descriptor and the path beneath it."""

    given: str
    """The path asked for, absolute and normalised (for messages)."""
    folder: str
    """The allowed folder that holds it, canonical."""
    fd: int
    """An ``O_PATH`` descriptor of that folder, open while the ``with`` block runs."""
    relative: str
    """The rest of the path beneath the folder; empty for the folder itself."""

    @property
    def shown(self) -> str:
        """The canonical path of what is read (no symlink is ever followed beneath the folder)."""
        if not self.relative:
            return self.folder
        return self.folder.rstrip("/") + "/" + self.relative


@contextlib.contextmanager
def _placed(raw: str, ctx: NativeContext) -> Iterator[_Place]:
    """The allowed folder holding ``raw``, opened; ``PermissionError`` when none does."""
    path = os.path.normpath(_absolute(raw))
    folders = ctx.settings.host_files_dirs
    folder, relative = _containing(path, folders)
    try:
        fd = os.open(folder, _FOLDER_FLAGS)
    except OSError as exc:
        message = f"cannot open {folder}, the allowed folder holding {path}: {exc.strerror or exc}"
        raise FileNotFoundError(f"{message} (the folders come from {_WIDEN})") from None
    try:
        yield _Place(path, _fd_path(fd, folder), fd, relative)
    finally:
        os.close(fd)


def _containing(path: str, folders: tuple[str, ...]) -> tuple[str, str]:
    """The allowed folder lexically holding ``path`` (the longest), and the path beneath it."""
    best: tuple[str, str] | None = None
    for configured in folders:
        given = os.path.normpath(os.path.expanduser(configured))
        for folder in dict.fromkeys((given, os.path.realpath(given))):
            if not os.path.isabs(folder):
                continue
            prefix = folder.rstrip("/") + "/"
            if path == folder:
                relative = ""
            elif path.startswith(prefix):
                relative = path[len(prefix) :]
            else:
                continue
            if best is None or len(folder) > len(best[0]):
                best = (folder, relative)
    if best is None:
        allowed = ", ".join(folders) if folders else "none are configured"
        message = f"{path} is outside the folders host_files may read ({allowed}); "
        message += f"an operator can widen them with {_WIDEN} (absolute folders separated by ':')"
        raise PermissionError(message)
    return best


def _fd_path(fd: int, fallback: str) -> str:
    """The canonical path of a folder descriptor."""
    with contextlib.suppress(OSError):
        real = os.readlink(f"/proc/self/fd/{fd}")
        if real.startswith("/"):
            return real
    return os.path.realpath(fallback)


def _beneath(place: _Place, flags: int) -> int:
    """``open_beneath`` of the place, its refusals explained."""
    try:
        return open_beneath(place.fd, place.relative, flags)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            message = f"{place.given}: a symbolic link is on the way; host_files follows no links "
            message += f"(give the path of the file itself, beneath {place.folder})"
            raise PermissionError(message) from None
        if exc.errno == errno.EXDEV:
            raise PermissionError(f"{place.given} leaves the allowed folder {place.folder}") from None
        if exc.errno == errno.ENOTDIR and flags & os.O_DIRECTORY:
            os.close(_beneath(place, _O_PATH))  # a symlink in the last place is refused as one
            raise NotADirectoryError(f"{place.given} is not a directory") from None
        raise FileNotFoundError(f"cannot open {place.given}: {exc.strerror or exc}") from None


def _open_regular(place: _Place) -> int:
    """A read-only descriptor on a regular file beneath the place; never blocks on a FIFO or device."""
    if not place.relative:
        raise ValueError(f"{place.given} is not a regular file")
    fd = _beneath(place, _READ_FLAGS)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise ValueError(f"{place.given} is not a regular file")
    return fd


def _open_folder(place: _Place) -> int:
    """A descriptor to list the folder at the place."""
    if not place.relative:
        return os.open(".", _SCAN_FLAGS | os.O_CLOEXEC, dir_fd=place.fd)
    return _beneath(place, _SCAN_FLAGS)


def _absolute(raw: str) -> str:
    if "\0" in raw:
        raise ValueError("path must not contain NUL characters")
    path = os.path.expanduser(raw)
    if not os.path.isabs(path):
        raise ValueError(f"path must be absolute (or start with ~), got {raw!r}")
    return path


def _iso(epoch: float) -> str:
    import datetime  # only when a tool reports a time: every plugin manager imports this module

    moment = datetime.datetime.fromtimestamp(epoch, datetime.UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


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
