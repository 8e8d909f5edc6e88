"""docs/settings.md lists every ONGRID_* variable Settings.from_env reads and every Settings field."""

from __future__ import annotations

import re
from pathlib import Path

import attrs

from ongrid_plugins import settings
from ongrid_plugins.settings import Settings

REPO = Path(__file__).resolve().parent.parent
DOC = (REPO / "docs" / "settings.md").read_text()


def variables_read() -> set[str]:
    """Every ONGRID_* name in the source of Settings.from_env and the two readers it calls
    (the one place variables are read)."""
    import inspect

    readers = (Settings.from_env, settings._loading_env, settings._call_env)
    return {name for f in readers for name in re.findall(r'"(ONGRID_[A-Z_]+)"', inspect.getsource(f))}


def test_the_reference_lists_every_variable() -> None:
    found = variables_read()
    assert len(found) >= 18
    missing = sorted(v for v in found if f"`{v}`" not in DOC)
    assert missing == [], f"docs/settings.md does not document {missing}"


def test_the_reference_lists_every_settings_field() -> None:
    fields = [f.name for f in attrs.fields(Settings)]
    missing = sorted(name for name in fields if f"| `{name}` |" not in DOC)
    assert missing == [], f"docs/settings.md does not document the Settings fields {missing}"


def test_the_reference_names_no_variable_that_does_not_exist() -> None:
    documented = set(re.findall(r"`(ONGRID_[A-Z_]+)`", DOC))
    assert documented <= variables_read()


def test_the_module_docstring_table_matches() -> None:
    assert variables_read() <= set(re.findall(r"``(ONGRID_[A-Z_]+)``", settings.__doc__ or ""))
