r"""How the SQLite store writes a frame embedding into a blob, and reads it back.

Each ``embeddings`` row names its own dtype, so a store whose ``embedding_dtype`` changed
between runs holds rows of both kinds and reads each as written.

* ``<f4`` (``float32``) and ``<f2`` (``float16``): the unit vector's values.
* ``q8`` (``int8``): a float32 scale, then the vector's values as int8,
  :math:`q = \mathrm{round}(127\, x / \max_j |x_j|)`; the scale is :math:`1/\lVert q
  \rVert`, so the vector read back, :math:`\hat{x} = s\, q`, is unit-norm. A 1024-d frame
  takes 1,028 bytes instead of float16's 2,048, and a cosine read back differs from
  float32's by at most about 0.005 (measured in RESULTS.md with the recall it costs).
  Copying a ``q8`` vector into another ``q8`` store gives the same bytes: the largest
  value of :math:`\hat{x}` maps to 127 again.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

__all__ = ["BLOB_DTYPES", "blob_dim", "decode_blob", "decode_blobs", "encode_blobs"]

BLOB_DTYPES = {"float16": "<f2", "float32": "<f4", "int8": "q8"}
"""The ``embedding_dtype`` setting -> the dtype a row names."""

_Q8 = "q8"
_SCALE = np.dtype("<f4")


def encode_blobs(unit: npt.NDArray[np.floating], dtype: str) -> list[bytes]:
    """One blob per row of ``unit`` (frames, D), in the row dtype ``dtype``."""
    if dtype != _Q8:
        return [row.astype(dtype).tobytes() for row in unit]
    x = np.asarray(unit, dtype=np.float32)
    peak = np.maximum(np.abs(x).max(axis=1, keepdims=True), np.finfo(np.float32).tiny)
    q = np.rint(x * (127.0 / peak)).astype(np.int8)
    norm = np.linalg.norm(q.astype(np.float32), axis=1)
    scale = np.where(norm > 0, 1.0 / np.maximum(norm, 1e-30), 0.0).astype(_SCALE)
    return [s.tobytes() + row.tobytes() for s, row in zip(scale, q, strict=True)]


def blob_dim(blob: bytes, dtype: str) -> int:
    """The dimension of a vector stored as ``blob`` in the row dtype ``dtype``."""
    if dtype == _Q8:
        return len(blob) - _SCALE.itemsize
    return len(blob) // np.dtype(dtype).itemsize


def decode_blob(blob: bytes, dim: int, dtype: str) -> npt.NDArray[np.floating]:
    """One stored vector (float16 stays float16: the caller converts when it computes)."""
    if dtype != _Q8:
        return np.frombuffer(blob, dtype=dtype, count=dim)
    row: npt.NDArray[np.float32] = decode_blobs([blob], dim, dtype)[0]
    return row


def decode_blobs(blobs: Sequence[bytes], dim: int, dtype: str) -> npt.NDArray[np.float32]:
    """Rows of one dtype and dimension as (rows, D) float32."""
    joined = b"".join(blobs)
    if dtype != _Q8:
        return np.frombuffer(joined, dtype=dtype).reshape(len(blobs), dim).astype(np.float32)
    raw = np.frombuffer(joined, dtype=np.uint8).reshape(len(blobs), _SCALE.itemsize + dim)
    scale = raw[:, : _SCALE.itemsize].copy().view(_SCALE)
    rows: npt.NDArray[np.float32] = raw[:, _SCALE.itemsize :].view(np.int8).astype(np.float32)
    rows *= scale
    return rows
