"""The disk skill pack: ``disk_cleaner/`` and ``cache_report/`` in this folder are skill.json skills."""
