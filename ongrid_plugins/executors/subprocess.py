"""Built-in plugin ``subprocess``: runs skill.json entries with the wire protocol.

stdin = the JSON arguments object, stdout = one JSON object (the result),
stderr = log lines streamed to the caller as they arrive, exit status != 0 =
failure. The process machinery (spawn, caps, timeouts, process-group kills)
lives in :mod:`._process`; this module turns a call into a
:class:`~._process.ProcessSpec` and the outcome into a
:class:`~ongrid_plugins.models.CallResult`.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import signal as signals
from typing import TYPE_CHECKING, Any, NamedTuple

from ..catalog.digest import entry_drift
from ..discovery.roots import escapes, is_executable_file, is_within, open_beneath, resolve_file
from ..hookspecs import hookimpl
from ..models import CallRequest, CallResult, canonical_json
from ..schema.arguments import surrogate_path, utf8_encodable

if TYPE_CHECKING:
    from ..models import Tool
    from ..settings import Settings
    from ._spec import ProcessOutcome, ProcessSpec
    from .confine import Plan

__all__ = ["HOST_SECRETS", "SubprocessExecutor", "parse_result"]

_PREVIEW_BYTES = 200


class SubprocessExecutor:
    """Runs one subprocess tool call; ``run`` and ``arun`` share everything but the wait.

    The entry is opened once, beneath its root with no symlink on the way
    (:func:`open_entry`), checked through that descriptor and executed through it.
    A confined call (:mod:`.confine`) gets a :class:`~.confine.plan.Plan`, applied in
    the spawning thread, whose cgroup and temp folder are given back when the call ends.
    """

    _ongrid_fresh_results = True
    """``run`` and ``arun`` return a new result each call and keep no reference to it:
    the pipeline completes it (decision, call id) in place."""

    def __init__(self, stdout_cap: int, kill_grace: float, settings: Settings | None = None) -> None:
        self.stdout_cap = stdout_cap
        self.kill_grace = kill_grace
        self.settings = settings

    def __repr__(self) -> str:
        return f"<SubprocessExecutor cap={self.stdout_cap}>"

    def run(self, request: CallRequest) -> CallResult:
        """Run the entry and wait for it in this thread."""
        spec = self._spec(request)
        if isinstance(spec, CallResult):
            return spec
        try:
            if request.on_event is not None:
                request.emit("start", {"entry": spec.argv[0]})
            from ._process import run_process

            outcome = run_process(spec, _stderr_sink(request))
            return self._result(request, spec, outcome)
        finally:
            _release(spec)

    async def arun(self, request: CallRequest) -> CallResult:
        """Run the entry without blocking the event loop."""
        spec = self._spec(request)
        if isinstance(spec, CallResult):
            return spec
        try:
            if request.on_event is not None:
                request.emit("start", {"entry": spec.argv[0]})
            from ._process import arun_process

            outcome = await arun_process(spec, _stderr_sink(request))
            return self._result(request, spec, outcome)
        finally:
            _release(spec)

    def _spec(self, request: CallRequest) -> ProcessSpec | CallResult:
        tool = request.tool
        prepared = _prepare(tool)
        opened = open_entry(tool) if prepared is None else _open_prepared(tool, prepared)
        if isinstance(opened, str):
            return CallResult(tool.name, False, error=opened, call_id=request.call_id)
        entry, fd = opened
        environ = os.environ
        env = {name: environ[name] for name in tool.env_allow if name in environ and name not in HOST_SECRETS}
        plan = None
        try:
            plan = self._plan(request, fd, env)
        except Exception as exc:  # ConfinementError, or a kernel refusal while preparing
            os.close(fd)
            return CallResult(tool.name, False, error=str(exc), call_id=request.call_id)
        if plan is not None and "TMPDIR" in tool.env_allow:
            env.update(plan.env_extra)
        timeout = tool.timeout if request.timeout is None else min(request.timeout, tool.timeout)
        payload = request.args_json or canonical_json(request.args)
        cwd = prepared.cwd if prepared is not None else tool.cwd or os.path.dirname(entry)
        # The runner's modules are imported with the first call, not with this plugin: a
        # process that loads skills and runs none (``list``, ``validate``) does not pay them.
        from ._spec import ProcessSpec

        try:
            spec = ProcessSpec(
                argv=(entry,), cwd=cwd, env=env, stdin=payload.encode("utf-8"), timeout=timeout,
                stdout_cap=self.stdout_cap, kill_grace=self.kill_grace, exec_fd=fd, confine=plan,
            )  # fmt: skip
            return spec
        except BaseException:
            try:
                if plan is not None:
                    plan.finish()
            finally:
                os.close(fd)  # the entry's descriptor goes with the refused spec
            raise

    def _plan(self, request: CallRequest, fd: int, env: dict[str, str]) -> Plan | None:
        profile = request.sandbox
        if profile is None:
            if self.settings is None:
                return None
            from .confine import profile_for

            profile = profile_for(request.tool, self.settings)
        if not profile.confined:
            return None
        from .confine import Plan, warn_missing

        mode = self.settings.sandbox if self.settings is not None else "auto"
        plan = Plan(profile, fd, env, mode)
        if plan.missing:
            warn_missing(plan.missing)
        return plan

    def _result(self, request: CallRequest, spec: ProcessSpec, outcome: ProcessOutcome) -> CallResult:
        tool = request.tool
        value, parse_error = parse_result(outcome.stdout)
        limit = spec.confine.limit_hit() if spec.confine is not None else None
        error = limit or _failure(spec, outcome, parse_error)
        result = CallResult(
            tool=tool.name,
            ok=error is None,
            value=value,
            error=error,
            exit_code=outcome.exit_code,
            signal=outcome.signal,
            timed_out=outcome.timed_out,
            duration=outcome.duration,
            stderr_tail=outcome.stderr_tail,
            call_id=request.call_id,
        )
        if request.on_event is not None:
            request.emit("exit", {"ok": result.ok, "exit_code": outcome.exit_code, "signal": outcome.signal})
        return result


#: The host's own secrets, never passed to a skill whatever its ``env_allow`` names: the
#: approvals bearer token, and URLs that may carry a password (the broker, the approvals server).
HOST_SECRETS = frozenset({"ONGRID_TOKEN", "ONGRID_BROKER_URL", "ONGRID_APPROVALS_URL"})


def _release(spec: ProcessSpec) -> None:
    if spec.confine is not None:
        spec.confine.finish()
    if spec.exec_fd is not None:
        os.close(spec.exec_fd)


class _Prepared(NamedTuple):
    """The parts of a tool's calls that depend on the tool alone."""

    entry: str
    root: str
    relative: str
    """The entry's path beneath ``root``."""
    cwd: str


def _prepare(tool: Tool) -> _Prepared | None:
    """None when the entry is not plainly beneath its root (``open_entry`` says why)."""
    entry = tool.entry or ""
    root = tool.root
    if not entry or not root or not is_within(entry, root) or entry == root:
        return None
    relative = entry[len(root) :].lstrip("/") if root != "/" else entry.lstrip("/")
    return _Prepared(entry, root, relative, tool.cwd or os.path.dirname(entry))


def open_entry(tool: Tool) -> tuple[str, int] | str:
    """Open the entry for execution: ``(canonical path, descriptor)`` or why it may not run.

    The canonical entry found at load time is opened beneath the canonical root with
    ``open_beneath`` (no symlink in any component, no ``..``), so a file or folder
    swapped for a symlink since then is refused, and the descriptor checked here
    (a regular file with an execute bit) is the one the child executes.
    """
    prepared = _prepare(tool)
    if prepared is None:
        real, refusal = recheck_entry(tool)
        return refusal or escapes("entry", real, tool.root or "") or f"entry {real} cannot run"
    return _open_prepared(tool, prepared)


def _open_prepared(tool: Tool, prepared: _Prepared) -> tuple[str, int] | str:
    opened = _open_beneath_root(prepared)
    if isinstance(opened, str):
        return opened
    return _checked(tool, prepared.entry, opened)


_ENTRY_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY


def _open_beneath_root(prepared: _Prepared) -> int | str:
    """The entry opened beneath its root, or why it cannot be."""
    entry, root, relative = prepared.entry, prepared.root, prepared.relative
    try:
        root_fd = os.open(root, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as exc:
        return f"allowlist root {root} is gone: {exc.strerror}"
    try:
        fd = open_beneath(root_fd, relative, _ENTRY_FLAGS)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            try:
                real = os.path.realpath(entry)
            except OSError:  # swapped again while we looked: say where it pointed, if we can
                real = entry + " (changing)"
            escape = escapes("entry", real, root)
            if escape is not None:
                return escape
            return (
                f"entry {entry} is now reached through a symlink (to {real}); "
                "it runs only as loaded: reload the skills to accept the new layout"
            )
        if exc.errno == errno.EXDEV:  # a mount point or "..": outside, whatever the path says
            return f"entry {entry} escapes allowlist root {root}"
        if exc.errno == errno.EACCES:
            try:
                fd = open_beneath(root_fd, relative, os.O_PATH)
            except OSError as again:
                return f"entry {entry} cannot be opened: {again.strerror}"
        else:
            return f"entry {entry} is gone: {exc.strerror}"
    finally:
        os.close(root_fd)
    return fd


def _checked(tool: Tool, entry: str, fd: int) -> tuple[str, int] | str:
    """``(entry, fd)`` once the open entry is checked (an executable file, its bytes the
    ones loaded, above the stdio numbers), else why not (``fd`` is then closed)."""
    try:
        st = os.fstat(fd)
        if not is_executable_file(st):
            os.close(fd)
            return f"entry {entry} is no longer an executable file"
        drift = entry_drift(tool, fd, st)  # the bytes about to run are still the ones loaded
        if drift is not None:
            os.close(fd)
            return drift
        if fd < 3:  # never where the child's stdio goes
            moved = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3)
            os.close(fd)
            fd = moved
    except OSError as exc:
        os.close(fd)
        return f"entry {entry} cannot be checked: {exc.strerror}"
    return entry, fd


def recheck_entry(tool: Tool) -> tuple[str, str | None]:
    """Resolve the entry again at call time and check it still may run.

    Returns ``(canonical path, None)``, or ``("", reason)`` when it may not run:
    a file swapped since load time for a symlink that escapes the root is refused.
    """
    declared = tool.entry_declared or tool.entry or ""
    candidate = os.path.join(tool.cwd or "", declared)
    try:
        real, st = resolve_file(candidate)
    except (OSError, ValueError) as exc:
        return "", f"entry {candidate} is gone: {getattr(exc, 'strerror', None) or exc}"
    escape = escapes("entry", real, tool.root or "")
    if escape is not None:
        return "", escape
    if not is_executable_file(st):
        return "", f"entry {real} is no longer an executable file"
    drift = entry_drift(tool)  # its bytes are still the ones loaded (the catalog's call-time check)
    if drift is not None:
        return "", drift
    return real, None


def parse_result(stdout: bytes) -> tuple[Any, str | None]:
    """The JSON object on stdout, or ``(None, why not)`` quoting the first bytes."""
    text = stdout.strip()
    if not text:
        return None, "the skill printed nothing on stdout (it must print one JSON object)"
    try:
        decoded = text.decode("utf-8")
        if decoded.startswith("\ufeff"):  # what json.loads refuses before decoding
            raise json.JSONDecodeError("Unexpected UTF-8 BOM (decode using utf-8-sig)", decoded, 0)
        value = _DECODER.decode(decoded)
    except (UnicodeDecodeError, ValueError) as exc:
        why = f"stdout is not one JSON object ({_reason(exc)}); it starts with {_preview(stdout)}"
        return None, why + _log_lines_hint(text)
    except RecursionError:  # the C scanner recurses once per container
        message = "stdout is nested too deeply to read (print a flatter object)"
        return None, f"{message}; it starts with {_preview(stdout)}"
    if not isinstance(value, dict):
        return (
            None,
            f"stdout must be a JSON object, not {type(value).__name__}; it starts with {_preview(stdout)}",
        )
    if ("\\ud" in decoded or "\\uD" in decoded) and not utf8_encodable(canonical_json(value)):
        # "\udcff" is valid JSON but no UTF-8 text: no audit row, HTTP body or MCP message
        # could carry it (the arguments are refused alike, schema.arguments.NOT_UTF8).
        where = surrogate_path(value)
        return (
            None,
            f"stdout holds a lone surrogate at {where} (a \\ud800-\\udfff escape alone): not UTF-8 "
            "text; print UTF-8, escaping surrogates only in pairs",
        )
    return value, None


def _log_lines_hint(text: bytes) -> str:
    """A hint when stdout is text lines and then one JSON object: a debug print went to stdout."""
    at = text.find(b"\n{")
    if at < 0:
        return ""
    try:
        tail = json.loads(text[at + 1 :])
    except (UnicodeDecodeError, ValueError, RecursionError):
        return ""
    if not isinstance(tail, dict):
        return ""
    return (
        "; it holds text and then a JSON object: log lines belong on stderr "
        "(print(..., file=sys.stderr), echo ... >&2), stdout carries only the result"
    )


def _no_constants(name: str) -> None:
    message = f"{name} is not valid JSON"
    raise ValueError(message)


_DECODER = json.JSONDecoder(parse_constant=_no_constants)


def _reason(exc: Exception) -> str:
    if isinstance(exc, UnicodeDecodeError):
        return f"invalid UTF-8 at byte {exc.start}"
    return str(exc).split(":")[0]


def _preview(data: bytes) -> str:
    head = data[:_PREVIEW_BYTES]
    suffix = "..." if len(data) > _PREVIEW_BYTES else ""
    return repr(head) + suffix


def _failure(spec: ProcessSpec, outcome: ProcessOutcome, parse_error: str | None) -> str | None:
    if outcome.spawn_error:
        return outcome.spawn_error
    if outcome.stdout_overflow:
        return f"the skill printed more than the stdout cap of {_size(spec.stdout_cap)}; it was killed"
    if outcome.timed_out:
        return f"the skill timed out after {spec.timeout:g} s and was killed"
    if outcome.signal is not None:
        return f"the skill was killed by {_signal_name(outcome.signal)}"
    if outcome.exit_code:
        detail = f": {outcome.stderr_tail[-1]}" if outcome.stderr_tail else ""
        return f"the skill exited with status {outcome.exit_code}{detail}"
    return parse_error


def _signal_name(number: int) -> str:
    try:
        return signals.Signals(number).name
    except ValueError:
        return f"signal {number}"


def _size(n: int) -> str:
    return f"{n // (1024 * 1024)} MiB" if n >= 1024 * 1024 and n % (1024 * 1024) == 0 else f"{n} bytes"


def _stderr_sink(request: CallRequest) -> Any:
    if request.on_event is None:
        return None
    return lambda line: request.emit("stderr", line)


@hookimpl(trylast=True)
def ongrid_executor(tool: Tool, settings: Settings) -> SubprocessExecutor | None:
    """Run every ``subprocess`` tool no other plugin claimed."""
    if tool.kind != "subprocess":
        return None
    return SubprocessExecutor(settings.stdout_cap, settings.kill_grace, settings)
