"""Rerun a module of loader tests with the load cache cold, warm and corrupted.

A matrix module does ``rerun(globals(), "test_loader")``: every test (and
fixture) of that module becomes its own, and the autouse fixture
:func:`load_cache_mode` runs each of them three times. Every load any of those
tests makes then opens its cache in that mode:

* ``cold``: the cache file is deleted first (and this process's memory of it):
  every manifest is read, and the load writes a new cache as usual;
* ``warm``: a priming walk fills a fresh cache from the tree as it is now (the
  loaders only: nothing is registered, logged or announced to plugins) and
  writes it; the load then reads that file back, and every manifest with a
  record must be answered from it (``stale == 0``; the matrix as a whole must
  answer some, checked by ``tests/test_load_cache.py``);
* ``corrupted``: the primed file has a byte flipped in its middle: the load
  must ignore it with exactly one log line and load as if cold.

In every mode the test's own assertions must hold unchanged: the cache never
changes what loads. The racy window is off (the tests' files are seconds old).
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from ongrid_plugins import loader
from ongrid_plugins.catalog import build as catalog_build
from ongrid_plugins.loadcache import CACHE_NAME, LoadCache, store
from ongrid_plugins.loaders.skill_json import skill_record

MODES = ("cold", "warm", "corrupted")
_LOGGER = "ongrid_plugins.loadcache.store"


def rerun(namespace: dict[str, Any], module_name: str) -> ModuleType:
    """Make every test and fixture of ``module_name`` part of ``namespace`` (a matrix module)."""
    module = __import__(module_name)
    for name, value in vars(module).items():
        if not name.startswith("__") and name not in namespace:
            namespace[name] = value
    namespace["load_cache_mode"] = load_cache_mode
    return module


class _Ignored(logging.Filter):
    """Counts the cache's "ignoring" lines and keeps them out of the test's own logs."""

    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if record.levelno >= logging.WARNING and message.startswith("load cache: ignoring"):
            self.lines.append(message)
            return False
        return True


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    previous = logging.root.manager.disable
    logging.disable(logging.CRITICAL)
    try:
        yield
    finally:
        logging.disable(previous)


def _forget(path: str) -> None:
    store.wait_for_writes(path)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
    store._written.pop(path, None)


def _prime(pm: Any, settings: Any, original: Any) -> int:
    """Fill a fresh cache from the tree as it is now; the number of manifests recorded."""
    cache: LoadCache | None = original(pm, settings)
    if cache is None:
        return 0
    cache.record = skill_record
    with _quiet():
        state = loader._Load(pm, settings, cache=cache)
        roots = loader.resolve_roots(pm, settings, [])
        names = frozenset(n for result in pm.hook.ongrid_manifest_names() if result for n in result)
        reals = frozenset(r.real for r in roots)
        for root in roots:
            for path, is_link in loader.iter_manifests(root.real, names, reals - {root.real}, cache):
                loader.read_one(state, root, path, is_link)
    pending = len(cache._pending)
    cache.flush()
    store.wait_for_writes(cache.path)
    return pending


@pytest.fixture(autouse=True, params=MODES)
def load_cache_mode(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Every load of the test opens its cache cold, warm or corrupted (see the module's docstring)."""
    mode: str = request.param
    monkeypatch.setattr(store, "RACY_NS", 0)
    original = store.open_cache
    opened: list[tuple[LoadCache, int]] = []
    corrupted: list[str] = []
    ignored = _Ignored()
    logging.getLogger(_LOGGER).addFilter(ignored)

    def open_cache(pm: Any, settings: Any) -> LoadCache | None:
        if not settings.cache_dir or not settings.load_cache:
            return original(pm, settings)
        path = os.path.join(settings.cache_dir, CACHE_NAME)
        _forget(path)
        primed = 0
        if mode != "cold":
            primed = _prime(pm, settings, original)
        if mode == "corrupted" and os.path.exists(path):
            data = bytearray(Path(path).read_bytes())
            data[len(data) // 2] ^= 0xFF
            Path(path).write_bytes(bytes(data))
            store._written.pop(path, None)
            corrupted.append(path)
        cache = original(pm, settings)
        if cache is not None:
            opened.append((cache, primed if mode == "warm" else 0))
        return cache

    monkeypatch.setattr(loader, "open_cache", open_cache)
    monkeypatch.setattr(catalog_build, "open_cache", open_cache)
    try:
        yield mode
        store.wait_for_writes()
        if mode == "warm":
            for cache, primed in opened:
                assert cache.stale == 0, f"{cache.stale} records of a fresh cache did not hold"
                assert cache.hits <= primed
        if mode == "corrupted":
            assert len(ignored.lines) == len(corrupted), ignored.lines
        else:
            assert ignored.lines == []
    finally:
        logging.getLogger(_LOGGER).removeFilter(ignored)
