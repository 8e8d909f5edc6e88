"""``python -m ongrid_plugins`` is the ``ongrid-skills`` command."""

from __future__ import annotations

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
