"""Docs stay true: every hook is documented, the README's commands are the real ones."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

from ongrid_plugins import hookspecs

REPO = Path(__file__).resolve().parent.parent
DOCS = REPO / "docs"


def hook_names() -> list[str]:
    return [
        name
        for name, obj in vars(hookspecs).items()
        if name.startswith("ongrid_") and inspect.isfunction(obj)
    ]


def test_every_hook_has_a_section_in_docs_hooks_md() -> None:
    text = (DOCS / "hooks.md").read_text()
    sections = set(re.findall(r"^### `(ongrid_\w+)\(", text, re.MULTILINE))
    assert hook_names(), "no hooks found"
    missing = sorted(set(hook_names()) - sections)
    assert not missing, f"hooks missing from docs/hooks.md: {missing}"
    assert not sorted(sections - set(hook_names())), "docs/hooks.md documents hooks that do not exist"


def test_documented_hook_signatures_match_the_specs() -> None:
    text = (DOCS / "hooks.md").read_text()
    for name in hook_names():
        params = list(inspect.signature(getattr(hookspecs, name)).parameters)
        assert f"### `{name}({', '.join(params)})`" in text, name


def test_every_hookspec_has_a_pytest_style_docstring() -> None:
    for name in hook_names():
        doc = inspect.getdoc(getattr(hookspecs, name)) or ""
        params = inspect.signature(getattr(hookspecs, name)).parameters
        assert doc.splitlines()[0].endswith("."), name
        for param in params:
            assert f":param {param}:" in doc, f"{name} does not document {param}"
        spec = getattr(getattr(hookspecs, name), "ongrid_spec", {})
        if spec.get("firstresult"):
            assert "Stops at first non-None result." in doc, name


def test_the_complete_plugin_of_writing_plugins_md_implements_every_hook() -> None:
    text = (DOCS / "writing-plugins.md").read_text()
    missing = [name for name in hook_names() if f"def {name}(" not in text]
    assert not missing, f"docs/writing-plugins.md's complete example lacks {missing}"
