"""``worker`` and ``workers``: run skills for other hosts, and see who does (extra ``[celery]``)."""

from __future__ import annotations

import argparse
import os
from typing import TYPE_CHECKING

from ..errors import ConfigError
from .argtypes import Subcommands
from .output import print_json, print_table

if TYPE_CHECKING:
    from ..cli import Context

__all__ = ["register"]

_EXTRA = "pip install 'ongrid-plugins[celery]'"


def register(sub: Subcommands) -> None:
    """Add the ``worker`` and ``workers`` sub-commands."""
    p = sub.add_parser(
        "worker", help="run calls sent by hosts over a Redis broker (Celery); needs the [celery] extra"
    )
    p.add_argument("--broker", metavar="URL", help="the Redis URL (default: $ONGRID_BROKER_URL)")
    p.add_argument(
        "--queue",
        action="append",
        metavar="NAME",
        help="a queue to take calls from (repeatable; default: ongrid)",
    )
    p.add_argument(
        "--concurrency", type=int, default=1, metavar="N", help="calls at once (processes; default 1)"
    )
    p.add_argument("--name", default="", metavar="NAME", help="the worker's name (default: ongrid-PID@HOST)")
    p.set_defaults(handler=cmd_worker)

    p = sub.add_parser("workers", help="list the live workers on a broker: queues, load, skills")
    p.add_argument("--broker", metavar="URL", help="the Redis URL (default: $ONGRID_BROKER_URL)")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(handler=cmd_workers)


def _broker(args: argparse.Namespace) -> str:
    url = args.broker or os.environ.get("ONGRID_BROKER_URL", "").strip()
    if not url:
        raise ConfigError("no broker: give --broker redis://HOST:PORT/0 or set ONGRID_BROKER_URL")
    return str(url)


def cmd_worker(ctx: Context) -> int:
    """Start a worker; returns when it stops."""
    args = ctx.args
    broker = _broker(args)
    if args.concurrency < 1:
        raise ConfigError(f"--concurrency must be at least 1, got {args.concurrency}")
    try:
        from ..remote.worker import run_worker
    except ImportError as exc:
        raise ConfigError(f"the worker needs Celery ({exc}): {_EXTRA}") from None
    run_worker(broker, tuple(args.queue or ("ongrid",)), args.concurrency, args.name, ctx.host)
    return 0


def cmd_workers(ctx: Context) -> int:
    """List the live workers."""
    args = ctx.args
    broker = _broker(args)
    try:
        from ..remote.worker import live_workers
    except ImportError as exc:
        raise ConfigError(f"listing workers needs Celery ({exc}): {_EXTRA}") from None
    rows = live_workers(broker)
    if args.json:
        print_json(rows)
        return 0
    if not rows:
        print(f"no live worker on {broker}")
        return 0
    print_table(
        ("WORKER", "QUEUES", "RUNNING", "CONCURRENCY", "TOOLS"),
        [
            (r["worker"], ",".join(r["queues"]), str(r["running"]), str(r["concurrency"]), str(r["tools"]))
            for r in rows
        ],
    )
    return 0
