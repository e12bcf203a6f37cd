"""Adapters to other projects' frameworks, each imported only when asked for.

* :mod:`.daaam`: :class:`~.daaam.EpisodicMemory`, the episodic memory as a tool of DAAAM's
  scene-understanding agent (a subclass of DAAAM's ``Tool``), where DAAAM is installed.

Nothing here imports the other project at import time: the package installs and imports
without it.
"""
