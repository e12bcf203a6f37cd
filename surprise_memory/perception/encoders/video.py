"""V-JEPA-2 window encoder: M frames in, one pooled embedding z in R^hidden out.

The model is transformers' ``VJEPA2Model`` run encoder-only (``skip_predictor=True``); this
wrapper only loads, places (device, dtype), preprocesses, batches and pools.

Preprocessing equals ``VJEPA2VideoProcessor`` for the model's ``crop_size`` c: resize the
shortest edge to ``int(c * 256 / 224)`` (292 for 256; bilinear, antialiased, on uint8),
centre crop c x c, then ``(x - 255*mean) / (255*std)`` with ImageNet mean/std, in float32
on the model's device, cast to the model dtype. It is split in two so that live windows are
cheap:

* :meth:`VideoEncoder.prepare_frame` (the geometric part, once per frame on insert into the
  ring buffer, on the CPU, uint8 in and out), and
* the normalisation, per window on the device (``prepared=True``).

Raw frames of any size (``prepared=False``) get both steps on the device.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Iterable, Sequence
from typing import Any, cast

import numpy as np
import numpy.typing as npt
import torch

from surprise_memory.config import EncoderConfig
from surprise_memory.errors import InputError, ModelLoadError
from surprise_memory.perception.encoders.acceleration import FastForward, ForwardOptions
from surprise_memory.perception.encoders.loading import (
    check_hub_reachable,
    parse_weights,
    resolve_device,
    resolve_dtype,
    seeded,
    synthetic_part,
)
from surprise_memory.perception.encoders.presets import (
    SYNTHETIC_MODEL_NAME,
    VJEPA2_PRESETS,
    VJEPA2_VITL_FPC64,
)
from surprise_memory.perception.frames import Frame
from surprise_memory.perception.window import WindowSampler

__all__ = [
    "IMAGENET_MEAN",
    "IMAGENET_STD",
    "VideoEncoder",
    "WindowLike",
    "encode_stream",
    "resize_shortest_edge_and_crop",
]

_log = logging.getLogger(__name__)

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)

WindowLike = npt.NDArray[np.uint8] | torch.Tensor


def resize_shortest_edge_and_crop(video: torch.Tensor, crop: int) -> torch.Tensor:
    """The geometric part of ``VJEPA2VideoProcessor`` on uint8 ``(..., 3, H, W)`` tensors.

    Args:
        video: uint8 tensor, channels before height and width.
        crop: The model's crop size c; the shortest edge goes to ``int(c * 256 / 224)``.

    Returns:
        uint8 ``(..., 3, c, c)``.

    """
    from torchvision.transforms.v2 import functional as tvf

    height, width = int(video.shape[-2]), int(video.shape[-1])
    short_target = int(crop * 256 / 224)
    short, long = (width, height) if width <= height else (height, width)
    long_target = int(short_target * long / short)
    size = [long_target, short_target] if width <= height else [short_target, long_target]
    if [height, width] != size:
        video = tvf.resize(
            video, size, interpolation=tvf.InterpolationMode.BILINEAR, antialias=True
        )
    top = int((size[0] - crop) / 2.0)
    left = int((size[1] - crop) / 2.0)
    return video[..., top : top + crop, left : left + crop]


def _as_tensor(window: WindowLike) -> torch.Tensor:
    if isinstance(window, torch.Tensor):
        return window
    if not isinstance(window, np.ndarray):
        raise InputError(f"window: expected a numpy array or tensor, got {type(window).__name__}")
    with warnings.catch_warnings():  # read-only ring-buffer views: never written to here
        warnings.simplefilter("ignore", UserWarning)
        return torch.from_numpy(window)


def _split_windows(windows: Sequence[WindowLike] | WindowLike) -> list[torch.Tensor]:
    if isinstance(windows, np.ndarray | torch.Tensor):
        t = _as_tensor(windows)
        if t.ndim == 4:
            return [t]
        if t.ndim == 5:
            return list(t.unbind(0))
        raise InputError(
            f"expected a (T, H, W, 3) window or (B, T, H, W, 3) windows, got shape {tuple(t.shape)}"
        )
    items = [_as_tensor(w) for w in windows]
    if not items:
        raise InputError("no windows to encode")
    return items


class VideoEncoder:
    """V-JEPA-2 encoder over windows of frames, mean-pooled to one vector per window.

    Long class: most of its lines are the read-only properties that the nodes, the
    catch-up and the benchmarks read; the model itself is transformers' and its
    loading is loading.py.

    Args:
        weights: Hub id (default: the paper's ViT-L fpc64-256), local folder in
            ``save_pretrained`` layout, ``random`` (ViT-L architecture) or
            ``random:<preset>`` (see :data:`VJEPA2_PRESETS`; ``random:tiny`` for tests), or
            ``synthetic-trained-tiny`` (the project's own tiny model trained on synthetic
            scenes; ``model_name`` ``VJEPA2-tiny:synthetic-trained-tiny``).
            Random weights are untrained: ``model_name`` says so and a warning is logged.
        device: ``auto``, ``cpu``, ``cuda`` or ``cuda:N``.
        dtype: ``auto`` (bf16 on CUDA, fp32 on CPU), ``bfloat16``, ``float16``, ``float32``.
        batch_size: Most windows per forward in :meth:`encode_windows` (and the largest
            batch :meth:`warm_up` prepares for).
        compile: Wrap the model in ``torch.compile`` (shorthand for ``options``).
        options: Speed options of the forward (compile mode, CUDA graphs, SDPA back-end,
            FP8); see :mod:`~surprise_memory.perception.encoders.acceleration`.
        pinned_upload: Host buffers from :meth:`host_buffer` are pinned (CUDA only).
        seed: Seed of a random init (the caller's RNG state is left untouched).
        hub_timeout_s: How long to wait for the hub when the weights are not cached.

    Raises:
        ModelLoadError: The weights cannot be loaded (message says how to give a folder).
        ConfigError: Bad device/dtype, a device that is not there, or a speed option this
            machine cannot honour.

    """

    def __init__(
        self,
        weights: str = VJEPA2_VITL_FPC64,
        *,
        device: str = "auto",
        dtype: str = "auto",
        batch_size: int = 8,
        compile: bool = False,
        options: ForwardOptions | None = None,
        pinned_upload: bool = True,
        seed: int = 0,
        hub_timeout_s: float = 10.0,
    ) -> None:
        self._device = resolve_device(device)
        self._dtype = resolve_dtype(dtype, self._device)
        self._batch_size = EncoderConfig(encoder_batch=batch_size).encoder_batch
        model, self._model_name, self._pretrained = _load_vjepa2(
            weights, self._dtype, seed, hub_timeout_s
        )
        self._model = model.to(self._device).eval()
        cfg = self._model.config
        self._crop = int(cfg.crop_size)
        self._tubelet = int(cfg.tubelet_size)
        self._dim = int(cfg.hidden_size)
        self._mean = torch.tensor(IMAGENET_MEAN, device=self._device) * (1.0 / (1.0 / 255.0))
        self._std = torch.tensor(IMAGENET_STD, device=self._device) * (1.0 / (1.0 / 255.0))
        opts = options or ForwardOptions(compile=compile)
        self._fast = FastForward(self._model, opts, self._device, self._dtype, self._batch_size)
        self._pinned = pinned_upload and self._device.type == "cuda"
        if not self._pretrained:
            _log.warning(
                "video encoder %s: random weights, embeddings and surprise are untrained",
                self._model_name,
            )

    @classmethod
    def from_config(cls, config: EncoderConfig, *, seed: int = 0) -> VideoEncoder:
        """Build the encoder from its config dataclass."""
        return cls(
            config.encoder_weights,
            device=config.encoder_device,
            dtype=config.encoder_dtype,
            batch_size=config.encoder_batch,
            options=ForwardOptions.from_config(config),
            pinned_upload=config.encoder_pinned_upload,
            seed=seed,
        )

    # ----------------------------------------------------------------- properties

    @property
    def model_name(self) -> str:
        """Hub id, folder, or ``random:<preset> (untrained, seed N)``; stored with outputs."""
        return self._model_name

    @property
    def pretrained(self) -> bool:
        """False for random (untrained) weights."""
        return self._pretrained

    @property
    def dim(self) -> int:
        """Embedding size (the model's hidden size; 1024 for ViT-L)."""
        return self._dim

    @property
    def crop_size(self) -> int:
        """Input height = width of the model."""
        return self._crop

    @property
    def tubelet_size(self) -> int:
        """Frames per temporal patch; a window's length must be a multiple of it."""
        return self._tubelet

    @property
    def batch_size(self) -> int:
        """Most windows per forward of :meth:`encode_windows`."""
        return self._batch_size

    @property
    def device(self) -> torch.device:
        """Where the model runs."""
        return self._device

    @property
    def dtype(self) -> torch.dtype:
        """Compute dtype of the model."""
        return self._dtype

    @property
    def fast_forward(self) -> FastForward:
        """The forward with its speed options (batch sizes it runs at, ...)."""
        return self._fast

    @property
    def pinned_upload(self) -> bool:
        """Whether live frames are staged in pinned memory (CUDA with the option on)."""
        return self._pinned

    @property
    def model(self) -> torch.nn.Module:
        """The underlying ``VJEPA2Model`` (for benchmarks and checks)."""
        return cast(torch.nn.Module, self._model)

    # ----------------------------------------------------------------- frames

    def prepare_frame(self, rgb: npt.NDArray[np.uint8]) -> npt.NDArray[np.uint8]:
        """Resize and centre-crop one RGB frame to ``crop_size`` on the CPU (uint8).

        This is the processor's geometric step, done once per frame when it enters the
        ring buffer, so windows only need :meth:`encode_window` with ``prepared=True``.

        Args:
            rgb: (H, W, 3) uint8.

        Returns:
            (crop_size, crop_size, 3) uint8, C-contiguous.

        Raises:
            InputError: Not an (H, W, 3) uint8 array.

        """
        if not isinstance(rgb, np.ndarray) or rgb.dtype != np.uint8 or rgb.shape[-1:] != (3,):
            raise InputError(f"prepare_frame: expected an (H, W, 3) uint8 array, got {rgb!r:.60}")
        if rgb.ndim != 3 or rgb.shape[0] == 0 or rgb.shape[1] == 0:
            raise InputError(f"prepare_frame: expected an (H, W, 3) image, got shape {rgb.shape}")
        x = _as_tensor(rgb).permute(2, 0, 1)
        out = resize_shortest_edge_and_crop(x, self._crop).permute(1, 2, 0)
        return np.ascontiguousarray(out.numpy())

    def make_sampler(self, config: EncoderConfig | None = None) -> WindowSampler:
        """A :class:`WindowSampler` whose buffer stores frames prepared for this encoder.

        Args:
            config: Window settings (clip_frames, clip_stride, input_fps, clip_warmup);
                defaults when None.

        Returns:
            The sampler; encode its windows with ``prepared=True``.

        Raises:
            ConfigError: ``clip_frames`` is not a multiple of the tubelet size.

        """
        cfg = config or EncoderConfig()
        if cfg.clip_frames % self._tubelet:
            from surprise_memory.errors import ConfigError

            raise ConfigError(
                f"clip_frames={cfg.clip_frames}: must be a multiple of the model's tubelet "
                f"size {self._tubelet}"
            )
        return WindowSampler.from_config(cfg, (self._crop, self._crop), self.prepare_frame)

    # ----------------------------------------------------------------- encoding

    def preprocess(
        self, windows: Sequence[WindowLike] | WindowLike, *, prepared: bool = False
    ) -> torch.Tensor:
        """Turn uint8 windows into the model input, on the device.

        Args:
            windows: One (T, H, W, 3) window, a (B, T, H, W, 3) array, or a sequence of
                (T, H, W, 3) windows (numpy or torch, uint8, RGB). Frames of one window
                share a size; T is the same for all windows and a multiple of
                ``tubelet_size``.
            prepared: The frames are already :meth:`prepare_frame` output (crop x crop).

        Returns:
            (B, T, 3, crop, crop) tensor in the model dtype on the model device.

        Raises:
            InputError: Wrong dtype/shape, empty, T not a multiple of the tubelet, or
                ``prepared`` frames that are not crop x crop.

        """
        items = _split_windows(windows)
        length = int(items[0].shape[0])
        if length == 0 or length % self._tubelet:
            raise InputError(
                f"windows have {length} frames: need a positive multiple of {self._tubelet}"
            )
        batch = []
        for i, w in enumerate(items):
            if w.dtype != torch.uint8 or w.ndim != 4 or w.shape[-1] != 3:
                raise InputError(
                    f"window {i}: expected (T, H, W, 3) uint8, got {w.dtype} {tuple(w.shape)}"
                )
            if int(w.shape[0]) != length:
                raise InputError(f"window {i} has {w.shape[0]} frames, window 0 has {length}")
            if w.shape[1] == 0 or w.shape[2] == 0:
                raise InputError(f"window {i}: empty frames {tuple(w.shape)}")
            x = w.to(self._device, non_blocking=True).permute(0, 3, 1, 2)
            if prepared:
                if tuple(x.shape[-2:]) != (self._crop, self._crop):
                    raise InputError(
                        f"window {i}: prepared frames must be {self._crop}x{self._crop}, got "
                        f"{x.shape[-1]}x{x.shape[-2]}; pass prepared=False for raw frames"
                    )
            else:
                x = resize_shortest_edge_and_crop(x, self._crop)
            batch.append(x)
        return self.normalize(torch.stack(batch))

    def normalize(self, video: torch.Tensor) -> torch.Tensor:
        """``(x - 255*mean) / (255*std)`` in float32, cast to the model dtype.

        Args:
            video: uint8 (..., 3, H, W) on the model device.

        Returns:
            The model input, same shape, model dtype.

        """
        video = video.to(torch.float32).sub_(self._mean.view(3, 1, 1))
        return video.div_(self._std.view(3, 1, 1)).to(self._dtype)

    def forward_features(self, pixel_values: torch.Tensor) -> torch.Tensor:
        """Encoder forward on model input and mean pooling over tokens.

        Args:
            pixel_values: (B, T, 3, crop, crop) from :meth:`preprocess`.

        Returns:
            (B, dim) float32 tensor on the device.

        """
        return self._fast(pixel_values)

    def encode_windows(
        self, windows: Sequence[WindowLike] | WindowLike, *, prepared: bool = False
    ) -> npt.NDArray[np.float32]:
        """Encode several windows, ``batch_size`` per forward.

        Args:
            windows: See :meth:`preprocess`.
            prepared: See :meth:`preprocess`.

        Returns:
            (B, dim) float32 array, one embedding per window, in order.

        Raises:
            InputError: See :meth:`preprocess`.

        """
        items = _split_windows(windows)
        out = np.empty((len(items), self._dim), dtype=np.float32)
        with torch.inference_mode():
            for lo in range(0, len(items), self._batch_size):
                chunk = items[lo : lo + self._batch_size]
                z = self.forward_features(self.preprocess(chunk, prepared=prepared))
                out[lo : lo + len(chunk)] = z.cpu().numpy()
        return out

    def encode_window(
        self, window: WindowLike, *, prepared: bool = False
    ) -> npt.NDArray[np.float32]:
        """Encode one (T, H, W, 3) window (the live path).

        Returns:
            (dim,) float32 embedding z.

        Raises:
            InputError: See :meth:`preprocess`.

        """
        return np.asarray(self.encode_windows([window], prepared=prepared)[0], dtype=np.float32)

    def encode_stream(
        self, frames: Iterable[Frame], config: EncoderConfig | None = None
    ) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.int64]]:
        """Embed a whole clip, one window per sampled frame: see :func:`encode_stream`."""
        return encode_stream(self, frames, config)


def encode_stream(
    encoder: VideoEncoder, frames: Iterable[Frame], config: EncoderConfig | None = None
) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.int64]]:
    """Embed a whole clip: one window per sampled frame (``config``), batched.

    For evaluations over short clips held in memory (GEBD, benchmarks); the robot and
    ``surprise-memory process`` stream instead.

    Returns:
        (N, dim) embeddings and the (N,) stamps of the windows' newest frames.

    """
    sampler = encoder.make_sampler(config or EncoderConfig())
    windows: list[npt.NDArray[np.uint8]] = []
    stamps: list[int] = []
    parts = [np.zeros((0, encoder.dim), dtype=np.float32)]
    for frame in frames:
        window = sampler.push(frame)
        if window is None:
            continue
        windows.append(np.array(window.frames))  # the view is overwritten next push
        stamps.append(window.stamp_ns)
        if len(windows) == encoder.batch_size:  # encode as we go: a batch in memory
            parts.append(encoder.encode_windows(windows, prepared=True))
            windows = []
    if windows:
        parts.append(encoder.encode_windows(windows, prepared=True))
    return np.concatenate(parts), np.asarray(stamps, dtype=np.int64)


def _load_vjepa2(
    weights: str, dtype: torch.dtype, seed: int, hub_timeout_s: float
) -> tuple[Any, str, bool]:
    """Return (model, model_name, pretrained)."""
    from transformers import VJEPA2Config, VJEPA2Model

    synthetic = synthetic_part(weights, "video")
    if synthetic is not None:
        try:
            model = VJEPA2Model.from_pretrained(
                str(synthetic), local_files_only=True, dtype=dtype, attn_implementation="sdpa"
            )
        except Exception as err:
            raise ModelLoadError(
                f"cannot load the shipped weights {str(synthetic)!r} ({type(err).__name__}: {err})"
            ) from None
        return model, f"VJEPA2-tiny:{SYNTHETIC_MODEL_NAME}", True
    source = parse_weights(weights, default_preset="vitl-fpc64-256")
    if source.kind == "random":
        if source.value not in VJEPA2_PRESETS:
            raise ModelLoadError(
                f"weights {weights!r}: unknown V-JEPA-2 preset {source.value!r}; known: "
                f"{', '.join(sorted(VJEPA2_PRESETS))}"
            )
        config = VJEPA2Config(**VJEPA2_PRESETS[source.value])
        config._attn_implementation = "sdpa"
        with seeded(seed):
            model = VJEPA2Model(config)
        return cast(Any, model).to(dtype), f"random:{source.value} (untrained, seed {seed})", False
    kwargs: dict[str, Any] = {"dtype": dtype, "attn_implementation": "sdpa"}
    if source.kind == "local":
        try:
            model = VJEPA2Model.from_pretrained(source.value, local_files_only=True, **kwargs)
        except Exception as err:
            raise ModelLoadError(
                f"cannot load V-JEPA-2 weights from {source.value!r} ({type(err).__name__}: "
                f"{err}); expected a save_pretrained folder (config.json + model.safetensors)"
            ) from None
        return model, source.value, True
    try:  # the local cache first: no network at all when the weights are there
        model = VJEPA2Model.from_pretrained(source.value, local_files_only=True, **kwargs)
    except OSError:
        check_hub_reachable(
            source.value,
            what="V-JEPA-2 weights",
            setting_name="encoder_weights",
            timeout_s=hub_timeout_s,
        )
        try:
            model = VJEPA2Model.from_pretrained(source.value, **kwargs)
        except Exception as err:
            raise ModelLoadError(
                f"cannot download V-JEPA-2 weights {source.value!r} ({type(err).__name__}: "
                f"{err}); give a local folder in encoder_weights instead"
            ) from None
    return model, source.value, True
