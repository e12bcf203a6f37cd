"""The live encoder's forward over catch-up batches: frames uploaded once, windows on the device.

A catch-up batch (:class:`~surprise_memory.perception.catchup.FrameBatch`) holds the N
distinct frames of B overlapping windows and, per window, the positions of its T frames.
:class:`LiveWindowEncoder` uploads the N frames in one copy (from pinned memory on CUDA,
asynchronously), normalises them once, gathers the (B, T) windows on the device and runs
one forward. With stride 1, N = T + B - 1: at T = 64, B = 8 that is 71 frames of upload
and normalisation instead of 512.

The upload is not overlapped with the previous forward: at M = 64, 256 px, a batch's
frames are 14 MB (about 0.6 ms over PCIe 4 x16 from pinned memory) against a forward of
tens of ms, and the live worker needs each batch's output before it takes the next one.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import torch

from surprise_memory.errors import InputError
from surprise_memory.perception.encoders.video import VideoEncoder, WindowLike, _as_tensor

__all__ = ["LiveWindowEncoder"]


class LiveWindowEncoder:
    """Encodes windows that share frames, each frame uploaded and normalised once.

    Args:
        encoder: The loaded video encoder (its speed options and batch size apply).

    """

    def __init__(self, encoder: VideoEncoder) -> None:
        self._encoder = encoder

    @property
    def encoder(self) -> VideoEncoder:
        """The wrapped video encoder."""
        return self._encoder

    def host_buffer(self, shape: tuple[int, ...]) -> npt.NDArray[np.uint8]:
        """A uint8 host array to stage frames for upload: pinned memory on CUDA.

        Pinned (page-locked) memory lets :meth:`encode` upload asynchronously
        (``non_blocking``), without a bounce through a driver buffer.

        Args:
            shape: Array shape.

        Returns:
            An uninitialised uint8 array.

        """
        if not self._encoder.pinned_upload:
            return np.empty(shape, dtype=np.uint8)
        return torch.empty(shape, dtype=torch.uint8, pin_memory=True).numpy()

    def encode(self, frames: WindowLike, index: npt.NDArray[np.int64]) -> npt.NDArray[np.float32]:
        """Encode the windows ``frames[index[b]]``, b = 0..B-1, in one forward.

        The result equals ``encoder.encode_windows([frames[i] for i in index],
        prepared=True)`` up to float rounding (the same operations per element; the batch
        shape may change the order of reductions).

        Args:
            frames: (N, crop, crop, 3) uint8 prepared frames (``prepare_frame`` output).
            index: (B, T) positions in ``frames``, oldest first per window; T a multiple
                of the tubelet size.

        Returns:
            (B, dim) float32 embeddings.

        Raises:
            InputError: Wrong frame shape or dtype, bad T, an index out of range.

        """
        enc = self._encoder
        crop = enc.crop_size
        x = _as_tensor(frames)
        if x.dtype != torch.uint8 or tuple(x.shape[1:]) != (crop, crop, 3):
            raise InputError(
                f"expected (N, {crop}, {crop}, 3) uint8 frames, got {x.dtype} {tuple(x.shape)}"
            )
        idx = torch.as_tensor(np.asarray(index, dtype=np.int64))
        if idx.ndim != 2 or idx.shape[0] == 0 or idx.shape[1] == 0:
            raise InputError(f"index of shape {tuple(idx.shape)}: expected (B, T), both > 0")
        if idx.shape[1] % enc.tubelet_size:
            raise InputError(
                f"windows of {idx.shape[1]} frames: need a multiple of {enc.tubelet_size}"
            )
        if int(idx.min()) < 0 or int(idx.max()) >= x.shape[0]:
            raise InputError(f"index outside the {x.shape[0]} frames given")
        b = int(idx.shape[0])
        size = enc.fast_forward.run_size(b)
        if size > b:  # pad by index (no pixel copy) up to the fixed batch size
            idx = torch.cat([idx, idx[-1:].expand(size - b, -1)])
        with torch.inference_mode():
            video = x.to(enc.device, non_blocking=True).permute(0, 3, 1, 2)
            video = enc.normalize(video)  # (N, 3, c, c), once per distinct frame
            pixels = video[idx.to(enc.device, non_blocking=True)]  # (B, T, 3, c, c)
            # .cpu() waits for the forward, hence for the upload: the staging buffer may
            # be refilled as soon as this returns
            z = enc.forward_features(pixels)[:b].cpu().numpy()
        return np.asarray(z, dtype=np.float32)

    def warm_up(self, frames: int, most: int | None = None) -> None:
        """Run every batch size the live path may use once, on dummy frames.

        torch.compile, CUDA-graph capture and kernel selection then happen here (at node
        start) instead of on the first camera frames.

        Args:
            frames: T, frames per window.
            most: The largest batch (default: the encoder's ``batch_size``).

        """
        most = most or self._encoder.batch_size
        sizes = self._encoder.fast_forward.batch_sizes or list(range(1, most + 1))
        crop = self._encoder.crop_size
        dummy = np.zeros((frames + most - 1, crop, crop, 3), dtype=np.uint8)
        for b in sorted({min(s, most) for s in sizes}, reverse=True):
            index = np.arange(frames)[None, :] + np.arange(b)[:, None]
            self.encode(dummy, index)
