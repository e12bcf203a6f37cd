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
    "SYNTHETIC_EMBEDDER_MODEL",
    "SYNTHETIC_MODEL_NAME",
    "SYNTHETIC_TRUNK",
    "SYNTHETIC_WEIGHTS",
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

SYNTHETIC_MODEL_NAME = "synthetic-trained-tiny"
"""What the project's own small models are called everywhere (run.json, reports, the
browser, diagnostics): the tiny V-JEPA-2 and a small PE-Core, *trained on synthetic scenes*
(:mod:`surprise_memory.offline.synthetic.training`), not the paper's models."""

SYNTHETIC_WEIGHTS = Path(__file__).resolve().parent / SYNTHETIC_MODEL_NAME
"""The folder of those weights, shipped with the package: ``video/`` (a ``save_pretrained``
folder of the tiny ``VJEPA2Model``), ``embedder/`` (an open_clip checkpoint of
:data:`SYNTHETIC_EMBEDDER_MODEL`) and ``MODEL_CARD.json`` (name, settings, checksums)."""

SYNTHETIC_EMBEDDER_MODEL = "PE-Core-synthetic-tiny"
"""open_clip name of the small PE-Core the synthetic weights are for: a PE-Core vision trunk
(timm's PE ``Eva`` at 64 px, 8 px patches, 4 layers of width 96, attention pooling:
:data:`SYNTHETIC_TRUNK`, 0.6 M parameters) and a 2-layer, 32-wide text tower, 64-d
embeddings; small enough that both towers train on a 2-core CPU in minutes and the
checkpoint stays under 5 MB."""

SYNTHETIC_TRUNK = "vit_pe_core_synthetic_patch8_64"
"""timm name of that trunk: ``vit_pe_core_tiny_patch16_384`` with smaller arguments,
registered by :func:`register_open_clip_configs`."""

_SYNTHETIC_TRUNK_ARGS: dict[str, Any] = {
    "img_size": 64,
    "patch_size": 8,
    "embed_dim": 96,
    "depth": 4,
    "num_heads": 3,
    "ref_feat_shape": (8, 8),
    "attn_pool_num_heads": 4,
}

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
    """Add this package's open_clip model configs (the tiny PE presets) to open_clip.

    Uses open_clip's own registry (``add_model_config``) and timm's (``register_model``,
    for :data:`SYNTHETIC_TRUNK`); idempotent.
    """
    import open_clip
    from timm.models import is_model, register_model

    if not is_model(SYNTHETIC_TRUNK):

        def vit_pe_core_synthetic_patch8_64(pretrained: bool = False, **kwargs: Any) -> Any:
            import timm

            return timm.create_model(
                "vit_pe_core_tiny_patch16_384",
                pretrained=False,
                **{**_SYNTHETIC_TRUNK_ARGS, **kwargs},
            )

        register_model(vit_pe_core_synthetic_patch8_64)
    if TINY_EMBEDDER_MODEL not in open_clip.list_models() or (
        SYNTHETIC_EMBEDDER_MODEL not in open_clip.list_models()
    ):
        open_clip.add_model_config(_CONFIG_DIR)
