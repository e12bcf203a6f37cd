"""VideoEncoder on the tiny V-JEPA-2 preset (real VJEPA2Model code, random weights)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
import torch
from transformers import VJEPA2Model, VJEPA2VideoProcessor

from surprise_memory.config import EncoderConfig
from surprise_memory.errors import ConfigError, InputError, ModelLoadError
from surprise_memory.perception.encoders import (
    TINY_VIDEO_WEIGHTS,
    ForwardOptions,
    VideoEncoder,
    batch_buckets,
)
from surprise_memory.perception.frames import Frame

RNG = np.random.default_rng(3)


@pytest.fixture(scope="module")
def encoder() -> VideoEncoder:
    return VideoEncoder(TINY_VIDEO_WEIGHTS, device="cpu", batch_size=2)


def window(frames: int = 16, h: int = 48, w: int = 64) -> np.ndarray:
    return RNG.integers(0, 256, (frames, h, w, 3), dtype=np.uint8)


def test_identity_and_defaults(encoder: VideoEncoder) -> None:
    assert encoder.dim == 64 and encoder.crop_size == 32 and encoder.tubelet_size == 2
    assert not encoder.pretrained and "untrained" in encoder.model_name
    assert encoder.dtype == torch.float32 and encoder.device.type == "cpu"  # auto on CPU
    assert encoder.model.config._attn_implementation == "sdpa"


@pytest.mark.parametrize("size", [(48, 64), (64, 48), (32, 32), (20, 90)])
def test_preprocessing_equals_the_hf_processor(
    encoder: VideoEncoder, size: tuple[int, int]
) -> None:
    w = window(4, *size)
    ref = VJEPA2VideoProcessor(crop_size=32)(videos=[w], return_tensors="pt")
    ours = encoder.preprocess(w)
    assert ours.shape == ref["pixel_values_videos"].shape == (1, 4, 3, 32, 32)
    torch.testing.assert_close(ours, ref["pixel_values_videos"], atol=1e-6, rtol=0)
    prepared = np.stack([encoder.prepare_frame(f) for f in w])
    assert prepared.shape == (4, 32, 32, 3) and prepared.dtype == np.uint8
    torch.testing.assert_close(encoder.preprocess(prepared, prepared=True), ours, atol=1e-6, rtol=0)


def test_embedding_is_the_mean_pooled_bare_forward(encoder: VideoEncoder) -> None:
    w = window()
    z = encoder.encode_window(w)
    assert z.shape == (64,) and z.dtype == np.float32 and np.isfinite(z).all()
    pixels = VJEPA2VideoProcessor(crop_size=32)(videos=[w], return_tensors="pt")
    with torch.inference_mode():
        out = encoder.model(pixel_values_videos=pixels["pixel_values_videos"], skip_predictor=True)
    np.testing.assert_allclose(z, out.last_hidden_state.mean(dim=1)[0].numpy(), atol=1e-5)


def test_batches_equal_single_windows(encoder: VideoEncoder) -> None:
    windows = [window(16, 40, 50) for _ in range(5)]  # batch_size 2: chunks of 2, 2, 1
    batched = encoder.encode_windows(windows)
    assert batched.shape == (5, 64)
    single = np.stack([encoder.encode_window(w) for w in windows])
    np.testing.assert_allclose(batched, single, atol=1e-5)
    np.testing.assert_allclose(encoder.encode_windows(np.stack(windows)), batched, atol=1e-6)


def test_sampler_windows_encode_like_raw_windows(encoder: VideoEncoder) -> None:
    sampler = encoder.make_sampler(EncoderConfig(clip_frames=8, clip_warmup="wait"))
    frames = window(8, 60, 80)
    got = None
    for i, rgb in enumerate(frames):
        got = sampler.push(Frame(rgb=rgb, stamp_ns=i + 1))
    assert got is not None and got.frames.shape == (8, 32, 32, 3)
    np.testing.assert_allclose(
        encoder.encode_window(got.frames, prepared=True), encoder.encode_window(frames), atol=1e-6
    )
    with pytest.raises(ConfigError, match="clip_frames=7: must be even"):
        EncoderConfig(clip_frames=7)


def test_seeded_random_init_is_reproducible_and_leaves_global_rng() -> None:
    state = torch.random.get_rng_state()
    a = VideoEncoder(TINY_VIDEO_WEIGHTS, device="cpu", seed=1)
    assert torch.equal(torch.random.get_rng_state(), state)
    b = VideoEncoder(TINY_VIDEO_WEIGHTS, device="cpu", seed=1)
    c = VideoEncoder(TINY_VIDEO_WEIGHTS, device="cpu", seed=2)
    w = window()
    np.testing.assert_array_equal(a.encode_window(w), b.encode_window(w))
    assert not np.allclose(a.encode_window(w), c.encode_window(w))
    assert "seed 1" in a.model_name


def test_local_folder_round_trip(encoder: VideoEncoder, tmp_path: Path) -> None:
    encoder.model.save_pretrained(tmp_path / "vjepa2")
    loaded = VideoEncoder(str(tmp_path / "vjepa2"), device="cpu")
    assert loaded.pretrained and loaded.model_name == str((tmp_path / "vjepa2").resolve())
    assert isinstance(loaded.model, VJEPA2Model)
    w = window()
    np.testing.assert_allclose(loaded.encode_window(w), encoder.encode_window(w), atol=1e-6)


def test_offline_hub_fails_at_once_with_a_clear_message(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert os.environ["HF_HUB_OFFLINE"] == "1"
    with pytest.raises(ModelLoadError) as info:
        VideoEncoder("facebook/vjepa2-vitl-fpc64-256", device="cpu")
    msg = str(info.value)
    assert "'facebook/vjepa2-vitl-fpc64-256'" in msg and "offline" in msg
    assert "--local-dir" in msg and "encoder_weights:=" in msg


@pytest.mark.parametrize(
    ("weights", "match"),
    [
        ("/nonexistent/vjepa2", r"no such file or folder"),
        ("random:huge", r"unknown V-JEPA-2 preset 'huge'"),
        ("", r"empty weights"),
    ],
)
def test_bad_weights(weights: str, match: str) -> None:
    with pytest.raises(ModelLoadError, match=match):
        VideoEncoder(weights, device="cpu")


def test_folder_without_a_model(tmp_path: Path) -> None:
    with pytest.raises(ModelLoadError, match="save_pretrained folder"):
        VideoEncoder(str(tmp_path), device="cpu")


@pytest.mark.parametrize(
    ("windows", "kwargs", "match"),
    [
        (np.zeros((16, 32, 32, 3), np.float32), {}, r"uint8"),
        (np.zeros((15, 32, 32, 3), np.uint8), {}, r"15 frames: need a positive multiple of 2"),
        (np.zeros((0, 32, 32, 3), np.uint8), {}, r"0 frames"),
        (np.zeros((16, 40, 32, 3), np.uint8), {"prepared": True}, r"must be 32x32"),
        (np.zeros((32, 32, 3), np.uint8), {}, r"got shape \(32, 32, 3\)"),
        ([], {}, r"no windows"),
        ([np.zeros((4, 8, 8, 3), np.uint8), np.zeros((6, 8, 8, 3), np.uint8)], {}, r"6 frames"),
        (np.zeros((4, 0, 8, 3), np.uint8), {}, r"empty frames"),
    ],
)
def test_bad_windows_raise_input_error(
    encoder: VideoEncoder, windows: object, kwargs: dict[str, bool], match: str
) -> None:
    with pytest.raises(InputError, match=match):
        encoder.encode_windows(windows, **kwargs)  # type: ignore[arg-type]


def test_bad_device_and_dtype() -> None:
    with pytest.raises(ConfigError, match="dtype='half'"):
        VideoEncoder(TINY_VIDEO_WEIGHTS, device="cpu", dtype="half")
    with pytest.raises(ConfigError, match="device='tpu'"):
        VideoEncoder(TINY_VIDEO_WEIGHTS, device="tpu")


def test_encode_stream_equals_one_window_per_frame(encoder: VideoEncoder) -> None:
    rng = np.random.default_rng(3)
    frames = [Frame(rng.integers(0, 256, (40, 50, 3), dtype=np.uint8), 1000 + i) for i in range(7)]
    config = EncoderConfig(clip_frames=4, clip_warmup="pad")
    z, stamps = encoder.encode_stream(iter(frames), config)  # batch 2: three full batches + 1
    sampler = encoder.make_sampler(config)
    expected = []
    for f in frames:
        window = sampler.push(f)
        assert window is not None  # warm-up 'pad': a window from the first frame on
        expected.append(encoder.encode_window(window.frames, prepared=True))
    assert list(stamps) == [f.stamp_ns for f in frames]
    np.testing.assert_allclose(z, np.stack(expected), rtol=1e-5, atol=1e-6)


# --------------------------------------------------------------------------- speed options


def test_sdpa_backends_agree_on_the_cpu(encoder: VideoEncoder) -> None:
    """flash and math attention give the auto back-end's embeddings (float32, CPU)."""
    windows = [window(16, 32, 32) for _ in range(3)]
    auto = encoder.encode_windows(windows, prepared=True)
    for backend in ("flash", "math"):
        cfg = EncoderConfig(
            encoder_weights=TINY_VIDEO_WEIGHTS, encoder_device="cpu", encoder_sdpa_backend=backend
        )
        other = VideoEncoder.from_config(cfg).encode_windows(windows, prepared=True)
        np.testing.assert_allclose(other, auto, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    ("settings", "match"),
    [
        ({"encoder_sdpa_backend": "efficient"}, "encoder_sdpa_backend=efficient does not run"),
        ({"encoder_cuda_graphs": True}, "encoder_cuda_graphs=true needs a CUDA device"),
        ({"encoder_fp8": True}, "encoder_fp8=true needs a CUDA device with FP8"),
    ],
)
def test_speed_options_this_machine_cannot_honour_fail_at_start(
    settings: dict[str, object], match: str
) -> None:
    cfg = EncoderConfig(encoder_weights=TINY_VIDEO_WEIGHTS, encoder_device="cpu", **settings)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=match):
        VideoEncoder.from_config(cfg)


def test_cuda_graphs_and_compile_are_one_or_the_other() -> None:
    with pytest.raises(ConfigError, match="choose one"):
        EncoderConfig(encoder_cuda_graphs=True, encoder_compile=True)


def test_fixed_shape_modes_pad_batches_to_power_of_two_sizes() -> None:
    assert batch_buckets(8) == [1, 2, 4, 8] and batch_buckets(6) == [1, 2, 4, 6]
    assert batch_buckets(1) == [1]
    # torch.compile is lazy: nothing is compiled until the first call
    enc = VideoEncoder(
        TINY_VIDEO_WEIGHTS,
        device="cpu",
        batch_size=6,
        options=ForwardOptions(compile=True, compile_mode="reduce-overhead"),
    )
    assert [enc.fast_forward.run_size(b) for b in range(1, 7)] == [1, 2, 4, 4, 6, 6]
    eager = VideoEncoder(TINY_VIDEO_WEIGHTS, device="cpu", batch_size=6)
    assert eager.fast_forward.batch_sizes == [] and eager.fast_forward.run_size(3) == 3


def test_compiled_forward_equals_eager_on_the_cpu(encoder: VideoEncoder) -> None:
    """torch.compile (inductor, default mode) on this CPU: about a minute, once."""
    compiled = VideoEncoder(TINY_VIDEO_WEIGHTS, device="cpu", batch_size=2, compile=True)
    windows = [window(16, 32, 32) for _ in range(2)]
    np.testing.assert_allclose(
        compiled.encode_windows(windows, prepared=True),
        encoder.encode_windows(windows, prepared=True),
        rtol=1e-5,
        atol=1e-5,
    )
