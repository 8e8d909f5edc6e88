"""Shared by both entries: walk a folder without ever leaving it.

``os.fwalk`` with ``follow_symlinks=False`` holds a descriptor for every folder
on the way and opens each sub-folder relative to its parent, so a folder
swapped for a symlink mid-walk is not followed; sub-folders on another
filesystem are not entered; symlinks are counted and never followed.
"""

import fnmatch
import json
import os
import stat
import sys

#: Folders never cleaned or reported on as a whole.
SYSTEM = frozenset(
    [
        "/",
        "/bin",
        "/boot",
        "/dev",
        "/etc",
        "/home",
        "/lib",
        "/lib32",
        "/lib64",
        "/opt",
        "/proc",
        "/root",
        "/run",
        "/sbin",
        "/srv",
        "/sys",
        "/usr",
        "/var",
    ]
)


def fail(message, code=1):
    """Print the error as the result and on stderr, and exit non-zero."""
    print(json.dumps({"error": message}))
    print(message, file=sys.stderr)
    sys.exit(code)


def checked_root(path):
    """The absolute, normalised folder to work in; exits with an error for anything else."""
    if not isinstance(path, str) or not os.path.isabs(path):
        fail(f"path must be an absolute folder, got {path!r}", 2)
    norm = os.path.normpath(path)
    if norm in SYSTEM:
        fail(f"refusing to work on {norm}: it is a system folder, give the cache folder inside it", 2)
    try:
        st = os.lstat(norm)
    except OSError as exc:
        fail(f"cannot use {norm}: {exc.strerror}", 2)
    if stat.S_ISLNK(st.st_mode):
        fail(f"{norm} is a symbolic link to {os.path.realpath(norm)}; give the real folder", 2)
    if not stat.S_ISDIR(st.st_mode):
        fail(f"{norm} is not a folder", 2)
    return norm, st.st_dev


def walk(root, dev, counts, patterns=("*",)):
    """Yield ``(dirfd, name, relative path, lstat)`` for every regular file matching ``patterns``."""
    for dirpath, dirnames, filenames, dirfd in os.fwalk(root, follow_symlinks=False):
        keep = []
        for name in dirnames:
            try:
                st = os.stat(name, dir_fd=dirfd, follow_symlinks=False)
            except OSError:
                counts["errors"] += 1
                continue
            if stat.S_ISLNK(st.st_mode):
                counts["symlinks"] += 1
            elif st.st_dev != dev:
                counts["other_filesystems"] += 1
            else:
                keep.append(name)
        dirnames[:] = keep
        rel_dir = os.path.relpath(dirpath, root)
        for name in filenames:
            try:
                st = os.stat(name, dir_fd=dirfd, follow_symlinks=False)
            except OSError:
                counts["errors"] += 1
                continue
            if stat.S_ISLNK(st.st_mode):
                counts["symlinks"] += 1
            elif not stat.S_ISREG(st.st_mode):
                counts["special"] += 1
            elif any(fnmatch.fnmatchcase(name, p) for p in patterns):
                yield dirfd, name, os.path.normpath(os.path.join(rel_dir, name)), st


def new_counts():
    """The skip counters both entries report."""
    return {"symlinks": 0, "special": 0, "other_filesystems": 0, "errors": 0}
