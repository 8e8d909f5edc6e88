#!/usr/bin/env python3
"""disk_usage: measure how much space a directory tree takes, like ``du``, read-only.

Wire protocol: one JSON object on stdin (the arguments), one JSON object on
stdout (the result), log lines on stderr, non-zero exit status on failure
(1: the path cannot be measured, 2: bad arguments). Each failure also prints
``{"error": "..."}`` on stdout.

Standard library only, and compatible with Python >= 3.8: the interpreter is
whatever ``python3`` is first on PATH, which may be older than the host's.

Nothing is ever opened except directories (FIFOs, sockets and devices are only
``lstat``-ed), symbolic links are not followed unless asked, every directory is
entered at most once (by device and inode), and the scan stops, reporting
``truncated: true``, after ``max_entries`` entries or ``time_budget_seconds``.
"""

from __future__ import annotations

import contextlib
import heapq
import json
import os
import stat
import sys
import time
from collections import deque
from typing import TYPE_CHECKING, Any, NoReturn

PROG = "disk_usage"
DEFAULTS: dict[str, Any] = {
    "top": 10,
    "max_depth": 1,
    "one_filesystem": True,
    "follow_symlinks": False,
    "apparent_size": False,
    "max_entries": 2_000_000,
    "time_budget_seconds": 40,
}
KNOWN = {"path", *DEFAULTS}
PROGRESS_EVERY = 250_000
"""Entries between two progress lines on stderr."""
CLOCK_EVERY = 512
"""Entries between two looks at the clock."""
MAX_ERROR_SAMPLES = 5
MAX_SKIPPED_MOUNTS = 50


if TYPE_CHECKING:
    from collections.abc import Callable

    # Directories still to scan: path, depth, ancestors ranked in ``largest``, (dev, ino).
    Queue = deque[tuple[str, int, tuple[int, ...], tuple[int, int]]]


class UsageError(Exception):
    """The arguments are unusable (exit status 2)."""


class MeasureError(Exception):
    """The path cannot be measured (exit status 1)."""


def log(message: str) -> None:
    print(f"{PROG}: {message}", file=sys.stderr, flush=True)


def fail(message: str, status: int = 1) -> NoReturn:
    """Report a failure on both channels and exit."""
    log(message)
    print(json.dumps({"error": message}), flush=True)
    sys.exit(status)


def human(n: int) -> str:
    """``1536`` -> ``"1.5 KiB"`` (binary units, like ``du -h``)."""
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if abs(value) < 1024 or unit == "PiB":
            return f"{int(value)} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{n} B"  # pragma: no cover - the loop always returns


def _int_arg(args: dict[str, Any], key: str, low: int, high: int) -> None:
    value = args[key]
    if isinstance(value, bool) or not isinstance(value, int):
        raise UsageError(f"'{key}' must be an integer, got {value!r}")
    if not low <= value <= high:
        raise UsageError(f"'{key}' must be between {low} and {high}, got {value}")


def parse_args(raw: str) -> dict[str, Any]:
    """Decode and check the arguments; the host validated them already, a direct run did not."""
    try:
        data = json.loads(raw) if raw.strip() else {}
    except ValueError as exc:
        raise UsageError(f"stdin is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise UsageError("stdin must be a JSON object")
    unknown = sorted(set(data) - KNOWN)
    if unknown:
        raise UsageError("unknown argument(s): " + ", ".join(unknown))
    args = dict(DEFAULTS)
    args.update(data)
    path = args.get("path")
    if not isinstance(path, str) or not path:
        raise UsageError("'path' is required and must be a non-empty string")
    if "\x00" in path:
        raise UsageError("'path' must not contain NUL characters")
    for key, low, high in (("top", 1, 100), ("max_depth", 1, 32), ("max_entries", 1, 100_000_000)):
        _int_arg(args, key, low, high)
    for key in ("one_filesystem", "follow_symlinks", "apparent_size"):
        if not isinstance(args[key], bool):
            raise UsageError(f"'{key}' must be true or false, got {args[key]!r}")
    budget = args["time_budget_seconds"]
    if isinstance(budget, bool) or not isinstance(budget, (int, float)):
        raise UsageError(f"'time_budget_seconds' must be a number, got {budget!r}")
    if not 0 < budget <= 55:
        raise UsageError(f"'time_budget_seconds' must be in (0, 55], got {budget}")
    return args


def _unescape_mount(field: str) -> str:
    """``/proc/mounts`` writes space, tab, newline and backslash as octal escapes."""
    for code, char in (("\\040", " "), ("\\011", "\t"), ("\\012", "\n"), ("\\134", "\\")):
        field = field.replace(code, char)
    return field


def mount_of(path: str) -> tuple[str | None, str | None]:
    """The mount point holding ``path`` and its filesystem type, or ``None`` when unknown."""
    best: tuple[str, str] | None = None
    try:
        with open("/proc/self/mounts", encoding="utf-8", errors="replace") as handle:
            for line in handle:
                fields = line.split()
                if len(fields) < 3:
                    continue
                point = _unescape_mount(fields[1])
                prefix = point.rstrip("/") + "/"
                inside = path == point or path.startswith(prefix)
                # ">=": a later mount on the same point hides the earlier one.
                if inside and (best is None or len(point) >= len(best[0])):
                    best = (point, fields[2])
    except OSError:
        best = None
    if best is not None:
        return best
    # No /proc (macOS, BSD): climb while the device stays the same.
    try:
        current, dev = path, os.stat(path).st_dev
        while current != os.path.dirname(current):
            parent = os.path.dirname(current)
            if os.stat(parent).st_dev != dev:
                break
            current = parent
        return current, None
    except OSError:
        return None, None


def filesystem_info(path: str) -> dict[str, Any] | None:
    """Size of the filesystem holding ``path``, with ``df``'s arithmetic."""
    try:
        vfs = os.statvfs(path)
    except (OSError, AttributeError):
        return None
    frsize = vfs.f_frsize or vfs.f_bsize
    total = vfs.f_blocks * frsize
    used = (vfs.f_blocks - vfs.f_bfree) * frsize
    free = vfs.f_bavail * frsize  # what an unprivileged user may still write
    usable = used + free
    mount_point, fs_type = mount_of(path)
    return {
        "mount_point": mount_point,
        "fs_type": fs_type,
        "total_bytes": total,
        "used_bytes": used,
        "free_bytes": free,
        "used_percent": round(used * 100.0 / usable, 1) if usable else 0.0,
    }


KINDS = {stat.S_IFDIR: "dir", stat.S_IFREG: "file", stat.S_IFLNK: "symlink"}


def kind_of(mode: int) -> str:
    return KINDS.get(stat.S_IFMT(mode), "other")


def ranked_item(path: str, kind: str, size: int) -> dict[str, Any]:
    """One item of ``largest`` and ``largest_files``."""
    return {"path": path, "bytes": size, "human": human(size), "type": kind}


class Scanner:
    """A breadth-first walk with bounded work; see the module docstring.

    Entries are only ever ``lstat``-ed through the descriptor of their folder
    (``scandir(fd)``); folders are opened with ``opener(path, flags)``, ``os.open``
    unless given, and entered only if still the folder that was listed.
    """

    def __init__(
        self,
        root: str,
        root_stat: os.stat_result,
        args: dict[str, Any],
        log_line: Callable[[str], None] = log,
        stop: Callable[[], bool] | None = None,
        opener: Callable[[str, int], int] | None = None,
    ) -> None:
        self.root = root
        # How a directory is opened from its path and flags; the host's find_large_files
        # passes one that opens it beneath the descriptor of the scanned folder.
        self.opener = opener or os.open
        self.log = log_line
        self.stop = stop
        self.root_stat = root_stat
        self.root_dev = root_stat.st_dev
        self.top: int = args["top"]
        self.max_depth: int = args["max_depth"]
        self.one_filesystem: bool = args["one_filesystem"]
        self.follow: bool = args["follow_symlinks"]
        self.apparent: bool = args["apparent_size"]
        self.max_entries: int = args["max_entries"]
        self.deadline = time.monotonic() + float(args["time_budget_seconds"])
        self.started = time.monotonic()
        # O_NOFOLLOW: a directory swapped for a symlink after listing is not entered.
        # O_NONBLOCK: even a FIFO swapped in could not block the open.
        self.open_flags = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | os.O_NONBLOCK
        self.open_flags |= getattr(os, "O_CLOEXEC", 0)
        if not self.follow:
            self.open_flags |= getattr(os, "O_NOFOLLOW", 0)
        # What was counted, in bytes and in entries; what could not be read or was left out.
        self.total = self.size_of(root_stat)  # the root folder's own size
        self.files = self.dirs = self.symlinks = self.other = self.entries = 0
        self.errors = self.skipped_mount_count = 0
        self.error_samples: list[dict[str, str]] = []
        self.skipped_mounts: list[str] = []
        self.truncated_reason: str | None = None
        # Entries at depth <= max_depth: their (path, type) and running byte totals.
        self.bucket_meta: list[tuple[str, str]] = []
        self.bucket_bytes: list[int] = []
        # Min-heap of the largest regular files anywhere: (bytes, -order, path).
        self.file_heap: list[tuple[int, int, str]] = []
        self.root_key = (root_stat.st_dev, root_stat.st_ino)
        self.seen_dirs: set[tuple[int, int]] = {self.root_key}
        self.seen_inodes: set[tuple[int, int]] = set()

    def size_of(self, st: os.stat_result) -> int:
        if self.apparent:
            return int(st.st_size)
        blocks = getattr(st, "st_blocks", None)
        return int(blocks) * 512 if blocks is not None else int(st.st_size)

    def error(self, path: str, exc: OSError | str) -> None:
        self.errors += 1
        if len(self.error_samples) < MAX_ERROR_SAMPLES:
            reason = exc if isinstance(exc, str) else exc.strerror or type(exc).__name__
            self.error_samples.append({"path": path, "error": reason})

    def over_budget(self) -> bool:
        """True (and the reason recorded) when no further entry may be scanned."""
        if self.entries >= self.max_entries:
            self.truncated_reason = f"stopped after max_entries={self.max_entries} entries"
            return True
        if self.entries % CLOCK_EVERY == 0:
            if self.stop is not None and self.stop():
                self.truncated_reason = "stopped because the call was cancelled"
                return True
            if time.monotonic() >= self.deadline:
                self.truncated_reason = "stopped when time_budget_seconds ran out"
                return True
        return False

    def progress(self) -> None:
        if self.entries % PROGRESS_EVERY == 0:
            self.log(
                f"scanned {self.entries} entries ({human(self.total)}) "
                f"in {time.monotonic() - self.started:.1f}s..."
            )

    def add(self, size: int, chain: tuple[int, ...]) -> None:
        self.total += size
        for bucket in chain:
            self.bucket_bytes[bucket] += size

    def new_bucket(self, path: str, kind: str) -> int:
        self.bucket_meta.append((path, kind))
        self.bucket_bytes.append(0)
        return len(self.bucket_bytes) - 1

    def run(self) -> None:
        if not stat.S_ISDIR(self.root_stat.st_mode):  # a file, a device...: the one entry of its result
            self.total, self.entries = 0, 1
            self.count_leaf(self.root, self.root_stat, (), ranked=True)
            return
        # Breadth-first, so that a truncated scan has looked at every top-level entry.
        queue: Queue = deque([(self.root, 0, (), self.root_key)])
        while queue and self.truncated_reason is None:
            self.scan_dir(*queue.popleft(), queue)

    def open_dir(self, path: str, key: tuple[int, int]) -> int | None:
        """An fd on the directory ``path``, if it is still the one that was ``lstat``-ed."""
        try:
            fd = self.opener(path, self.open_flags)
        except OSError as exc:
            self.error(path, exc)
            return None
        try:
            st = os.fstat(fd)
            if (st.st_dev, st.st_ino) == key:
                return fd
            self.error(path, "changed during the scan")  # replaced since it was listed
        except OSError as exc:
            self.error(path, exc)
        os.close(fd)
        return None

    def scan_dir(
        self, path: str, depth: int, chain: tuple[int, ...], key: tuple[int, int], queue: Queue
    ) -> None:
        fd = self.open_dir(path, key)
        if fd is None:
            return
        try:
            with os.scandir(fd) as iterator:
                while True:
                    try:
                        entry = next(iterator)
                    except StopIteration:
                        break
                    except OSError as exc:  # the directory vanished or broke mid-read
                        self.error(path, exc)
                        break
                    if self.over_budget():
                        return
                    self.entries += 1
                    self.scan_entry(fd, path, entry, depth + 1, chain, queue)
                    self.progress()
        except OSError as exc:
            self.error(path, exc)
        finally:
            os.close(fd)

    def scan_entry(
        self,
        dir_fd: int,
        parent: str,
        entry: os.DirEntry[str],
        depth: int,
        chain: tuple[int, ...],
        queue: Queue,
    ) -> None:
        path = os.path.join(parent, entry.name)
        try:
            st = entry.stat(follow_symlinks=False)  # fstatat: never opens anything
        except OSError as exc:
            self.error(path, exc)
            return
        if self.follow and stat.S_ISLNK(st.st_mode):
            # stat only (targets are never opened); a dangling link counts as itself.
            with contextlib.suppress(OSError):
                st = os.stat(entry.name, dir_fd=dir_fd)
        ranked = depth <= self.max_depth
        if stat.S_ISDIR(st.st_mode):
            if self.one_filesystem and st.st_dev != self.root_dev:
                self.skipped_mount_count += 1
                if len(self.skipped_mounts) < MAX_SKIPPED_MOUNTS:
                    self.skipped_mounts.append(path)
                return
            key = (st.st_dev, st.st_ino)
            if key in self.seen_dirs:  # a symlink loop or a bind mount: entered once only
                return
            self.seen_dirs.add(key)
            self.dirs += 1
            if ranked:
                chain = (*chain, self.new_bucket(path, "dir"))
            self.add(self.size_of(st), chain)
            queue.append((path, depth, chain, key))
            return
        self.count_leaf(path, st, chain, ranked)

    def count_leaf(self, path: str, st: os.stat_result, chain: tuple[int, ...], ranked: bool) -> None:
        """Count an entry that is not a folder: its kind, its bytes (a hard link once), the largest files."""
        kind = kind_of(st.st_mode)
        if kind == "file":
            self.files += 1
        elif kind == "symlink":
            self.symlinks += 1
        else:
            self.other += 1
        if self.follow or st.st_nlink > 1:  # hard links and link targets count once
            key = (st.st_dev, st.st_ino)
            if key in self.seen_inodes:
                return
            self.seen_inodes.add(key)
        size = self.size_of(st)
        if ranked:
            chain = (*chain, self.new_bucket(path, kind))
        self.add(size, chain)
        if kind == "file":
            item = (size, -self.entries, path)
            if len(self.file_heap) < self.top:
                heapq.heappush(self.file_heap, item)
            elif item > self.file_heap[0]:
                heapq.heapreplace(self.file_heap, item)

    def largest(self) -> list[dict[str, Any]]:
        order = heapq.nsmallest(
            self.top,
            range(len(self.bucket_bytes)),
            key=lambda i: (-self.bucket_bytes[i], self.bucket_meta[i][0]),
        )
        return [ranked_item(*self.bucket_meta[i], self.bucket_bytes[i]) for i in order]

    def largest_files(self) -> list[dict[str, Any]]:
        ordered = sorted(self.file_heap, key=lambda item: (-item[0], item[2]))
        return [ranked_item(path, "file", size) for size, _, path in ordered]


def target(path: str) -> tuple[str, os.stat_result]:
    """The canonical path to measure and what it names; :class:`MeasureError` says why not."""
    given = os.path.expanduser(path)
    if not os.path.isabs(given):
        raise MeasureError(f"path must be absolute (or start with ~), got {path!r}")
    try:
        st = os.stat(given)  # the path itself may be a symlink: measure what it names
    except OSError as exc:
        raise MeasureError(f"cannot access {given}: {exc.strerror or exc}") from None
    canonical = os.path.realpath(given)
    if stat.S_ISDIR(st.st_mode):
        try:
            os.scandir(canonical).close()
        except OSError as exc:
            raise MeasureError(f"cannot read directory {canonical}: {exc.strerror or exc}") from None
    return canonical, st


def measure(
    args: dict[str, Any], log_line: Callable[[str], None] = log, stop: Callable[[], bool] | None = None
) -> dict[str, Any]:
    """Measure ``args["path"]``; raise :class:`MeasureError` when it cannot be measured.

    ``log_line`` receives the progress lines, ``stop`` is polled with the clock and
    ends the scan early (``truncated: true``) when it returns true.
    """
    started = time.monotonic()
    canonical, st = target(args["path"])
    scanner = Scanner(canonical, st, args, log_line, stop)
    scanner.run()
    result = {
        "path": canonical,
        "type": kind_of(st.st_mode),
        "size_kind": "apparent" if args["apparent_size"] else "allocated",
        "total_bytes": scanner.total,
        "total_human": human(scanner.total),
        "files": scanner.files,
        "dirs": scanner.dirs,
        "symlinks": scanner.symlinks,
        "other": scanner.other,
        "largest": scanner.largest(),
        "largest_files": scanner.largest_files(),
        "filesystem": filesystem_info(canonical),
        "errors": scanner.errors,
        "error_samples": scanner.error_samples,
        "skipped_mounts": scanner.skipped_mounts,
        "skipped_mount_count": scanner.skipped_mount_count,
        "truncated": scanner.truncated_reason is not None,
        "truncated_reason": scanner.truncated_reason,
        "entries_scanned": scanner.entries,
        "elapsed_seconds": round(time.monotonic() - started, 3),
    }
    if scanner.truncated_reason:
        log_line(f"{scanner.truncated_reason}; totals are partial")
    return result


def main() -> int:
    try:
        args = parse_args(sys.stdin.read())
    except UsageError as exc:
        fail(str(exc), status=2)
    try:
        result = measure(args)
    except MeasureError as exc:
        fail(str(exc))
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        fail("interrupted", status=130)
