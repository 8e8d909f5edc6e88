"""The catalog sits below the host: it never imports the host, the surfaces or the CLI."""

from __future__ import annotations

import ast
from pathlib import Path

import ongrid_plugins

PACKAGE = Path(ongrid_plugins.__file__).parent
HIGHER = ("host", "server", "cli", "commands", "dispatch", "__main__")


def imported_modules(path: Path) -> set[str]:
    """Every ``ongrid_plugins`` module a file imports (relative imports resolved)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level:
            parts = ["ongrid_plugins", *path.relative_to(PACKAGE).parent.parts]
            base = parts[: len(parts) - node.level + 1]
            found.add(".".join([*base, node.module] if node.module else base))
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return {m for m in found if m.startswith("ongrid_plugins")}


def test_the_catalog_imports_no_higher_layer() -> None:
    files = sorted((PACKAGE / "catalog").glob("*.py"))
    assert len(files) >= 5
    for path in files:
        for module in imported_modules(path):
            top = module.split(".")[1] if "." in module else ""
            assert top not in HIGHER, f"{path.name} imports {module}"


def test_the_layering_check_sees_a_violation() -> None:
    assert "ongrid_plugins.host.facade" in imported_modules(PACKAGE / "server" / "mcp.py")
