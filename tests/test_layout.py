"""No module over 500 lines, no function over 60 (issue 15): each file and function reads in one sitting.

A module's length is its number of lines; a function's is ``end_lineno - lineno + 1``
of its ``def`` (docstring and nested functions included, decorators not). Every
``.py`` file under ``ongrid_plugins/`` counts, the built-in skills' scripts too.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "ongrid_plugins"
MAX_MODULE_LINES = 500
MAX_FUNCTION_LINES = 60


def _functions(tree: ast.AST, prefix: str = "") -> list[tuple[str, int]]:
    """Every function and method of ``tree`` (nested ones too) as (qualified name, lines)."""
    found = []
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            assert node.end_lineno is not None
            found.append((prefix + node.name, node.end_lineno - node.lineno + 1))
            found += _functions(node, f"{prefix}{node.name}.")
        elif isinstance(node, ast.ClassDef):
            found += _functions(node, f"{prefix}{node.name}.")
        else:
            found += _functions(node, prefix)
    return found


def offenders(package: Path) -> dict[str, int]:
    """``path`` (a module too long) or ``path::qualified.name`` (a function too long) -> its lines."""
    found = {}
    for path in sorted(package.rglob("*.py")):
        name = path.relative_to(package.parent).as_posix()
        text = path.read_text(encoding="utf-8")
        lines = len(text.splitlines())
        if lines > MAX_MODULE_LINES:
            found[name] = lines
        for function, length in _functions(ast.parse(text, name)):
            if length > MAX_FUNCTION_LINES:
                found[f"{name}::{function}"] = length
    return found


def _listing(found: dict[str, int]) -> str:
    return "\n".join(f"  {name}: {lines} lines" for name, lines in sorted(found.items()))


OFFENDERS = offenders(PACKAGE)


def test_no_module_is_over_500_lines_and_no_function_over_60() -> None:
    assert not OFFENDERS, (
        f"over the limit ({MAX_MODULE_LINES} lines a module, {MAX_FUNCTION_LINES} a function); "
        f"split by job:\n{_listing(OFFENDERS)}"
    )


def _function(name: str, lines: int, indent: str = "") -> list[str]:
    """A ``def`` of exactly ``lines`` lines."""
    return [f"{indent}def {name}():", *(f"{indent}    x{i} = {i}" for i in range(lines - 1))]


def test_the_checker_names_each_long_module_and_function_with_its_length(tmp_path: Path) -> None:
    package = tmp_path / "ongrid_plugins"
    (package / "sub").mkdir(parents=True)
    long = [
        "class Box:",
        *_function("method", 61, "    "),
        *_function("outer", 1),
        *_function("inner", 61, "    "),  # nested: outer is 62 lines
        *_function("exactly_sixty", 60),
    ]
    long += [""] * (MAX_MODULE_LINES + 1 - len(long))
    (package / "sub" / "long.py").write_text("\n".join(long) + "\n")
    (package / "short.py").write_text("\n".join(["x = 1"] * MAX_MODULE_LINES) + "\n")
    assert offenders(package) == {
        "ongrid_plugins/sub/long.py": MAX_MODULE_LINES + 1,
        "ongrid_plugins/sub/long.py::Box.method": 61,
        "ongrid_plugins/sub/long.py::outer": 62,
        "ongrid_plugins/sub/long.py::outer.inner": 61,
    }
