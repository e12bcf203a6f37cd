"""PE-Core image/text embedder (open_clip): episode frames and retrieval queries.

Preprocessing is PE's own, set here explicitly rather than taken from open_clip: with
``pretrained=None`` (random weights, or a checkpoint file) open_clip silently falls back to
OpenAI CLIP preprocessing (bicubic, shortest-edge resize + crop, CLIP mean/std). PE uses a
*squash* resize to the model's image size (aspect ratio not kept; 336 for L-14-336),
bilinear, antialiased, then ``(x/255 - 0.5) / 0.5``. It runs with torch ops on the device.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import cast

import numpy as np
import numpy.typing as npt
import torch

from surprise_memory.config import EmbedderConfig
from surprise_memory.errors import InputError, ModelLoadError
from surprise_memory.perception.encoders.loading import (
    check_hub_reachable,
    local_folder_hint,
    parse_weights,
    resolve_device,
    resolve_dtype,
    seeded,
    synthetic_part,
)
from surprise_memory.perception.encoders.presets import (
    PE_CORE_L14,
    SYNTHETIC_MODEL_NAME,
    register_open_clip_configs,
)
from surprise_memory.perception.frames import Frame

__all__ = ["PE_INTERPOLATION", "PE_MEAN", "PE_RESIZE_MODE", "PE_STD", "ImageTextEmbedder"]

_log = logging.getLogger(__name__)

PE_MEAN = (0.5, 0.5, 0.5)
PE_STD = (0.5, 0.5, 0.5)
PE_INTERPOLATION = "bilinear"
PE_RESIZE_MODE = "squash"

_CHECKPOINT_NAMES = (
    "open_clip_model.safetensors",
    "open_clip_pytorch_model.safetensors",
    "open_clip_pytorch_model.bin",
    "model.safetensors",
    "pytorch_model.bin",
)

ImageLike = npt.NDArray[np.uint8] | Frame


class ImageTextEmbedder:
    """PE-Core image and text embeddings in one L2-normalised space.

    Args:
        model: open_clip architecture name (a PE-Core model, or ``TINY_EMBEDDER_MODEL``).
        weights: open_clip pretrained tag (``meta``), a hub id, a checkpoint file, a folder
            holding one, ``synthetic-trained-tiny`` (the project's own small model for
            ``PE-Core-synthetic-tiny``, trained on synthetic scenes), or ``random``
            (seeded init, untrained: ``model_name`` says so).
        device: ``auto``, ``cpu``, ``cuda`` or ``cuda:N``.
        dtype: ``auto`` (bf16 on CUDA, fp32 on CPU), ``bfloat16``, ``float16``, ``float32``.
        batch_size: Most images/texts per forward.
        seed: Seed of a random init (the caller's RNG state is left untouched).
        hub_timeout_s: How long to wait for the hub when the weights are not cached.

    Raises:
        ModelLoadError: Unknown model, not a PE model, or weights that cannot be loaded.
        ConfigError: Bad device/dtype.

    """

    def __init__(
        self,
        model: str = PE_CORE_L14,
        weights: str = "meta",
        *,
        device: str = "auto",
        dtype: str = "auto",
        batch_size: int = 16,
        seed: int = 0,
        hub_timeout_s: float = 10.0,
    ) -> None:
        import open_clip

        self._device = resolve_device(device)
        self._dtype = resolve_dtype(dtype, self._device)
        self._batch_size = EmbedderConfig(embedder_batch=batch_size).embedder_batch
        register_open_clip_configs()
        model_cfg = open_clip.get_model_config(model)
        if model_cfg is None:
            raise ModelLoadError(
                f"unknown open_clip model {model!r}; PE-Core models: "
                f"{', '.join(m for m in open_clip.list_models() if m.startswith('PE-Core'))}"
            )
        trunk = str(model_cfg.get("vision_cfg", {}).get("timm_model_name", ""))
        if not trunk.startswith("vit_pe_core"):
            raise ModelLoadError(
                f"model {model!r} is not a PE-Core model: this embedder applies PE's "
                "preprocessing (squash, bilinear, mean=std=0.5) only"
            )
        checkpoint, label = _resolve_checkpoint(model, weights, hub_timeout_s)
        try:
            if checkpoint is None:
                with seeded(seed):
                    net = open_clip.create_model(model, pretrained=None)
            else:
                net = open_clip.create_model(model, pretrained=checkpoint)
        except Exception as err:
            raise ModelLoadError(
                f"cannot build {model!r} with weights {label!r} ({type(err).__name__}: {err})"
            ) from None
        self._pretrained = checkpoint is not None
        self._model_name = (
            f"{model}:{label}" if self._pretrained else f"{model}:random (untrained, seed {seed})"
        )
        self._model = net.to(device=self._device, dtype=self._dtype).eval()
        self._tokenizer = open_clip.get_tokenizer(model)
        self._dim = int(model_cfg["embed_dim"])
        size = model_cfg["vision_cfg"].get("image_size", 224)
        self._size = (size, size) if isinstance(size, int) else (int(size[0]), int(size[1]))
        if not self._pretrained:
            _log.warning("embedder %s: random weights, retrieval is untrained", self._model_name)

    @property
    def batch_size(self) -> int:
        """Most images or texts per forward (``embedder_batch``; may change live)."""
        return self._batch_size

    @batch_size.setter
    def batch_size(self, value: int) -> None:
        self._batch_size = EmbedderConfig(embedder_batch=value).embedder_batch  # validates

    @classmethod
    def from_config(cls, config: EmbedderConfig, *, seed: int = 0) -> ImageTextEmbedder:
        """Build the embedder from its config dataclass."""
        return cls(
            config.embedder_model,
            config.embedder_weights,
            device=config.embedder_device,
            dtype=config.embedder_dtype,
            batch_size=config.embedder_batch,
            seed=seed,
        )

    @property
    def model_name(self) -> str:
        """``<model>:<weights>``, or ``<model>:random (untrained, seed N)``."""
        return self._model_name

    @property
    def pretrained(self) -> bool:
        """False for random (untrained) weights."""
        return self._pretrained

    @property
    def dim(self) -> int:
        """Embedding size (1024 for PE-Core-L-14-336)."""
        return self._dim

    @property
    def image_size(self) -> tuple[int, int]:
        """(height, width) every image is squashed to."""
        return self._size

    @property
    def device(self) -> torch.device:
        """Where the model runs."""
        return self._device

    @property
    def dtype(self) -> torch.dtype:
        """Compute dtype of the model."""
        return self._dtype

    @property
    def model(self) -> torch.nn.Module:
        """The underlying open_clip model."""
        return cast(torch.nn.Module, self._model)

    def preprocess(self, images: Sequence[ImageLike] | npt.NDArray[np.uint8]) -> torch.Tensor:
        """PE preprocessing on the device: squash resize (bilinear), then mean=std=0.5.

        Args:
            images: (H, W, 3) uint8 RGB arrays (sizes may differ), :class:`Frame` objects,
                or one (N, H, W, 3) array.

        Returns:
            (N, 3, h, w) tensor in the model dtype on the model device.

        Raises:
            InputError: Empty list or an item that is not a non-empty (H, W, 3) uint8 image.

        """
        from torchvision.transforms.v2 import functional as tvf

        items = list(images)
        if not items:
            raise InputError("no images to embed")
        batch = []
        for i, item in enumerate(items):
            rgb = item.rgb if isinstance(item, Frame) else item
            if (
                not isinstance(rgb, np.ndarray)
                or rgb.dtype != np.uint8
                or rgb.ndim != 3
                or rgb.shape[2] != 3
                or rgb.shape[0] == 0
                or rgb.shape[1] == 0
            ):
                what = f"{rgb.dtype} {rgb.shape}" if isinstance(rgb, np.ndarray) else type(rgb)
                raise InputError(f"image {i}: expected an (H, W, 3) uint8 RGB array, got {what}")
            x = torch.from_numpy(np.ascontiguousarray(rgb)).to(self._device).permute(2, 0, 1)
            if tuple(x.shape[-2:]) != self._size:
                x = tvf.resize(
                    x,
                    list(self._size),
                    interpolation=tvf.InterpolationMode.BILINEAR,
                    antialias=True,
                )
            batch.append(x)
        x = torch.stack(batch).to(torch.float32).div_(255.0)
        x = x.sub_(PE_MEAN[0]).div_(PE_STD[0])
        return x.to(self._dtype)

    def embed_images(
        self, images: Sequence[ImageLike] | npt.NDArray[np.uint8]
    ) -> npt.NDArray[np.float32]:
        """Embed RGB images, ``batch_size`` per forward.

        Args:
            images: See :meth:`preprocess`.

        Returns:
            (N, dim) float32, each row L2-normalised.

        Raises:
            InputError: See :meth:`preprocess`.

        """
        items = list(images)
        if not items:
            raise InputError("no images to embed")
        out = np.empty((len(items), self._dim), dtype=np.float32)
        with torch.inference_mode():
            for lo in range(0, len(items), self._batch_size):
                chunk = items[lo : lo + self._batch_size]
                z = self._model.encode_image(self.preprocess(chunk))
                out[lo : lo + len(chunk)] = _normalise(z)
        return out

    def warm_up(self, images: int) -> None:
        """Embed ``images`` blank images and one text once, at node start.

        The first forward of each tower allocates the model's working memory (about 25 MB
        with the tiny preset on a CPU; kernel selection on a GPU). Done here, it happens
        before the first episode, so the memory node's footprint is flat from the start.

        Args:
            images: How many images an episode embeds (the batch the live path uses).

        """
        blank = np.zeros((min(images, self._batch_size), *self._size, 3), dtype=np.uint8)
        self.embed_images(blank)
        self.embed_text(["warm-up"])

    def embed_text(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """Embed text queries (tokenised to the model's context length, longer text cut).

        Args:
            texts: The queries.

        Returns:
            (N, dim) float32, each row L2-normalised.

        Raises:
            InputError: Empty list, or an item that is not a string.

        """
        if isinstance(texts, str):
            raise InputError("embed_text takes a list of strings, got one string")
        items = list(texts)
        if not items:
            raise InputError("no texts to embed")
        for i, t in enumerate(items):
            if not isinstance(t, str):
                raise InputError(f"text {i}: expected a string, got {type(t).__name__}")
        out = np.empty((len(items), self._dim), dtype=np.float32)
        with torch.inference_mode():
            for lo in range(0, len(items), self._batch_size):
                chunk = items[lo : lo + self._batch_size]
                tokens = self._tokenizer(chunk).to(self._device)
                out[lo : lo + len(chunk)] = _normalise(self._model.encode_text(tokens))
        return out


def _normalise(z: torch.Tensor) -> npt.NDArray[np.float32]:
    z = z.float()
    z = z / z.norm(dim=-1, keepdim=True).clamp_min(1e-12)
    return np.asarray(z.cpu().numpy(), dtype=np.float32)


def _find_checkpoint(folder: Path) -> Path | None:
    for name in _CHECKPOINT_NAMES:
        if (folder / name).is_file():
            return folder / name
    found = sorted(
        p for ext in ("*.safetensors", "*.bin", "*.pt", "*.pth") for p in folder.glob(ext)
    )
    return found[0] if found else None


def _resolve_checkpoint(model: str, weights: str, hub_timeout_s: float) -> tuple[str | None, str]:
    """Return (checkpoint path or None for random, label of the weights)."""
    import open_clip

    text = weights.strip()
    synthetic = synthetic_part(text, "embedder")
    if synthetic is not None:
        found = _find_checkpoint(synthetic)
        if found is None:
            raise ModelLoadError(
                f"the shipped weights folder {str(synthetic)!r} holds no checkpoint"
            )
        return str(found), SYNTHETIC_MODEL_NAME
    is_tag = text and "/" not in text and not text.startswith(("random", ".", "~"))
    if is_tag and not Path(text).exists():
        cfg = open_clip.get_pretrained_cfg(model, text)
        if not cfg or not cfg.get("hf_hub"):
            tags = open_clip.list_pretrained_tags_by_model(model)
            raise ModelLoadError(
                f"embedder weights {weights!r}: not a pretrained tag of {model!r} (tags: "
                f"{', '.join(tags) or 'none'}), nor a file or folder"
            )
        repo = str(cfg["hf_hub"]).strip("/")
        return _hub_checkpoint(repo, hub_timeout_s), text
    source = parse_weights(text, default_preset="random")
    if source.kind == "random":
        return None, "random"
    if source.kind == "local":
        path = Path(source.value)
        found = _find_checkpoint(path) if path.is_dir() else path
        if found is None:
            raise ModelLoadError(
                f"embedder weights folder {str(path)!r} holds no checkpoint "
                f"(*.safetensors, *.bin, *.pt, *.pth)"
            )
        return str(found), str(path)
    return _hub_checkpoint(source.value, hub_timeout_s), source.value


def _hub_checkpoint(repo: str, hub_timeout_s: float) -> str:
    """The checkpoint file of a hub repo: the cache first, else a download (fails fast)."""
    from huggingface_hub import hf_hub_download

    for name in _CHECKPOINT_NAMES[:3]:
        try:
            return str(hf_hub_download(repo, name, local_files_only=True))
        except Exception:  # not cached under this name
            continue
    check_hub_reachable(
        repo, what="embedder weights", setting_name="embedder_weights", timeout_s=hub_timeout_s
    )
    errors: list[str] = []
    for name in _CHECKPOINT_NAMES[:3]:
        try:
            return str(hf_hub_download(repo, name))
        except Exception as err:
            errors.append(f"{name}: {type(err).__name__}")
    raise ModelLoadError(
        f"embedder weights {repo!r}: no checkpoint could be downloaded ({'; '.join(errors)}). "
        + local_folder_hint(repo, "embedder_weights")
    )
