"""Reading and checking the policy-window configuration (file, then environment)."""

from __future__ import annotations

import datetime
import os
import re
import tomllib
import zoneinfo

import attrs
import platformdirs

__all__ = ["DAYS", "Config", "ConfigProblem", "Window", "config_path", "load_config", "parse_window"]

DAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
_WINDOW = re.compile(r"(?:(?P<days>[A-Za-z*][A-Za-z,*\- ]*?)\s+)?(?P<start>\d\d:\d\d)-(?P<end>\d\d:\d\d)")
_CLASSES = frozenset({"safe", "mutating", "dangerous"})
ENV = "ONGRID_POLICY_WINDOW_"


class ConfigProblem(Exception):
    """The configuration cannot be used; the message says where and why."""


@attrs.frozen
class Window:
    """Starts on each of ``days`` at ``start`` and lasts until ``end`` (the next day if end <= start)."""

    text: str
    days: frozenset[int]
    start: int
    """Minutes after midnight."""
    end: int

    def contains(self, now: datetime.datetime) -> bool:
        """True if ``now`` (aware, in the window's zone) falls in this window."""
        minute = now.hour * 60 + now.minute
        today, yesterday = now.weekday(), (now.weekday() - 1) % 7
        if self.start < self.end:
            return today in self.days and self.start <= minute < self.end
        # Over midnight: the part after the start today, or the part before the end from yesterday.
        return (today in self.days and minute >= self.start) or (yesterday in self.days and minute < self.end)


@attrs.frozen
class Config:
    """The checked configuration."""

    windows: tuple[Window, ...] = ()
    zone_name: str = "UTC"
    classes: frozenset[str] = frozenset({"mutating", "dangerous"})
    audit_log: str | None = None
    include_args: bool = False

    @property
    def zone(self) -> datetime.tzinfo:
        """The time zone windows are read in."""
        return datetime.UTC if self.zone_name == "UTC" else zoneinfo.ZoneInfo(self.zone_name)

    def open_window(self, now: datetime.datetime) -> Window | None:
        """The window ``now`` falls in, if any."""
        return next((w for w in self.windows if w.contains(now)), None)


def parse_window(text: str) -> Window:
    """``"Mon-Fri 22:00-06:00"``, ``"Sat,Sun 00:00-24:00"`` or ``"02:00-04:00"`` (every day)."""
    match = _WINDOW.fullmatch(text.strip())
    if match is None:
        raise ConfigProblem(f"window {text!r} is not like 'Mon-Fri 22:00-06:00' or '02:00-04:00'")
    start, end = _minutes(match["start"], text), _minutes(match["end"], text)
    if start == end or start == 24 * 60:
        raise ConfigProblem(f"window {text!r} is empty or starts at 24:00")
    return Window(text.strip(), _days(match["days"] or "*", text), start, end)


def _minutes(hhmm: str, text: str) -> int:
    hours, minutes = int(hhmm[:2]), int(hhmm[3:])
    if minutes > 59 or hours > 24 or (hours == 24 and minutes):
        raise ConfigProblem(f"window {text!r}: {hhmm} is not a time of day")
    return hours * 60 + minutes


def _days(spec: str, text: str) -> frozenset[int]:
    days: set[int] = set()
    for part in (p.strip().lower() for p in spec.split(",") if p.strip()):
        if part == "*":
            days.update(range(7))
            continue
        first, _, last = part.partition("-")
        if first[:3] not in DAYS or (last and last[:3] not in DAYS):
            raise ConfigProblem(f"window {text!r}: {part!r} is not a day (Mon..Sun, ranges like Mon-Fri)")
        a, b = DAYS.index(first[:3]), DAYS.index((last or first)[:3])
        days.update(range(a, b + 1) if a <= b else [*range(a, 7), *range(b + 1)])
    return frozenset(days)


def config_path(environ: os._Environ[str] | dict[str, str] | None = None) -> str:
    """The file: ``ONGRID_POLICY_WINDOW_CONFIG``, else ``<ongrid config dir>/policy-window.toml``."""
    env = os.environ if environ is None else environ
    if env.get(ENV + "CONFIG"):
        return env[ENV + "CONFIG"]
    base = env.get("ONGRID_CONFIG_DIR") or platformdirs.user_config_dir("ongrid", appauthor=False)
    return os.path.join(base, "policy-window.toml")


def _default_log(env: os._Environ[str] | dict[str, str]) -> str:
    base = env.get("ONGRID_STATE_DIR") or platformdirs.user_state_dir("ongrid", appauthor=False)
    return os.path.join(base, "policy-window.jsonl")


_cache: dict[object, Config] = {}


def load_config(environ: os._Environ[str] | dict[str, str] | None = None) -> Config:
    """The configuration now in force (re-read when the file or the environment changes)."""
    env = os.environ if environ is None else environ
    path = config_path(env)
    try:
        stamp: object = os.stat(path).st_mtime_ns
    except FileNotFoundError:
        stamp = None
    except OSError as exc:
        raise ConfigProblem(f"{path}: {exc.strerror}") from None
    key = (path, stamp, tuple(sorted((k, v) for k, v in env.items() if k.startswith(ENV))))
    if key not in _cache:
        _cache.clear()
        _cache[key] = _build(_read_file(path) if stamp is not None else {}, env, path)
    return _cache[key]


def _read_file(path: str) -> dict[str, object]:
    try:
        with open(path, "rb") as f:
            return tomllib.load(f)
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigProblem(f"{path}: {exc}") from None


def _build(data: dict[str, object], env: os._Environ[str] | dict[str, str], path: str) -> Config:
    unknown = set(data) - {"windows", "timezone", "classes", "audit_log", "include_args"}
    if unknown:
        raise ConfigProblem(f"{path}: unknown keys {sorted(unknown)}")
    windows = data.get("windows", [])
    if ENV + "WINDOWS" in env:
        windows = [w for w in env[ENV + "WINDOWS"].split(";") if w.strip()]
    classes = data.get("classes", ["mutating", "dangerous"])
    if ENV + "CLASSES" in env:
        classes = [c.strip() for c in env[ENV + "CLASSES"].split(",") if c.strip()]
    zone = str(env.get(ENV + "TIMEZONE") or data.get("timezone") or "UTC")
    log = str(env.get(ENV + "AUDIT_LOG") or data.get("audit_log") or _default_log(env))
    include = env.get(ENV + "INCLUDE_ARGS", str(data.get("include_args", False))).strip().lower()
    if not isinstance(windows, list) or not isinstance(classes, list) or not set(classes) <= _CLASSES:
        raise ConfigProblem(f"windows must be a list of strings and classes a subset of {sorted(_CLASSES)}")
    try:
        zoneinfo.ZoneInfo(zone) if zone != "UTC" else None
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        raise ConfigProblem(f"unknown time zone {zone!r}") from None
    return Config(
        windows=tuple(parse_window(str(w)) for w in windows),
        zone_name=zone,
        classes=frozenset(classes),
        audit_log=None if log.lower() == "off" else os.path.abspath(os.path.expanduser(log)),
        include_args=include in ("1", "true", "yes", "on"),
    )
