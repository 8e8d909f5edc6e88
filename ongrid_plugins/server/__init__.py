"""Network surfaces over :class:`~ongrid_plugins.SkillHost`: REST (extra ``[server]``), MCP (``[mcp]``).

Nothing here is imported by ``import ongrid_plugins``; the modules that need an extra
import it themselves and, when it is missing, name the extra and the ``pip install`` that adds
it (:mod:`ongrid_plugins.hints`), before doing anything else.
"""

from __future__ import annotations

from ..errors import ConfigError

__all__ = ["MissingExtra", "missing_extra", "require_extra"]

#: The modules each extra brings, checked in this order.
_EXTRA_MODULES = {"server": ("starlette", "uvicorn"), "mcp": ("mcp", "anyio")}


class MissingExtra(ConfigError):
    """An optional dependency is missing: names the extra, the module and the command that adds it."""

    def __init__(self, extra: str, module: str, command: str = "this") -> None:
        from ..hints import extra_install

        self.extra = extra
        self.module = module
        message = (
            f"{command} needs the [{extra}] extra of ongrid-plugins, which is not installed "
            f"(no module {module!r}): {extra_install(extra)}"
        )
        super().__init__(message)


def missing_extra(extra: str, module: str, command: str = "this") -> MissingExtra:
    """The error for a missing extra (see :class:`MissingExtra`)."""
    return MissingExtra(extra, module, command)


def require_extra(extra: str, command: str) -> None:
    """Raise :class:`MissingExtra` for ``command`` unless every module of ``extra`` imports."""
    import importlib

    for module in _EXTRA_MODULES[extra]:
        try:
            importlib.import_module(module)
        except ImportError as exc:
            raise MissingExtra(extra, exc.name or module, command) from None
