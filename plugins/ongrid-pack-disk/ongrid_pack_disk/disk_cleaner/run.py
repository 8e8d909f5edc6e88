#!/usr/bin/env python3
"""disk_cleaner: remove regular files older than N days under a folder, never leaving it.

stdin: {"path": "/var/cache/build", "dry_run": true, "older_than_days": 7, "patterns": ["*"]}
stdout: {"files_deleted": 17, "freed_bytes": 1048576, ...}
"""

import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.realpath(__file__))))
from _walk import checked_root, fail, new_counts, walk

SAMPLE = 20


def main():
    args = json.load(sys.stdin)
    root, dev = checked_root(args.get("path"))
    dry_run = args.get("dry_run", True)
    days = args.get("older_than_days", 7)
    limit = args.get("max_files", 100000)
    cutoff = time.time() - days * 86400
    counts = new_counts()
    out = {"path": root, "dry_run": dry_run, "older_than_days": days, "files_matched": 0, "bytes_matched": 0}
    out.update(files_deleted=0, freed_bytes=0, fresh_files=0, truncated=False, sample=[], errors=[])
    for dirfd, name, rel, st in walk(root, dev, counts, args.get("patterns") or ["*"]):
        if st.st_mtime >= cutoff:
            out["fresh_files"] += 1
            continue
        if out["files_matched"] >= limit:
            out["truncated"] = True
            break
        out["files_matched"] += 1
        out["bytes_matched"] += st.st_size
        if len(out["sample"]) < SAMPLE:
            out["sample"].append(rel)
        if dry_run:
            continue
        try:
            os.unlink(name, dir_fd=dirfd)  # the name in this very folder: a link is removed, not followed
        except OSError as exc:
            counts["errors"] += 1
            if len(out["errors"]) < SAMPLE:
                out["errors"].append(f"{rel}: {exc.strerror}")
            continue
        out["files_deleted"] += 1
        if st.st_nlink == 1:  # other hard links keep the data alive
            out["freed_bytes"] += st.st_size
    out["skipped"] = counts
    if dry_run:
        said = f"would remove {out['files_matched']} file(s)"
    else:
        said = f"removed {out['files_deleted']} of {out['files_matched']} file(s)"
        if counts["errors"]:
            said += f" ({counts['errors']} could not be removed: see errors)"
    print(f"disk_cleaner: {said} under {root}", file=sys.stderr)
    print(json.dumps(out))


if __name__ == "__main__":
    try:
        main()
    except (ValueError, TypeError) as exc:
        fail(f"bad arguments: {exc}", 2)
