"""The host stage: :class:`SkillHost` and the call pipeline it forwards to.

- :mod:`.facade`: :class:`SkillHost`, the facade a host application embeds;
- :mod:`.pipeline`: the call as named steps (with :mod:`.callinputs`, the checks of what a
  caller passes besides the arguments, and :mod:`.begin_aside`, an ``acall``'s first steps
  in a worker thread);
- :mod:`.ticketlog`: the ticket decisions made through a host, as audit rows;
- :mod:`.dispatch` and :mod:`.export`: a model's tool calls run, and the tool list in each
  model API's shape, and :mod:`.export_prompt`, the ``<available_skills>`` block;
- :mod:`.hostlike`: what the pipeline, ticketlog, dispatch and export read of a host, as
  protocols, so that none of them imports :mod:`.facade`.

This ``__init__`` re-exports :class:`SkillHost` only. What the stage may import: every
earlier stage (values, schemas, discovery, catalog, gate, audit, executors); never a
surface (``cli``, ``commands``, ``server``, ``remote``).
"""

from __future__ import annotations

from .facade import SkillHost

__all__ = ["SkillHost"]
