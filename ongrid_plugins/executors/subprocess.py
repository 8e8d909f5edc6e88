"""Built-in plugin ``subprocess``: runs skill.json entries with the wire protocol.

stdin = the JSON arguments object, stdout = one JSON object (the result),
stderr = log lines streamed to the caller as they arrive, exit status != 0 =
failure. The process machinery (spawn, caps, timeouts, process-group kills)
lives in :mod:`._process`; this module turns a call into a
:class:`~._process.ProcessSpec` and the outcome into a
:class:`~ongrid_plugins.models.CallResult`.
"""

from __future__ import annotations

import functools
import json
import os
import signal as signals
import stat
from typing import TYPE_CHECKING, Any

from ..catalog.digest import entry_drift
from ..hookspecs import hookimpl
from ..models import CallRequest, CallResult, canonical_json
from ..roots import is_executable_file, is_within, resolve_file

if TYPE_CHECKING:
    from ..models import Tool
    from ..settings import Settings
    from ._process import ProcessOutcome, ProcessSpec

__all__ = ["SubprocessExecutor", "parse_result"]

_PREVIEW_BYTES = 200


class SubprocessExecutor:
    """Runs one subprocess tool call; ``run`` and ``arun`` share everything but the wait."""

    def __init__(self, stdout_cap: int, kill_grace: float) -> None:
        self.stdout_cap = stdout_cap
        self.kill_grace = kill_grace

    def __repr__(self) -> str:
        return f"<SubprocessExecutor cap={self.stdout_cap}>"

    def run(self, request: CallRequest) -> CallResult:
        """Run the entry and wait for it in this thread."""
        spec = self._spec(request)
        if isinstance(spec, CallResult):
            return spec
        request.emit("start", {"entry": spec.argv[0]})
        from ._process import run_process

        outcome = run_process(spec, _stderr_sink(request))
        return self._result(request, spec, outcome)

    async def arun(self, request: CallRequest) -> CallResult:
        """Run the entry without blocking the event loop."""
        spec = self._spec(request)
        if isinstance(spec, CallResult):
            return spec
        request.emit("start", {"entry": spec.argv[0]})
        from ._process import arun_process

        outcome = await arun_process(spec, _stderr_sink(request))
        return self._result(request, spec, outcome)

    def _spec(self, request: CallRequest) -> ProcessSpec | CallResult:
        tool = request.tool
        entry, refusal = recheck_entry(tool)
        if refusal is not None:
            return CallResult(tool.name, False, error=refusal, call_id=request.call_id)
        environ = os.environ
        env = {name: environ[name] for name in tool.env_allow if name in environ}
        timeout = tool.timeout if request.timeout is None else min(request.timeout, tool.timeout)
        payload = request.args_json or canonical_json(request.args)
        from ._process import ProcessSpec  # the runner (and asyncio) load on the first call

        return ProcessSpec(
            argv=(entry,),
            cwd=tool.cwd or os.path.dirname(entry),
            env=env,
            stdin=payload.encode("utf-8"),
            timeout=timeout,
            stdout_cap=self.stdout_cap,
            kill_grace=self.kill_grace,
        )

    def _result(self, request: CallRequest, spec: ProcessSpec, outcome: ProcessOutcome) -> CallResult:
        tool = request.tool
        value, parse_error = parse_result(outcome.stdout)
        error = _failure(spec, outcome, parse_error)
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
        request.emit("exit", {"ok": result.ok, "exit_code": outcome.exit_code, "signal": outcome.signal})
        return result


def recheck_entry(tool: Tool) -> tuple[str, str | None]:
    """Resolve the entry again at call time and check it still may run.

    Returns ``(canonical path, None)``, or ``("", reason)`` when it may not run:
    a file swapped since load time for a symlink that escapes the root is refused.
    """
    declared = tool.entry_declared or tool.entry or ""
    candidate = os.path.join(tool.cwd or "", declared)
    try:
        real, st = _resolve(candidate, declared, tool.entry)
    except (OSError, ValueError) as exc:
        return "", f"entry {candidate} is gone: {getattr(exc, 'strerror', None) or exc}"
    if not is_within(real, tool.root):
        return "", f"entry {real} escapes allowlist root {tool.root}"
    if not is_executable_file(st):
        return "", f"entry {real} is no longer an executable file"
    drift = entry_drift(tool)  # its bytes are still the ones loaded (the catalog's call-time check)
    if drift is not None:
        return "", drift
    return real, None


def _resolve(candidate: str, declared: str, loaded: str | None) -> tuple[str, os.stat_result]:
    # Fast path: a plain file name that resolved to itself at load time and is
    # still not a symlink needs one lstat; anything else is fully resolved.
    if "/" not in declared and candidate == loaded:
        st = os.lstat(candidate)
        if not stat.S_ISLNK(st.st_mode):
            return candidate, st
    return resolve_file(candidate)


def parse_result(stdout: bytes) -> tuple[Any, str | None]:
    """The JSON object on stdout, or ``(None, why not)`` quoting the first bytes."""
    text = stdout.strip()
    if not text:
        return None, "the skill printed nothing on stdout (it must print one JSON object)"
    try:
        value = json.loads(text.decode("utf-8"), parse_constant=_no_constants)
    except (UnicodeDecodeError, ValueError) as exc:
        return None, f"stdout is not one JSON object ({_reason(exc)}); it starts with {_preview(stdout)}"
    if not isinstance(value, dict):
        return (
            None,
            f"stdout must be a JSON object, not {type(value).__name__}; it starts with {_preview(stdout)}",
        )
    return value, None


def _no_constants(name: str) -> None:
    message = f"{name} is not valid JSON"
    raise ValueError(message)


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
    return _executor_for(settings.stdout_cap, settings.kill_grace)


@functools.lru_cache(maxsize=16)
def _executor_for(stdout_cap: int, kill_grace: float) -> SubprocessExecutor:
    # Executors hold no per-call state: one per distinct set of limits will do.
    return SubprocessExecutor(stdout_cap, kill_grace)
