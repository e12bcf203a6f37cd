"""Stage 1, perception: camera frames in, one V-JEPA-2 embedding per window out.

* :mod:`.frames`: the one frame type (:class:`~.frames.Frame`) and its conversion from
  ``sensor_msgs/Image`` / ``CompressedImage`` messages (live rclpy or read from bags).
* :mod:`.window`: the encoder's ring of fixed-size frames and the window sampler (input
  rate, stride, warm-up): one frame in, at most one M-frame window out.
* :mod:`.catchup`: the live encoder's bounded queue of pending windows and its catch-up
  batches (every pending window in one forward, each frame copied once).
* :mod:`.encoders`: the paper's two learned models, V-JEPA-2 (windows -> z_t) and PE-Core
  (episode frames and queries -> retrieval embeddings). Imported on demand: they pull in
  torch.

Next stage: :mod:`surprise_memory.surprise` scores each embedding.
"""
