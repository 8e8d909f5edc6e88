"""Discovery: where skills may come from, and the one registry every load feeds.

The first stage after the schemas, in the order a load meets it:

- :mod:`.roots` is the allow-list: the roots a load may walk (the ``ongrid_skill_roots``
  hook of the built-in ``roots`` plugin), and the one rule "the entry stays under its
  root" (:func:`~.roots.escapes`, :func:`~.roots.check_entry`), applied at load and at
  call time, with :func:`~.roots.open_beneath` opening a path without following a
  symlink out of its root.
- :mod:`.registry` holds the snapshots: every loader feeds one
  :class:`~.registry.RegistryBuilder`, a finished load becomes a frozen
  :class:`~.registry.Snapshot`, swapped in atomically.

The format loaders (``loaders/``), the pip packs (``packs/``) and the plugin manager sit
at the same stage; the walk that drives them is ``ongrid_plugins.catalog.loader`` (the catalog's).

This ``__init__`` imports nothing. What it may import: the standard library, ``attrs``
and the core values (``models``, ``errors``, ``hookspecs``, ``settings``); never the
loaders, the catalog, the gate, the host or a surface.

- :mod:`.builtin_tools` is the built-in plugin that contributes the Python tools of
  the built-in skills (``ongrid_native_tools``).
"""
