"""Named architectures: the real ones of the paper and tiny ones of the same code for tests.

Tiny presets build the *real* model classes (transformers ``VJEPA2Model``, open_clip's PE
towers) at small sizes; with random weights they run in milliseconds on a CPU, so tests
exercise the real code paths without any download.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = [
    "PE_CORE_L14",
    "RANDOM",
    "TINY_EMBEDDER_MODEL",
    "TINY_VIDEO_WEIGHTS",
    "VJEPA2_PRESETS",
    "VJEPA2_VITL_FPC64",
    "register_open_clip_configs",
    "vjepa2_preset",
]

RANDOM = "random"
"""Weights value for a seeded random init (untrained): ``random`` or ``random:<preset>``."""

VJEPA2_VITL_FPC64 = "facebook/vjepa2-vitl-fpc64-256"
"""The paper's video encoder on the hub (ViT-L, 64-frame clips, 256 crop, hidden 1024)."""

TINY_VIDEO_WEIGHTS = "random:tiny"
"""``encoder_weights`` value of the tiny V-JEPA-2 test preset (random, untrained)."""

PE_CORE_L14 = "PE-Core-L-14-336"
"""The paper's frame/text embedder (open_clip name; pretrained tag ``meta``)."""

TINY_EMBEDDER_MODEL = "PE-Core-tiny-random"
"""open_clip name of the tiny PE test preset: the real PE-Core-T vision trunk (timm
``vit_pe_core_tiny_patch16_384``, 5.5 M parameters, 384 px) with a 2-layer, 64-wide text
tower and 64-d embeddings; registered from ``open_clip_configs/`` by
:func:`register_open_clip_configs`. ``PE-Core-T-16-384`` itself is 70 M parameters (its
text tower), about 1 s to build on a 2-core CPU: too slow for every test."""

VJEPA2_PRESETS: dict[str, dict[str, Any]] = {
    # transformers' VJEPA2Config defaults are the ViT-L fpc64-256 model.
    "vitl-fpc64-256": {},
    # Same architecture, tiny: 2x2 patches of 16 px at crop 32, 2 layers of width 64.
    # The predictor is never run (skip_predictor) but is built: head size 32 >= 16.
    "tiny": {
        "crop_size": 32,
        "frames_per_clip": 16,
        "hidden_size": 64,
        "num_attention_heads": 2,
        "num_hidden_layers": 2,
        "mlp_ratio": 2.0,
        "pred_hidden_size": 64,
        "pred_num_attention_heads": 2,
        "pred_num_hidden_layers": 1,
        "num_pooler_layers": 1,
    },
}
"""V-JEPA-2 architectures for ``random:<name>`` weights (overrides of ``VJEPA2Config``)."""


def vjepa2_preset(name: str) -> dict[str, Any]:
    """Return the ``VJEPA2Config`` overrides of a preset (a copy).

    Raises:
        KeyError: Unknown preset name.

    """
    return dict(VJEPA2_PRESETS[name])


_CONFIG_DIR = Path(__file__).resolve().parent / "open_clip_configs"


def register_open_clip_configs() -> None:
    """Add this package's open_clip model configs (the tiny PE preset) to open_clip.

    Uses open_clip's own registry (``add_model_config``); idempotent.
    """
    import open_clip

    if TINY_EMBEDDER_MODEL not in open_clip.list_models():
        open_clip.add_model_config(_CONFIG_DIR)
