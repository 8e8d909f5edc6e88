"""The persistent load cache: a warm restart skips reading folders, parsing and checking unchanged manifests.

What it does: :class:`LoadCache` keeps, in one file under ``Settings.cache_dir``
(``load-cache.bin``), what the walker found in each folder and what the built-in
``skill.json`` loader made of each manifest (the skill as plain values, the parse
error or the build error), with the ``lstat`` signature of every file and folder
that decided it, and the content hashes of the catalog's digest memo. The whole
file is keyed by a fingerprint of everything else that shapes a build (see
:func:`fingerprint`): the project version, the stamps of the package's own code,
the loaders registered, the settings the loaders read, the home folder. Any
difference is a cold load; nothing it holds is trusted without a match.

What it may import: the core values (``models``, ``errors``, ``settings``),
``roots``, ``schema.verdicts`` (its environment fingerprint). The loader and the
catalog use it; it imports neither (the loader hands it the skill.json loader's
record constructor).
"""

from __future__ import annotations

from .key import fingerprint
from .store import CACHE_NAME, LoadCache, open_cache, wait_for_writes

__all__ = ["CACHE_NAME", "LoadCache", "fingerprint", "open_cache", "wait_for_writes"]
