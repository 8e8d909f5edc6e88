"""The values stage's helpers: what every later stage shares that is not a value object.

- :mod:`.echo`: how a user value enters a message or a log line (cut, escaped);
- :mod:`.hints`: the ``pip install`` lines error messages print;
- :mod:`.identity`: people's names as the approval rules compare them;
- :mod:`.userfiles`: reading a file a user named without blocking on a FIFO or a device;
- :mod:`.stdio`: stdout kept for our own output while third-party code is imported;
- :mod:`.forksafe`: locks a forked child makes anew;
- :mod:`._sqlite`: opening the state databases the same careful way;
- :mod:`.hooks`: the typed facade over pluggy, one method per hook of ``hookspecs``;
- :mod:`.version`: the installed version, read from the package metadata on first use.

This ``__init__`` imports nothing. What it may import: the standard library, pluggy,
``attrs`` and the top-level values (``errors``, ``settings``, ``hookspecs``, ``models``);
never a later stage.
"""
