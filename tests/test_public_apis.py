"""The package uses only the public API of other distributions, the standard library included.

Every module of ``ongrid_plugins`` is read with :mod:`ast`. A private name of another
distribution is a leading-underscore name (a dunder is not private) reached through that
distribution: an import of it or from it (``from pluggy._callers import _multicall``,
``import _json``), an attribute of one of its modules (``pluggy._hooks``,
``os._wrap_close``), or an attribute with a private name that the package itself never
defines (``pm._inner_hookexec``, ``caller._hookimpls``: what is not ours is someone
else's). A few names are private by their documentation though they carry no
underscore (:data:`UNDERSCORELESS_PRIVATE`), and a few carry one though they are
documented API (:data:`DOCUMENTED_UNDERSCORE`, each with where it is documented).
Private names of our own (``self._pm``, ``from ._spec import ...``) are fine.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "ongrid_plugins"
OWN = "ongrid_plugins"

#: Underscore names that are documented public API, with where each is documented.
DOCUMENTED_UNDERSCORE: dict[str, str] = {
    "os._exit": "os docs, 'Process Management': exit without cleanup (a forked child)",
    "sys._getframe": "sys docs: CPython's documented frame access",
    "_thread": "the _thread module is documented ('Low-level threading API')",
    "_replace": "collections.namedtuple docs: NamedTuple._replace",
    "_asdict": "collections.namedtuple docs: NamedTuple._asdict",
    "_fields": "collections.namedtuple docs: NamedTuple._fields",
    "_make": "collections.namedtuple docs: NamedTuple._make",
    "_field_defaults": "collections.namedtuple docs: NamedTuple._field_defaults",
    "_value_": "enum docs ('Supported _sunder_ names'): a member's value, set in __new__",
    "_name_": "enum docs ('Supported _sunder_ names'): a member's name",
    "_missing_": "enum docs ('Supported _sunder_ names'): the lookup fallback classmethod",
    "_generate_next_value_": "enum docs ('Supported _sunder_ names')",
    "_ignore_": "enum docs ('Supported _sunder_ names')",
}

#: Names without an underscore that their module documents as private (or leaves undocumented
#: as an implementation detail): the C accelerators behind a documented pure-Python API.
UNDERSCORELESS_PRIVATE: dict[str, frozenset[str]] = {
    "json.encoder": frozenset(
        {"c_make_encoder", "c_encode_basestring", "c_encode_basestring_ascii", "py_encode_basestring"}
    ),
    "json.decoder": frozenset({"c_scanstring", "py_scanstring"}),
    "json.scanner": frozenset({"c_make_scanner", "py_make_scanner"}),
}


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _modules(package: Path) -> Iterator[tuple[str, ast.Module]]:
    for path in sorted(package.rglob("*.py")):
        relative = path.relative_to(package.parent)
        if "skills" in relative.parts[1:2]:  # the built-in skills are skill code, not package modules
            continue
        yield relative.as_posix(), ast.parse(path.read_text(encoding="utf-8"), str(path))


def own_private_names(trees: list[ast.Module]) -> set[str]:
    """Every underscore attribute the package defines: in a class body, by assignment, in slots.

    Module-level names do not count: a function ``_actions`` of ours does not make
    argparse's ``parser._actions`` ours.
    """
    names: set[str] = set()
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                for item in node.body:
                    if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                        names.add(item.name)
                    elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                        names.add(item.target.id)
                    elif isinstance(item, ast.Assign):
                        names.update(t.id for t in item.targets if isinstance(t, ast.Name))
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store | ast.Del):
                names.add(node.attr)
            elif _slots(node) or _by_name(node, "setattr"):
                names.update(_strings(node))  # __slots__ entries, setattr(obj, "_x", ...)
    return {name for name in names if _private(name)}


def _slots(node: ast.AST) -> bool:
    return isinstance(node, ast.Assign) and any(
        isinstance(target, ast.Name) and target.id == "__slots__" for target in node.targets
    )


def _by_name(node: ast.AST, *functions: str) -> bool:
    """``getattr(obj, "name", ...)`` and the like: an attribute named by a constant."""
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in functions
        and len(node.args) >= 2
        and isinstance(node.args[1], ast.Constant)
    )


def _strings(node: ast.AST) -> set[str]:
    if isinstance(node, ast.Call):
        value = node.args[1].value  # type: ignore[attr-defined]  # checked by _by_name
        return {value} if isinstance(value, str) else set()
    return {
        sub.value for sub in ast.walk(node) if isinstance(sub, ast.Constant) and isinstance(sub.value, str)
    }


def _external(module: str, level: int) -> bool:
    return level == 0 and module.split(".")[0] != OWN


def _dotted(node: ast.expr) -> list[str] | None:
    """``a.b.c`` as ``["a", "b", "c"]`` when it is a chain of names, else None."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    return [node.id, *reversed(parts)]


def _check_path(dotted: str) -> bool:
    """True when the external dotted path names something private."""
    if dotted in DOCUMENTED_UNDERSCORE:
        return False
    parts = dotted.split(".")
    for end in range(1, len(parts) + 1):
        prefix, name = ".".join(parts[: end - 1]), parts[end - 1]
        if ".".join(parts[:end]) in DOCUMENTED_UNDERSCORE or name in DOCUMENTED_UNDERSCORE:
            continue
        if _private(name) or name in UNDERSCORELESS_PRIVATE.get(prefix, ()):
            return True
    return False


def offenders(package: Path) -> list[str]:
    """``path:line: what`` for every use of another distribution's private name."""
    modules = list(_modules(package))
    ours = own_private_names([tree for _path, tree in modules])
    found: list[str] = []
    for path, tree in modules:
        aliases: dict[str, str] = {}  # local name -> the external module or object it is
        own: set[str] = set()  # local names of our own modules and objects
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and not _external(node.module or "", node.level):
                own.update(alias.asname or alias.name for alias in node.names)
            elif isinstance(node, ast.Import):
                own.update(a.asname or a.name.split(".")[0] for a in node.names if not _external(a.name, 0))
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if _external(alias.name, 0):
                        if _check_path(alias.name):
                            found.append(f"{path}:{node.lineno}: import {alias.name}")
                        local = alias.asname or alias.name.split(".")[0]
                        aliases[local] = alias.name if alias.asname else local
            elif isinstance(node, ast.ImportFrom) and node.module and _external(node.module, node.level):
                for alias in node.names:
                    dotted = f"{node.module}.{alias.name}"
                    if _check_path(dotted):
                        found.append(f"{path}:{node.lineno}: from {node.module} import {alias.name}")
                    aliases[alias.asname or alias.name] = dotted
        inner: set[int] = set()  # the attributes inside a chain already checked whole
        for node in ast.walk(tree):  # outermost first
            if isinstance(node, ast.Call) and _by_name(node, "getattr", "hasattr", "delattr"):
                [name] = _strings(node) or {""}
                if _private(name) and name not in ours and name not in DOCUMENTED_UNDERSCORE:
                    found.append(f"{path}:{node.lineno}: .{name} (not a name of ours)")
            if not isinstance(node, ast.Attribute) or id(node) in inner:
                continue
            inner.update(id(sub) for sub in ast.walk(node.value) if isinstance(sub, ast.Attribute))
            chain = _dotted(node)
            if chain is not None and chain[0] in own:
                continue  # ours: a module-level _name of our own module is fine
            if chain is not None and chain[0] in aliases:
                dotted = ".".join([aliases[chain[0]], *chain[1:]])
                if _check_path(dotted) and not _check_path(aliases[chain[0]]):
                    found.append(f"{path}:{node.lineno}: {dotted}")
                continue
            name = node.attr
            if _private(name) and name not in ours and name not in DOCUMENTED_UNDERSCORE:
                found.append(f"{path}:{node.lineno}: .{name} (not a name of ours)")
    return sorted(set(found), key=lambda line: (line.split(":")[0], int(line.split(":")[1]), line))


#: Uses still in modules other branches of issue 35 are rewriting (``models/``: the canonical
#: JSON encoder; ``schema/``: the RE2 wrapper's internals and jsonschema's message helper),
#: without line numbers. Each line goes when its module no longer needs it.
PENDING_ELSEWHERE: frozenset[str] = frozenset()


def _unnumbered(line: str) -> str:
    path, _number, what = line.split(":", 2)
    return f"{path}:{what}"


def test_the_package_uses_no_private_name_of_another_distribution() -> None:
    assert [line for line in offenders(PACKAGE) if _unnumbered(line) not in PENDING_ELSEWHERE] == []


def _package(tmp_path: Path, files: dict[str, str]) -> Path:
    package = tmp_path / OWN
    for name, text in {"__init__.py": "", **files}.items():
        (package / name).parent.mkdir(parents=True, exist_ok=True)
        (package / name).write_text(text, encoding="utf-8")
    return package


def test_the_check_finds_each_way_of_reaching_a_private_name(tmp_path: Path) -> None:
    package = _package(
        tmp_path,
        {
            "a.py": "from pluggy._callers import _multicall\n",
            "b.py": "import json.encoder\nencode = json.encoder.c_make_encoder\n",
            "c.py": "from json import encoder as e\nx = e.c_make_encoder\n",
            "d.py": "def f(pm):\n    return pm._inner_hookexec, pm.hook.x._hookimpls, getattr(pm, '_opt')\n",
            "e.py": "import _json\nimport pluggy\ny = pluggy._hooks.HookImpl\n",
            "f.py": "from attr._make import _ClassBuilder\nimport platformdirs._xdg\n",
        },
    )
    assert offenders(package) == [
        f"{OWN}/a.py:1: from pluggy._callers import _multicall",
        f"{OWN}/b.py:2: json.encoder.c_make_encoder",
        f"{OWN}/c.py:2: json.encoder.c_make_encoder",
        f"{OWN}/d.py:2: ._hookimpls (not a name of ours)",
        f"{OWN}/d.py:2: ._inner_hookexec (not a name of ours)",
        f"{OWN}/d.py:2: ._opt (not a name of ours)",
        f"{OWN}/e.py:1: import _json",
        f"{OWN}/e.py:3: pluggy._hooks.HookImpl",
        f"{OWN}/f.py:1: from attr._make import _ClassBuilder",
        f"{OWN}/f.py:2: import platformdirs._xdg",
    ]


def test_the_check_leaves_our_own_private_names_and_documented_ones_alone_only(tmp_path: Path) -> None:
    package = _package(
        tmp_path,
        {
            "_spec.py": "_LIMIT = 1\n",
            "a.py": (
                "import os, sys\nfrom . import _spec\nfrom ._spec import _LIMIT\n"
                "class A:\n    __slots__ = ('_pm',)\n    def __init__(self, pm):\n        self._pm = pm\n"
                "    def f(self, point):\n        os._exit(_spec._LIMIT + self._pm.x)\n"
                "        return sys._getframe(1), point._replace(x=1), self.__class__\n"
            ),
            "b.py": "def _actions():\n    pass\ndef f(parser):\n    return parser._actions\n",
        },
    )
    # a module-level function of ours does not make another object's attribute ours
    assert offenders(package) == [f"{OWN}/b.py:4: ._actions (not a name of ours)"]


def test_every_documented_underscore_name_is_one_the_standard_library_has() -> None:
    import importlib

    for dotted in DOCUMENTED_UNDERSCORE:
        if "." in dotted:
            module, _, name = dotted.rpartition(".")
            assert hasattr(importlib.import_module(module), name), dotted
        elif dotted == "_thread":
            assert "_thread" in sys.stdlib_module_names
