"""The offline path: recordings through the same core objects as the live nodes.

* :mod:`.pipeline`: a bag or a video (from :mod:`surprise_memory.sources`) through
  perception, surprise and memory, batched, into the same store the memory node writes.
* :mod:`.run_record`: what a run leaves beside the store (``scores.csv``, ``run.json``):
  names, formats, the run summary, writers and readers.
* :mod:`.synthetic`: deterministic synthetic recordings with scripted events and ground
  truth, for the demo and the tests: :mod:`.synthetic.scene` (events, odometry, rendering,
  ground truth, in memory) and :mod:`.synthetic.recording` (the bag, video and
  ground-truth writers); the package re-exports the public names of both.
* Many recordings (``process`` with folders, globs, lists; ``--ray``):
  :mod:`.inputs` (inputs expanded to recordings, their names and robot ids),
  :mod:`.batch` (the job: its worker, run folders, ``summary.json``, resume),
  :mod:`.jobs` (the worker shape, the local runner, the progress view, shared with the
  GEBD shards) and :mod:`.ray_runner` (the same tasks on a Ray cluster; Ray is imported
  there only).
* :mod:`.demo`: the README's main job (``make demo``).
* :mod:`.report`: the HTML report and the surprise curve of a processed store.
"""
