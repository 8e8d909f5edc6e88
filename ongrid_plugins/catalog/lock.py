"""``skills.lock``: what ``ongrid-skills install`` put into the packs folder, file by file.

The lock is one JSON file, ``<packs folder>/skills.lock`` (the user skills
dir), rewritten atomically (temporary file + rename) by every install and
uninstall, under the install lock. Its schema is published as
``ongrid_plugins/schemas/skills-lock.schema.json``::

    {"lock_version": 1,
     "packs": {"<name>": {"name": ..., "version": ...,
                          "origin": {"kind": "archive" | "folder", "path": ..., "sha256": ... | null},
                          "installed_at": "2026-12-01T09:00:00Z",
                          "files": {"<relative path>": {"sha256": ..., "mode": "0111"}},
                          "consent": {"version": ..., "capabilities": {...}, "capability_digest": ...,
                                      "pack_digest": ..., "signer": ..., "by": ..., "at": ..., "mac": ...}}}}

``consent`` is what a person said yes to (:mod:`.capabilities`), sealed with an HMAC
keyed by ``<state dir>/consent.key`` (:func:`seal`): a lock edited by hand to widen a
grant, or a grant copied from version 1 to version 2, no longer matches its seal.

``mode`` is the digest's mode (see :mod:`.digest`). The pack's marker file is
not listed (it is written with the lock). :func:`verify_pack` compares a pack
folder with its entry and returns every changed, added and removed file.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import logging
import os
import stat
from collections.abc import Mapping
from typing import Any

import attrs

from ..core.userfiles import read_regular_text
from ..errors import ConfigError
from ..packs import MARKER
from .digest import tree_records

__all__ = [
    "LOCK_NAME",
    "LOCK_VERSION",
    "Drift",
    "LockEntry",
    "consent_key",
    "consent_problem",
    "installed_folders",
    "lock_path",
    "locked_versions",
    "new_entry",
    "pack_files",
    "read_lock",
    "read_pip_consents",
    "seal",
    "unlocked_message",
    "verify_pack",
    "write_entry",
    "write_pip_consent",
]

logger = logging.getLogger(__name__)

LOCK_NAME = "skills.lock"
LOCK_VERSION = 1


@attrs.frozen
class LockEntry:
    """One pack as the lock records it."""

    name: str
    version: str
    origin: Mapping[str, Any]
    installed_at: str
    files: Mapping[str, Mapping[str, str]]
    """Relative path -> ``{"sha256": ..., "mode": ...}``."""
    consent: Mapping[str, Any] | None = None
    """The consented capabilities and their seal; None for an entry written before consent existed."""

    def to_dict(self) -> dict[str, Any]:
        """The entry as the lock file spells it."""
        return {
            "name": self.name,
            "version": self.version,
            "origin": dict(self.origin),
            "installed_at": self.installed_at,
            "files": {path: dict(self.files[path]) for path in sorted(self.files)},
            **({"consent": dict(self.consent)} if self.consent is not None else {}),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> LockEntry:
        """Read an entry checked by :func:`read_lock`."""
        return cls(
            data["name"],
            data["version"],
            data["origin"],
            data["installed_at"],
            data["files"],
            data.get("consent"),
        )


@attrs.frozen
class Drift:
    """One difference between a pack folder and its lock entry."""

    pack: str
    change: str
    """``changed``, ``added``, ``removed`` or ``missing`` (the whole pack folder)."""
    path: str
    """The file, relative to the pack folder (empty for ``missing``)."""

    def __str__(self) -> str:
        if self.change == "missing":
            return f"pack {self.pack}: its folder is gone"
        return f"pack {self.pack}: {self.change} file {self.path}"

    def to_dict(self) -> dict[str, str]:
        """A JSON-ready dict."""
        return {"pack": self.pack, "change": self.change, "path": self.path}


def lock_path(packs_dir: str) -> str:
    """Where the lock of ``packs_dir`` lives."""
    return os.path.join(packs_dir, LOCK_NAME)


def read_lock(packs_dir: str) -> dict[str, LockEntry] | None:
    """The entries of the lock, by pack name; None when there is no lock file.

    :raises ConfigError: the lock exists but is not a lock (say where, and that
        reinstalling the packs writes a new one).
    """
    path = lock_path(packs_dir)
    try:
        data = json.loads(read_regular_text(path))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        if os.path.isfile(os.path.join(path, MARKER)) and not os.path.islink(path):
            message = f"{path} is a pack folder, not the lock (installed under that name by an older "
            raise ConfigError(
                message + "version): `ongrid-skills uninstall skills.lock` removes it"
            ) from None
        message = f"{path}: not a readable skills.lock ({exc}); reinstall the packs to write a new one"
        raise ConfigError(message) from None
    problem = _check(data)
    if problem:
        message = f"{path}: {problem}; reinstall the packs to write a new one"
        raise ConfigError(message)
    return {name: LockEntry.from_dict(entry) for name, entry in data["packs"].items()}


def _check(data: Any) -> str:
    if not isinstance(data, dict) or data.get("lock_version") != LOCK_VERSION:
        return f"lock_version must be {LOCK_VERSION}"
    packs = data.get("packs")
    if not isinstance(packs, dict):
        return '"packs" must be an object'
    for name, entry in packs.items():
        if not isinstance(entry, dict) or not isinstance(entry.get("files"), dict):
            return f'pack "{name}" must be an object with "files"'
        for key in ("name", "version", "installed_at"):
            if not isinstance(entry.get(key), str):
                return f'pack "{name}": "{key}" must be a string'
        if not isinstance(entry.get("origin"), dict):
            return f'pack "{name}": "origin" must be an object'
        for rel, record in entry["files"].items():
            if not isinstance(record, dict) or not isinstance(record.get("sha256"), str):
                return f'pack "{name}": file "{rel}" needs a "sha256" string'
        consent = entry.get("consent")
        if consent is not None and not _consent_ok(consent):
            return f'pack "{name}": "consent" must hold "capabilities" (with "tools") and string fields'
    return ""


_CONSENT_STRINGS = ("version", "capability_digest", "pack_digest", "signer", "by", "at", "mac")


def _consent_ok(consent: Any) -> bool:
    return (
        isinstance(consent, dict)
        and all(isinstance(consent.get(k), str) for k in _CONSENT_STRINGS)
        and isinstance(consent.get("capabilities"), dict)
        and isinstance(consent["capabilities"].get("tools"), dict)
        and isinstance(consent["capabilities"].get("plugins", []), list)
    )


KEY_NAME = "consent.key"


def consent_key(state_dir: str, *, create: bool = False) -> bytes | None:
    """The key that seals consents (``<state_dir>/consent.key``, 32 random bytes, mode 0600).

    None when it does not exist (and ``create`` is false) or is not a private regular file.
    """
    path = os.path.join(state_dir, KEY_NAME)
    if create and not os.path.lexists(path):
        os.makedirs(state_dir, 0o700, exist_ok=True)
        with contextlib.suppress(FileExistsError):
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
            with os.fdopen(fd, "wb") as f:
                f.write(os.urandom(32))
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        key = f.read(64)
    if not stat.S_ISREG(st.st_mode) or st.st_mode & 0o077 or len(key) != 32:
        return None
    return key


def seal(key: bytes, name: str, consent: Mapping[str, Any]) -> str:
    """The HMAC-SHA256 of pack ``name``'s consent (every field but ``mac``, canonical JSON)."""
    body = {k: v for k, v in consent.items() if k != "mac"}
    text = json.dumps({"pack": name, **body}, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hmac.new(key, text.encode(), hashlib.sha256).hexdigest()


def consent_problem(entry: LockEntry, key: bytes | None, pack_digest: str) -> str:
    """Why ``entry``'s consent does not vouch for its pack now ("" when it does)."""
    c = entry.consent
    how = (
        f"`ongrid-skills show {entry.name}` shows what it may do, `ongrid-skills trust {entry.name}` consents"
    )
    if c is None:
        return f"pack {entry.name} has no recorded consent in skills.lock; its skills are not loaded ({how})"
    if key is None or not hmac.compare_digest(seal(key, entry.name, c), c["mac"]):
        return (
            f"pack {entry.name}: the consent in skills.lock does not match its seal (edited by hand, "
            "copied from another lock, or the state folder's consent.key changed); its skills are not "
            f"loaded ({how})"
        )
    if c["version"] != entry.version or c["pack_digest"] != pack_digest:
        return (
            f"pack {entry.name}: the consent in skills.lock was given for version {c['version'] or '(none)'}"
            f" of other content, not for {entry.version or '(unversioned)'} installed now; its skills are "
            f"not loaded ({how})"
        )
    return ""


def pack_files(folder: str) -> dict[str, dict[str, str]]:
    """Every file of an installed pack folder, as the lock records them.

    Every one, in the folders the loader and the skill digests skip too
    (``node_modules``, ``.git``, ``.ongrid-*``): install copies them, and a skill's code
    may source, import or read them. ``__pycache__`` aside: Python writes it as a skill
    imports its modules (and checks each cached file against its source).
    """
    records = tree_records(folder, skip=frozenset({MARKER}), every_folder=True) or []
    return {r.path: {"sha256": r.sha256, "mode": r.mode} for r in records}


def installed_folders(packs_dir: str) -> list[str]:
    """The names of the folders ``install`` put in ``packs_dir``: those holding a marker file.

    A marker that is unreadable still counts: the folder was installed, and a
    broken marker must not be a way out of the lock's check.
    """
    try:
        names = sorted(os.listdir(packs_dir))
    except OSError:
        return []
    return [
        name
        for name in names
        if not name.startswith(".")
        and not os.path.islink(os.path.join(packs_dir, name))
        and os.path.lexists(os.path.join(packs_dir, name, MARKER))
    ]


def locked_versions(packs_dir: str) -> dict[str, str]:
    """The version of every pack the lock lists, by name; empty when there is no readable lock."""
    try:
        entries = read_lock(packs_dir) or {}
    except ConfigError:
        return {}
    return {name: entry.version for name, entry in entries.items()}


def unlocked_message(name: str) -> str:
    """What to say about the installed pack ``name`` that has no entry in the lock."""
    return (
        f"pack {name} was installed but has no entry in skills.lock (the lock was deleted or edited, "
        "or the pack folder renamed or installed before locks), so nothing vouches for its files; "
        f"its skills are not loaded: reinstall it (`ongrid-skills install --replace SOURCE`) "
        f"or remove it (`ongrid-skills uninstall {name}`)"
    )


def write_entry(packs_dir: str, name: str, entry: LockEntry | None) -> None:
    """Record ``entry`` as pack ``name`` (None removes it) and rewrite the lock atomically.

    The caller holds the install lock. An unreadable lock is replaced (with a
    warning): it is rebuilt from what is installed from now on.
    """
    try:
        entries = read_lock(packs_dir) or {}
        pip = read_pip_consents(packs_dir)
    except ConfigError as exc:
        logger.warning("catalog: %s; starting a new one", exc)
        entries, pip = {}, {}
    if entry is None:
        entries.pop(name, None)
    else:
        entries[name] = entry
    _write(packs_dir, entries, pip)


def read_pip_consents(packs_dir: str) -> dict[str, dict[str, Any]]:
    """The consents given to pip packs (``"pip"`` of the lock), by entry point name; {} when none."""
    try:
        data = json.loads(read_regular_text(lock_path(packs_dir)))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError):
        raise ConfigError(
            f"{lock_path(packs_dir)}: not a readable skills.lock; reinstall the packs"
        ) from None
    pip = data.get("pip", {}) if isinstance(data, dict) else None
    if not isinstance(pip, dict) or not all(
        isinstance(v, dict) and isinstance(v.get("distribution"), str) and _consent_ok(v.get("consent"))
        for v in pip.values()
    ):
        raise ConfigError(
            f'{lock_path(packs_dir)}: "pip" must map entry points to consents; trust them again'
        )
    return pip


def write_pip_consent(packs_dir: str, name: str, record: Mapping[str, Any] | None) -> None:
    """Record the consent of pip pack ``name`` (None removes it); the caller holds the install lock."""
    entries = read_lock(packs_dir) or {}
    try:
        pip = read_pip_consents(packs_dir)
    except ConfigError:
        pip = {}
    if record is None:
        pip.pop(name, None)
    else:
        pip[name] = dict(record)
    _write(packs_dir, entries, pip)


def _write(packs_dir: str, entries: Mapping[str, LockEntry], pip: Mapping[str, Any]) -> None:
    data: dict[str, Any] = {
        "lock_version": LOCK_VERSION,
        "packs": {n: entries[n].to_dict() for n in sorted(entries)},
    }
    if pip:
        data["pip"] = {n: pip[n] for n in sorted(pip)}
    import tempfile

    os.makedirs(packs_dir, 0o755, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".ongrid-lock-", dir=packs_dir)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=2, ensure_ascii=False, sort_keys=False)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, lock_path(packs_dir))
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def new_entry(
    name: str,
    version: str,
    folder: str,
    source: str,
    source_sha256: str | None,
    files: Mapping[str, Mapping[str, str]] | None = None,
) -> LockEntry:
    """The lock entry of a pack just installed into ``folder`` from ``source``."""
    origin = {"kind": "archive" if source_sha256 else "folder", "path": source, "sha256": source_sha256}
    return LockEntry(name, version, origin, utc_now(), pack_files(folder) if files is None else files)


def utc_now() -> str:
    """Now, UTC, ISO 8601 to the second (``2026-12-01T09:00:00Z``)."""
    import datetime

    return datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def verify_pack(entry: LockEntry, folder: str) -> list[Drift]:
    """Every difference between ``folder`` now and its lock ``entry`` (empty: it matches)."""
    if not os.path.isdir(folder):
        return [Drift(entry.name, "missing", "")]
    now = pack_files(folder)
    drift = []
    for path in sorted(set(now) | set(entry.files)):
        if path not in now:
            drift.append(Drift(entry.name, "removed", path))
        elif path not in entry.files:
            drift.append(Drift(entry.name, "added", path))
        elif _differs(entry.files[path], now[path]):
            drift.append(Drift(entry.name, "changed", path))
    return drift


def _differs(locked: Mapping[str, str], now: Mapping[str, str]) -> bool:
    return locked.get("sha256") != now["sha256"] or locked.get("mode", now["mode"]) != now["mode"]
