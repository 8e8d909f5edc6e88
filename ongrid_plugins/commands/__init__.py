"""The sub-commands of ``ongrid-skills``, one module each (see :mod:`ongrid_plugins.cli`).

Helpers beside the sub-commands: :mod:`.scaffold` (what ``new`` writes) and
:mod:`.statedir` (``state init``: a state folder shared by a group).

Layering: the surfaces stage; these modules may import every earlier stage.
"""

from __future__ import annotations

from ..errors import ConfigError

__all__ = ["UsageError"]


class UsageError(ConfigError):
    """The command line itself is wrong (flags that do not go together, a missing one).

    ``ongrid-skills`` prints the sub-command's usage line after the ``ERROR:`` line,
    as argparse does for the errors it finds itself; exit code 2.
    """
