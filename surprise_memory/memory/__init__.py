"""Stage 3, memory: gated events in, stored episodes out, and retrieval over them.

* :mod:`.episodes`: the bounded frame history by stamp and the assembly of the 8 frames
  around each event.
* :mod:`.pose`: robot poses by stamp (the pose type, interpolation, the lookup rule).
* :mod:`.store`: the episode store, a package of its own (interface, SQLite backend,
  durable frame files, schema and migrations, the in-memory search).
* :mod:`.retrieval`: what a query is (:class:`~.retrieval.RetrievalQuery`): text or image
  embedding, time window, place, top-k.

Next: :mod:`surprise_memory.agents` serves the memory to agents and other nodes.
"""
