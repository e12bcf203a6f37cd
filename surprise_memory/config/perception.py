"""Settings of the perception stage: the camera input, the V-JEPA-2 encoder, the embedder."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from surprise_memory.config.schema import ComponentConfig, setting
from surprise_memory.errors import ConfigError

__all__ = ["CameraConfig", "EmbedderConfig", "EncoderConfig"]


@dataclass(frozen=True)
class CameraConfig(ComponentConfig):
    """How the nodes read the camera."""

    component: ClassVar[str] = "camera"

    image_transport: str = setting(
        "raw",
        "raw: subscribe sensor_msgs/Image; compressed: sensor_msgs/CompressedImage (jpeg/png). "
        "Remap the node's `image` input onto the camera topic (e.g. .../image_raw/compressed).",
        choices=("raw", "compressed"),
        read_only=True,
    )
    camera_loss_warn: float = setting(
        0.05,
        "Diagnostics WARN when the node lost more than this share of the camera's frames in "
        "the last period (counted by the publisher's sequence numbers, else estimated from "
        "the header stamps), or when the encoder's windows miss more than this share of "
        "their frames. See doc/guides/large-frames.md.",
        low=0.0,
        high=1.0,
        read_only=True,
    )


@dataclass(frozen=True)
class EncoderConfig(ComponentConfig):
    """Settings of the :class:`~surprise_memory.perception.encoders.VideoEncoder` and sampler."""

    component: ClassVar[str] = "encoder"

    encoder_weights: str = setting(
        "facebook/vjepa2-vitl-fpc64-256",
        "V-JEPA-2 weights: a hub id, a local folder in save_pretrained layout, or 'random' "
        "(seeded random init of ViT-L; 'random:tiny' for the tiny test preset). Random "
        "weights are untrained: every output that depends on them says so.",
        read_only=True,
    )
    encoder_device: str = setting(
        "auto",
        "Device of the video encoder: auto (cuda when available, else cpu), cuda, cuda:N, cpu.",
        read_only=True,
    )
    encoder_dtype: str = setting(
        "auto",
        "Compute dtype of the video encoder: auto = bfloat16 on CUDA, float32 on CPU (bf16 "
        "is several times slower on CPUs).",
        choices=("auto", "bfloat16", "float16", "float32"),
        read_only=True,
    )
    clip_frames: int = setting(
        64,
        "M: number of most recent frames in one encoder window (paper: 64); a multiple of "
        "the model's tubelet size (2).",
        low=2,
        high=1024,
        read_only=True,
    )
    clip_stride: int = setting(
        1,
        "Encode a window every k-th sampled frame (1 = every frame).",
        low=1,
        high=10_000,
        read_only=True,
    )
    input_fps: float = setting(
        0.0,
        "Sample the camera down to this rate in Hz before windowing (0 = keep every frame).",
        low=0.0,
        high=1000.0,
        read_only=True,
    )
    clip_warmup: str = setting(
        "wait",
        "Before M frames exist: 'wait' encodes nothing until the window is full; 'pad' also "
        "encodes windows padded by repeating the first frame (published on `embedding` with "
        "their padded_frames count, never scored: the paper's s(t) assumes real windows).",
        choices=("pad", "wait"),
        read_only=True,
    )
    encoder_batch: int = setting(
        8,
        "Most windows in one forward pass: offline, windows per batch; live, the most "
        "pending windows encoded together when the encoder falls behind the camera "
        "(catch-up batching).",
        low=1,
        high=1024,
        read_only=True,
    )
    encoder_queue: int = setting(
        16,
        "Live: most windows waiting for the encoder; when full, the oldest is dropped and "
        "counted (windows_dropped). The frame ring holds clip_frames + (encoder_queue + "
        "encoder_batch) * clip_stride frames, plus clip_frames - 1 mirrored slots (151 at "
        "the defaults: 30 MB at 256 px). Several cameras: a queue and a ring each.",
        low=1,
        high=4096,
        read_only=True,
    )
    encoder_batch_interval_s: float = setting(
        0.0,
        "Live: shortest time in seconds between two forward passes; windows arriving "
        "meanwhile are encoded together (more windows per forward, more latency). 0 = "
        "encode as soon as a window waits.",
        low=0.0,
        high=60.0,
    )
    encoder_compile: bool = setting(
        False,
        "Wrap the encoder in torch.compile (slow first call, faster afterwards on GPUs).",
        read_only=True,
    )
    encoder_compile_mode: str = setting(
        "default",
        "torch.compile mode when encoder_compile is true; reduce-overhead and max-autotune "
        "also capture CUDA graphs (batches are then padded to power-of-two sizes).",
        choices=("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"),
        read_only=True,
    )
    encoder_cuda_graphs: bool = setting(
        False,
        "Capture the eager forward as CUDA graphs, one per batch size (1, 2, 4, ... up to "
        "encoder_batch; batches are padded up to the next): CUDA only, not with "
        "encoder_compile.",
        read_only=True,
    )
    encoder_sdpa_backend: str = setting(
        "auto",
        "Attention kernel of the encoder: auto (PyTorch picks), flash, efficient "
        "(memory-efficient), cudnn, math. efficient and cudnn need CUDA; on CUDA, flash "
        "needs bf16/fp16. A kernel that does not run here stops the node at start.",
        choices=("auto", "flash", "efficient", "cudnn", "math"),
        read_only=True,
    )
    encoder_fp8: bool = setting(
        False,
        "FP8 matmuls in the encoder's linear layers (torchao dynamic float8 activations "
        "and weights): CUDA cards with FP8 (compute capability >= 8.9) and torchao installed.",
        read_only=True,
    )
    encoder_pinned_upload: bool = setting(
        True,
        "Copy live windows' frames to the GPU from pinned host memory (asynchronous "
        "upload); ignored on the CPU.",
        read_only=True,
    )
    encoder_warmup: bool = setting(
        True,
        "Live: at start, encode dummy windows at every batch size the node may use, so "
        "that compilation, CUDA-graph capture and kernel set-up do not fall on the first "
        "frames.",
        read_only=True,
    )

    def validate(self) -> None:
        """The window must hold whole tubelets; CUDA graphs are captured by one path only."""
        if self.clip_frames % 2:
            raise ConfigError(
                f"clip_frames={self.clip_frames}: must be even (V-JEPA-2 tubelets are 2 frames)"
            )
        if self.encoder_cuda_graphs and self.encoder_compile:
            raise ConfigError(
                "encoder_cuda_graphs=true with encoder_compile=true: choose one (for compiled "
                "CUDA graphs use encoder_compile_mode: reduce-overhead)"
            )


@dataclass(frozen=True)
class EmbedderConfig(ComponentConfig):
    """Settings of the :class:`~surprise_memory.perception.encoders.ImageTextEmbedder`."""

    component: ClassVar[str] = "embedder"

    embedder_model: str = setting(
        "PE-Core-L-14-336",
        "open_clip architecture name of the frame/text embedder (paper: PE-Core-L-14-336).",
        read_only=True,
    )
    embedder_weights: str = setting(
        "meta",
        "Embedder weights: an open_clip pretrained tag ('meta' = hub timm/PE-Core-L-14-336), "
        "a checkpoint file, a folder holding one, or 'random' (untrained).",
        read_only=True,
    )
    embedder_device: str = setting(
        "auto",
        "Device of the embedder: auto (cuda when available, else cpu), cuda, cuda:N, cpu.",
        read_only=True,
    )
    embedder_dtype: str = setting(
        "auto",
        "Compute dtype of the embedder: auto = bfloat16 on CUDA, float32 on CPU.",
        choices=("auto", "bfloat16", "float16", "float32"),
        read_only=True,
    )
    embedder_batch: int = setting(
        16,
        "Most images or texts in one forward pass of the embedder.",
        low=1,
        high=4096,
    )
