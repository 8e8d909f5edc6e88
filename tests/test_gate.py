"""The permission gate: the whole decision table, and the same verdicts enforced by the host.

The expected verdicts are written out here by hand from the specification (class x
mode table, deny-globs win, ``confirmation: required``, strictest vote wins); they
are not computed with the gate's own helpers.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest

from ongrid_plugins import (
    ApprovalRequired,
    ConfirmationRequired,
    Decision,
    PermissionDenied,
    PermissionMode,
    Persona,
    Tool,
    ToolClass,
    Verdict,
    get_plugin_manager,
    hookimpl,
)
from ongrid_plugins.gate.decision import decide
from ongrid_plugins.testing import isolated_settings, make_skill

RANK = {"allow": 0, "confirm": 1, "dual_sign": 2, "deny": 3}

#: The specification's class x mode table.
TABLE = {
    ("safe", "read-only"): "allow",
    ("safe", "mutating-with-confirm"): "allow",
    ("safe", "dual-sign-required"): "allow",
    ("mutating", "read-only"): "deny",
    ("mutating", "mutating-with-confirm"): "confirm",
    ("mutating", "dual-sign-required"): "confirm",
    ("dangerous", "read-only"): "deny",
    ("dangerous", "mutating-with-confirm"): "deny",
    ("dangerous", "dual-sign-required"): "dual_sign",
}

#: (allow globs, deny globs, may the persona call "target" at all?)
GLOBS = {
    "everything": (("*",), (), True),
    "allowed_by_glob": (("tar*", "other"), (), True),
    "not_in_allow_list": (("other_*",), (), False),
    "empty_allow_list": ((), (), False),
    "deny_glob": (("*",), ("*get",), False),
    "deny_beats_exact_allow": (("target",), ("target",), False),
    "deny_glob_for_others_only": (("*",), ("other*",), True),
}

#: A plugin's vote: None abstains; "garbage" is not a Decision and must count as a deny naming the plugin.
VOTES: dict[str, Any] = {
    "abstain": None,
    "allow": Decision(Verdict.ALLOW, "fine by me", "voter"),
    "confirm": Decision(Verdict.CONFIRM, "ask first", "voter"),
    "dual_sign": Decision(Verdict.DUAL_SIGN, "two people please", "voter"),
    "deny": Decision(Verdict.DENY, "not today", "voter"),
    "garbage": "yes",
}


def expected(tool_class: str, mode: str, globs: str, confirmation: bool, vote: str) -> tuple[str, str]:
    """The verdict and the plugin that gave it, from the rules as the specification states them."""
    builtin = TABLE[(tool_class, mode)] if GLOBS[globs][2] else "deny"
    if builtin == "allow" and confirmation:
        builtin = "confirm"
    voted = {"abstain": None, "garbage": "deny"}.get(vote, vote)
    if voted is not None and RANK[voted] > RANK[builtin]:
        return voted, "voter"  # a garbage vote is a deny naming its plugin
    return builtin, "ongrid.gate"


class Voter:
    def __init__(self, vote: Any) -> None:
        self.vote = vote

    @hookimpl
    def ongrid_check_permission(self, tool: Tool) -> Any:
        return self.vote


@pytest.fixture(scope="module")
def managers(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    settings = isolated_settings(tmp_path_factory.mktemp("gate"))
    pms = {}
    for name, vote in VOTES.items():
        pm = get_plugin_manager(settings)
        if vote is not None:
            pm.add_plugin(Voter(vote), "voter")
        pms[name] = pm
    return pms


@pytest.mark.parametrize(
    ("tool_class", "mode", "globs", "confirmation", "vote"),
    list(
        itertools.product(
            ["safe", "mutating", "dangerous"], list(PermissionMode), GLOBS, [False, True], VOTES
        )
    ),
)
def test_the_decision_table(
    managers: dict[str, Any], tool_class: str, mode: PermissionMode, globs: str, confirmation: bool, vote: str
) -> None:
    allow, deny, _ = GLOBS[globs]
    tool = Tool(
        "target",
        "t",
        {},
        ToolClass(tool_class),
        "target",
        "x",
        "subprocess",
        confirmation_required=confirmation,
    )
    persona = Persona("p", mode, tools=allow, disallowed_tools=deny)
    decision = decide(managers[vote], tool, persona, None)
    want_verdict, want_plugin = expected(tool_class, mode.value, globs, confirmation, vote)
    assert (decision.verdict.value, decision.plugin) == (want_verdict, want_plugin)
    assert decision.reason, "every decision names its reason"


def test_the_table_covers_every_combination() -> None:
    cases = list(itertools.product(TABLE, GLOBS, [False, True], VOTES))
    assert len(cases) == 9 * 7 * 2 * 6
    assert {expected(c, m, g, f, v)[0] for (c, m), g, f, v in cases} == set(RANK)


# ---------------------------------------------------------------- enforced by the host


@pytest.mark.parametrize(("tool_class", "mode"), list(TABLE))
def test_the_host_enforces_each_verdict(make_host: Any, root: Path, tool_class: str, mode: str) -> None:
    make_skill(root, "target", class_=tool_class)
    host = make_host(root)
    persona = Persona("p", PermissionMode(mode))
    verdict = TABLE[(tool_class, mode)]
    if verdict == "allow":
        assert host.call("target", {"a": 1}, persona=persona).value == {"a": 1}
        return
    errors = {"deny": PermissionDenied, "confirm": ConfirmationRequired, "dual_sign": ApprovalRequired}
    with pytest.raises(errors[verdict]) as info:
        host.call("target", {"a": 1}, persona=persona)
    assert type(info.value) is errors[verdict]
    assert info.value.decision.plugin == "ongrid.gate"
    assert info.value.decision.reason in str(info.value)
    if verdict == "confirm":
        assert host.call("target", {"a": 1}, persona=persona, confirm=True).ok
    if verdict == "dual_sign":
        with pytest.raises(ApprovalRequired):  # a confirmation never stands in for two approvals
            host.call("target", {"a": 1}, persona=persona, confirm=True)


def test_a_plugin_vote_names_itself_in_the_error(make_host: Any, root: Path) -> None:
    make_skill(root, "look")
    host = make_host(root, plugins=(Voter(VOTES["dual_sign"]),))
    with pytest.raises(ApprovalRequired, match="needs two-person approval, says voter: two people please"):
        host.call("look", persona="viewer")
