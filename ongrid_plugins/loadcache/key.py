"""The key of the whole load cache: everything but the files that shapes what the loader builds.

A cache file written under another key is a cold load without a warning (an
upgrade is no fault). See :func:`fingerprint`.

It may import the core values, ``roots`` and ``schema.verdicts``.
"""

from __future__ import annotations

import functools
import hashlib
import operator
import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..discovery.roots import builtin_skills_dir
from ..hooks import hooks
from .cachefile import FORMAT

if TYPE_CHECKING:
    import pluggy

    from ..settings import Settings

__all__ = ["deferred_fingerprint", "fingerprint"]


@functools.cache
def _code_stamp() -> str:
    """Path, size and mtime of every module of the package, read once per process.

    One ``scandir`` per folder and one ``stat`` per ``.py`` / ``.json`` file
    (symlinks followed, symlinked folders not walked, ``__pycache__`` skipped),
    hashed as one text: a tenth of what ``os.walk`` with a ``relpath`` per file
    cost, which a cold load paid before its first manifest.
    """
    top = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    lines: list[str] = []
    stack = [(top, ".")]
    while stack:
        folder, shown = stack.pop()
        with os.scandir(folder) as it:
            entries = sorted(it, key=_BY_NAME)
        subdirs = []
        for entry in entries:
            name = entry.name
            if entry.is_dir():
                if name != "__pycache__" and not entry.is_symlink():
                    subdirs.append((entry.path, name if shown == "." else f"{shown}/{name}"))
            elif name.endswith((".py", ".json")):
                st = entry.stat()
                lines.append(f"{shown}/{name}\0{st.st_size}\0{st.st_mtime_ns}\n")
        stack.extend(reversed(subdirs))
    return hashlib.blake2b("".join(lines).encode(), digest_size=16).hexdigest()


_BY_NAME = operator.attrgetter("name")


def fingerprint(pm: pluggy.PluginManager, settings: Settings) -> str | None:
    """The key of the whole cache: everything but the files that shapes what the loader builds.

    None (no cache) when a plugin from outside this package implements
    ``ongrid_load_manifest`` or ``ongrid_manifest_names``: what a third-party
    loader reads cannot be known. No hook is called: the built-in names are code.
    """
    later = deferred_fingerprint(pm, settings)
    return None if later is None else later()


def deferred_fingerprint(pm: pluggy.PluginManager, settings: Settings) -> Callable[[], str] | None:
    """:func:`fingerprint` in two steps: what this load's plugins and settings give, now;
    what the process's code and packages give, when the returned function is called.

    The second part (the version, a ``stat`` of every module, the stamps of the
    packages behind the schema checks) is the same for every load of a process and
    costs a few ms: a load that finds no cache file never needs it before its writer
    runs, in the background, after the load.
    """
    loaders = []
    for hook in ("ongrid_load_manifest", "ongrid_manifest_names"):
        for impl in hooks(pm).implementations(hook):
            module = getattr(impl.plugin, "__name__", "")
            if not module.startswith("ongrid_plugins."):
                return None
            loaders.append((hook, impl.plugin_name, module, impl.tryfirst, impl.trylast))
    this_load: list[Any] = [
        loaders,
        os.path.expanduser("~"),
        os.geteuid(),
        builtin_skills_dir(),
        settings.default_timeout,
        sorted(settings.sandbox_caps.items()),
        settings.state_dir,
        settings.config_dir,
        settings.cache_dir,
        settings.skill_dirs,
        settings.env_dirs,
        settings.system_skills_dir,
        settings.user_skills_dir,
        settings.include_defaults,
    ]

    def complete() -> str:
        from .._version import __version__
        from ..schema import verdicts

        code = [FORMAT, __version__, sys.version, _code_stamp(), verdicts._environment_fingerprint()]
        parts = [*code, *this_load]
        return hashlib.blake2b(repr(parts).encode("utf-8", "surrogateescape"), digest_size=16).hexdigest()

    return complete
