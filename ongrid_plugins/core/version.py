"""The installed version of ongrid-plugins, read from the package metadata.

Its own module, importing nothing of the package, so any stage may ask for the
version without importing the package root (which imports the host). The lookup
is lazy (``importlib.metadata`` costs a start-up that ``list`` should not pay):
``from ._version import __version__`` reads it on first use.
"""

from __future__ import annotations

__all__ = ["__version__"]  # noqa: F822 - provided by __getattr__ on first use


def _lookup() -> str:
    from importlib import metadata

    try:
        return metadata.version("ongrid-plugins")
    except metadata.PackageNotFoundError:  # a source tree used without installing it
        return "0+unknown"


def __getattr__(name: str) -> str:
    if name == "__version__":
        version = _lookup()
        globals()["__version__"] = version
        return version
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
