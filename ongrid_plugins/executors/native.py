"""Built-in plugin ``native``: runs ``builtin:<key>`` tools, Python callables from plugins.

Plugins contribute implementations through ``ongrid_native_tools`` (key ->
callable); :func:`collect_native_tools` gathers them once per load and the loader
binds each tool to its callable (or marks it unavailable). A call then goes
through the same pipeline as a subprocess tool — argument validation, the gate,
events, :class:`~ongrid_plugins.models.CallResult` — and this executor:

* calls ``fn(args, ctx)`` with the validated arguments and a :class:`NativeContext`;
* runs a synchronous callable in a worker thread, so that its timeout can be
  enforced. A thread cannot be killed: a synchronous tool that overruns is reported
  as timed out, ``ctx.cancelled`` turns true so it can stop on its own, and until it
  does it keeps its worker. Workers are daemon threads of a bounded pool, so an
  overrunning tool never keeps the process from exiting;
* awaits a coroutine function; on timeout it is cancelled;
* requires a JSON object (a ``dict``) back: anything else, or an exception, is a
  failed result naming the type and message (never a traceback, which is logged).
"""

from __future__ import annotations

import collections
import inspect
import json
import logging
import os
import threading
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from ..hookspecs import hookimpl
from ..models import CallRequest, CallResult, Tool
from ..plugins import NATIVE_KEY, collect_native_tools
from ..settings import Settings

if TYPE_CHECKING:
    from concurrent.futures import Future
    from queue import SimpleQueue


__all__ = ["NativeContext", "NativeExecutor", "collect_native_tools"]

logger = logging.getLogger(__name__)

KEY = NATIVE_KEY
MAX_WORKERS = min(32, (os.cpu_count() or 1) + 4)
_TAIL_LINES = 50
_ASYNC_GRACE = 0.5  # the worker-side wait_for of an async tool fires before the caller gives up


class NativeContext:
    """What a native tool gets besides its arguments.

    ``emit(kind, data)`` sends an event to the caller, ``log(line)`` a stderr-like
    line (also kept for the result's ``stderr_tail``); ``cancelled`` turns true when
    the call timed out or was cancelled; ``remaining()`` is the time left;
    ``settings`` are the host's :class:`~ongrid_plugins.settings.Settings` (the
    defaults when the executor was made without any).
    """

    def __init__(self, request: CallRequest, timeout: float, settings: Settings | None = None) -> None:
        tool = request.tool
        self.call_id = request.call_id
        self.tool: Tool = tool
        self.persona: str = request.persona.name
        self.caller: str = request.caller
        self.skill_dir: str = tool.cwd or os.path.dirname(tool.source)
        self.settings: Settings = settings if settings is not None else Settings()
        self.timeout = timeout
        self.deadline = time.monotonic() + timeout
        self._request = request
        self._cancel = threading.Event()
        self._tail: collections.deque[str] = collections.deque(maxlen=_TAIL_LINES)

    def __repr__(self) -> str:
        return f"<NativeContext {self.tool.name} call={self.call_id}>"

    @property
    def cancelled(self) -> bool:
        """True once the call timed out or was cancelled: stop as soon as you can."""
        return self._cancel.is_set()

    def remaining(self) -> float:
        """Seconds left before the call times out (never negative)."""
        return max(0.0, self.deadline - time.monotonic())

    def emit(self, kind: str, data: Any = None) -> None:
        """Send an event (``progress``, ...) to the caller's ``on_event``; may run in a worker thread."""
        self._request.emit(kind, data)

    def log(self, line: str) -> None:
        """A log line for the caller, like a subprocess's stderr."""
        for part in str(line).splitlines() or [""]:
            self._tail.append(part)
            self._request.emit("stderr", part)

    def cancel(self) -> None:
        """Mark the call as cancelled (the executor does this on a timeout)."""
        self._cancel.set()

    @property
    def tail(self) -> tuple[str, ...]:
        """The last lines logged."""
        return tuple(self._tail)


class NativeExecutor:
    """Runs one ``builtin:`` tool call; ``run`` and ``arun`` share everything but the wait."""

    def __init__(self, settings: Settings | None = None) -> None:
        self.settings = settings

    def __repr__(self) -> str:
        return "<NativeExecutor>"

    def run(self, request: CallRequest) -> CallResult:
        """Run the call in a worker thread and wait for it here, at most the timeout."""
        fn, timeout, refusal = _prepare(request)
        if fn is None:
            return refusal
        ctx = NativeContext(request, timeout, self.settings)
        started = _start(request)
        future = _POOL.submit(_call_blocking, fn, request.args, ctx, timeout)
        try:
            outcome = future.result(timeout=timeout + (_ASYNC_GRACE if _is_async(fn) else 0.0))
        except TimeoutError:  # concurrent.futures.TimeoutError is TimeoutError since 3.11
            outcome = ("not_started", None) if future.cancel() else ("timeout", None)
        return _finish(request, ctx, outcome, started, sync=not _is_async(fn))

    async def arun(self, request: CallRequest) -> CallResult:
        """Await the call (a sync tool runs in a worker thread); cancelling the task cancels it."""
        import asyncio  # not at module level: the CLI loads this plugin without any async call

        fn, timeout, refusal = _prepare(request)
        if fn is None:
            return refusal
        ctx = NativeContext(request, timeout, self.settings)
        started = _start(request)
        try:
            if _is_async(fn):
                outcome = await _await_async(fn, request.args, ctx, timeout)
            else:
                future = _POOL.submit(_call_blocking, fn, request.args, ctx, timeout)
                try:
                    outcome = await asyncio.wait_for(asyncio.shield(asyncio.wrap_future(future)), timeout)
                except TimeoutError:
                    outcome = ("not_started", None) if future.cancel() else ("timeout", None)
                except asyncio.CancelledError:
                    future.cancel()  # if it has not started, it never will
                    raise
        except asyncio.CancelledError:
            ctx.cancel()
            raise
        return _finish(request, ctx, outcome, started, sync=not _is_async(fn))


Outcome = tuple[str, Any]


def _prepare(request: CallRequest) -> tuple[Any, float, CallResult]:
    tool = request.tool
    timeout = tool.timeout if request.timeout is None else min(request.timeout, tool.timeout)
    refusal = CallResult(
        tool.name, False, error=f"no implementation is bound for {tool.impl}", call_id=request.call_id
    )
    return tool.native, timeout, refusal


def _start(request: CallRequest) -> float:
    request.emit("start", {"impl": request.tool.impl})
    return time.monotonic()


def _is_async(fn: Callable[..., Any]) -> bool:
    if inspect.iscoroutinefunction(fn):
        return True
    return not inspect.isroutine(fn) and inspect.iscoroutinefunction(type(fn).__call__)


def _call_blocking(
    fn: Callable[..., Any], args: Mapping[str, Any], ctx: NativeContext, timeout: float
) -> Outcome:
    """Run in a worker thread: the tool's outcome, never an exception."""
    import asyncio

    try:
        if _is_async(fn):
            return asyncio.run(_await_async(fn, args, ctx, timeout))
        value = fn(dict(args), ctx)
        if inspect.isawaitable(value):  # a sync callable that returned a coroutine
            return asyncio.run(_await_async(lambda _a, _c: value, args, ctx, ctx.remaining()))
        return ("ok", value)
    except BaseException as exc:  # SystemExit from a tool is a failure too, not an exit
        return ("error", exc)


async def _await_async(
    fn: Callable[..., Any], args: Mapping[str, Any], ctx: NativeContext, timeout: float
) -> Outcome:
    import asyncio

    try:
        return await asyncio.wait_for(_guarded(fn, args, ctx), timeout)
    except TimeoutError:  # ours: the tool's own TimeoutError is an "error" outcome of _guarded
        ctx.cancel()
        return ("timeout", None)
    except asyncio.CancelledError:
        ctx.cancel()
        raise


async def _guarded(fn: Callable[..., Any], args: Mapping[str, Any], ctx: NativeContext) -> Outcome:
    """The tool's outcome; its exceptions are caught in its own task, before asyncio sees them.

    (asyncio re-raises ``SystemExit`` out of the event loop: a tool calling ``sys.exit()``
    must fail its call, not stop the host.)
    """
    try:
        return ("ok", await fn(dict(args), ctx))
    except (Exception, SystemExit) as exc:
        return ("error", exc)


def _finish(
    request: CallRequest, ctx: NativeContext, outcome: Outcome, started: float, *, sync: bool
) -> CallResult:
    tool = request.tool
    status, value = outcome
    error: str | None = None
    if status == "not_started":
        ctx.cancel()
        error = f"the tool did not start within its timeout of {ctx.timeout:g} s: all {MAX_WORKERS} native "
        error += "workers are busy (synchronous tools past their timeouts still hold them)"
        value = None
    elif status == "timeout":
        ctx.cancel()
        error = f"the tool timed out after {ctx.timeout:g} s"
        error += " (a synchronous tool cannot be stopped; it was asked to)" if sync else " and was cancelled"
        value = None
    elif status == "error":
        error = f"{type(value).__name__}: {value}"
        logger.warning("native tool %s (%s) raised %s", tool.name, tool.impl, error)
        logger.debug("native tool %s traceback", tool.name, exc_info=value)
        value = None
    else:
        value, error = _json_object(value)
    result = CallResult(
        tool=tool.name,
        ok=error is None,
        value=value,
        error=error,
        timed_out=status in ("timeout", "not_started"),
        duration=time.monotonic() - started,
        stderr_tail=ctx.tail,
        call_id=request.call_id,
    )
    request.emit("exit", {"ok": result.ok, "timed_out": result.timed_out})
    return result


def _json_object(value: Any) -> tuple[Any, str | None]:
    """The value as plain JSON if it is a JSON object, else ``(None, why not)``."""
    if not isinstance(value, dict):
        return None, f"the tool must return a JSON object (a dict), not {type(value).__name__}"
    try:
        return json.loads(json.dumps(value, allow_nan=False)), None
    except (TypeError, ValueError, RecursionError) as exc:
        return None, f"the tool returned a dict that is not JSON: {exc}"


class _WorkerPool:
    """A bounded pool of daemon threads with the ``concurrent.futures`` API.

    Not a ``ThreadPoolExecutor``: that one joins its workers when the interpreter
    exits, so a single synchronous tool overrunning its timeout would keep the
    process alive until it returned.
    """

    def __init__(self, max_workers: int) -> None:
        self._max = max_workers
        # Made with the first job: the pool is made when this plugin is imported, which every
        # load does, and the queue module is ~1 ms of a cold start that may run no native tool.
        self._queue: SimpleQueue[tuple[Future[Any], Callable[..., Any], tuple[Any, ...]]] | None = None
        self._idle = threading.Semaphore(0)
        self._lock = threading.Lock()
        self._threads = 0

    def submit(self, fn: Callable[..., Any], *args: Any) -> Future[Any]:
        """Schedule ``fn(*args)``; a new worker starts unless one is idle or the pool is full."""
        from concurrent.futures import Future  # first native call only: ~7 ms of imports

        future: Future[Any] = Future()
        jobs = self._queue if self._queue is not None else self._new_queue()
        jobs.put((future, fn, args))
        if not self._idle.acquire(blocking=False):
            with self._lock:
                if self._threads < self._max:
                    self._threads += 1
                    name = f"ongrid-native-{self._threads}"
                    threading.Thread(target=self._work, name=name, daemon=True).start()
        return future

    def _new_queue(self) -> SimpleQueue[tuple[Future[Any], Callable[..., Any], tuple[Any, ...]]]:
        from queue import SimpleQueue

        with self._lock:  # two first jobs at once get one queue
            if self._queue is None:
                self._queue = SimpleQueue()
            return self._queue

    def _work(self) -> None:
        jobs = self._queue
        assert jobs is not None  # workers start after the first job is queued
        while True:
            future, fn, args = jobs.get()
            if future.set_running_or_notify_cancel():
                try:
                    future.set_result(fn(*args))
                except BaseException as exc:
                    future.set_exception(exc)
            del future, fn, args
            self._idle.release()


_POOL = _WorkerPool(MAX_WORKERS)


@hookimpl
def ongrid_executor(tool: Tool, settings: Settings) -> NativeExecutor | None:
    """Run every ``native`` (``builtin:``) tool."""
    if tool.kind != "native":
        return None
    return NativeExecutor(settings)
