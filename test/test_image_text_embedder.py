"""ImageTextEmbedder on the tiny PE preset (real PE-Core-T trunk, random weights)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import open_clip
import pytest
import torch
from PIL import Image
from safetensors.torch import save_file

from surprise_memory.errors import InputError, ModelLoadError
from surprise_memory.perception.encoders import (
    PE_CORE_L14,
    PE_MEAN,
    PE_STD,
    TINY_EMBEDDER_MODEL,
    ImageTextEmbedder,
)
from surprise_memory.perception.encoders.image_text import PE_INTERPOLATION, PE_RESIZE_MODE
from surprise_memory.perception.frames import Frame

RNG = np.random.default_rng(5)


@pytest.fixture(scope="module")
def embedder() -> ImageTextEmbedder:
    return ImageTextEmbedder(TINY_EMBEDDER_MODEL, "random", device="cpu", batch_size=2)


def images(n: int, h: int = 60, w: int = 80) -> list[np.ndarray]:
    return [RNG.integers(0, 256, (h, w, 3), dtype=np.uint8) for _ in range(n)]


def test_identity(embedder: ImageTextEmbedder) -> None:
    assert embedder.dim == 64 and embedder.image_size == (384, 384)
    assert not embedder.pretrained and "untrained" in embedder.model_name
    assert embedder.dtype == torch.float32


def test_pe_preprocessing_constants_are_the_pretrained_ones() -> None:
    cfg = open_clip.get_pretrained_cfg(PE_CORE_L14, "meta")
    assert tuple(cfg["mean"]) == PE_MEAN and tuple(cfg["std"]) == PE_STD
    assert cfg["interpolation"] == PE_INTERPOLATION and cfg["resize_mode"] == PE_RESIZE_MODE
    # the trap this guards against: without a pretrained tag open_clip uses CLIP's
    fallback = open_clip.create_model_and_transforms(TINY_EMBEDDER_MODEL, pretrained=None)[2]
    assert "0.48145466" in repr(fallback)


@pytest.mark.parametrize("size", [(60, 80), (500, 300), (384, 384)])
def test_preprocessing_matches_open_clip_pe_transform(
    embedder: ImageTextEmbedder, size: tuple[int, int]
) -> None:
    img = images(1, *size)[0]
    ref_tf = open_clip.image_transform(
        384,
        is_train=False,
        mean=PE_MEAN,
        std=PE_STD,
        resize_mode=PE_RESIZE_MODE,
        interpolation=PE_INTERPOLATION,
    )
    ref = ref_tf(Image.fromarray(img))
    ours = embedder.preprocess([img])[0]
    assert ours.shape == ref.shape == (3, 384, 384)
    # PIL and torch antialiased bilinear agree to within one uint8 level (2/255 after /0.5)
    assert (ours - ref).abs().max() <= 2.0 / 255 + 1e-6
    assert (ours - ref).abs().mean() < 0.002


def test_embed_images(embedder: ImageTextEmbedder) -> None:
    imgs = [*images(2), *images(1, 30, 200)]  # batch_size 2: chunks of 2 and 1
    z = embedder.embed_images(imgs)
    assert z.shape == (3, 64) and z.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(z, axis=1), 1.0, atol=1e-5)
    np.testing.assert_allclose(embedder.embed_images([imgs[1]])[0], z[1], atol=1e-5)
    as_frames = [Frame(rgb=imgs[2], stamp_ns=0)]
    np.testing.assert_allclose(embedder.embed_images(as_frames)[0], z[2], atol=1e-6)


def test_embed_text(embedder: ImageTextEmbedder) -> None:
    z = embedder.embed_text(["the golf cart stopped", "a person crossing", "x" * 500])
    assert z.shape == (3, 64) and z.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(z, axis=1), 1.0, atol=1e-5)
    np.testing.assert_allclose(embedder.embed_text(["the golf cart stopped"])[0], z[0], atol=1e-6)
    assert not np.allclose(z[0], z[1])


def test_warm_up_leaves_the_embeddings_as_they_were() -> None:
    imgs, texts = images(3), ["a door opens"]
    cold = ImageTextEmbedder(TINY_EMBEDDER_MODEL, "random", device="cpu", batch_size=2)
    expected = cold.embed_images(imgs), cold.embed_text(texts)
    warm = ImageTextEmbedder(TINY_EMBEDDER_MODEL, "random", device="cpu", batch_size=2)
    warm.warm_up(8)  # more than a batch: one batch of blanks
    np.testing.assert_allclose(warm.embed_images(imgs), expected[0], atol=1e-6)
    np.testing.assert_allclose(warm.embed_text(texts), expected[1], atol=1e-6)


@pytest.mark.parametrize(
    ("call", "arg", "match"),
    [
        ("embed_images", [], r"no images"),
        ("embed_images", [np.zeros((4, 4), np.uint8)], r"image 0: expected an \(H, W, 3\) uint8"),
        ("embed_images", [np.zeros((4, 4, 3), np.float32)], r"float32"),
        ("embed_images", [np.zeros((0, 4, 3), np.uint8)], r"image 0"),
        ("embed_text", [], r"no texts"),
        ("embed_text", "one string", r"list of strings"),
        ("embed_text", ["ok", 3], r"text 1: expected a string, got int"),
    ],
)
def test_bad_inputs(embedder: ImageTextEmbedder, call: str, arg: object, match: str) -> None:
    with pytest.raises(InputError, match=match):
        getattr(embedder, call)(arg)


def test_local_checkpoint_file_and_folder(embedder: ImageTextEmbedder, tmp_path: Path) -> None:
    state = {k: v.contiguous() for k, v in embedder.model.state_dict().items()}
    save_file(state, str(tmp_path / "open_clip_model.safetensors"))
    imgs = images(1)
    expected = embedder.embed_images(imgs)
    for weights in (str(tmp_path), str(tmp_path / "open_clip_model.safetensors")):
        loaded = ImageTextEmbedder(TINY_EMBEDDER_MODEL, weights, device="cpu")
        assert loaded.pretrained and "untrained" not in loaded.model_name
        np.testing.assert_allclose(loaded.embed_images(imgs), expected, atol=1e-5)


def test_offline_hub_fails_at_once_with_a_clear_message(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ModelLoadError) as info:
        ImageTextEmbedder(PE_CORE_L14, "meta", device="cpu")
    msg = str(info.value)
    assert "'timm/PE-Core-L-14-336'" in msg and "offline" in msg
    assert "--local-dir" in msg and "embedder_weights:=" in msg


@pytest.mark.parametrize(
    ("model", "weights", "match"),
    [
        ("No-Such-Model", "random", r"unknown open_clip model 'No-Such-Model'"),
        ("ViT-B-32", "random", r"not a PE-Core model"),
        (TINY_EMBEDDER_MODEL, "laion2b", r"not a pretrained tag"),
        (TINY_EMBEDDER_MODEL, "/nonexistent/pe.safetensors", r"no such file or folder"),
    ],
)
def test_bad_model_or_weights(model: str, weights: str, match: str) -> None:
    with pytest.raises(ModelLoadError, match=match):
        ImageTextEmbedder(model, weights, device="cpu")


def test_empty_folder(tmp_path: Path) -> None:
    with pytest.raises(ModelLoadError, match="holds no checkpoint"):
        ImageTextEmbedder(TINY_EMBEDDER_MODEL, str(tmp_path), device="cpu")
