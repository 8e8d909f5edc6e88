"""Every error carries its own exit code, stable code, HTTP status and details; surfaces agree."""

from __future__ import annotations

import inspect
import json
from typing import Any

import pytest

from ongrid_plugins import errors
from ongrid_plugins.errors import (
    EXIT_CODES,
    ApprovalError,
    AuditError,
    ConfirmationRequired,
    InvalidArguments,
    OngridError,
    PackError,
    PermissionDenied,
    ResourceRefused,
    SkillUnavailable,
    UnknownSkill,
)
from ongrid_plugins.host.dispatch import _explain
from ongrid_plugins.models import Decision, Verdict

_CONFIRM = Decision(Verdict.CONFIRM, "changes files")
_GATE = Decision(Verdict.DENY, "the read-only persona may not run mutating tools", "ongrid.gate")

#: One instance of each refusal a call can end in, with the code every surface must report.
REFUSALS: list[tuple[OngridError, str, int]] = [
    (UnknownSkill("nope", ["note"]), "unknown_skill", 404),
    (InvalidArguments("note", [("$.n", "'n' is a required property")]), "invalid_arguments", 422),
    (PermissionDenied("note", _GATE), "denied", 403),
    (ConfirmationRequired("note", _CONFIRM, "ab12"), "needs_confirmation", 409),
    (ApprovalError("unknown", "t-1", "no ticket t-1"), "ticket_refused", 404),
    (ApprovalError("expired", "t-1", "ticket t-1 expired"), "ticket_refused", 409),
    (ApprovalError("store", "t-1", "cannot open approvals.db"), "ticket_refused", 503),
    (SkillUnavailable("note", ["needs git on PATH"]), "unavailable", 409),
    (AuditError("the audit log cannot be written"), "audit_unavailable", 503),
    (ResourceRefused("note", "../x", "escapes the skill folder"), "resource_refused", 403),
]


def _error_classes() -> list[type[OngridError]]:
    found = [getattr(errors, name) for name in errors.__all__]
    return [cls for cls in found if inspect.isclass(cls) and issubclass(cls, OngridError)]


@pytest.mark.parametrize("cls", _error_classes(), ids=lambda cls: cls.__name__)
def test_every_error_class_has_an_exit_code_of_the_table_a_code_and_a_status(cls: type[OngridError]) -> None:
    assert cls.exit_code in EXIT_CODES.values()
    assert isinstance(cls.code, str) and cls.code.isidentifier() and cls.code.islower()
    assert isinstance(cls.__dict__.get("http_status", 400), int | property)


def test_every_exit_code_in_the_table_is_used_by_an_error_or_the_runner() -> None:
    used = {cls.exit_code for cls in _error_classes()} | {EXIT_CODES["ok"], EXIT_CODES["skill_failed"]}
    assert used == set(EXIT_CODES.values())


@pytest.mark.parametrize(("exc", "code", "status"), REFUSALS, ids=lambda v: getattr(v, "code", None))
def test_the_error_carries_its_code_and_status(exc: OngridError, code: str, status: int) -> None:
    assert (exc.code, exc.http_status) == (code, status)
    json.dumps(exc.details())  # JSON-ready


@pytest.mark.parametrize(("exc", "code", "status"), REFUSALS, ids=lambda v: getattr(v, "code", None))
def test_dispatch_and_rest_report_the_same_code_and_fields(exc: OngridError, code: str, status: int) -> None:
    from ongrid_plugins.server.responses import api_error

    api = api_error(exc)
    dispatched_code, details, hint = _explain(exc)
    assert api.code == dispatched_code == code
    assert api.status == status
    shared = {key: value for key, value in exc.details().items() if key != "args_digest"}
    assert {key: details[key] for key in shared} == shared
    assert {key: api.details[key] for key in exc.details()} == exc.details()
    assert hint.strip()


def test_the_unknown_skill_code_is_the_same_in_dispatch_rest_and_the_exit_code_table() -> None:
    exc = UnknownSkill("nope")
    assert exc.code == "unknown_skill" and EXIT_CODES[exc.code] == exc.exit_code == 4


def test_a_denial_names_the_deciding_plugin_under_the_same_key_everywhere() -> None:
    from ongrid_plugins.server.responses import api_error

    exc = PermissionDenied("note", _GATE)
    assert api_error(exc).details["plugin"] == _explain(exc)[1]["plugin"] == "ongrid.gate"


def test_a_model_is_not_handed_the_confirmation_digest() -> None:
    exc = ConfirmationRequired("note", Decision(Verdict.CONFIRM, "changes files"), "ab12")
    assert "args_digest" not in _explain(exc)[1]
    assert exc.details()["args_digest"] == "ab12"


def test_pack_error_is_part_of_the_tree_and_still_importable_from_packs() -> None:
    from ongrid_plugins import packs

    assert packs.PackError is PackError and issubclass(PackError, OngridError)
    err: Any = PackError("module nope is not installed")
    assert err.code == "pack_unusable" and err.exit_code == 2


def test_a_huge_unknown_name_is_cut_in_the_message_and_kept_whole_in_the_field() -> None:
    name = "a" * 100_000
    exc = UnknownSkill(name)
    cut = "'" + "a" * 80 + "'…(100000 characters)"
    assert (str(exc), exc.name) == (f"no skill named {cut} is registered (see `ongrid-skills list`)", name)
    prompt = str(UnknownSkill("b" * 200, skill="bb"))
    assert prompt.startswith("'" + "b" * 80 + "'…(200 characters) is a prompt skill")
