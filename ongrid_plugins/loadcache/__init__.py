"""The persistent load cache: a warm restart skips parsing and checking unchanged manifests.

What it does: :class:`LoadCache` keeps, in one file under ``Settings.cache_dir``
(``load-cache.bin``), what the built-in ``skill.json`` loader made of each manifest
(the skill, or the parse error), with the stat signature of every file that
decided it (the manifest; the entry, resolved again when it is not a plain
file name), and the content hashes of the catalog's digest memo. The whole
file is keyed by a fingerprint of everything else that shapes a build (see
:func:`fingerprint`): the project version, the stamps of the package's own code,
the loaders registered, the settings the loaders read, the home folder. Any
difference is a cold load; nothing it holds is trusted without a match.

What it may import: the core values (``models``, ``errors``, ``settings``),
``roots``, ``schemacheck`` (its environment fingerprint). The loader and the
catalog use it; it imports neither.
"""

from __future__ import annotations

from .store import CACHE_NAME, LoadCache, fingerprint, open_cache

__all__ = ["CACHE_NAME", "LoadCache", "fingerprint", "open_cache"]
