"""The project's own small models (``synthetic-trained-tiny``) on one held-out scene.

The scene (``model_scene(SEED)``: the demo's and the benchmark's layout, a seed never
trained on) goes through the offline pipeline with the shipped models, the gate at the
model card's settings, into a store: about 1.5 s here. ``test_synthetic_models.py`` checks
on it that every scripted event is found and that each held-out paraphrase ranks its
event's episode first on every path; ``test_mcp_server.py`` serves the same store to MCP
clients. ROS-free.
"""

from __future__ import annotations

import json
from pathlib import Path

from surprise_memory.offline.pipeline import OfflinePipeline, PipelineSettings
from surprise_memory.offline.synthetic import model_scene
from surprise_memory.offline.synthetic.evaluation import evaluate_scene
from surprise_memory.offline.synthetic.training import HELD_OUT_SEED_BASE
from surprise_memory.perception.encoders import (
    SYNTHETIC_EMBEDDER_MODEL,
    SYNTHETIC_MODEL_NAME,
    SYNTHETIC_WEIGHTS,
)

SEED = HELD_OUT_SEED_BASE + 7
KINDS = ("person_crosses", "light_change", "object_appears", "camera_pan")
SETTINGS = {
    # the surprise episodes only: the tests over this store rank and count episodes
    "place_keyframes": False,
    "encoder_weights": SYNTHETIC_MODEL_NAME,
    "embedder_model": SYNTHETIC_EMBEDDER_MODEL,
    "embedder_weights": SYNTHETIC_MODEL_NAME,
    "encoder_device": "cpu",
    "embedder_device": "cpu",
    # the trained video model's clip length and the gate's calibrated gamma, as the demo
    **json.loads((SYNTHETIC_WEIGHTS / "MODEL_CARD.json").read_text(encoding="utf-8"))[
        "recommended"
    ],
}


def build_trained_store(path: Path) -> Path:
    """The held-out scene processed into a store at ``path``, every scripted event found.

    Returns:
        ``path``.

    """
    pipeline = OfflinePipeline(PipelineSettings.from_mapping(SETTINGS))
    result = evaluate_scene(pipeline, model_scene(SEED), path)
    assert result.found_in_span == len(KINDS), result  # every scripted event, within 1 s
    assert result.ranks, "text queries ran on the trained embedder"
    return path
