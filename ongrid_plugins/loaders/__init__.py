"""The format loaders: a manifest file in, a :class:`~ongrid_plugins.models.Skill` out.

Each is a built-in plugin implementing ``ongrid_manifest_names`` and
``ongrid_load_manifest``, called by the walk in ``ongrid_plugins.catalog.loader``:

- :mod:`.skill_json` reads ``skill.json`` subprocess manifests, field by field as the
  specification says (:mod:`.skill_json_parse` the strict JSON reading, :mod:`._fields`
  the shared field rules, :mod:`._sandbox` the ``sandbox`` declaration);
- :mod:`.skill_md` reads ``SKILL.md`` front matter in the Agent Skills, Claude Code and
  openclaw dialects (:mod:`.skill_md_meta` the metadata, :mod:`.skill_md_tools` the
  ``builtin:`` and ``exec:`` tools);
- :mod:`.containers` finds packs of skills inside a folder.

A broken manifest is logged and skipped, never raised to the host.

This ``__init__`` imports nothing. What it may import: the standard library, ``attrs``,
``yaml``, the core values, ``schema/`` and ``discovery/``; never the catalog, the gate,
the host or a surface.

- :mod:`.frontmatter` splits a Markdown file's YAML front matter and parses it safely
  (SKILL.md files and persona files).
"""
