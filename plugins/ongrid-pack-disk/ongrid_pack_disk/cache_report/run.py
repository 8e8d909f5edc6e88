#!/usr/bin/env python3
"""cache_report: how much a folder holds and how much of it is stale; changes nothing."""

import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.realpath(__file__))))
from _walk import checked_root, fail, new_counts, walk


def main():
    args = json.load(sys.stdin)
    root, dev = checked_root(args.get("path"))
    days = args.get("older_than_days", 7)
    top = args.get("top", 10)
    cutoff = time.time() - days * 86400
    counts = new_counts()
    total = {"files": 0, "bytes": 0, "stale_files": 0, "stale_bytes": 0}
    by_child = {}
    for _dirfd, _name, rel, st in walk(root, dev, counts):
        total["files"] += 1
        total["bytes"] += st.st_size
        if st.st_mtime < cutoff:
            total["stale_files"] += 1
            total["stale_bytes"] += st.st_size
        child = rel.split(os.sep, 1)[0]
        by_child[child] = by_child.get(child, 0) + st.st_size
    largest = sorted(by_child.items(), key=lambda kv: (-kv[1], kv[0]))[:top]
    out = {"path": root, "older_than_days": days, **total, "skipped": counts}
    out["largest"] = [{"name": name, "bytes": size} for name, size in largest]
    print(f"cache_report: {total['files']} file(s) under {root}", file=sys.stderr)
    print(json.dumps(out))


if __name__ == "__main__":
    try:
        main()
    except (ValueError, TypeError) as exc:
        fail(f"bad arguments: {exc}", 2)
