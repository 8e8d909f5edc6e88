"""Memos live beside the value objects, by identity, and go with them."""

from __future__ import annotations

import gc
import pickle

import attrs

from ongrid_plugins.models import SkillRoot, Tool, ToolClass
from ongrid_plugins.models.sidetable import SideTable
from ongrid_plugins.schema.arguments import COMPILED, check_arguments


def _tool(**changes: object) -> Tool:
    tool = Tool("probe", "d", {"type": "object"}, ToolClass.SAFE, "probe", "test", "native")
    return attrs.evolve(tool, **changes) if changes else tool


def test_equal_roots_keep_separate_memos() -> None:
    table: SideTable[list[str]] = SideTable()
    first, second = SkillRoot("/x", real="/x"), SkillRoot("/x", real="/x")
    assert first == second
    table.of(first, list).append("seen")
    assert table.get(id(first)) == ["seen"] and table.get(id(second)) is None


def test_an_entry_goes_when_its_object_is_collected() -> None:
    table: SideTable[str] = SideTable()
    tool = _tool()
    table.put(tool, "compiled")
    assert len(table) == 1
    del tool
    gc.collect()
    assert len(table) == 0


def test_a_tool_carries_no_memo_and_a_copy_compiles_anew() -> None:
    tool = _tool()
    check_arguments(tool, {})
    assert COMPILED.get(id(tool)) is not None
    assert not hasattr(tool, "cache") and "cache" not in attrs.fields_dict(Tool)
    copy = _tool(description="other")
    assert COMPILED.get(id(copy)) is None
    assert pickle.loads(pickle.dumps(tool)).name == "probe"
