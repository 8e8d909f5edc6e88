"""Where things are and how big they may get: environment variables, platformdirs.

``Settings.from_env()`` reads every ``ONGRID_*`` variable once; ``Settings(...)``
with explicit values ignores the environment entirely, which is what tests and
embedding hosts want.

=============================== ==================================================
variable                        meaning
=============================== ==================================================
``ONGRID_SKILLS_EXTERNAL_DIRS`` extra allow-list roots, absolute, split on ``:,;``
``ONGRID_DISABLE_PLUGINS``      plugin names not to register, comma separated
``ONGRID_TRACE_PLUGINS``        ``1`` traces every hook call to stderr
``ONGRID_STRICT``               ``1`` turns plugin and pack failures into errors
``ONGRID_STDOUT_CAP``           bytes of stdout a skill may print (default 16 MiB)
``ONGRID_KILL_GRACE``           seconds between SIGTERM and SIGKILL (default 2)
``ONGRID_CACHE_DIR``            cache directory; ``off`` disables the cache
``ONGRID_STATE_DIR``            state directory (approvals, audit log)
``ONGRID_CONFIG_DIR``           configuration directory (personas)
``ONGRID_PERSONAS_DIRS``        persona folders searched before ``<config>/personas``, split on ``:,;``
``ONGRID_APPROVAL_TTL``         seconds a two-person ticket stays valid (default 900)
``ONGRID_APPROVALS_URL``        keep two-person tickets on this ``ongrid-skills serve`` (docs/approvals.md)
``ONGRID_APPROVALS_TOKEN_FILE`` its bearer token, in a file (else ``ONGRID_TOKEN``)
``ONGRID_AUDIT_FAIL_CLOSED``    ``1`` (default): refuse mutating/dangerous calls the audit log cannot record
``ONGRID_AUDIT_KEY_FILE``       a secret key file: every audit row then carries an HMAC (docs/audit.md)
``ONGRID_REQUIRE_SIGNED``       ``1``: refuse packs not signed by a trusted signer (docs/trust.md)
``ONGRID_USER_SKILLS_DIR``      the per-user skills root (default: platformdirs)
``ONGRID_SYSTEM_SKILLS_DIR``    the system skills root (default ``/etc/ongrid/skills``)
``ONGRID_AGENT_SKILLS_USER``    ``0`` stops walking ``~/.agents/skills`` (default: walked)
``ONGRID_PROJECT_DIR``          the project whose ``.agents/skills`` loads when trusted (default: cwd)
``ONGRID_TRUSTED_FOLDERS``      project folders trusted besides ``trust-folder``'s, split on ``:,;``
``ONGRID_OTEL``                 ``1`` registers the ``otel`` plugin: spans, metrics (docs/telemetry.md)
``ONGRID_SANDBOX``              ``auto`` (default), ``require`` or ``off``: how calls are confined
``ONGRID_SANDBOX_POLICY``       ``default`` or ``strict``: whether undeclared mutating tools are confined
``ONGRID_SANDBOX_LIMITS``       operator caps, ``processes=64,memory_mb=1024,...`` (docs/sandbox.md)
``ONGRID_HOST_FILES_DIRS``      the folders ``host_files`` may read, split on ``:,;`` (default ``/var/log``)
``ONGRID_BROKER_URL``           the Redis broker remote workers listen on (docs/remote.md)
``ONGRID_REMOTE_ROUTES``        ``PATTERN=QUEUE,...``: which tools run on which worker queue
``ONGRID_BROKER_TIMEOUT``       seconds to reach the broker before a remote call fails (default 3)
``ONGRID_REMOTE_KEY_FILE``      the secret both host and workers sign remote tasks and results with
``ONGRID_MAX_OPEN_TICKETS``     open two-person tickets one requester may hold at once (default 20)
=============================== ==================================================

The three remote settings can also be written in ``[remote]`` of ``<config dir>/config.toml``
(``broker_url``, ``routes``, ``broker_timeout``); a variable that is set wins over the file.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs
import platformdirs

from .core.echo import echo
from .errors import ConfigError

__all__ = ["Settings", "split_dirs"]

APP_NAME = "ongrid"
DEFAULT_TIMEOUT = 30.0
DEFAULT_STDOUT_CAP = 16 * 1024 * 1024
DEFAULT_KILL_GRACE = 2.0
SYSTEM_SKILLS_DIR = "/etc/ongrid/skills"
DEFAULT_APPROVAL_TTL = 15 * 60.0
SANDBOX_MODES = ("auto", "require", "off")
SANDBOX_POLICIES = ("default", "strict")
DEFAULT_HOST_FILES_DIRS = ("/var/log",)
DEFAULT_SANDBOX_LIMITS = {
    "processes": 64,
    "memory_mb": 1024,
    "cpu_seconds": 60,
    "file_size_mb": 1024,
    "open_files": 1024,
}
"""What a call gets when neither its manifest nor the operator says otherwise."""
MAX_SANDBOX_LIMITS = {
    "processes": 4096,
    "memory_mb": 64 * 1024,
    "cpu_seconds": 24 * 3600,
    "file_size_mb": 1024 * 1024,
    "open_files": 65536,
}
"""The operator's caps when ``ONGRID_SANDBOX_LIMITS`` does not lower them."""

_SPLIT_DIRS = re.compile(r"[:,;]")
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def split_dirs(value: str) -> tuple[str, ...]:
    """Split a directory list on ``:``, ``,`` or ``;``; blanks around names are dropped."""
    return tuple(part.strip() for part in _SPLIT_DIRS.split(value) if part.strip())


def _user_data_dir() -> str:
    return str(Path(platformdirs.user_data_dir(APP_NAME, appauthor=False)) / "skills")


def _user_cache_dir() -> str:
    return platformdirs.user_cache_dir(APP_NAME, appauthor=False)


def _user_state_dir() -> str:
    return platformdirs.user_state_dir(APP_NAME, appauthor=False)


def _user_config_dir() -> str:
    return platformdirs.user_config_dir(APP_NAME, appauthor=False)


def _positive_int(name: str, raw: str) -> int:
    try:
        value = int(raw.strip())
    except ValueError:
        value = 0
    if value <= 0:
        message = f"{name} must be a positive integer, got {raw!r}"
        raise ConfigError(message)
    return value


def _seconds(name: str, raw: str, *, zero: bool) -> float:
    """A finite number of seconds, >= 0 (``zero``) or > 0; the message states the same rule."""
    try:
        value = float(raw.strip())
    except ValueError:
        value = -1.0
    if not (value >= 0 if zero else value > 0) or value == float("inf"):
        message = f"{name} must be a number of seconds {'>= 0' if zero else '> 0'}, got {echo(raw)}"
        raise ConfigError(message)
    return value


def _nonneg_float(name: str, raw: str) -> float:
    return _seconds(name, raw, zero=True)


def _positive_float(name: str, raw: str) -> float:
    return _seconds(name, raw, zero=False)


def _absolute_dir(name: str, raw: str) -> str:
    """A state, cache or config folder from the environment: absolute, or a :class:`ConfigError`.

    A relative one would move with the working directory (an audit log per folder the
    command runs in), which is why ``ONGRID_SKILLS_EXTERNAL_DIRS`` takes absolute roots only.
    """
    value = raw.strip()
    if not os.path.isabs(value):
        guess = os.path.abspath(os.path.expanduser(value))
        message = f"{name} must be an absolute path (a relative one moves with the working directory), "
        message += f"got {echo(value)}: give an absolute path, e.g. {guess}"
        raise ConfigError(message)
    return value


def _flag(name: str, raw: str) -> bool:
    lowered = raw.strip().lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    message = f"{name} must be 1 or 0 (or true/false), got {raw!r}"
    raise ConfigError(message)


class Caps(dict[str, int]):
    """The operator's limit caps: a read-only, hashable mapping (Settings stay hashable)."""

    def __hash__(self) -> int:  # type: ignore[override]
        return hash(tuple(sorted(self.items())))

    def _readonly(self, *args: Any, **kwargs: Any) -> None:
        message = "sandbox caps are read-only: build new Settings with other caps"
        raise TypeError(message)

    __setitem__ = __delitem__ = update = pop = popitem = clear = setdefault = _readonly  # type: ignore[assignment]


def _caps(value: Mapping[str, int]) -> Caps:
    caps = dict(MAX_SANDBOX_LIMITS)
    for key, number in dict(value).items():
        if key not in caps:
            message = f"sandbox_caps: unknown limit {key!r} (known: {', '.join(caps)})"
            raise ConfigError(message)
        if isinstance(number, bool) or not isinstance(number, int) or number <= 0:
            message = f"sandbox_caps: {key} must be a positive integer, got {number!r}"
            raise ConfigError(message)
        caps[key] = number
    return Caps(caps)


def _choice(name: str, raw: str, choices: tuple[str, ...]) -> str:
    value = raw.strip().lower()
    if value not in choices:
        message = f"{name} must be one of {', '.join(choices)}, got {raw!r}"
        raise ConfigError(message)
    return value


def _limits(name: str, raw: str) -> dict[str, int]:
    """``processes=64,memory_mb=512``: caps the operator sets; unnamed ones keep the maximum."""
    caps = dict(MAX_SANDBOX_LIMITS)
    for part in raw.split(","):
        key, sep, number = part.partition("=")
        key = key.strip()
        if not part.strip():
            continue
        if not sep or key not in caps:
            known = ", ".join(caps)
            message = f"{name}: {part.strip()!r} is not NAME=NUMBER with NAME one of {known}"
            raise ConfigError(message)
        caps[key] = _positive_int(f"{name} {key}", number)
    return caps


def _str_tuple(value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        return (value,)
    return tuple(os.fspath(v) for v in value)


_REMOTE_KEYS = (
    ("broker_url", "broker_url", "ONGRID_BROKER_URL"),
    ("routes", "remote_routes", "ONGRID_REMOTE_ROUTES"),
    ("broker_timeout", "broker_timeout", "ONGRID_BROKER_TIMEOUT"),
)


def _remote_config(values: dict[str, Any], env: Mapping[str, str]) -> None:
    """Fill the remote settings the environment (or a keyword) left unset from ``[remote]``
    of ``<config dir>/config.toml``. An unreadable file is logged, never fatal; a bad
    ``broker_timeout`` is a ConfigError naming the file; bad routes are kept, for the
    remote plugin to report (docs/remote.md)."""
    if all(field in values for _key, field, _var in _REMOTE_KEYS):
        return
    import logging
    import tomllib

    from .core.userfiles import read_regular_text

    folder = values.get("config_dir") or _user_config_dir()
    path = os.path.join(folder, "config.toml")
    try:
        table = tomllib.loads(read_regular_text(path)).get("remote")
    except FileNotFoundError:
        return
    except (OSError, ValueError) as exc:  # ValueError: not UTF-8, or not TOML
        logging.getLogger(__name__).warning(
            "settings: cannot read %s, its [remote] is ignored: %s", path, exc
        )
        return
    if not isinstance(table, dict):
        return
    for key, field, var in _REMOTE_KEYS:
        if field in values or key not in table:
            continue
        value, where = table[key], f"{key} in [remote] of {path}"
        if key == "broker_timeout":
            if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < float("inf"):
                message = f"{where} must be a positive number of seconds, got {value!r} ({var} wins over it)"
                raise ConfigError(message)
            values[field] = float(value)
        elif key == "routes":
            if isinstance(value, dict):  # [remote.routes] "disk_*" = "storage" (TOML keeps the order)
                items = [f"{pattern}={queue}" for pattern, queue in value.items()]
            else:  # a string, or a list of strings; anything else shows as a bad item
                items = [str(item) for item in value] if isinstance(value, list) else [str(value)]
            values[field] = ",".join(item.strip() for item in items)
            values["remote_routes_from"] = where
        elif isinstance(value, str):
            values[field] = value.strip()
        else:
            raise ConfigError(f"{where} must be a string like redis://HOST:6379/0, got {value!r}")


def _loading_env(env: Mapping[str, str]) -> dict[str, Any]:
    """The ``ONGRID_*`` variables about what loads from where: roots, plugins, caches, folders."""
    values: dict[str, Any] = {}
    if "ONGRID_SKILLS_EXTERNAL_DIRS" in env:
        values["env_dirs"] = split_dirs(env["ONGRID_SKILLS_EXTERNAL_DIRS"])
    if "ONGRID_DISABLE_PLUGINS" in env:
        raw = env["ONGRID_DISABLE_PLUGINS"]
        values["disable_plugins"] = tuple(p.strip() for p in raw.split(",") if p.strip())
    if "ONGRID_TRACE_PLUGINS" in env:
        values["trace_plugins"] = _flag("ONGRID_TRACE_PLUGINS", env["ONGRID_TRACE_PLUGINS"])
    if "ONGRID_STRICT" in env:
        values["strict"] = _flag("ONGRID_STRICT", env["ONGRID_STRICT"])
    if env.get("ONGRID_REQUIRE_SIGNED", "").strip():
        values["require_signed"] = _flag("ONGRID_REQUIRE_SIGNED", env["ONGRID_REQUIRE_SIGNED"])
    if "ONGRID_CACHE_DIR" in env:
        raw = env["ONGRID_CACHE_DIR"].strip()
        off = raw.lower() in ("off", "none", "")
        values["cache_dir"] = None if off else _absolute_dir("ONGRID_CACHE_DIR", raw)
    if "ONGRID_PERSONAS_DIRS" in env:
        values["persona_dirs"] = split_dirs(env["ONGRID_PERSONAS_DIRS"])
    if "ONGRID_AGENT_SKILLS_USER" in env:
        values["agent_skills_user"] = _flag("ONGRID_AGENT_SKILLS_USER", env["ONGRID_AGENT_SKILLS_USER"])
    if env.get("ONGRID_PROJECT_DIR", "").strip():
        values["project_dir"] = _absolute_dir("ONGRID_PROJECT_DIR", env["ONGRID_PROJECT_DIR"])
    if "ONGRID_OTEL" in env:
        values["otel"] = _flag("ONGRID_OTEL", env["ONGRID_OTEL"])
    if "ONGRID_TRUSTED_FOLDERS" in env:
        values["trusted_folders"] = split_dirs(env["ONGRID_TRUSTED_FOLDERS"])
    if "ONGRID_HOST_FILES_DIRS" in env:
        values["host_files_dirs"] = split_dirs(env["ONGRID_HOST_FILES_DIRS"])
    for var, field in (("ONGRID_STATE_DIR", "state_dir"), ("ONGRID_CONFIG_DIR", "config_dir")):
        if env.get(var, "").strip():
            values[field] = _absolute_dir(var, env[var])
    for var, field in (
        ("ONGRID_USER_SKILLS_DIR", "user_skills_dir"),
        ("ONGRID_SYSTEM_SKILLS_DIR", "system_skills_dir"),
    ):
        if env.get(var, "").strip():
            values[field] = env[var].strip()
    return values


def _call_env(env: Mapping[str, str]) -> dict[str, Any]:
    """The ``ONGRID_*`` variables about how a call runs: output, approvals, audit, sandbox, broker."""
    values: dict[str, Any] = {}
    if "ONGRID_STDOUT_CAP" in env:
        values["stdout_cap"] = _positive_int("ONGRID_STDOUT_CAP", env["ONGRID_STDOUT_CAP"])
    if "ONGRID_KILL_GRACE" in env:
        values["kill_grace"] = _nonneg_float("ONGRID_KILL_GRACE", env["ONGRID_KILL_GRACE"])
    if env.get("ONGRID_APPROVAL_TTL", "").strip():
        values["approval_ttl"] = _positive_float("ONGRID_APPROVAL_TTL", env["ONGRID_APPROVAL_TTL"])
    for var, field in (
        ("ONGRID_APPROVALS_URL", "approvals_url"),
        ("ONGRID_APPROVALS_TOKEN_FILE", "approvals_token_file"),
    ):
        if env.get(var, "").strip():
            values[field] = env[var].strip()
    if "ONGRID_AUDIT_FAIL_CLOSED" in env:
        values["audit_fail_closed"] = _flag("ONGRID_AUDIT_FAIL_CLOSED", env["ONGRID_AUDIT_FAIL_CLOSED"])
    if env.get("ONGRID_AUDIT_KEY_FILE", "").strip():
        values["audit_key_file"] = env["ONGRID_AUDIT_KEY_FILE"].strip()
    if env.get("ONGRID_SANDBOX", "").strip():
        values["sandbox"] = _choice("ONGRID_SANDBOX", env["ONGRID_SANDBOX"], SANDBOX_MODES)
    if env.get("ONGRID_SANDBOX_POLICY", "").strip():
        values["sandbox_policy"] = _choice(
            "ONGRID_SANDBOX_POLICY", env["ONGRID_SANDBOX_POLICY"], SANDBOX_POLICIES
        )
    if env.get("ONGRID_SANDBOX_LIMITS", "").strip():
        values["sandbox_caps"] = _limits("ONGRID_SANDBOX_LIMITS", env["ONGRID_SANDBOX_LIMITS"])
    if env.get("ONGRID_BROKER_URL", "").strip():
        values["broker_url"] = env["ONGRID_BROKER_URL"].strip()
    if env.get("ONGRID_REMOTE_ROUTES", "").strip():
        values["remote_routes"] = env["ONGRID_REMOTE_ROUTES"].strip()
    if env.get("ONGRID_BROKER_TIMEOUT", "").strip():
        values["broker_timeout"] = _positive_float("ONGRID_BROKER_TIMEOUT", env["ONGRID_BROKER_TIMEOUT"])
    if env.get("ONGRID_REMOTE_KEY_FILE", "").strip():
        values["remote_key_file"] = env["ONGRID_REMOTE_KEY_FILE"].strip()
    if env.get("ONGRID_MAX_OPEN_TICKETS", "").strip():
        values["max_open_tickets"] = _positive_int("ONGRID_MAX_OPEN_TICKETS", env["ONGRID_MAX_OPEN_TICKETS"])
    return values


@attrs.frozen
class Settings:
    """Everything a :class:`~ongrid_plugins.SkillHost` needs to know about its environment."""

    skill_dirs: tuple[str, ...] = attrs.field(default=(), converter=_str_tuple)
    """Allow-list roots given explicitly (``--dirs``); walked first, in order."""
    env_dirs: tuple[str, ...] = attrs.field(default=(), converter=_str_tuple)
    """Roots from ``ONGRID_SKILLS_EXTERNAL_DIRS``; walked after ``skill_dirs``."""
    include_defaults: bool = True
    """Also walk the built-in, system and user skill roots and installed skill packs."""
    disable_plugins: tuple[str, ...] = attrs.field(default=(), converter=_str_tuple)
    trace_plugins: bool = False
    strict: bool = False
    """Plugin and pack failures raise instead of being logged and skipped."""
    load_entry_points: bool = True
    """Load third-party plugins and packs from installed distributions."""
    require_signed: bool = False
    """Refuse packs not signed by a signer of ``<config_dir>/trust.json`` (``ONGRID_REQUIRE_SIGNED``;
    docs/trust.md)."""
    stdout_cap: int = attrs.field(default=DEFAULT_STDOUT_CAP)
    default_timeout: float = DEFAULT_TIMEOUT
    kill_grace: float = DEFAULT_KILL_GRACE
    cache_dir: str | None = attrs.field(factory=_user_cache_dir)
    """The cache folder (the CLI's memory of warnings already shown); None keeps none."""
    state_dir: str = attrs.field(factory=_user_state_dir)
    config_dir: str = attrs.field(factory=_user_config_dir)
    user_skills_dir: str = attrs.field(factory=_user_data_dir)
    system_skills_dir: str = SYSTEM_SKILLS_DIR
    persona_dirs: tuple[str, ...] = attrs.field(default=(), converter=_str_tuple)
    """Persona folders from ``ONGRID_PERSONAS_DIRS``, searched before ``<config_dir>/personas``."""
    agent_skills_user: bool = True
    """Walk ``~/.agents/skills`` (with the default roots; ``ONGRID_AGENT_SKILLS_USER``)."""
    project_dir: str = ""
    """The project whose ``.agents/skills`` is walked when trusted (``--project``,
    ``ONGRID_PROJECT_DIR``); empty: the working directory, with the default roots only."""
    trusted_folders: tuple[str, ...] = attrs.field(default=(), converter=_str_tuple)
    """Project folders trusted besides those ``trust-folder`` recorded (``ONGRID_TRUSTED_FOLDERS``)."""
    otel: bool = False
    """Register the ``otel`` plugin: a span, events and metrics per call (``ONGRID_OTEL``,
    extra ``[otel]``)."""
    approval_ttl: float = attrs.field(default=DEFAULT_APPROVAL_TTL)
    """Seconds a two-person ticket stays valid, from its request to its execution."""
    approvals_url: str = ""
    """An ``ongrid-skills serve`` URL whose store keeps this host's tickets; empty: the state dir's."""
    approvals_token_file: str = ""
    """The file holding the bearer token for ``approvals_url`` (empty: ``$ONGRID_TOKEN``)."""
    audit_fail_closed: bool = True
    """Refuse mutating and dangerous calls when the audit log cannot record them."""
    audit_key_file: str | None = None
    """A file holding a secret key (skills must not be able to read it): every audit row then
    carries an HMAC, so a chain recomputed without the key does not verify."""
    sandbox: str = attrs.field(default="auto")
    """``auto`` confines with what the kernel offers, ``require`` refuses what it cannot
    confine, ``off`` runs skills with the host's authority (docs/sandbox.md)."""
    sandbox_policy: str = attrs.field(default="default")
    """``strict`` confines mutating/dangerous tools without a ``sandbox`` declaration
    like a declared empty profile; ``default`` keeps their write and network reach."""
    sandbox_caps: Mapping[str, int] = attrs.field(factory=lambda: Caps(MAX_SANDBOX_LIMITS), converter=_caps)
    """The operator's caps per limit name: a manifest may not ask for more."""
    host_files_dirs: tuple[str, ...] = attrs.field(default=DEFAULT_HOST_FILES_DIRS, converter=_str_tuple)
    """Folders the built-in ``host_files`` tools (``tail_file``, ``find_large_files``) may
    read, absolute (or ``~/``); a path outside all of them is refused. Empty: nothing."""
    broker_url: str = ""
    """The Redis URL of the Celery broker remote workers listen on; empty: every tool runs here."""
    remote_routes: str = ""
    """``PATTERN=QUEUE`` pairs, comma separated: a tool-name glob or ``category:NAME``; the
    first match sends the tool's calls to that worker queue (docs/remote.md)."""
    broker_timeout: float = 3.0
    """Seconds a remote call may spend reaching the broker before it fails (never a hang)."""
    remote_routes_from: str = "ONGRID_REMOTE_ROUTES"
    """Where :attr:`remote_routes` was read, named in the errors of a bad route."""
    remote_key_file: str = ""
    """A file holding the secret the host and its workers sign tasks and results with
    (HMAC-SHA256); a routed call or a worker without one is refused (docs/remote.md)."""
    max_open_tickets: int = 20
    """Open two-person tickets one requester may hold at once; the next request is refused."""

    @sandbox.validator
    def _check_sandbox(self, _attribute: attrs.Attribute[str], value: str) -> None:
        if value not in SANDBOX_MODES:
            message = f"sandbox must be one of {', '.join(SANDBOX_MODES)}, got {value!r}"
            raise ConfigError(message)

    @sandbox_policy.validator
    def _check_policy(self, _attribute: attrs.Attribute[str], value: str) -> None:
        if value not in SANDBOX_POLICIES:
            message = f"sandbox_policy must be one of {', '.join(SANDBOX_POLICIES)}, got {value!r}"
            raise ConfigError(message)

    @host_files_dirs.validator
    def _check_host_files_dirs(
        self, _attribute: attrs.Attribute[tuple[str, ...]], value: tuple[str, ...]
    ) -> None:
        for folder in value:
            if not os.path.isabs(os.path.expanduser(folder)):
                message = f"host_files_dirs (ONGRID_HOST_FILES_DIRS): {folder!r} is not an absolute folder; "
                message += "give absolute paths (or ~/...) separated by ':'"
                raise ConfigError(message)

    @approval_ttl.validator
    def _check_ttl(self, _attribute: attrs.Attribute[float], value: float) -> None:
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < float("inf"):
            message = f"approval_ttl must be a positive number of seconds, got {value!r}"
            raise ConfigError(message)

    @stdout_cap.validator
    def _check_cap(self, _attribute: attrs.Attribute[int], value: int) -> None:
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            message = f"stdout_cap must be a positive number of bytes, got {value!r}"
            raise ConfigError(message)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides: Any) -> Settings:
        """Read the ``ONGRID_*`` variables; keyword arguments win over them.

        Raises :class:`~ongrid_plugins.errors.ConfigError` naming the variable when
        one has an unusable value.
        """
        env = os.environ if environ is None else environ
        values = {**_loading_env(env), **_call_env(env)}
        values.update(overrides)
        _remote_config(values, env)
        return cls(**values)
