"""A faster encoder forward: torch.compile, CUDA graphs, the SDPA back-end, FP8 matmuls.

Each option is one setting of :class:`~surprise_memory.config.EncoderConfig`, off (or
``auto``) by default, and fails at construction with a :class:`ConfigError` that names the
setting when this machine cannot honour it (no CUDA, no FP8 on the card, torchao missing,
an attention kernel that does not run here), never at the first frame.

* ``encoder_compile`` / ``encoder_compile_mode``: ``torch.compile(model, mode=...)``.
* ``encoder_cuda_graphs``: the eager forward captured as one CUDA graph per batch size;
  batches are padded up to the next captured size (powers of two up to the largest batch),
  so a handful of graphs serve every catch-up batch. The compile modes that use CUDA graphs
  (``reduce-overhead``, ``max-autotune``) get the same padding, so they also record only
  those shapes.
* ``encoder_sdpa_backend``: ``torch.nn.attention.sdpa_kernel`` around the forward.
* ``encoder_fp8``: torchao's training-free float8 inference path
  (``Float8DynamicActivationFloat8WeightConfig``, per-row scales) on the linear layers;
  torchao is an optional dependency, imported only when asked for.

The pooled output is the same function of the input in every case (mean over tokens of
the last hidden state, in float32); only rounding differs, which the tests bound on the CPU
(SDPA back-ends, torch.compile) and ``benchmarks/gpu_catchup_check.py`` reports on a GPU.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch

from surprise_memory.config import EncoderConfig
from surprise_memory.errors import ConfigError

__all__ = ["FastForward", "ForwardOptions", "batch_buckets"]

_SDPA = {
    "flash": "FLASH_ATTENTION",
    "efficient": "EFFICIENT_ATTENTION",
    "cudnn": "CUDNN_ATTENTION",
    "math": "MATH",
}
_GRAPH_COMPILE_MODES = ("reduce-overhead", "max-autotune")


@dataclass(frozen=True)
class ForwardOptions:
    """The speed options of the encoder forward (see the module docstring)."""

    compile: bool = False
    compile_mode: str = "default"
    cuda_graphs: bool = False
    sdpa_backend: str = "auto"
    fp8: bool = False

    @classmethod
    def from_config(cls, config: EncoderConfig) -> ForwardOptions:
        """The options of an encoder config."""
        return cls(
            compile=config.encoder_compile,
            compile_mode=config.encoder_compile_mode,
            cuda_graphs=config.encoder_cuda_graphs,
            sdpa_backend=config.encoder_sdpa_backend,
            fp8=config.encoder_fp8,
        )


def batch_buckets(most: int) -> list[int]:
    """Batch sizes served by fixed-shape forwards: 1, 2, 4, ... below ``most``, and ``most``.

    Args:
        most: The largest batch.

    Returns:
        Ascending sizes; a batch of b runs at the smallest size >= b.

    """
    sizes = []
    size = 1
    while size < most:
        sizes.append(size)
        size *= 2
    return [*sizes, most]


class FastForward:
    """``pixel_values (B, T, 3, c, c) -> pooled (B, hidden)``: the model with its options.

    Args:
        model: A ``VJEPA2Model`` on its device and dtype (FP8 modifies it in place).
        options: What to turn on.
        device: The model's device.
        dtype: The model's dtype.
        most_batch: The largest batch that will be run (sets the fixed-shape sizes).

    Raises:
        ConfigError: An option this machine cannot honour; the message names the setting.

    """

    def __init__(
        self,
        model: Any,
        options: ForwardOptions,
        device: torch.device,
        dtype: torch.dtype,
        most_batch: int,
    ) -> None:
        self._options = options
        self._backends = _check_sdpa(options.sdpa_backend, device, dtype)
        if options.cuda_graphs and device.type != "cuda":
            raise ConfigError(f"encoder_cuda_graphs=true needs a CUDA device, not {device}")
        if options.fp8:
            _apply_fp8(model, device)
        self._model = model
        self._fn: Any = model
        if options.compile:
            self._fn = torch.compile(model, mode=options.compile_mode)
        fixed = options.cuda_graphs or (
            options.compile and options.compile_mode in _GRAPH_COMPILE_MODES
        )
        self._sizes = batch_buckets(most_batch) if fixed else []
        self._graphs: dict[tuple[int, ...], tuple[Any, torch.Tensor, torch.Tensor]] = {}
        self._pool: Any = None

    @property
    def batch_sizes(self) -> list[int]:
        """The fixed batch sizes run (batches are padded up to one); empty when any size runs."""
        return list(self._sizes)

    def run_size(self, batch: int) -> int:
        """The batch size a batch of ``batch`` windows is run at (after padding)."""
        for size in self._sizes:
            if size >= batch:
                return size
        return batch

    def __call__(self, pixel_values: torch.Tensor) -> torch.Tensor:
        """Forward and mean pooling of a batch, padded to a fixed size where one is used.

        Args:
            pixel_values: (B, T, 3, c, c) model input on the model's device and dtype.

        Returns:
            (B, hidden) float32 on the device.

        """
        b = int(pixel_values.shape[0])
        size = self.run_size(b)
        if size > b:  # repeat the last window; its extra outputs are dropped
            pad = pixel_values[-1:].expand(size - b, *pixel_values.shape[1:])
            pixel_values = torch.cat([pixel_values, pad])
        with torch.inference_mode():
            if self._options.cuda_graphs:
                return self._graphed(pixel_values)[:b]
            return self._eager(pixel_values)[:b]

    def _eager(self, pixel_values: torch.Tensor) -> torch.Tensor:
        with self._sdpa():
            out = self._fn(pixel_values_videos=pixel_values, skip_predictor=True)
        pooled: torch.Tensor = out.last_hidden_state.float().mean(dim=1)
        return pooled

    @contextlib.contextmanager
    def _sdpa(self) -> Iterator[None]:
        if self._backends is None:
            yield
            return
        from torch.nn.attention import sdpa_kernel

        with sdpa_kernel(self._backends):
            yield

    def _graphed(self, pixel_values: torch.Tensor) -> torch.Tensor:
        """Replay (capturing on first use) the CUDA graph of this input shape."""
        key = tuple(pixel_values.shape)
        if key not in self._graphs:
            static_in = pixel_values.clone()
            # warm up on a side stream, as torch.cuda.graphs asks before a capture
            side = torch.cuda.Stream()  # type: ignore[no-untyped-call]
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                for _ in range(2):
                    self._eager(static_in)
            torch.cuda.current_stream().wait_stream(side)
            if self._pool is None:
                self._pool = torch.cuda.graph_pool_handle()
            graph = torch.cuda.CUDAGraph()
            # one memory pool for all sizes: they never run at the same time, and each
            # output is cloned before the next replay
            with torch.cuda.graph(graph, pool=self._pool):
                static_out = self._eager(static_in)
            self._graphs[key] = (graph, static_in, static_out)
        graph, static_in, static_out = self._graphs[key]
        static_in.copy_(pixel_values)
        graph.replay()
        return static_out.clone()


def _check_sdpa(name: str, device: torch.device, dtype: torch.dtype) -> list[Any] | None:
    """The SDPA back-end list for ``sdpa_kernel`` (None = auto), probed on this device."""
    if name == "auto":
        return None
    from torch.nn.attention import SDPBackend, sdpa_kernel

    backends = [getattr(SDPBackend, _SDPA[name])]
    q = torch.zeros((1, 2, 8, 64), device=device, dtype=dtype)
    try:
        with sdpa_kernel(backends), torch.inference_mode():
            torch.nn.functional.scaled_dot_product_attention(q, q, q)
    except RuntimeError as err:
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise ConfigError(
            f"encoder_sdpa_backend={name} does not run on {device} in {dtype} ({first}); "
            "use auto, math, or another back-end"
        ) from None
    return backends


def _apply_fp8(model: Any, device: torch.device) -> None:
    """Swap the linear layers to torchao's dynamic float8 (per-row scales), in place."""
    if device.type != "cuda":
        raise ConfigError(f"encoder_fp8=true needs a CUDA device with FP8, not {device}")
    capability = torch.cuda.get_device_capability(device)
    if capability < (8, 9):
        raise ConfigError(
            f"encoder_fp8=true: {torch.cuda.get_device_name(device)} (compute capability "
            f"{capability[0]}.{capability[1]}) has no FP8 matmuls; they need 8.9 or newer "
            "(Ada, Hopper, Blackwell)"
        )
    try:
        from torchao.quantization import (  # type: ignore[import-not-found,unused-ignore]
            Float8DynamicActivationFloat8WeightConfig,
            PerRow,
            quantize_,
        )
    except ImportError:
        raise ConfigError(
            "encoder_fp8=true needs torchao, an optional dependency that is not installed: "
            "pip install torchao (a version matching this torch)"
        ) from None
    quantize_(model, Float8DynamicActivationFloat8WeightConfig(granularity=PerRow()))
