"""Stage 3, memory: gated events in, stored episodes out, and retrieval over them.

* :mod:`.episodes`: the bounded frame history by stamp and the assembly of the 8 frames
  around each event.
* :mod:`.pose`: robot poses by stamp (the pose type, interpolation, the lookup rule).
* :mod:`.places`: place keyframes, the latest view of every place cell and viewing
  direction passed (which frames to keep, the place keys).
* :mod:`.store`: the episode store, a package of its own (interface, ``open_store``, the
  SQLite backend with its durable frame files, schema and in-memory search, the
  PostgreSQL + pgvector backend, migration between them).
* :mod:`.retrieval`: what a query is (:class:`~.retrieval.RetrievalQuery`): text or image
  embedding, time window, place, robot, top-k.
* :mod:`.navigation`: an episode as a navigation goal (its pose in the navigation frame,
  a stand-off, the refusals).

Next: :mod:`surprise_memory.agents` serves the memory to agents and other nodes.
"""
