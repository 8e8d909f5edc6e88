"""tests/test_availability.py, again with the load cache cold, warm and corrupted (tests/cachemodes.py)."""

from __future__ import annotations

from cachemodes import rerun

rerun(globals(), "test_availability")
