"""A small camera stream with one scene change, and node parameters with the tiny presets."""

from __future__ import annotations

from typing import Any

import numpy as np

from surprise_memory.perception.encoders import SYNTHETIC_EMBEDDER_MODEL, TINY_VIDEO_WEIGHTS

T0 = 1_700_000_000 * 10**9  # a realistic epoch stamp (ns)
FPS = 20
N_FRAMES = 160
CHANGE_AT = 100  # frame index of the scene change
SIZE = 48

SCORER = {"window": 8, "gamma": 2.0, "warmup": 16, "nms_seconds": 0.5}
ENCODER = {
    "encoder_weights": TINY_VIDEO_WEIGHTS,
    "encoder_device": "cpu",
    "clip_frames": 8,
}
EPISODE = {
    "episode_before_seconds": 0.5,
    "episode_after_seconds": 0.5,
    "frame_history_seconds": 4.0,
    "episode_timeout_seconds": 2.0,
}
# the small PE-Core preset (64 px, random weights): the same architecture as PE-Core-T at
# 384 px (test_image_text_embedder.py) at an eighth of its cost per frame, which every
# episode of every node test pays
EMBEDDER = {
    "embedder_model": SYNTHETIC_EMBEDDER_MODEL,
    "embedder_weights": "random",
    "embedder_device": "cpu",
}
OFFLINE = {**ENCODER, **EMBEDDER, "window": 16, "warmup": 8, "nms_seconds": 0.5}
"""Offline pipeline settings with the tiny presets (random weights, CPU) and a short scorer
window, so that a synthetic recording of a few seconds gets events."""


def node_params(store_path: str, camera: str | None = None, **overrides: Any) -> dict[str, Any]:
    """A params-file dict for the three nodes with the tiny presets, and for pipeline_node.

    The ``pipeline_node`` section holds the union of the three (the same values), so the
    one-process pipeline and the split run the same settings; run one shape at a time, as
    both would write to ``store_path``.

    With ``camera`` (the resolved camera topic), the image subscriptions are made reliable
    with a deep queue through the nodes' QoS overrides, so that a loaded test machine
    delays frames instead of dropping them and the results stay comparable.
    """

    def qos() -> dict[str, Any]:  # a new dict per node: YAML aliases break rcl's parser
        if not camera:
            return {}
        policy = {"reliability": "reliable", "history": "keep_last", "depth": 1000}
        return {"qos_overrides": {camera: {"subscription": policy}}}

    return {
        "/**/encoder_node": {"ros__parameters": {**ENCODER, **qos(), **overrides}},
        "/**/scorer_node": {"ros__parameters": {**SCORER, **overrides}},
        "/**/memory_node": {
            "ros__parameters": {
                **EPISODE,
                **EMBEDDER,
                **qos(),
                "store_path": store_path,
                **overrides,
            }
        },
        "/**/pipeline_node": {
            "ros__parameters": {
                **ENCODER,
                **SCORER,
                **EPISODE,
                **EMBEDDER,
                **qos(),
                "store_path": store_path,
                **overrides,
            }
        },
    }


TEST_PARAMS = node_params("/tmp/surprise_memory_launch_test_store")


def stamps() -> list[int]:
    """Frame stamps in ns."""
    return [T0 + i * 10**9 // FPS for i in range(N_FRAMES)]


def scene_change_rgb() -> list[np.ndarray]:
    """Frames of a slowly moving textured scene that changes to another scene at CHANGE_AT."""
    rng = np.random.default_rng(5)
    scene_a = rng.integers(0, 256, size=(SIZE * 2, SIZE * 2, 3), dtype=np.uint8)
    scene_b = np.zeros_like(scene_a)
    scene_b[..., 0] = np.linspace(0, 255, SIZE * 2, dtype=np.uint8)[None, :]
    scene_b[SIZE // 2 : SIZE, SIZE // 2 : SIZE] = (250, 250, 0)
    frames = []
    for i in range(N_FRAMES):
        scene = scene_a if i < CHANGE_AT else scene_b
        off = (i // 2) % SIZE  # the camera pans slowly
        frames.append(np.ascontiguousarray(scene[off : off + SIZE, off : off + SIZE]))
    return frames


def scene_change_frames() -> list[tuple[int, Any]]:
    """(stamp, sensor_msgs/Image rgb8) pairs of the stream (for rclpy publishers)."""
    from surprise_memory.nodes.messages import image_msg_from_rgb

    return [
        (t, image_msg_from_rgb(rgb, t, "camera"))
        for t, rgb in zip(stamps(), scene_change_rgb(), strict=True)
    ]


def camera_scene(seed: int, change_at: int) -> list[np.ndarray]:
    """One camera of several: a slowly panning texture of its own (``seed``) that changes
    to a flat coloured scene at frame ``change_at``, over :data:`N_FRAMES` frames."""
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 256, size=(SIZE * 2, SIZE * 2, 3), dtype=np.uint8)
    b = np.zeros_like(a)
    b[..., seed % 3] = np.linspace(0, 255, SIZE * 2, dtype=np.uint8)[None, :]
    b[SIZE // 2 : SIZE, SIZE // 2 : SIZE] = (250, 250, 0)
    out = []
    for i in range(N_FRAMES):
        scene = a if i < change_at else b
        off = (i // 2) % SIZE
        out.append(np.ascontiguousarray(scene[off : off + SIZE, off : off + SIZE]))
    return out
