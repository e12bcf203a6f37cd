"""``python -m surprise_memory``: the ``surprise-memory`` command line."""

from surprise_memory.cli import main

raise SystemExit(main())
