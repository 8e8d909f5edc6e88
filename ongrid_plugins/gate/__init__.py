"""Stage ``gate``: may this persona make this call, and under what condition?

:mod:`.decision` is the permission decision and the built-in plugin ``gate``:
the class x persona-mode table, every ``ongrid_check_permission`` vote, the
strictest wins. :mod:`.personas` resolves persona names and persona files.
A dangerous call needs a two-person approval ticket: :mod:`.tickets` holds the
ticket values and the rules a ticket is held to, :mod:`.approvals` the SQLite
ticket store (with the ``ongrid_verify_approval`` votes), and
:mod:`.approvals_client` the same store on a server (REST).

May import: the value modules (``errors``, ``models``, ``hookspecs``,
``identity``, ``settings``, ``frontmatter``, ``_sqlite``) and ``plugins`` (to
call the approval hook one implementation at a time). Never the host, the
executors, the audit log or a surface.

``ongrid_plugins.gate`` is the documented import path of the decision and the
module the ``gate`` plugin is registered as: its names stay importable from here.

:mod:`.persona_lookup` resolves the persona of every call for a host (a name, a path or
a :class:`Persona`) and defines ``PersonaLike``.
"""

from __future__ import annotations

from .decision import BUILTIN_PERSONAS, GATE_PLUGIN, class_rule, decide, needs, ongrid_check_permission

__all__ = ["BUILTIN_PERSONAS", "GATE_PLUGIN", "class_rule", "decide", "needs", "ongrid_check_permission"]
