"""Sub-commands of ``ongrid-skills``; each module has ``register(subparsers)``."""
