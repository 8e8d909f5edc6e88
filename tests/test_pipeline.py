"""The call pipeline is the named steps its docstring draws, and each refusal is recorded once.

Each step of :mod:`ongrid_plugins.host.pipeline` is a function of the module; a call that
reaches the gate ends in exactly one ``ongrid_after_call`` with the status the module's
table gives, and one that stops at the lookup records nothing. The host remembers
sandbox profiles itself, per tool, until the next load.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from ongrid_plugins import SkillHost
from ongrid_plugins.errors import (
    ApprovalRequired,
    ConfirmationRequired,
    InvalidArguments,
    OngridError,
    PermissionDenied,
    PluginFailed,
    UnknownPersona,
    UnknownSkill,
)
from ongrid_plugins.hookspecs import hookimpl
from ongrid_plugins.host.facade import pipeline
from ongrid_plugins.models import CallRequest, CallResult
from ongrid_plugins.testing import isolated_settings, make_skill

SCHEMA = {"type": "object", "properties": {"p": {"type": "string"}}, "additionalProperties": False}


class Recorder:
    """Sees every before_call and after_call; raises in before_call when ``abort`` is set."""

    def __init__(self) -> None:
        self.before: list[str] = []
        self.after: list[tuple[str, str, str]] = []
        self.abort = False

    @hookimpl
    def ongrid_before_call(self, request: CallRequest) -> None:
        self.before.append(request.call_id)
        if self.abort:
            raise RuntimeError("the audit log is full")

    @hookimpl
    def ongrid_after_call(self, request: CallRequest, result: CallResult) -> None:
        self.after.append((request.call_id, result.tool, result.outcome))


@pytest.fixture
def recorded(tmp_path: Path) -> tuple[SkillHost, Recorder]:
    root = tmp_path / "skills"
    make_skill(root, "look", schema=SCHEMA, class_="safe")
    make_skill(root, "change", schema=SCHEMA, class_="mutating")
    make_skill(root, "wipe", schema=SCHEMA, class_="dangerous")
    recorder = Recorder()
    host = SkillHost(isolated_settings(tmp_path, root, sandbox="off"), plugins=[recorder])
    host.load()
    return host, recorder


def test_every_step_the_module_docstring_draws_is_a_function_of_the_module() -> None:
    assert pipeline.__doc__ is not None
    drawing = pipeline.__doc__.split("::", 1)[1].split("\n\n")[1]
    steps = [name for name in re.findall(r"[a-z_]+", drawing) if name not in {"run", "sync", "or", "async"}]
    assert steps == [
        "lookup",
        "check_arguments",
        "decide",
        "before_call",
        "request_ticket",
        "refuse",
        "choose_executor",
        "claim_ticket",
        "after_call",
    ]
    assert all(callable(getattr(pipeline, step)) and step in pipeline.__all__ for step in steps)


@pytest.mark.parametrize(
    ("tool", "args", "persona", "error", "status"),
    [
        ("look", {"p": "x"}, "viewer", None, "ok"),
        ("change", {"p": "x"}, "viewer", PermissionDenied, "denied"),
        ("look", {"p": 1}, "viewer", InvalidArguments, "invalid_arguments"),
        ("change", {"p": "x"}, "operator", ConfirmationRequired, "needs_confirmation"),
        ("wipe", {"p": "x"}, "admin", ApprovalRequired, "needs_approval"),
    ],
)
def test_a_call_that_reaches_the_gate_ends_in_exactly_one_after_call_with_its_status(
    recorded: tuple[SkillHost, Recorder],
    tool: str,
    args: dict[str, Any],
    persona: str,
    error: type[OngridError] | None,
    status: str,
) -> None:
    host, recorder = recorded
    if error is None:
        host.call(tool, args, persona=persona)
    else:
        with pytest.raises(error):
            host.call(tool, args, persona=persona)
    assert len(recorder.before) == 1
    assert recorder.after == [(recorder.before[0], tool, status)]


def test_a_before_call_hook_that_raises_aborts_the_call_and_is_recorded_once(
    recorded: tuple[SkillHost, Recorder],
) -> None:
    host, recorder = recorded
    recorder.abort = True
    with pytest.raises(PluginFailed, match=r"RuntimeError: the audit log is full in ongrid_before_call"):
        host.call("wipe", {"p": "x"}, persona="admin")
    assert recorder.after == [(recorder.before[0], "wipe", "aborted")]
    assert host.tickets() == []  # the call the audit refused opened no ticket


@pytest.mark.parametrize(
    ("tool", "persona", "error"), [("nope", "viewer", UnknownSkill), ("look", "nobody", UnknownPersona)]
)
def test_a_call_stopped_at_the_lookup_records_nothing(
    recorded: tuple[SkillHost, Recorder], tool: str, persona: str, error: type[OngridError]
) -> None:
    host, recorder = recorded
    with pytest.raises(error):
        host.call(tool, {"p": "x"}, persona=persona)
    assert (recorder.before, recorder.after) == ([], [])


def test_the_host_remembers_sandbox_profiles_outside_the_tool_until_the_next_load(
    recorded: tuple[SkillHost, Recorder],
) -> None:
    host, _recorder = recorded
    tool = host.get("look")
    profile = host.sandbox_profile(tool)
    assert host.sandbox_profile(tool) is profile
    assert not hasattr(tool, "cache")  # the value object carries no host state
    host.settings = isolated_settings(Path(host.settings.state_dir).parent, *host.settings.skill_dirs)
    again = host.sandbox_profile(tool)
    assert again is not profile and again.digest != profile.digest  # other settings: computed again
    host.reload()
    fresh = host.get("look")
    assert fresh is not tool and host.sandbox_profile(fresh).digest == again.digest
    assert list(host._profiles) == [id(fresh)]  # the old tools are forgotten
