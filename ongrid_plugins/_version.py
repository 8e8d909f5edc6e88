"""The installed version of ongrid-plugins, read from the package metadata.

Its own module, importing nothing of the package, so any stage may ask for the
version without importing the package root (which imports the host). The lookup
is lazy (``importlib.metadata`` costs a start-up that ``list`` should not pay):
``from ._version import __version__`` reads it on first use.

The usual case, a ``.dist-info`` folder in a plain directory of ``sys.path``, is
read directly: the ``Version`` header of the distribution ``importlib.metadata``
would find first. Importing ``importlib.metadata`` (and the ``email`` parser it
reads the file with) costs ~25 ms, a tenth of a cold load of 2,000 manifests.
Anything else (an egg, a zip, another metadata finder) asks ``importlib.metadata``.
"""

from __future__ import annotations

__all__ = ["__version__"]  # noqa: F822 - provided by __getattr__ on first use

_NAME = "ongrid_plugins"  # the distribution's name as importlib.metadata normalises it


def _lookup() -> str:
    found = _from_dist_info()
    if found is not None:
        return found
    from importlib import metadata

    try:
        return metadata.version("ongrid-plugins")
    except metadata.PackageNotFoundError:  # a source tree used without installing it
        return "0+unknown"


def _from_dist_info() -> str | None:
    """The version ``importlib.metadata.version`` returns, when it is found the plain way; else None.

    ``importlib.metadata`` takes the first ``<name>-*.dist-info`` or ``.egg-info``
    of the first ``sys.path`` entry that holds one (names normalised, in listing
    order). None (ask it) for anything this does not read the same way.
    """
    import os
    import re
    import sys
    from importlib.machinery import PathFinder

    finders = [f for f in sys.meta_path if getattr(f, "find_distributions", None) is not None]
    if finders != [PathFinder]:
        return None
    for entry in sys.path:
        try:
            children = os.listdir(entry or ".")
        except FileNotFoundError:
            continue
        except Exception:  # a zip archive, an unreadable folder: importlib.metadata knows
            return None
        if os.path.basename(entry).lower().endswith(".egg"):
            return None
        for child in children:
            low = child.lower()
            if not low.endswith((".dist-info", ".egg-info")):
                continue
            stem = low.rpartition(".")[0].partition("-")[0]
            if re.sub(r"[-_.]+", "_", stem) != _NAME:
                continue
            if low.endswith(".egg-info"):
                return None
            return _version_header(os.path.join(entry or ".", child, "METADATA"))
    return None


def _version_header(path: str) -> str | None:
    """The first ``Version:`` header of a METADATA file, or None."""
    try:
        with open(path, encoding="utf-8") as handle:
            for line in handle:
                if not line.strip():
                    break
                name, colon, value = line.partition(":")
                if colon and name.lower() == "version":
                    return value.strip() or None
    except (OSError, UnicodeDecodeError):
        return None
    return None


def __getattr__(name: str) -> str:
    if name == "__version__":
        version = _lookup()
        globals()["__version__"] = version
        return version
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
