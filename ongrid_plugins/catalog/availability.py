"""Availability: does a skill apply to this machine, and can its tools run here?

The walker asks at every load, so a reload sees what changed (a binary installed, a
variable exported, a plugin added):

* ``os`` — a skill for another operating system is not registered at all; the load
  report says ``skipped`` and why;
* ``bins``, ``any_bins``, ``env``, ``config``, ``min_version`` — a skill missing any
  of them is registered but *unavailable*: listed by ``ongrid-skills list --all``
  with the reasons, never offered to a model, and a call raises
  :class:`~ongrid_plugins.errors.SkillUnavailable` saying exactly what is missing;
* ``builtin:`` tools — bound to the callable a plugin contributes through
  ``ongrid_native_tools``; a key nobody contributes makes that tool unavailable
  (with a ``native_missing`` warning on the skill).

A *config key* is a dotted path (``channels.discord``,
``plugins.entries.voice-call.enabled``). It is set when the environment variable
``ONGRID_CONFIG_<KEY>`` (the key upper-cased, every run of other characters turned
into ``_``: ``ONGRID_CONFIG_CHANNELS_DISCORD``) holds a true value, or when the
optional TOML file ``<config dir>/config.toml`` (``ONGRID_CONFIG_DIR``, else the
platformdirs user config dir) holds a truthy value at that path. The file is read
at most once per load.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import sys
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import attrs

from ..core.echo import printable
from ..core.userfiles import read_regular_text
from ..models import Problem, Requirements, Skill, Tool

if TYPE_CHECKING:
    import pluggy

    from ..settings import Settings

__all__ = ["CONFIG_FILE", "Availability", "config_env_var", "current_os"]

logger = logging.getLogger("ongrid_plugins.availability")

CONFIG_FILE = "config.toml"
_FALSE = frozenset({"", "0", "false", "no", "off"})
_NOT_ALNUM = re.compile(r"[^A-Za-z0-9]+")
_OS_NAMES = {"win32": "windows", "cygwin": "windows", "darwin": "darwin"}


def current_os(platform: str | None = None) -> str:
    """This machine's OS in the names skills use: ``linux``, ``darwin``, ``windows``, ``freebsd``..."""
    name = platform or sys.platform
    return _OS_NAMES.get(name, name.rstrip("0123456789"))


def config_env_var(key: str) -> str:
    """The environment variable that sets a config key: ``ONGRID_CONFIG_CHANNELS_DISCORD``."""
    return "ONGRID_CONFIG_" + _NOT_ALNUM.sub("_", key).strip("_").upper()


class Availability:
    """Checks skills against this machine for one load; lookups are cached for the load."""

    def __init__(
        self,
        pm: pluggy.PluginManager | None,
        settings: Settings,
        environ: Mapping[str, str] | None = None,
        platform: str | None = None,
    ) -> None:
        self._pm = pm
        self._settings = settings
        self._environ = os.environ if environ is None else environ
        self.os = current_os(platform)
        self._natives: dict[str, Callable[..., Any]] | None = None
        self._bins: dict[str, bool] = {}
        self._config: dict[str, Any] | None = None

    def __repr__(self) -> str:
        return f"<Availability os={self.os}>"

    def skip_reason(self, skill: Skill) -> str | None:
        """Why the skill does not apply here at all (another OS), or None."""
        wanted = skill.requires.os
        if wanted and self.os not in wanted:
            return f"for {', '.join(wanted)} only, this is {self.os}"
        return None

    def apply(self, skill: Skill) -> Skill:
        """The skill with its missing requirements recorded and its native tools bound."""
        natives = any(map(_unbound, skill.tools))  # no generator: this runs for every skill
        if not natives and skill.requires.empty:
            return skill
        reasons = tuple(self.missing(skill.requires))
        warnings: list[Problem] = []
        tools = tuple(self._tool(skill, tool, reasons, warnings) for tool in skill.tools)
        return attrs.evolve(skill, tools=tools, unavailable=reasons, warnings=(*skill.warnings, *warnings))

    def missing(self, requires: Requirements) -> list[str]:
        """What the machine lacks, one sentence each (empty when nothing is missing)."""
        reasons = [self._bin_reason(name, requires) for name in requires.bins if not self.has_bin(name)]
        for group in requires.any_bins:
            if not any(self.has_bin(name) for name in group):
                names = ", ".join(f'"{name}"' for name in group)
                reasons.append(f"none of the binaries {names} is on PATH")
        for name in requires.env:
            if not self._environ.get(name, "").strip():
                reasons.append(f"environment variable {name} is not set")
        for key in requires.config:
            if not self.has_config(key):
                where = os.path.join(self._settings.config_dir, CONFIG_FILE)
                reasons.append(f'config key "{key}" is not set (in {where} or {config_env_var(key)})')
        if requires.min_version and not _at_least(_own_version(), requires.min_version):
            reasons.append(f"needs ongrid-plugins >= {requires.min_version} (this is {_own_version()})")
        return reasons

    def has_bin(self, name: str) -> bool:
        """True if ``name`` is an executable on ``PATH``."""
        if name not in self._bins:
            self._bins[name] = shutil.which(name, path=self._environ.get("PATH", os.defpath)) is not None
        return self._bins[name]

    def has_config(self, key: str) -> bool:
        """True if the config key is set to a truthy value (environment first, then the file)."""
        raw = self._environ.get(config_env_var(key))
        if raw is not None:
            return raw.strip().lower() not in _FALSE
        value: Any = self._config_file()
        for part in key.split("."):
            if not isinstance(value, dict) or part not in value:
                return False
            value = value[part]
        return bool(value)

    @property
    def natives(self) -> dict[str, Callable[..., Any]]:
        """Every contributed ``builtin:`` key, collected once per load."""
        if self._natives is None:
            from ..plugins import collect_native_tools

            self._natives = collect_native_tools(self._pm) if self._pm is not None else {}
        return self._natives

    def _tool(self, skill: Skill, tool: Tool, reasons: tuple[str, ...], warnings: list[Problem]) -> Tool:
        if _unbound(tool):
            key = (tool.impl or "").removeprefix("builtin:")
            fn = self.natives.get(key)
            if fn is None:
                missing = f"no plugin provides {tool.impl}"
                message = f'tool "{tool.name}": {missing}; the tool is unavailable'
                warnings.append(Problem("warning", "native_missing", message, skill.path, "/tools"))
                return attrs.evolve(tool, unavailable=(*reasons, missing))
            return attrs.evolve(tool, native=fn, unavailable=reasons)
        return attrs.evolve(tool, unavailable=reasons) if reasons else tool

    def _bin_reason(self, name: str, requires: Requirements) -> str:
        hint = requires.hints.get(name)
        return f'binary "{name}" is not on PATH' + (f" (install: {hint})" if hint else "")

    def _config_file(self) -> dict[str, Any]:
        if self._config is None:
            import tomllib  # only when a skill asks for a config key

            path = os.path.join(self._settings.config_dir, CONFIG_FILE)
            try:
                self._config = tomllib.loads(read_regular_text(path))
            except FileNotFoundError:
                self._config = {}
            except (OSError, ValueError) as exc:  # ValueError: not UTF-8, or not TOML
                logger.warning(
                    "skill loader: cannot read config file %s: %s", printable(path), printable(str(exc))
                )
                self._config = {}
        return self._config


def _unbound(tool: Tool) -> bool:
    """A ``builtin:`` tool whose callable is still to be looked up (a loader may bind its own)."""
    return tool.native is None and tool.kind == "native" and (tool.impl or "").startswith("builtin:")


def _own_version() -> str:
    from ..core.version import __version__

    return __version__


def _at_least(version: str, minimum: str) -> bool:
    return _numbers(version) >= _numbers(minimum)


def _numbers(version: str) -> tuple[int, ...]:
    parts = []
    for piece in version.strip().lstrip("vV").split("."):
        digits = re.match(r"\d+", piece)
        if digits is None:
            break
        parts.append(int(digits.group()))
    while parts and parts[-1] == 0:
        parts.pop()
    return tuple(parts)
