"""Skill packs: pip-installed distributions and packs installed by ``ongrid-skills install``.

Two kinds of pack become allow-list roots, after every configured root:

* **pip packs** — an entry point of group ``ongrid_skills`` names a package (or a
  module) whose folder holds skill manifests (skill.json and SKILL.md alike)::

      [project.entry-points.ongrid_skills]
      disk = "ongrid_pack_disk"

  The folder is found with the import system's finders, without running the
  package's code, nor its parents' for a dotted name (``pkg.skills``). Skills
  found there show ``"<distribution> <version>"`` as their provenance. A pack
  whose module is missing, whose folder does not exist, or whose lookup raises
  is logged with its distribution and skipped (``--strict`` raises
  :class:`~ongrid_plugins.errors.PackLoadError`).
* **installed packs** — folders of the user skills dir holding the marker
  :data:`MARKER` written by ``ongrid-skills install``; their provenance is
  ``"<name> <version> (installed)"``.

Entry points are read once per plugin manager (so once per host), by
:class:`PackRoots`, the built-in plugin ``packs``; installed packs are listed
again at every load, so a reload sees what was installed meanwhile.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

import attrs

from ..core.userfiles import read_regular_text
from ..errors import PackError, PackLoadError
from ..hookspecs import hookimpl
from ..models import SkillRoot

if TYPE_CHECKING:
    from importlib.machinery import ModuleSpec
    from importlib.metadata import EntryPoint

    import pluggy

    from ..settings import Settings

__all__ = [
    "MARKER",
    "PACK_GROUP",
    "InstalledPack",
    "PackError",
    "PackInfo",
    "PackRoots",
    "installed_packs",
    "listed_pack",
    "marker_meta",
    "pack_folder",
]

logger = logging.getLogger("ongrid_plugins.packs")

PACK_GROUP = "ongrid_skills"
#: The file ``ongrid-skills install`` writes into every pack it installs.
MARKER = ".ongrid-pack.json"


@attrs.frozen
class PackInfo:
    """What became of one pip pack (an ``ongrid_skills`` entry point)."""

    name: str
    """The entry point's name."""
    value: str
    """What the entry point names: a package or module."""
    distribution: str = ""
    version: str = ""
    path: str = ""
    """The pack's folder (empty when it could not be found)."""
    status: str = "active"
    """``active``, ``blocked``, ``failed``, ``unconsented`` (not loaded until ``ongrid-skills trust``)
    or ``refused`` (by the trust policy)."""
    error: str = ""
    signer: str = ""
    """The trusted signer that signed it (empty: unsigned, or not checked)."""

    @property
    def provenance(self) -> str:
        """What listings show for skills of this pack."""
        return f"{self.distribution} {self.version}".strip() or self.name

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {"kind": "pip", "provenance": self.provenance, **attrs.asdict(self)}


@attrs.frozen
class InstalledPack:
    """A pack that ``ongrid-skills install`` put into the user skills dir."""

    name: str
    version: str
    path: str
    meta: dict[str, Any] = attrs.field(factory=dict, eq=False)
    """Everything the marker file records (source, digest, skills, sizes)."""
    status: str = "active"
    """``active``, or ``broken``: installed, but its marker cannot be read (see :attr:`error`)."""
    error: str = ""

    @property
    def provenance(self) -> str:
        """What listings show for skills of this pack."""
        return f"{self.name} {self.version} (installed)".replace("  ", " ")

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {
            "kind": "installed",
            "name": self.name,
            "version": self.version,
            "path": self.path,
            "provenance": self.provenance,
            "status": self.status,
            **({"error": self.error} if self.error else {}),
            **{k: v for k, v in self.meta.items() if k not in ("name", "version", "status", "error")},
        }


def pack_folder(value: str) -> str:
    """The folder an ``ongrid_skills`` entry point names; raise :class:`PackError` saying why not.

    A package (regular or namespace, or a plain data folder inside a package)
    gives its own folder; a module inside a package gives the package's folder.
    A top-level module is refused: its folder would be ``site-packages`` itself.
    """
    module, _, attr = value.partition(":")
    module = module.strip()
    if attr.strip():
        message = f"{value!r} names an attribute; an ongrid_skills entry point names a package ({module!r})"
        raise PackError(message)
    try:
        spec = _find_spec(module)
    except ModuleNotFoundError as exc:
        raise PackError(f"module {module} is not installed ({exc})") from exc
    except KeyboardInterrupt:
        raise  # the operator's Ctrl-C: stop as asked
    except BaseException as exc:  # a parent package raised (or called sys.exit()) while importing
        raise PackError(f"looking up {module} raised {type(exc).__name__}: {exc}") from exc
    if spec is None:
        raise PackError(f"module {module} is not installed")
    locations = list(spec.submodule_search_locations or ())
    if len(locations) > 1:
        raise PackError(f"package {module} spans several folders ({', '.join(locations)}); name one")
    if locations:
        folder = locations[0]
    elif spec.origin and spec.has_location:
        folder = os.path.dirname(spec.origin)
        if "." not in module:
            message = f"{module} is a top-level module: its folder {folder} holds other packages too"
            raise PackError(message + "; name a package instead")
    else:
        raise PackError(f"module {module} has no folder on disk")
    if not os.path.isdir(folder):
        raise PackError(f"folder {folder} of {module} does not exist (is the distribution zipped?)")
    return folder


def _find_spec(module: str) -> ModuleSpec | None:
    """The spec of ``module``, found without importing its parent packages.

    ``importlib.util.find_spec("pkg.skills")`` imports ``pkg`` (its ``__init__`` runs).
    Here each component is looked up in the folders of the one before by the finders of
    ``sys.path_hooks``, as the import system would, but nothing is executed. A parent
    already imported is used as it is. (A package that extends its ``__path__`` in code,
    the ``pkgutil`` namespace style, is seen with its own folders only.)
    """
    import importlib.util

    parts = module.split(".")
    spec = importlib.util.find_spec(parts[0])  # a top-level lookup runs no package code
    for depth in range(2, len(parts) + 1):
        if spec is None:
            return None
        name = ".".join(parts[:depth])
        if name in sys.modules:
            spec = importlib.util.find_spec(name)
        elif spec.submodule_search_locations is None:
            raise ModuleNotFoundError(f"{spec.name} is a module, not a package", name=name)
        else:
            spec = _child_spec(name, list(spec.submodule_search_locations))
    return spec


def _child_spec(name: str, locations: list[str]) -> ModuleSpec | None:
    """``name`` in the parent's folders ``locations``: a module or package, else a namespace of its
    folders (what ``PathFinder`` does, without the parent module it would read)."""
    from importlib.machinery import ModuleSpec

    portions: list[str] = []
    for location in locations:
        finder = _path_finder(location)
        found: ModuleSpec | None = finder.find_spec(name) if finder is not None else None
        if found is None:
            continue
        if found.loader is not None:
            return found
        portions += list(found.submodule_search_locations or ())
    if not portions:
        return None
    spec = ModuleSpec(name, None, is_package=True)
    spec.submodule_search_locations = portions
    return spec


def _path_finder(location: str) -> Any:
    """The finder for one folder: the import system's cached one, else the first path hook's."""
    finder = sys.path_importer_cache.get(location)
    if finder is not None:
        return finder
    for hook in sys.path_hooks:
        try:
            return hook(location)
        except ImportError:
            continue
    return None


def dist_name_version(ep: EntryPoint) -> tuple[str, str]:
    """The name and version of the distribution declaring ``ep`` (empty strings if unknown).

    Reads only the header lines of METADATA: ``Distribution.name`` and
    ``.version`` each parse the whole file as an e-mail message, ~0.1 ms apiece,
    which adds up with dozens of packs.
    """
    dist = getattr(ep, "dist", None)
    if dist is None:
        return "", ""
    fields = {"name": "", "version": ""}
    for line in (dist.read_text("METADATA") or dist.read_text("PKG-INFO") or "").splitlines():
        if not line.strip():
            break  # the headers end at the first blank line
        key, _, value = line.partition(":")
        if key.lower() in fields and not fields[key.lower()]:
            fields[key.lower()] = value.strip()
    if not fields["name"]:
        return str(dist.name), str(dist.version)
    return fields["name"], fields["version"]


def resolve_pack(ep: EntryPoint, blocked: bool = False) -> PackInfo:
    """Look one entry point up: a :class:`PackInfo` with its folder, or the reason it has none."""
    dist, version = dist_name_version(ep)
    info = PackInfo(ep.name, ep.value, dist, version)
    if blocked:
        return attrs.evolve(info, status="blocked")
    try:
        folder = pack_folder(ep.value)
    except PackError as exc:
        return attrs.evolve(info, status="failed", error=str(exc))
    return attrs.evolve(info, path=folder)


def installed_packs(user_dir: str, locked: Mapping[str, str] | None = None) -> list[InstalledPack]:
    """The packs ``ongrid-skills install`` put into ``user_dir``, sorted by name.

    With ``locked`` (the versions skills.lock records, by pack name), the broken
    ones too: a folder whose marker cannot be read, or is missing while the lock
    lists the folder. They are ``broken``, with the reason and what to do.
    """
    try:
        with os.scandir(user_dir) as it:
            folders = sorted(e.path for e in it if e.name[0] != "." and e.is_dir(follow_symlinks=False))
    except OSError:
        return []
    packs = []
    for folder in folders:
        pack = read_marker(folder) if locked is None else listed_pack(folder, locked)
        if pack is not None:
            packs.append(pack)
    return packs


def listed_pack(folder: str, locked: Mapping[str, str]) -> InstalledPack | None:
    """The pack install put in ``folder``, ``broken`` when its marker cannot be read (or is
    missing while ``locked``, the lock's versions by name, lists it); None for a folder of the
    user's own."""
    name = os.path.basename(folder)
    meta, why = marker_meta(folder)
    if meta is not None:
        return InstalledPack(str(meta.get("name") or name), str(meta.get("version") or ""), folder, meta)
    if not why and name not in locked:
        return None  # no marker, no lock entry: a folder of the user's own
    why = why or f"its {MARKER} is missing"
    why += "; reinstall it (`ongrid-skills install --replace SOURCE`) or remove it "
    why += f"(`ongrid-skills uninstall {name}`)"
    return InstalledPack(name, locked.get(name, ""), folder, status="broken", error=why)


def marker_meta(folder: str) -> tuple[dict[str, Any] | None, str]:
    """What the marker in ``folder`` records; or None and why it cannot be read ("" when there is none)."""
    try:
        meta = json.loads(read_regular_text(os.path.join(folder, MARKER)))
    except FileNotFoundError:
        return None, ""
    except ValueError as exc:
        return None, f"its {MARKER} is not valid JSON ({exc})"
    except OSError as exc:
        return None, f"its {MARKER} cannot be read ({exc.strerror or exc})"
    if not isinstance(meta, dict):
        return None, f"its {MARKER} is not a JSON object"
    return meta, ""


def read_marker(folder: str) -> InstalledPack | None:
    """The installed pack in ``folder``, or None when it holds no readable marker."""
    meta, why = marker_meta(folder)
    if meta is None:
        if why:
            logger.warning("skill packs: %s: %s", folder, why)
        return None
    name = str(meta.get("name") or os.path.basename(folder))
    return InstalledPack(name, str(meta.get("version") or ""), folder, meta)


class PackRoots:
    """The built-in plugin ``packs``: one allow-list root per pip pack and installed pack.

    Built once per plugin manager from the ``ongrid_skills`` entry points it is
    given; failures are logged and skipped, or raised in strict mode. What became
    of each pack is in :attr:`packs`; the plugin manager records them as
    ``kind="pack"`` plugin infos, which ``ongrid-skills plugins`` shows.
    """

    def __init__(
        self, pm: pluggy.PluginManager, settings: Settings, entry_points: Iterable[EntryPoint]
    ) -> None:
        self.packs: list[PackInfo] = []
        self.grants: dict[str, tuple[str, Mapping[str, Any]]] = {}
        """Canonical folder -> (pack, consented capabilities as the lock spells them) of every
        consented pip pack."""
        if settings.include_defaults:
            for ep in entry_points:
                self.packs.append(self._resolve(pm, settings, ep))
        self.vetted = False
        """Whether :func:`~ongrid_plugins.packs.pipconsent.vet` checked the packs' consents (once,
        before the first load: the plugin manager that builds this object comes before the catalog)."""

    def __repr__(self) -> str:
        return f"<PackRoots packs={len(self.packs)}>"

    @staticmethod
    def _resolve(pm: pluggy.PluginManager, settings: Settings, ep: EntryPoint) -> PackInfo:
        info = resolve_pack(ep, blocked=pm.is_blocked(ep.name))
        where = f" (distribution {info.distribution} {info.version})" if info.distribution else ""
        if info.status == "blocked":
            logger.info("skill packs: %s is disabled by ONGRID_DISABLE_PLUGINS", ep.name)
        elif info.status == "failed":
            logger.warning("skill packs: cannot load pack %s%s: %s", ep.name, where, info.error)
            if settings.strict:
                raise PackLoadError(ep.name, info.error + where)
        return info

    @hookimpl(trylast=True)
    def ongrid_skill_roots(self, settings: Settings) -> list[SkillRoot]:
        """Installed packs (user skills dir), then pip packs; nothing without ``include_defaults``."""
        if not settings.include_defaults:
            return []
        roots = [
            SkillRoot(pack.path, source="installed", provenance=pack.provenance)
            for pack in installed_packs(settings.user_skills_dir)
        ]
        roots += [
            SkillRoot(info.path, source="pack", provenance=info.provenance)
            for info in self.packs
            if info.status == "active"
        ]
        return roots
