"""``serve``: the REST API on 127.0.0.1 (extra ``[server]``), and its token tools.

Without ``--tokens`` the server makes one random token for this run (for the OS user,
as ``--persona``) and prints it on standard error, like a notebook server does; such a
server only ever listens on a loopback address. Listening anywhere else needs a token
file, so that no request reaches a skill without a token.
"""

from __future__ import annotations

import argparse
import ipaddress
import socket
import sys
from typing import TYPE_CHECKING

from ..errors import ConfigError
from ..server.tokens import TokenStore, add_token, hash_token, new_token

if TYPE_CHECKING:
    from ..cli import Context

__all__ = ["is_loopback", "register"]


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``serve`` sub-command."""
    p = sub.add_parser("serve", help="serve the REST API (/v1/skills) over HTTP; needs the [server] extra")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1)")
    p.add_argument(
        "--port", type=int, default=8765, help="port to listen on; 0 picks a free one (default: 8765)"
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
    p.add_argument("--max-concurrent", type=int, default=16, metavar="N", help="calls at once; more get 429")
    p.add_argument("--max-body", type=int, default=1024 * 1024, metavar="BYTES", help="larger bodies get 413")
    p.add_argument(
        "--max-per-token", type=int, default=4, metavar="N", help="calls at once for one token; more get 429"
    )
    p.add_argument(
        "--max-connections", type=int, default=256, metavar="N", help="open connections; more are closed"
    )
    p.add_argument(
        "--header-timeout", type=float, default=10.0, metavar="S", help="seconds for a request's headers"
    )
    p.add_argument(
        "--body-timeout", type=float, default=30.0, metavar="S", help="seconds for a body; then 408"
    )
    tools = p.add_mutually_exclusive_group()
    tools.add_argument(
        "--hash-token", action="store_true", help="read a token on standard input, print its hash, and exit"
    )
    tools.add_argument(
        "--new-token",
        metavar="IDENTITY",
        help="add a new random token for IDENTITY (as --persona) to the --tokens file, print it, and exit",
    )
    p.add_argument("--note", default="", help="with --new-token: a note kept next to the hash")
    p.set_defaults(handler=cmd_serve)


def cmd_serve(ctx: Context) -> int:
    args = ctx.args
    if args.hash_token:
        token = sys.stdin.readline().strip()
        if not token:
            raise ConfigError("--hash-token reads the token from standard input, and got none")
        print(hash_token(token))
        return 0
    if args.new_token:
        if not args.tokens:
            raise ConfigError("--new-token adds to a token file: give it with --tokens FILE")
        ctx.host.persona(args.persona)  # refuse a persona that does not exist
        print(add_token(args.tokens, args.new_token, args.persona, args.note))
        print(
            f"added a token for {args.new_token} (persona {args.persona}) to {args.tokens}", file=sys.stderr
        )
        return 0
    return _serve(ctx)


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and loopback addresses (127.0.0.0/8, ::1)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _serve(ctx: Context) -> int:
    args = ctx.args
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
        from ..approvals import os_identity

        ctx.host.persona(args.persona)
        token = new_token()
        tokens = TokenStore.single(token, os_identity(), args.persona)
        print(
            f"ongrid-skills serve: no --tokens file, so this run accepts one token, for {os_identity()} "
            f"(persona {args.persona}):\n    Authorization: Bearer {token}",
            file=sys.stderr,
        )
    try:
        import uvicorn

        from ..server.rest import create_app
    except ImportError as exc:
        from ..server import missing_extra

        raise missing_extra("server", exc.name or "uvicorn") from None
    from ..server.limits import server_config

    app = create_app(
        ctx.host,
        tokens,
        max_body=args.max_body,
        max_concurrent=args.max_concurrent,
        max_per_token=args.max_per_token,
        body_timeout=args.body_timeout,
    )
    sock = _bind(args.host, args.port)
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    print(f"ongrid-skills serve: listening on http://{shown}:{port}", file=sys.stderr, flush=True)
    config = server_config(app, header_timeout=args.header_timeout, max_connections=args.max_connections)
    uvicorn.Server(config).run(sockets=[sock])
    return 0


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
