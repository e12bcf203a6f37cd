"""The offline path: recordings through the same core objects as the live nodes.

* :mod:`.pipeline`: a bag or a video (from :mod:`surprise_memory.sources`) through
  perception, surprise and memory, batched, into the same store the memory node writes.
* :mod:`.run_record`: what a run leaves beside the store (``scores.csv``, ``run.json``).
* :mod:`.synthetic`: deterministic synthetic recordings with scripted events and ground
  truth, for the demo and the tests.
* :mod:`.demo`: the README's main job (``make demo``).
* :mod:`.report`: the HTML report and the surprise curve of a processed store.
"""
