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

import re

__all__ = ["__version__"]  # noqa: F822 - provided by __getattr__ on first use


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
        # One regex over the whole listing (a folder may hold thousands of names; a loop
        # in Python over them cost ~1 ms per 1,000). A file name holds no NUL.
        found = _OURS.search("\0" + "\0".join(children) + "\0")
        if found is None:
            continue
        child = found.group(1)
        if child.lower().endswith(".egg-info"):
            return None
        return _version_header(os.path.join(entry or ".", child, "METADATA"))
    return None


#: A ``.dist-info`` or ``.egg-info`` name of this distribution, between NULs: the part
#: before the first ``-`` of the name less its suffix normalises (``[-_.]+`` -> ``_``,
#: lower case) to ``ongrid_plugins``, as ``importlib.metadata`` compares them (ASCII case only:
#: ``str.lower`` leaves ``ſ`` and ``ı``, which Unicode case folding would match).
_OURS = re.compile(r"\0(ongrid[_.]+plugins(?:-[^\0]*)?\.(?:dist|egg)-info)(?=\0)", re.IGNORECASE | re.ASCII)


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
