"""The ``pip install`` lines error messages and ``new`` print, never pointing at an index by mistake.

A hint that says ``pip install ongrid-pack-greet`` for a folder the user just made,
or ``pip install 'ongrid-plugins[server]'`` to someone who installed from a
checkout, sends them to a package index for a local package: at best it fails, at
worst it installs whatever someone uploaded under that name (dependency
confusion). So a local folder is always written as a path (``./ongrid-pack-greet``),
and ongrid-plugins itself is named the way it was installed: by its folder when it
came from one or from a local wheel (PEP 610 ``direct_url.json``, or the source tree
it runs from), by
name only when it came from an index.

Imports only the standard library.
"""

from __future__ import annotations

import json
import os
import shlex
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import unquote, urlparse

if TYPE_CHECKING:
    from importlib.metadata import Distribution

__all__ = ["extra_install", "install_source", "local_path", "pack_install"]

_DIST = "ongrid-plugins"


def local_path(folder: str | os.PathLike[str]) -> str:
    """``folder`` as pip reads a path, never a name: ``./name`` for a bare relative folder."""
    text = os.fspath(folder)
    if os.path.isabs(text) or text.startswith(("./", "../", "~")):
        return text
    return "./" + text


def install_source() -> tuple[str, bool]:
    """``(what to give pip, editable)`` for ongrid-plugins as it is installed here.

    A folder when it came from one (a checkout, editable or not), ``ongrid-plugins``
    when it came from an index.
    """
    source = _direct_folder()
    if source is not None:
        return source
    tree = Path(__file__).resolve().parent.parent
    if (tree / "pyproject.toml").is_file() and not _installed_from_index():
        return str(tree), True  # running from a source tree that pip never installed
    return _DIST, False


def extra_install(extra: str) -> str:
    """The command that adds the optional dependencies ``extra`` to this installation."""
    source, editable = install_source()
    target = shlex.quote(f"{source}[{extra}]")
    return f"pip install {'-e ' if editable else ''}{target}"


def pack_install(folder: str | os.PathLike[str]) -> str:
    """The command that installs a scaffolded pack ``folder``, in a fresh venv too.

    The pack depends on ongrid-plugins: when that came from a folder, the folder is
    installed with it, so pip never looks for ``ongrid-plugins`` on an index.
    """
    pack = shlex.quote(local_path(folder))
    source, editable = install_source()
    if source == _DIST:
        return f"pip install {pack}"
    return f"pip install {'-e ' if editable else ''}{shlex.quote(source)} {pack}"


def _dist_info() -> Distribution | None:
    # importlib.metadata imports zipfile and more: only error messages and `new` need it.
    from importlib.metadata import PackageNotFoundError, distribution

    try:
        return distribution(_DIST)
    except PackageNotFoundError:
        return None


def _direct_folder() -> tuple[str, bool] | None:
    info = _dist_info()
    if info is None:
        return None
    try:
        data = json.loads(info.read_text("direct_url.json") or "null")
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict):
        return None
    url = urlparse(str(data.get("url", "")))
    if url.scheme != "file":
        return None  # from a VCS or a remote archive: its name on an index is no worse
    folder = data.get("dir_info")
    return unquote(url.path), isinstance(folder, dict) and bool(folder.get("editable"))


def _installed_from_index() -> bool:
    return _dist_info() is not None
