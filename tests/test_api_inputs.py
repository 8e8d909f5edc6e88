"""``host.call`` with values of the wrong type: a ConfigError naming the parameter, and an
audit log that goes on recording every call after it.

The attack that found it: ``caller=["a"]`` (or bytes, or ``ticket=["x"]``) reached the
audit row, SQLite could not bind it, and the writer stopped chaining rows for good;
every mutating call after it, in every process sharing the state folder, failed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ongrid_plugins import SkillHost
from ongrid_plugins.errors import ConfigError
from ongrid_plugins.testing import assert_ok, isolated_settings, make_skill


@pytest.fixture
def host(tmp_path: Path) -> SkillHost:
    root = tmp_path / "skills"
    make_skill(root, "echo")
    make_skill(root, "change", class_="mutating")
    host = SkillHost(isolated_settings(tmp_path, root))
    host.load()
    return host


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        ({"caller": ["a"]}, "caller must be a string (an identity) or None, got list"),
        ({"caller": b"x"}, "caller must be a string (an identity) or None, got bytes"),
        ({"caller": 5}, "caller must be a string (an identity) or None, got int"),
        ({"ticket": ["x"]}, "ticket must be a ticket id (a string) or None, got list"),
        ({"ticket": 7}, "ticket must be a ticket id (a string) or None, got int"),
        ({"timeout": 10**400}, "timeout must be a finite number of seconds, got 1000000"),
        ({"timeout": float("inf")}, "timeout must be a finite number of seconds, got inf"),
        ({"timeout": float("nan")}, "timeout must be a positive number of seconds, got nan"),
        ({"timeout": "5"}, "timeout must be a positive number of seconds, got '5'"),
    ],
)
def test_a_value_of_the_wrong_type_is_a_config_error_and_the_audit_log_goes_on(
    host: SkillHost, kwargs: dict[str, Any], words: str
) -> None:
    with pytest.raises(ConfigError) as info:
        host.call("echo", {}, **kwargs)
    assert words in str(info.value)
    assert_ok(host.call("change", {}, confirm=True, caller="ann"))  # a risky call is still recorded
    host.audit.flush()
    rows = host.audit.entries()
    assert [(r.tool, r.caller) for r in rows][-1:] == [("change", "ann")]
    assert host.audit.verify().ok


@pytest.mark.parametrize("name", [None, 5, b"echo", ["echo"]])
def test_a_tool_name_that_is_not_a_string_is_a_config_error(host: SkillHost, name: object) -> None:
    with pytest.raises(ConfigError, match=f"a tool name must be a string, got {type(name).__name__}"):
        host.call(name, {})  # type: ignore[arg-type]


def test_acall_checks_the_same_values(host: SkillHost) -> None:
    import asyncio

    with pytest.raises(ConfigError, match="caller must be a string"):
        asyncio.run(host.acall("echo", {}, caller=["a"]))  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="a tool name must be a string"):
        asyncio.run(host.acall(None, {}))  # type: ignore[arg-type]


def test_a_persona_built_with_a_plain_string_mode_works_as_the_enum(host: SkillHost) -> None:
    from ongrid_plugins.models import PermissionMode, Persona

    persona = Persona(name="ops", permission_mode="dual-sign-required")  # type: ignore[arg-type]
    assert persona.permission_mode is PermissionMode.DUAL_SIGN_REQUIRED
    assert_ok(host.call("echo", {}, persona=persona))
    with pytest.raises(ValueError, match="'sudo' is not a valid PermissionMode"):
        Persona(name="ops", permission_mode="sudo")  # type: ignore[arg-type]
