"""The arguments of ``ongrid-skills run``: from ARGS_JSON, stdin (``-``) or ``--args-file``.

Whatever the source, at most :data:`MAX_ARGS_BYTES` are read (the limit of a manifest and
of a REST request body), ``--args-file`` must be a regular file (a device, FIFO or socket
could feed the command forever or block it), and the JSON may nest at most
:data:`MAX_ARGS_DEPTH` containers. Each refusal is a :class:`ConfigError` (exit code 2)
that names the source and says what to do.
"""

from __future__ import annotations

import json
import re
import shlex
import sys
from typing import TYPE_CHECKING, Any

from ..core.userfiles import NotRegularFile, read_regular
from ..errors import ConfigError
from ..host.callinputs import DuplicateMember, no_duplicates
from . import UsageError

if TYPE_CHECKING:
    from ..cli import Context

__all__ = ["MAX_ARGS_BYTES", "MAX_ARGS_DEPTH", "read_args"]

#: Most bytes of arguments ``run`` reads, whatever the source.
MAX_ARGS_BYTES = 1024 * 1024
#: Deepest nesting of JSON containers in the arguments (``{}`` is one level). Far below
#: what the parser, the schema check and the audit's redaction can walk, and deeper than
#: any schema can describe (schemas nest at most 64 containers).
MAX_ARGS_DEPTH = 64

#: ``key=value`` pairs, as a shell user types them, separated by commas or spaces.
_PAIRS = re.compile(r"\s*[A-Za-z_][\w.-]*=[^,\s]*(?:[,\s]+[A-Za-z_][\w.-]*=[^,\s]*)*[,\s]*")


def read_args(ctx: Context) -> Any:
    """The call's arguments (``{}`` when none were given), read within the limits above."""
    args = ctx.args
    if args.args_json is not None and args.args_file:
        message = "give the arguments either as ARGS_JSON or with --args-file, not both"
        raise UsageError(message)
    if args.args_file:
        source = f"--args-file {args.args_file}"
        raw = _read_file(args.args_file, ctx.command("run", args.name, "-"))
    elif args.args_json == "-":
        source, raw = "stdin", _read_stdin()
    elif args.args_json is not None:
        source, raw = "ARGS_JSON", args.args_json.encode("utf-8", "surrogatepass")
    else:
        return {}
    if len(raw) > MAX_ARGS_BYTES:
        message = (
            f"the arguments in {source} are larger than the limit of 1 MiB ({MAX_ARGS_BYTES} bytes): "
            "pass big data as a file the skill reads, not as an argument"
        )
        raise ConfigError(message)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        message = f"the arguments in {source} are not UTF-8 text (byte {exc.start}: {exc.reason})"
        raise ConfigError(message) from None
    return _parse(ctx, text, source)


def _read_file(path: str, piped: str) -> bytes:
    """At most one byte over the limit of the regular file ``path`` (a FIFO or device is refused
    before it is read: :func:`~ongrid_plugins.core.userfiles.read_regular`)."""
    try:
        return read_regular(path, MAX_ARGS_BYTES)
    except NotRegularFile as exc:
        message = (
            f"--args-file {path} is not a regular file ({exc.kind}): give a regular file, "
            f"or pipe the arguments to `{piped}`"
        )
        raise ConfigError(message) from None
    except OSError as exc:
        raise ConfigError(f"cannot read --args-file {path}: {exc.strerror}") from None


def _read_stdin() -> bytes:
    """At most one byte over the limit of stdin (enough to tell it is too big)."""
    stream = getattr(sys.stdin, "buffer", None)
    if stream is not None:
        data: bytes = stream.read(MAX_ARGS_BYTES + 1)
        return data
    return sys.stdin.read(MAX_ARGS_BYTES + 1).encode("utf-8", "surrogatepass")  # a test's StringIO


def _parse(ctx: Context, text: str, source: str) -> Any:
    if not text.strip():
        return {}
    shown = ctx.command("show", ctx.args.name)
    too_deep = (
        f"the arguments in {source} are nested too deeply (at most {MAX_ARGS_DEPTH} levels): "
        f"see `{shown}` for the arguments it takes"
    )
    try:
        value = json.loads(text, object_pairs_hook=no_duplicates)
    except RecursionError:
        raise ConfigError(too_deep) from None
    except DuplicateMember as exc:
        raise ConfigError(f"the arguments in {source} are ambiguous: {exc}; give each member once") from None
    except ValueError as exc:
        message = f"the arguments in {source} are not valid JSON: {exc}; give a JSON object"
        example = _example(text)
        message += f", e.g. {example}" if example else f" (see `{shown}` for the arguments it takes)"
        raise ConfigError(message) from None
    if _deeper_than(value, MAX_ARGS_DEPTH):
        raise ConfigError(too_deep)
    return value


def _deeper_than(value: Any, limit: int) -> bool:
    """Whether ``value`` nests more than ``limit`` containers (walked without recursion)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            if depth > limit:
                return True
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children)
    return False


def _example(text: str) -> str:
    """``who=ada,n=5`` as the JSON object it meant, quoted for a shell, or "" if it is not that."""
    if not _PAIRS.fullmatch(text):
        return ""
    example: dict[str, Any] = {}
    for pair in re.split(r"[,\s]+", text.strip(" \t\n,")):
        key, _, raw = pair.partition("=")
        example[key] = _scalar(raw)
    return shlex.quote(json.dumps(example, ensure_ascii=False))


def _scalar(raw: str) -> Any:
    """A number, true, false or null as JSON reads it; anything else as a string."""
    try:
        value = json.loads(raw)
    except ValueError:
        return raw
    return value if value is None or isinstance(value, bool | int | float) else raw
