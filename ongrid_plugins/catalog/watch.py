"""Hot reload: watch the folders skills come from, reload on a change, tell the subscribers.

A :class:`Watch` runs one daemon thread. It watches every path it is given
(the walked roots, the persona folders, the packs folder) with
**watchfiles** (extra ``[watch]``) and, when that is not installed or the
kernel's inotify watches run out, by polling ``stat`` (one log line says
so). A burst of changes is debounced (``debounce`` seconds, 0.2 by default)
into one reload; the reload swaps the registry atomically and the host
publishes what changed, so calls in flight keep the snapshot they started with.

Two forms::

    with host.watch():                     # reloads in the background until the block ends
        serve()

    async for changes in host.watch():     # each batch of CatalogChange, as it happens
        ...

The watch depends only on callables (what to watch, how to reload, how to
subscribe), never on the host, so the layering holds.
"""

from __future__ import annotations

import asyncio
import logging
import os
import stat
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterable
from types import TracebackType
from typing import Any

from .events import CatalogChange, Listener

__all__ = ["DEFAULT_DEBOUNCE", "DEFAULT_POLL_INTERVAL", "Watch"]

logger = logging.getLogger(__name__)

DEFAULT_DEBOUNCE = 0.2
DEFAULT_POLL_INTERVAL = 0.25
_PATHS_RECHECK = 1.0  # seconds between looks for watched folders that appeared or went
_WAKE_MS = 100  # watchfiles returns this often without changes (to notice a stop or a new folder)
_warned: set[str] = set()


_THREAD_NAME = "ongrid-catalog-watch"


class _OwnLines(logging.Filter):
    """Drops watchfiles' own "N changes detected" lines from our thread: the reload logs what changed."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.threadName != _THREAD_NAME or record.levelno > logging.INFO


_OWN_LINES = _OwnLines()


def _once(key: str, message: str, *args: object) -> None:
    if key not in _warned:
        _warned.add(key)
        logger.warning(message, *args)


class Watch:
    """A background watcher that reloads a catalog when its files change."""

    def __init__(
        self,
        paths: Callable[[], Iterable[str]],
        reload: Callable[[], object],
        subscribe: Callable[[Listener], Callable[[], None]],
        *,
        debounce: float = DEFAULT_DEBOUNCE,
        poll_interval: float = DEFAULT_POLL_INTERVAL,
        force_polling: bool = False,
    ) -> None:
        """Nothing starts until :meth:`start`, ``with`` or ``async for``.

        :param paths: The folders to watch now (asked again after every reload).
        :param reload: Loads again and publishes the changes.
        :param subscribe: Adds a change listener, returning its unsubscribe function.
        :param debounce: Seconds a burst of changes is gathered for before one reload.
        :param poll_interval: Seconds between two looks when polling.
        :param force_polling: Poll even when watchfiles could be used.
        """
        if not debounce >= 0 or not poll_interval > 0:
            message = (
                f"debounce must be >= 0 and poll_interval > 0 seconds (got {debounce!r}, {poll_interval!r})"
            )
            raise ValueError(message)
        self._paths = paths
        self._reload = reload
        self._subscribe = subscribe
        self.debounce = debounce
        self.poll_interval = poll_interval
        self.polling = force_polling
        """True once the watch polls (asked for, watchfiles missing, or inotify exhausted)."""
        self.reloads = 0
        """How many reloads this watch triggered."""
        self._stop = threading.Event()
        self._restart = threading.Event()
        self._ready = threading.Event()
        self._baseline: dict[str, tuple[int, ...]] | None = None
        self._thread: threading.Thread | None = None

    def __repr__(self) -> str:
        how = "polling" if self.polling else "watchfiles"
        return f"<Watch {how} {'running' if self.running else 'stopped'} reloads={self.reloads}>"

    @property
    def running(self) -> bool:
        """True while the watcher thread runs."""
        return self._thread is not None and self._thread.is_alive()

    def start(self, timeout: float = 10.0) -> Watch:
        """Start watching in a daemon thread; return once it watches (a second start does nothing).

        A change made after ``start`` returns is seen; one made while it
        starts is caught by comparing the folders before and after.
        """
        if not self.running:
            self._stop.clear()
            self._ready.clear()
            self._baseline = _scan(self._existing())
            self._thread = threading.Thread(target=self._run, name=_THREAD_NAME, daemon=True)
            self._thread.start()
            self._ready.wait(timeout)
        return self

    def stop(self, timeout: float = 5.0) -> None:
        """Stop watching and wait for the thread to end."""
        self._stop.set()
        thread, self._thread = self._thread, None
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)

    def __enter__(self) -> Watch:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def __aiter__(self) -> AsyncIterator[list[CatalogChange]]:
        return self._changes()

    async def _changes(self) -> AsyncIterator[list[CatalogChange]]:
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[list[CatalogChange]] = asyncio.Queue()

        def listener(changes: list[CatalogChange]) -> None:
            if not loop.is_closed():
                loop.call_soon_threadsafe(queue.put_nowait, changes)

        unsubscribe = self._subscribe(listener)
        started = not self.running
        await asyncio.to_thread(self.start)  # it waits for the watcher to be set up
        try:
            while True:
                yield await queue.get()
        finally:
            unsubscribe()
            if started:
                await asyncio.to_thread(self.stop)

    # ------------------------------------------------------------------ the thread

    def _run(self) -> None:
        previous: list[str] | None = None
        while not self._stop.is_set():
            paths = self._existing()
            if previous is not None and paths != previous:
                # A folder appeared or went: what is in it now was never seen; load it once
                # the new watcher is set up.
                self._baseline = {}
                self._ready.clear()
            previous = paths
            if not paths:
                self._ready.set()
                self._stop.wait(_PATHS_RECHECK)
                continue
            if not self.polling:
                self.polling = not self._watchfiles(paths)
            else:
                self._poll(paths)

    def _existing(self) -> list[str]:
        try:
            wanted = list(dict.fromkeys(self._paths()))
        except Exception:
            logger.exception("catalog: cannot tell which folders to watch")
            return []
        return [p for p in wanted if os.path.isdir(p)]

    def _became_ready(self, paths: list[str]) -> None:
        """The watcher is set up: reload if anything changed while it was being set up."""
        if self._ready.is_set():
            return
        baseline, self._baseline = self._baseline, None
        if baseline is not None and (not baseline or _scan(paths) != baseline):
            self._do_reload()
        self._ready.set()

    def _do_reload(self) -> None:
        self.reloads += 1
        try:
            self._reload()
        except Exception:
            logger.exception("catalog: reload failed; the previous catalog stays")

    def _watchfiles(self, paths: list[str]) -> bool:
        """Watch with watchfiles until the watched set changes or the watch stops; False to poll instead."""
        try:
            import watchfiles
        except ImportError:
            _once(
                "missing",
                "catalog: watchfiles is not installed (pip install 'ongrid-plugins[watch]'); "
                "watching by polling every %.2f s",
                self.poll_interval,
            )
            return False
        watch_logger = logging.getLogger("watchfiles.main")
        if _OWN_LINES not in watch_logger.filters:
            watch_logger.addFilter(_OWN_LINES)
        debounce_ms = max(1, int(self.debounce * 1000))
        next_recheck = time.monotonic() + _PATHS_RECHECK
        stop = _Either(self._stop, self._restart)
        self._restart.clear()
        try:
            for _changes in watchfiles.watch(
                *paths,
                debounce=debounce_ms,
                step=min(50, debounce_ms),
                stop_event=stop,
                rust_timeout=_WAKE_MS,
                yield_on_timeout=True,
                raise_interrupt=False,
                ignore_permission_denied=True,
            ):
                self._became_ready(paths)  # the first yield: a timeout or a change, watched either way
                if _changes:
                    self._do_reload()
                if time.monotonic() >= next_recheck:
                    if self._existing() != paths:
                        return True
                    next_recheck = time.monotonic() + _PATHS_RECHECK
        except OSError as exc:  # inotify watches or instances exhausted, a folder gone mid-setup
            _once(
                "inotify",
                "catalog: cannot watch with inotify (%s); watching by polling every %.2f s",
                exc,
                self.poll_interval,
            )
            return False
        return True

    def _poll(self, paths: list[str]) -> None:
        """Poll until the watched set changes or the watch stops."""
        baseline, self._baseline = self._baseline, None
        seen = baseline if baseline is not None and not self._ready.is_set() else _scan(paths)
        if baseline == {}:
            seen = _scan(paths)
            self._do_reload()
        self._ready.set()
        next_recheck = time.monotonic() + _PATHS_RECHECK
        while not self._stop.wait(self.poll_interval):
            now = _scan(paths)
            if now != seen:
                seen = self._settle(paths, now)
                self._do_reload()
            if time.monotonic() >= next_recheck:
                if self._existing() != paths:
                    return
                next_recheck = time.monotonic() + _PATHS_RECHECK

    def _settle(self, paths: list[str], now: dict[str, tuple[int, ...]]) -> dict[str, tuple[int, ...]]:
        """Wait until the tree is quiet for ``debounce`` (at most 10 of them), return its state."""
        deadline = time.monotonic() + 10 * max(self.debounce, self.poll_interval)
        while self.debounce and not self._stop.wait(self.debounce) and time.monotonic() < deadline:
            later = _scan(paths)
            if later == now:
                break
            now = later
        return now


class _Either:
    """A stop event for watchfiles that is set when either of two events is."""

    def __init__(self, a: threading.Event, b: threading.Event) -> None:
        self._a, self._b = a, b

    def is_set(self) -> bool:
        return self._a.is_set() or self._b.is_set()


def _scan(paths: list[str]) -> dict[str, tuple[int, ...]]:
    """The stat signature of every file and folder under ``paths`` (symlinks not followed)."""
    state: dict[str, tuple[int, ...]] = {}
    stack = list(paths)
    while stack:
        folder = stack.pop()
        try:
            with os.scandir(folder) as it:
                entries: list[Any] = list(it)
        except OSError:
            continue
        for entry in entries:
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            state[entry.path] = (st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino, st.st_mode)
            if stat.S_ISDIR(st.st_mode) and entry.name not in (".git", "__pycache__", "node_modules"):
                stack.append(entry.path)
    return state
