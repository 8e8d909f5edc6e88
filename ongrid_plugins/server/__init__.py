"""Network surfaces over :class:`~ongrid_plugins.SkillHost`: REST (extra ``[server]``), MCP (``[mcp]``).

Nothing here is imported by ``import ongrid_plugins``; the modules that need an extra
import it themselves and say which ``pip install`` is missing when it is.
"""

from __future__ import annotations

from ..errors import ConfigError

__all__ = ["missing_extra"]


def missing_extra(extra: str, module: str) -> ConfigError:
    """The error for a missing optional dependency: what is missing and the command that adds it."""
    message = (
        f"this needs the optional dependency {module!r}, which is not installed: "
        f"pip install 'ongrid-plugins[{extra}]'"
    )
    return ConfigError(message)
