"""``ongrid-skills install``: put a non-Python pack into the user skills dir, as a unit.

A pack is a folder of skills (skill.json and SKILL.md alike), given as the
folder itself or as a ``.tar.gz`` / ``.tgz`` / ``.tar`` / ``.zip`` of it. Installing:

1. unpacks it into a staging folder *inside* the user skills dir (same
   filesystem, and named ``.ongrid-staging-*`` so the walker never reads it)
   under the rules of :mod:`ongrid_plugins.packs.archive`;
2. validates it with exactly the code ``ongrid-skills validate`` runs; any error
   (any problem with ``strict``) refuses the pack and leaves nothing behind;
3. writes the marker :data:`~ongrid_plugins.packs.MARKER` and renames the
   folder into place. Over an existing pack (only with ``replace``: otherwise the
   refusal names both origins and digests), the two folders are swapped with
   one ``renameat2(RENAME_EXCHANGE)``: a host loading meanwhile sees the old
   pack or the new one, never neither; the old one is kept until then;
4. records the pack, file by file, in ``skills.lock``
   (:mod:`ongrid_plugins.catalog.lock`); ``uninstall`` removes its entry.

Between 2 and 3, the trust step (:mod:`.consent`): the signature is checked
against the operator's trust policy, the capabilities (and what grew since the
consent of an installed version) are reviewed, and ``consent`` is asked; the
sealed consent goes into the lock entry beside the digests.

``require_digest`` (``install --require-digest SHA256``) refuses an archive
whose sha256 is another one, before anything is unpacked.

Installs and uninstalls of one user dir are serialised by a lock file.
"""

from __future__ import annotations

import contextlib
import ctypes
import datetime
import errno
import fcntl
import hashlib
import json
import logging
import os
import re
import stat
import tempfile
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import attrs

from ..catalog.lock import (
    LockEntry,
    lock_path,
    locked_versions,
    new_entry,
    pack_files,
    read_lock,
    write_entry,
)
from ..catalog.validate import FileReport, validate_paths
from ..core.echo import echo, printable
from ..core.userfiles import file_kind
from ..errors import ConfigError, OngridError
from .archive import Limits, UnpackReport, check_links, remove_tree, unpack
from .consent import ConsentError, Review, consent_record, review_pack, who
from .pack_roots import MARKER, InstalledPack, installed_packs, listed_pack, read_marker
from .sources import archive_label, check_no_marker, pack_top, relabel

if TYPE_CHECKING:
    import pluggy

    from ..settings import Settings

__all__ = ["InstallError", "InstallResult", "install_pack", "name_problem", "pack_identity", "uninstall_pack"]

NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")
#: Names of files the install machinery keeps beside the packs: no pack may take them.
#: (Names starting with ``.ongrid-`` are already out: a pack name starts with a letter or digit.)
RESERVED_NAMES = frozenset({"skills.lock"})
#: Files that may name a pack (and version) at its top, in order of preference.
IDENTITY_FILES = ("pack.json", ".claude-plugin/plugin.json", "openclaw.plugin.json", "clawdbot.plugin.json")
#: The longest version a pack may declare (listings and messages show it whole).
MAX_VERSION = 100
_LOCK = ".ongrid-install.lock"
logger = logging.getLogger(__name__)


class InstallError(OngridError):
    """A pack was refused; nothing was changed. ``reports`` holds the validation findings."""

    exit_code = 1

    def __init__(self, message: str, reports: tuple[FileReport, ...] = ()) -> None:
        self.reports = reports
        super().__init__(message)


@attrs.frozen
class InstallResult:
    """What ``install`` did."""

    pack: InstalledPack
    replaced: str | None
    """The version that was replaced, or None for a fresh install."""
    unpacked: UnpackReport
    reports: tuple[FileReport, ...]
    """The validation of the new pack (warnings included)."""
    seconds: float
    review: Review | None = None
    """What was consented to (signature, capabilities, growth)."""

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {
            **self.pack.to_dict(),
            "trust": self.review.to_dict() if self.review is not None else None,
            "replaced": self.replaced,
            "seconds": round(self.seconds, 4),
            "problems": [p.to_dict() for r in self.reports for p in r.problems],
        }


def install_pack(
    source: str,
    pm: pluggy.PluginManager,
    settings: Settings,
    *,
    name: str | None = None,
    strict: bool = False,
    limits: Limits | None = None,
    require_digest: str | None = None,
    replace: bool = False,
    consent: Callable[[Review], bool] | None = None,
    by: str = "",
) -> InstallResult:
    """Install the pack at ``source`` (folder or archive) into ``settings.user_skills_dir``.

    Over an installed pack of the same name, ``replace`` must be given: a pack whose
    ``pack.json`` names another one never replaces it by surprise. The refusal shows
    both origins and digests.

    ``consent`` is given the :class:`~.consent.Review` (to show it); when the review needs a
    yes (a first install, or growth since the installed version's consent), False refuses
    the pack (:class:`~.consent.ConsentError`). None: the caller consents by calling. ``by`` is who
    consents (default: the login name).
    """
    started = time.perf_counter()
    user_dir = settings.user_skills_dir
    source = _check_source(source, user_dir)
    os.makedirs(user_dir, 0o755, exist_ok=True)
    with _locked(user_dir), _staging(user_dir) as staging:
        archive_sha = _check_digest(source, require_digest)
        root = os.path.join(staging, "unpacked")
        unpacked = unpack(source, root, limits)
        if archive_sha is not None and _digest(source) != archive_sha:
            raise InstallError(f"{source} changed while it was unpacked; nothing was installed")
        top, default_name = pack_top(root, source, pm)
        check_links(source, root, top)
        check_no_marker(source, root, top)
        pack_name, version, description = pack_identity(top, name or None, default_name)
        shown = source if os.path.isdir(source) else archive_label(source)
        reports = _validated(top, os.path.realpath(root), shown, pm, settings, strict)
        target = os.path.join(user_dir, pack_name)
        old = read_marker(target) if os.path.lexists(target) else None
        if os.path.lexists(target) and old is None:
            message = f"{target} exists and was not installed by `ongrid-skills install`; "
            raise InstallError(message + "move it away or install under another --name")
        meta = _marker(pack_name, version, description, source, unpacked, reports, archive_sha)
        if old is not None and not replace:
            raise InstallError(_would_replace(old, meta))
        files = pack_files(top)  # the files as validated (the marker is never listed)
        review = _reviewed(top, pack_name, version, files, pm, settings, old is not None, consent)
        record = consent_record(review, settings, by or who())
        _write_marker(top, meta)
        entry = attrs.evolve(
            new_entry(pack_name, version, top, source, meta["sha256"], files), consent=record
        )
        _commit(top, target, user_dir, entry, replace=old is not None)
    pack = InstalledPack(pack_name, version, target, meta)
    replaced = old.version if old is not None else None
    return InstallResult(pack, replaced, unpacked, reports, time.perf_counter() - started, review)


def _reviewed(
    top: str,
    name: str,
    version: str,
    files: dict[str, dict[str, str]],
    pm: pluggy.PluginManager,
    settings: Settings,
    replacing: bool,
    consent: Callable[[Review], bool] | None,
) -> Review:
    """The trust step: policy, capabilities, growth since the installed version's consent, the yes."""
    previous = None
    if replacing:
        with contextlib.suppress(ConfigError):
            entry = (read_lock(settings.user_skills_dir) or {}).get(name)
            previous = entry.consent if entry is not None else None
    review = review_pack(top, name, version, files, pm, settings, previous)
    if consent is not None and not consent(review) and review.needs_consent:
        raise ConsentError(f"pack {name} was not installed: consent was not given; nothing was changed")
    return review


def _write_marker(top: str, meta: dict[str, Any]) -> None:
    """Write the marker as a new file: never through a link, never over a validated file."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    with open(os.open(os.path.join(top, MARKER), flags, 0o644), "w", encoding="utf-8") as f:
        json.dump(meta, f, indent=2, ensure_ascii=False)


def _commit(top: str, target: str, user_dir: str, entry: LockEntry, *, replace: bool) -> None:
    """Rename the pack into place and lock it; if the lock cannot be written, undo the rename.

    A pack in place without its lock entry would load with no tamper check at all, and
    the user would be told the install failed: it is either installed and locked, or not.
    """
    _move_into_place(top, target, replace=replace)
    try:
        write_entry(user_dir, entry.name, entry)
    except BaseException as exc:
        if replace:
            _move_into_place(top, target, replace=True)  # swapped back: the old pack is in place again
        else:
            os.rename(target, top)
        if not isinstance(exc, Exception):
            raise
        raise InstallError(_lock_failure(user_dir, exc)) from exc


def _lock_failure(user_dir: str, exc: Exception) -> str:
    where = lock_path(user_dir)
    if os.path.isdir(where):
        try:
            read_lock(user_dir)
        except ConfigError as why:  # names what the folder is and how to remove it
            return f"{why}; nothing was installed"
    reason = getattr(exc, "strerror", None) or exc
    return f"cannot write {where} ({reason}); nothing was installed: fix or remove {where}, then retry"


def _check_source(given: str, user_dir: str) -> str:
    """The absolute path of a usable source, refused at once when it cannot be one.

    Never opens it: a FIFO would block the open, ``/dev/zero`` would be read forever.
    A folder that holds the user skills dir (``install .`` in ``~``) would be copied
    into itself until the names grow too long.
    """
    if not given.strip():
        raise ConfigError("the pack path is empty: give a pack folder, a .tar.gz or a .zip")
    source = os.path.abspath(given)
    try:
        source.encode("utf-8")
    except UnicodeEncodeError:
        message = f"{echo(source)} is not valid UTF-8, and skills.lock records the source as UTF-8: "
        raise ConfigError(message + "rename it") from None
    try:
        st = os.stat(source)
    except OSError as exc:
        message = f"{source} does not exist" if isinstance(exc, FileNotFoundError) else f"{source}: {exc}"
        raise ConfigError(message + " (give a pack folder, a .tar.gz or a .zip)") from None
    if stat.S_ISDIR(st.st_mode):
        real, into = os.path.realpath(source), os.path.realpath(user_dir)
        if into == real or into.startswith(real.rstrip("/") + "/"):
            message = f"{source} contains the user skills dir {user_dir}, where packs are installed: "
            message += "installing it would copy the folder into itself; give the pack's own folder"
            raise ConfigError(message)
    elif not stat.S_ISREG(st.st_mode):
        message = f"{source} is not a folder, a tar archive or a .zip (it is {file_kind(st.st_mode)})"
        raise ConfigError(message)
    return source


def uninstall_pack(name: str, settings: Settings) -> InstalledPack:
    """Remove the installed pack ``name``; raise :class:`InstallError` naming the installed ones if none."""
    user_dir = settings.user_skills_dir
    target = os.path.join(user_dir, name)
    if not NAME_RE.fullmatch(name) or not os.path.isdir(user_dir):
        raise InstallError(_not_installed(name, user_dir))
    with _locked(user_dir):
        pack = _installed(target, user_dir)
        if pack is None:
            raise InstallError(_not_installed(name, user_dir))
        trash = tempfile.mkdtemp(prefix=".ongrid-trash-", dir=user_dir)
        os.rename(target, os.path.join(trash, name))  # gone for every reader at once
        _remove(trash)
        write_entry(user_dir, name, None)
    return pack


def _installed(target: str, user_dir: str) -> InstalledPack | None:
    """The pack install put at ``target``, broken ones too (a marker unreadable, or missing while
    the lock lists the folder); None for any other path."""
    if not os.path.isdir(target) or os.path.islink(target):
        return None
    return listed_pack(target, locked_versions(user_dir))


def _check_digest(source: str, required: str | None) -> str | None:
    """The archive's sha256 (None for a folder); refuse it when ``required`` names another."""
    if os.path.isdir(source):
        if required is not None:
            message = f"--require-digest checks an archive, and {source} is a folder; "
            raise InstallError(message + "pack it (tar czf) or install without --require-digest")
        return None
    actual = _digest(source)
    if required is not None:
        wanted = required.strip().lower().removeprefix("sha256:")
        if not re.fullmatch(r"[0-9a-f]{64}", wanted):
            raise ConfigError(f"--require-digest wants a sha256 in hex (64 digits), got {required!r}")
        if actual != wanted:
            raise InstallError(
                f"{source} has sha256 {actual}, not the required {wanted}; nothing was installed"
            )
    return actual


def _would_replace(old: InstalledPack, new: dict[str, Any]) -> str:
    def origin(meta: dict[str, Any], version: str) -> str:  # versions and sources: the packs' text
        digest = f"sha256 {printable(str(meta['sha256']))}" if meta.get("sha256") else "a folder, no digest"
        return printable(f"{version or 'unversioned'} from {meta.get('source') or '?'} ({digest})")

    return (
        f"pack {old.name} is already installed: {origin(old.meta, old.version)}; this one is "
        f"{origin(new, str(new.get('version') or ''))}. Nothing was changed: give --replace to "
        "replace it, or --name to install it beside"
    )


def _not_installed(name: str, user_dir: str) -> str:
    known = ", ".join(p.name for p in installed_packs(user_dir, locked_versions(user_dir))) or "none"
    return f"no pack named {name!r} was installed by `ongrid-skills install` (installed: {known})"


def pack_identity(top: str, name: str | None, default_name: str) -> tuple[str, str, str]:
    """``(name, version, description)`` of the pack in ``top``, from ``pack.json`` and the like."""
    found: dict[str, Any] = {}
    found_in = ""
    for relative in IDENTITY_FILES:
        path = os.path.join(top, relative)
        if os.path.isfile(path) and not os.path.islink(path):
            found, found_in = _read_identity(path), relative
            break
    chosen = name or str(found.get("name") or default_name)
    problem = name_problem(chosen)
    if problem:
        raise InstallError(f"pack name {echo(chosen)} {problem}; give another one with --name")
    version = str(found.get("version") or "")
    if len(version) > MAX_VERSION:
        message = f"{found_in}: version is {len(version)} characters long; {MAX_VERSION} at most"
        raise InstallError(message + " (it is shown in every listing): shorten it")
    return chosen, version, str(found.get("description") or "")


def name_problem(name: str) -> str:
    """Why ``name`` cannot name an installed pack (its folder in the user skills dir), or ""."""
    if not NAME_RE.fullmatch(name):
        return "is not usable as a folder name (letters, digits, '.', '_' and '-'; 100 at most)"
    if name.lower() in RESERVED_NAMES:
        return f"is reserved: {name} beside the packs is the file that locks them"
    return ""


def _read_identity(path: str) -> dict[str, Any]:
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError) as exc:
        raise InstallError(f"{path}: not a readable JSON object: {exc}") from None
    if not isinstance(data, dict):
        raise InstallError(f"{path}: must be a JSON object with name and version")
    return data


def _validated(
    top: str, staged: str, shown: str, pm: pluggy.PluginManager, settings: Settings, strict: bool
) -> tuple[FileReport, ...]:
    reports = tuple(relabel(r, staged, shown) for r in validate_paths([top], pm, settings))
    failed = [r for r in reports if not r.ok or (strict and r.problems)]
    if failed:
        lines = [printable(str(p)) for r in failed for p in r.problems if p.level == "error" or strict]
        message = f"{shown} is not a valid pack; nothing was installed:\n  " + "\n  ".join(lines)
        raise InstallError(message, reports)
    return reports


def _marker(
    name: str,
    version: str,
    description: str,
    source: str,
    unpacked: UnpackReport,
    reports: tuple[FileReport, ...],
    archive_sha: str | None,
) -> dict[str, Any]:
    return {
        "name": name,
        "version": version,
        "description": description,
        "source": source,
        "sha256": archive_sha,
        "installed_at": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "skills": sorted(r.skill for r in reports if r.skill),
        "files": unpacked.files,
        "bytes": unpacked.bytes,
    }


def _digest(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1024 * 1024):
            h.update(chunk)
    return h.hexdigest()


@contextlib.contextmanager
def _locked(user_dir: str) -> Iterator[None]:
    fd = os.open(os.path.join(user_dir, _LOCK), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


@contextlib.contextmanager
def _staging(user_dir: str) -> Iterator[str]:
    # Installs hold the lock: any staging or trash folder still here was left by one
    # that was killed (SIGKILL, a power cut), and nobody else is using it.
    for name in os.listdir(user_dir):
        if name.startswith((".ongrid-staging-", ".ongrid-trash-")):
            _remove(os.path.join(user_dir, name))
    staging = tempfile.mkdtemp(prefix=".ongrid-staging-", dir=user_dir)
    try:
        yield staging
    finally:
        _remove(staging)


def _remove(path: str) -> None:
    """Remove a staging or trash folder; one that cannot be removed is named, never fatal."""
    if not remove_tree(path):
        logger.warning("install: cannot remove %s; delete it by hand (rm -rf)", path)


def _move_into_place(new: str, target: str, *, replace: bool) -> None:
    """Rename ``new`` to ``target``; with ``replace``, swap them atomically (the old one lands at ``new``)."""
    if not replace:
        os.rename(new, target)
        return
    if _exchange(new, target):
        return
    # No renameat2 (old kernel or libc, some filesystems): two renames, the old
    # pack parked beside the new one until the second succeeds.
    parked = new + ".old"
    os.rename(target, parked)
    try:
        os.rename(new, target)
    except OSError:
        os.rename(parked, target)
        raise
    os.rename(parked, new)


_AT_FDCWD = -100
_RENAME_EXCHANGE = 2


def _exchange(a: str, b: str) -> bool:
    """Atomically swap two paths with ``renameat2``; False when the system cannot."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return False
    renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    renameat2.restype = ctypes.c_int
    if renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
        return False
    raise OSError(err, os.strerror(err), b)
