"""The two learned models of the paper, as ROS-free core classes.

* :class:`VideoEncoder`: V-JEPA-2 (transformers ``VJEPA2Model``, encoder only) over windows
  of M frames, mean-pooled to one embedding per window (the surprise signal's input).
* :class:`ImageTextEmbedder`: PE-Core (open_clip) image and text embeddings, L2-normalised,
  for episode frames and retrieval queries.

Both load weights from a hub id, a local folder, ``synthetic-trained-tiny`` (the project's
own tiny models trained on synthetic scenes, shipped in the package; not the paper's), or
``random`` (seeded, untrained; tiny presets of the real architectures for tests), and
expose ``model_name``, ``pretrained`` and ``dim`` for the store and the messages.

* :class:`LiveWindowEncoder`: the live encoder's forward over catch-up batches (distinct
  frames uploaded once, overlapping windows gathered on the device).
* :class:`FastForward` / :class:`ForwardOptions`: the speed options of the forward
  (torch.compile, CUDA graphs, SDPA back-end, FP8).
"""

from surprise_memory.perception.encoders.acceleration import (
    FastForward,
    ForwardOptions,
    batch_buckets,
)
from surprise_memory.perception.encoders.image_text import PE_MEAN, PE_STD, ImageTextEmbedder
from surprise_memory.perception.encoders.live import LiveWindowEncoder
from surprise_memory.perception.encoders.loading import (
    WeightsSource,
    check_hub_reachable,
    hub_offline,
    parse_weights,
    resolve_device,
    resolve_dtype,
    seeded,
    synthetic_part,
)
from surprise_memory.perception.encoders.presets import (
    PE_CORE_L14,
    RANDOM,
    SYNTHETIC_EMBEDDER_MODEL,
    SYNTHETIC_MODEL_NAME,
    SYNTHETIC_WEIGHTS,
    TINY_EMBEDDER_MODEL,
    TINY_VIDEO_WEIGHTS,
    VJEPA2_PRESETS,
    VJEPA2_VITL_FPC64,
    register_open_clip_configs,
)
from surprise_memory.perception.encoders.video import (
    IMAGENET_MEAN,
    IMAGENET_STD,
    VideoEncoder,
    encode_stream,
    resize_shortest_edge_and_crop,
)

__all__ = [
    "IMAGENET_MEAN",
    "IMAGENET_STD",
    "PE_CORE_L14",
    "PE_MEAN",
    "PE_STD",
    "RANDOM",
    "SYNTHETIC_EMBEDDER_MODEL",
    "SYNTHETIC_MODEL_NAME",
    "SYNTHETIC_WEIGHTS",
    "TINY_EMBEDDER_MODEL",
    "TINY_VIDEO_WEIGHTS",
    "VJEPA2_PRESETS",
    "VJEPA2_VITL_FPC64",
    "FastForward",
    "ForwardOptions",
    "ImageTextEmbedder",
    "LiveWindowEncoder",
    "VideoEncoder",
    "WeightsSource",
    "batch_buckets",
    "check_hub_reachable",
    "encode_stream",
    "hub_offline",
    "parse_weights",
    "register_open_clip_configs",
    "resize_shortest_edge_and_crop",
    "resolve_device",
    "resolve_dtype",
    "seeded",
    "synthetic_part",
]
