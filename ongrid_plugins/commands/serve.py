"""``serve``: the REST API on 127.0.0.1 (extra ``[server]``), and its token tools.

Without ``--tokens`` the server makes one random token for this run (for the OS user,
as ``--persona``) and prints it on standard error, like a notebook server does; such a
server only ever listens on a loopback address. Listening anywhere else needs a token
file, so that no request reaches a skill without a token.
"""

from __future__ import annotations

import contextlib
import ipaddress
import logging
import socket
import sys
from typing import TYPE_CHECKING, Any

from ..errors import ConfigError
from ..server.tokens import TokenStore, add_token, hash_token, list_tokens, new_token, revoke_token
from . import UsageError
from .argtypes import Subcommands, limit, non_empty, port, seconds
from .output import print_json, print_table

if TYPE_CHECKING:
    from ..cli import Context

__all__ = ["is_loopback", "register"]


#: ``serve``'s limits and time-outs: flag, type (checked when parsed), default, metavar, help.
_LIMITS: tuple[tuple[str, Any, Any, str, str], ...] = (
    ("--max-concurrent", limit, 16, "N", "calls at once; more get 429"),
    ("--max-body", limit, 1024 * 1024, "BYTES", "larger bodies get 413"),
    ("--max-per-token", limit, 4, "N", "calls at once for one token; more get 429"),
    ("--max-connections", limit, 256, "N", "open connections; more are closed"),
    ("--header-timeout", seconds, 10.0, "S", "seconds for a request's headers"),
    ("--body-timeout", seconds, 30.0, "S", "seconds for a body; then 408"),
)


def register(sub: Subcommands) -> None:
    """Add the ``serve`` sub-command."""
    p = sub.add_parser("serve", help="serve the REST API (/v1/skills) over HTTP; needs the [server] extra")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1)")
    p.add_argument(
        "--port", type=port, default=8765, help="port to listen on; 0 picks a free one (default: 8765)"
    )
    p.add_argument(
        "--tokens", metavar="FILE", help="the token file (JSON; see docs/rest.md); required off loopback"
    )
    p.add_argument(
        "--persona",
        default="operator",
        metavar="NAME",
        help="persona of the one-run token made when there is no --tokens (default: operator); "
        "with --new-token, the new token's persona",
    )
    for flag, kind, default, metavar, text in _LIMITS:
        p.add_argument(flag, type=kind, default=default, metavar=metavar, help=text)
    p.add_argument(
        "--watch",
        action="store_true",
        help="reload when skill files change (GET /v1/events streams them)",
    )
    tools = p.add_mutually_exclusive_group()
    tools.add_argument(
        "--hash-token", action="store_true", help="read a token on standard input, print its hash, and exit"
    )
    tools.add_argument(
        "--new-token",
        type=non_empty("give the identity the new token is for"),
        metavar="IDENTITY",
        help="add a new random token for IDENTITY (as --persona) to the --tokens file, print it, and exit",
    )
    tools.add_argument(
        "--list-tokens", action="store_true", help="list the --tokens file: identity, persona, hash, note"
    )
    tools.add_argument(
        "--revoke-token",
        type=non_empty("give the identity, or the hash (8+ hex digits), of the token to revoke"),
        metavar="IDENTITY|HASH",
        help="remove from the --tokens file every token of IDENTITY, or the one with this hash "
        "(or 8+ of its first hex digits); restart a running server",
    )
    p.add_argument("--note", default="", help="with --new-token: a note kept next to the hash")
    p.add_argument("--json", action="store_true", help="with --list-tokens / --revoke-token: print JSON")
    p.set_defaults(handler=cmd_serve)


def cmd_serve(ctx: Context) -> int:
    args = ctx.args
    if args.hash_token:
        token = sys.stdin.readline().strip()
        if not token:
            raise UsageError("--hash-token reads the token from standard input, and got none")
        print(hash_token(token))
        return 0
    if args.new_token:
        if not args.tokens:
            raise UsageError("--new-token adds to a token file: give it with --tokens FILE")
        ctx.host.persona(args.persona)  # refuse a persona that does not exist
        print(add_token(args.tokens, args.new_token, args.persona, args.note))
        print(
            f"added a token for {args.new_token} (persona {args.persona}) to {args.tokens}", file=sys.stderr
        )
        return 0
    if args.list_tokens or args.revoke_token:
        return _token_file(ctx)
    return _serve(ctx)


def _token_file(ctx: Context) -> int:
    args = ctx.args
    flag = "--list-tokens" if args.list_tokens else "--revoke-token"
    if not args.tokens:
        raise UsageError(f"{flag} works on a token file: give it with --tokens FILE")
    if args.list_tokens:
        entries = list_tokens(args.tokens)
        if args.json:
            print_json({"items": entries, "total": len(entries)})
        elif not entries:
            print(f"no tokens in {args.tokens}")
        else:
            rows = [(e["identity"], e["persona"], e["hash"][:19] + "…", e["note"]) for e in entries]
            print_table(("IDENTITY", "PERSONA", "HASH", "NOTE"), rows)
        return 0
    removed = revoke_token(args.tokens, args.revoke_token)
    if args.json:
        print_json({"revoked": removed, "file": args.tokens})
    else:
        for entry in removed:
            shown = entry["hash"][:19] + "…"
            print(f"revoked the token of {entry['identity']} (persona {entry['persona']}, {shown})")
        print("a running server keeps its tokens until it restarts: restart it to drop them", file=sys.stderr)
    return 0


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and loopback addresses (127.0.0.0/8, ::1)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _server_modules() -> tuple[Any, Any]:
    """uvicorn and ``create_app``, or the missing-extra error (before any token is printed)."""
    from ..server import require_extra

    require_extra("server", "`ongrid-skills serve`")
    import uvicorn

    from ..server.rest import create_app

    return uvicorn, create_app


def _serve(ctx: Context) -> int:
    args = ctx.args
    _server_modules()  # a missing extra fails first: nothing printed, no token made
    if args.tokens:
        tokens = TokenStore.from_file(args.tokens)
        if not len(tokens):
            raise ConfigError(f"token file {args.tokens} holds no token: nobody could call this server")
    elif not is_loopback(args.host):
        message = (
            f"refusing to listen on {args.host} without --tokens: off loopback every caller needs a token "
            "(make a token file with `ongrid-skills serve --new-token NAME --persona P --tokens FILE`)"
        )
        raise ConfigError(message)
    else:
        from ..gate.tickets import os_identity

        ctx.host.persona(args.persona)
        token = new_token()
        tokens = TokenStore.single(token, os_identity(), args.persona)
        print(
            f"ongrid-skills serve: no --tokens file, so this run accepts one token, for {os_identity()} "
            f"(persona {args.persona}):\n    Authorization: Bearer {token}",
            file=sys.stderr,
        )
    _uvicorn, create_app = _server_modules()
    from ..server.limits import server_config

    app = create_app(
        ctx.host,
        tokens,
        max_body=args.max_body,
        max_concurrent=args.max_concurrent,
        max_per_token=args.max_per_token,
        body_timeout=args.body_timeout,
    )
    if not args.quiet:  # one access-log line per request on stderr (docs/rest.md)
        logging.getLogger("ongrid_plugins.server.access").setLevel(logging.INFO)
    sock = _bind(args.host, args.port)
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    print(f"ongrid-skills serve: listening on http://{shown}:{port}", file=sys.stderr, flush=True)
    # Live pages hold their connection open: give them 2 s at shutdown, then close them.
    config = server_config(
        app,
        header_timeout=args.header_timeout,
        max_connections=args.max_connections,
        timeout_graceful_shutdown=2,
    )
    with ctx.host.watch() if args.watch else contextlib.nullcontext():
        _server(config, app).run(sockets=[sock])
    return 0


def _server(config: Any, app: Any) -> Any:
    """uvicorn's server, ending the endless ``/v1/events`` streams when it is asked to stop."""
    import uvicorn

    from ..server.rest import close_event_streams

    class Server(uvicorn.Server):
        def handle_exit(self, sig: int, frame: Any) -> None:
            close_event_streams(app)
            super().handle_exit(sig, frame)

    return Server(config)


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP spelled out: asyncio sets TCP_NODELAY only on connections whose socket says
    # so, and without it every keep-alive response waits ~40 ms for a delayed ACK.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise ConfigError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    sock.listen(2048)  # connections queue from now on, so "listening on" is true when printed
    return sock
