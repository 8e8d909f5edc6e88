"""The import graph has no cycle, and no stage imports a later one.

Every import counts, lazy ones inside functions included (a lazy import hides a
cycle from the interpreter, not from a reader); the cycle check counts the
``if TYPE_CHECKING:`` imports too (:data:`TYPED_GRAPH`), the stage check leaves
them out. The stages are the pipeline read bottom up: a module may import its
own stage and earlier ones. The few upward imports there are stand in
:data:`ALLOWED_UPWARD`, each with its reason.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "ongrid_plugins"

#: Top-level modules and subpackages of ``ongrid_plugins`` by stage, earliest first. A
#: folder whose modules sit at different stages (``packs/``) names the ones that are not
#: at the folder's own stage as ``folder.module``; the longest name that matches wins.
STAGES: tuple[tuple[str, frozenset[str]], ...] = tuple(
    (name, frozenset(members.split()))
    for name, members in (
        ("values", "errors models hookspecs settings core"),
        ("schemas", "schema packs.headers packs.archive"),
        ("discovery", "discovery loaders packs plugins"),
        ("catalog", "catalog packs.sources packs.install packs.pipconsent packs.consent packs.trusted"),
        ("gate", "gate"),
        ("audit", "audit"),
        ("execution", "executors"),
        ("host", "host testing"),
        ("surfaces", "<root> __main__ cli commands server remote"),
    )
)

#: Imports from a stage to a later one that are kept on purpose.
ALLOWED_UPWARD: Mapping[tuple[str, str], str] = {}


def _modules(package: Path) -> dict[str, Path]:
    """Every module and its ``.py`` file."""
    found = {}
    for path in sorted(package.rglob("*.py")):
        relative = path.relative_to(package.parent).with_suffix("")
        parts = relative.parts[:-1] if relative.name == "__init__" else relative.parts
        if "skills" in parts[1:2]:  # the built-in skills folder holds skill code, not package modules
            continue
        found[".".join(parts)] = path
    return found


def _imports(module: str, path: Path, known: Iterable[str], type_only: bool = False) -> set[str]:
    """The package modules ``module`` imports, lazy ones included; TYPE_CHECKING ones if ``type_only``."""
    known = set(known)
    tree = ast.parse(path.read_text(), str(path))
    typing_only = (
        set()
        if type_only
        else {
            id(inner)
            for node in ast.walk(tree)
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
            for inner in ast.walk(node)
        }
    )
    base = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    root = module.split(".")[0]
    targets: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.ImportFrom):
            parent = base[: len(base) - node.level + 1] if node.level else []
            target = ".".join([*parent, *(node.module.split(".") if node.module else [])])
            if not target.startswith(root):
                continue
            for alias in node.names:
                name = f"{target}.{alias.name}"
                targets.add(name if name in known else target)
        elif isinstance(node, ast.Import):
            targets.update(alias.name for alias in node.names if alias.name.startswith(root + "."))
    return {target for target in targets if target in known and target != module}


def import_graph(package: Path, type_only: bool = False) -> dict[str, set[str]]:
    """Module -> the package modules it imports (with ``type_only``, under TYPE_CHECKING too)."""
    modules = _modules(package)
    return {module: _imports(module, path, modules, type_only) for module, path in modules.items()}


def cycles(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def _top(module: str) -> str:
    """The member of :data:`STAGES` ``module`` belongs to: its dotted name if listed, else its top level."""
    parts = module.split(".")[1:]
    if not parts:
        return "<root>"
    listed = {m for _n, members in STAGES for m in members}
    for end in range(len(parts), 1, -1):
        if ".".join(parts[:end]) in listed:
            return ".".join(parts[:end])
    return parts[0]


def _stage(top: str) -> int:
    for number, (_name, members) in enumerate(STAGES):
        if top in members:
            return number
    raise LookupError(top)


def upward_imports(graph: Mapping[str, set[str]]) -> list[str]:
    """Every import from a stage to a later one that :data:`ALLOWED_UPWARD` does not list."""
    found = []
    for module, targets in sorted(graph.items()):
        for target in sorted(targets):
            pair = (_top(module), _top(target))
            if _stage(pair[1]) > _stage(pair[0]) and pair not in ALLOWED_UPWARD:
                found.append(
                    f"{module} ({STAGES[_stage(pair[0])][0]}) imports {target} ({STAGES[_stage(pair[1])][0]})"
                )
    return found


GRAPH = import_graph(PACKAGE)
#: The graph with the imports made for type checking only: a circle through them is one too.
TYPED_GRAPH = import_graph(PACKAGE, type_only=True)


def test_the_package_has_no_import_cycle() -> None:
    assert cycles(GRAPH) == []


def test_the_package_has_no_import_cycle_type_only_imports_included() -> None:
    assert cycles(TYPED_GRAPH) == []


def test_the_packs_and_plugins_circle_is_gone_type_only_imports_included() -> None:
    assert not any(
        m.startswith(("ongrid_plugins.packs", "ongrid_plugins.plugins"))
        for c in cycles(TYPED_GRAPH)
        for m in c
    )


@pytest.mark.parametrize(
    "guard",
    [
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n",
        "import typing\nif typing.TYPE_CHECKING:\n",
    ],
)
def test_the_cycle_check_counts_a_type_only_import(tmp_path: Path, guard: str) -> None:
    package = _write_package(
        tmp_path,
        {"__init__.py": "", "a.py": "from . import b\n", "b.py": guard + "    from .a import x\n"},
    )
    assert cycles(import_graph(package)) == []
    assert cycles(import_graph(package, type_only=True)) == [["ongrid_plugins.a", "ongrid_plugins.b"]]


def test_every_module_belongs_to_a_stage() -> None:
    unplaced = sorted({_top(module) for module in GRAPH} - {m for _n, members in STAGES for m in members})
    assert unplaced == [], f"add these to a stage of STAGES: {unplaced}"


def test_no_stage_imports_a_later_one() -> None:
    assert upward_imports(GRAPH) == []


def test_every_allowed_upward_import_is_still_needed() -> None:
    pairs = {(_top(module), _top(target)) for module, targets in GRAPH.items() for target in targets}
    assert set(ALLOWED_UPWARD) <= pairs


def test_the_version_comes_from_the_package_metadata() -> None:
    from importlib import metadata

    import ongrid_plugins

    assert ongrid_plugins.__version__ == metadata.version("ongrid-plugins")


def _write_package(tmp_path: Path, files: Mapping[str, str]) -> Path:
    package = tmp_path / "ongrid_plugins"
    for name, text in files.items():
        path = package / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return package


def test_the_checker_finds_a_cycle_hidden_in_a_lazy_import(tmp_path: Path) -> None:
    package = _write_package(
        tmp_path,
        {
            "__init__.py": "",
            "host.py": "from .loader import load\n",
            "loader.py": "def load():\n    from . import host\n",
            "models.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .host import x\n",
        },
    )
    graph = import_graph(package)
    assert cycles(graph) == [["ongrid_plugins.host", "ongrid_plugins.loader"]]
    assert graph["ongrid_plugins.models"] == set()  # typing-only imports are not edges


def test_the_checker_reports_an_import_from_an_earlier_stage_to_a_later_one(tmp_path: Path) -> None:
    package = _write_package(
        tmp_path,
        {"__init__.py": "", "models.py": "def f():\n    from .server import app\n", "server/__init__.py": ""},
    )
    assert upward_imports(import_graph(package)) == [
        "ongrid_plugins.models (values) imports ongrid_plugins.server (surfaces)"
    ]


def test_the_checker_places_a_module_of_a_split_folder_at_its_own_stage(tmp_path: Path) -> None:
    """``packs/`` spans three stages: ``packs.install`` is at the catalog's, so it may import it."""
    package = _write_package(
        tmp_path,
        {
            "__init__.py": "",
            "catalog/__init__.py": "",
            "packs/__init__.py": "from .pack_roots import x\n",
            "packs/pack_roots.py": "from ..models import y\n",
            "packs/install.py": "from ..catalog import z\n",
            "packs/archive.py": "from .install import w\n",
            "models.py": "",
        },
    )
    assert _top("ongrid_plugins.packs.pack_roots") == "packs"
    assert _top("ongrid_plugins.packs.install") == "packs.install"
    assert upward_imports(import_graph(package)) == [
        "ongrid_plugins.packs.archive (schemas) imports ongrid_plugins.packs.install (catalog)"
    ]


@pytest.mark.parametrize(
    "module", ["ongrid_plugins.commands.listing", "ongrid_plugins.packs", "ongrid_plugins.plugins"]
)
def test_the_circles_the_layout_issue_named_are_gone(module: str) -> None:
    assert not any(module in component for component in cycles(GRAPH))


@pytest.mark.parametrize(
    "module",
    [
        "ongrid_plugins.host.facade",
        "ongrid_plugins.host.pipeline",
        "ongrid_plugins.host.dispatch",
        "ongrid_plugins.host.export",
        "ongrid_plugins.host.ticketlog",
    ],
)
def test_the_host_stage_is_in_no_circle_type_only_imports_included(module: str) -> None:
    """Issue 35 item 5: the steps, dispatch, export and ticketlog name what they read of a
    host by a protocol of their own, so not even a type annotation imports the host back."""
    circles = cycles(import_graph(PACKAGE, type_only=True))
    assert [c for c in circles if module in c] == []


def test_the_architecture_page_names_every_stage_module_and_hook() -> None:
    import re

    from ongrid_plugins import hookspecs

    page = (PACKAGE.parent / "docs" / "architecture.md").read_text()
    named = set(re.findall(r"`([\w/]+?)/?`", page))
    missing = sorted(
        m for _n, members in STAGES for m in members if m != "<root>" and m.replace(".", "/") not in named
    )
    assert missing == [], f"docs/architecture.md does not name {missing}"
    hooks = [name for name in dir(hookspecs) if name.startswith("ongrid_")]
    assert hooks and [hook for hook in hooks if f"`{hook}`" not in page] == []


#: Import paths the docs show, with the module that holds the name since the stage folders.
DOCUMENTED_PATHS = (
    ("ongrid_plugins.gate", "decide", "ongrid_plugins.gate.decision"),
    ("ongrid_plugins.gate", "class_rule", "ongrid_plugins.gate.decision"),
    ("ongrid_plugins.audit", "AuditLog", "ongrid_plugins.audit.log"),
    ("ongrid_plugins.audit", "AuditEntry", "ongrid_plugins.audit.entries"),
    ("ongrid_plugins.audit", "row_hash", "ongrid_plugins.audit.chain"),
    ("ongrid_plugins.packs", "PackRoots", "ongrid_plugins.packs.pack_roots"),
    ("ongrid_plugins.packs", "read_marker", "ongrid_plugins.packs.pack_roots"),
)


@pytest.mark.parametrize(("path", "name", "home"), DOCUMENTED_PATHS)
def test_a_documented_import_path_still_gives_the_same_object(path: str, name: str, home: str) -> None:
    import importlib

    assert getattr(importlib.import_module(path), name) is getattr(importlib.import_module(home), name)


@pytest.mark.parametrize(
    ("module", "homes"),
    [
        ("ongrid_plugins.packs", ("ongrid_plugins.packs.pack_roots",)),
    ],
)
def test_a_documented_path_module_re_exports_every_public_name_of_its_homes(
    module: str, homes: tuple[str, ...]
) -> None:
    import importlib

    shim = importlib.import_module(module)
    public = {name for home in homes for name in importlib.import_module(home).__all__}
    assert set(shim.__all__) == public
    assert all(getattr(shim, name) is not None for name in shim.__all__)


def _server(name: str) -> str:
    return f"ongrid_plugins.server.{name}"


#: The layering the docstrings of ``server/`` and ``server/console/`` state.
_SERVER_LEAVES = ("tokens", "responses", "access", "limits", "openapi", "apidocs")
_REST_ROUTES = ("rest.public", "rest.skills", "rest.approvals", "rest.audit")
_CONSOLE_HANDLERS = ("console.signin", "console.tools", "console.approvals", "console.audit", "console.live")
_CONSOLE_HTML = (
    "console.html",
    "console.forms",
    "console.pages",
    "console.approval_pages",
    "console.audit_pages",
)


def _importers(target: str) -> set[str]:
    return {module for module, targets in GRAPH.items() if target in targets}


def test_the_server_folder_keeps_the_layering_its_docstrings_state() -> None:
    server = "ongrid_plugins.server"
    inside = {
        m: {t for t in ts if t.startswith(server + ".")} for m, ts in GRAPH.items() if m.startswith(server)
    }
    problems = []
    for leaf in map(_server, _SERVER_LEAVES):
        problems += [f"{leaf} imports {t}" for t in inside[leaf]]
    for module, targets in inside.items():
        if module.startswith(_server("console")):
            problems += [f"{module} imports {t}" for t in targets if t.startswith(_server("rest"))]
    for route in map(_server, _REST_ROUTES):
        problems += [f"{m} imports {route}" for m in _importers(route) - {_server("rest.app")}]
    for handler in map(_server, _CONSOLE_HANDLERS):
        problems += [f"{m} imports {handler}" for m in _importers(handler) - {_server("console.app")}]
    html = set(map(_server, _CONSOLE_HTML))
    for module in html:
        problems += [f"{module} imports {t}" for t in inside[module] - html]
    assert problems == []
    assert all(name in GRAPH for name in map(_server, _REST_ROUTES + _CONSOLE_HANDLERS))
