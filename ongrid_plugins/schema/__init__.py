"""Schemas: a tool's argument schema is checked at load, checked against at call time,
rewritten for strict-mode exports and walked to hide secrets.

The stage between the core values and discovery, in the order a schema meets it:

- :mod:`.check` is the load-time metaschema check (:func:`~.check.check_schema`): the
  keyword rules of :mod:`.metaschema` over the bounded walks of :mod:`.subschemas`,
  and jsonschema for anything that walk cannot vouch for; :mod:`.defaults` checks every
  ``default`` against the subschema that carries it.
- :mod:`.safe` makes untrusted schemas harmless: RE2 for every regex, ``$ref`` refused
  unless it stays in the document, and the one validator every caller uses.
- :mod:`.arguments` fills in defaults and checks a call's arguments.
- :mod:`.strict` rewrites a schema for a model API's strict mode.
- :mod:`.redact` blanks out argument values a schema marks (or names) as secrets.

One rule, one place: where subschemas sit in a schema is the table in
:mod:`.subschemas`. This ``__init__`` imports nothing, so loading one module does not
load the others (``import jsonschema`` alone costs 70-90 ms).

What it may import: the standard library, ``re2``, ``attrs``, ``jsonschema`` and
``referencing`` (lazily), and from ``ongrid_plugins`` only the core values
(``models``, ``forksafe``).
Nothing here imports discovery, the catalog, the host or a surface.

- :mod:`.export_gemini` rewrites a schema into the subset Gemini's function
  declarations read.
"""
