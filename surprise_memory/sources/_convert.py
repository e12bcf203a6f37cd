"""Image messages (as deserialized by ``rosbags``) to RGB uint8 arrays.

Private helper of the bag source. ``rosbags-image`` would do this, but it imports OpenCV,
which is not a dependency of this package; this helper needs only numpy and Pillow.
It reads the fields every ``sensor_msgs/msg/Image`` / ``CompressedImage`` object has
(rosbags' dataclasses and rclpy's messages alike), so it can move to
:mod:`surprise_memory.frames` once that module converts messages itself.
"""

from __future__ import annotations

import io
from typing import Any

import numpy as np
import numpy.typing as npt

from surprise_memory.errors import InputError

__all__ = ["SUPPORTED_ENCODINGS", "compressed_to_rgb", "image_to_rgb", "message_to_rgb"]

# encoding -> (channels, bytes per channel, channel order for RGB out)
_RAW: dict[str, tuple[int, int, tuple[int, ...]]] = {
    "rgb8": (3, 1, (0, 1, 2)),
    "bgr8": (3, 1, (2, 1, 0)),
    "rgba8": (4, 1, (0, 1, 2)),
    "bgra8": (4, 1, (2, 1, 0)),
    "mono8": (1, 1, (0, 0, 0)),
    "8UC1": (1, 1, (0, 0, 0)),
    "8UC3": (3, 1, (2, 1, 0)),  # OpenCV's default order, as cv_bridge reads it
    "8UC4": (4, 1, (2, 1, 0)),
    "rgb16": (3, 2, (0, 1, 2)),
    "bgr16": (3, 2, (2, 1, 0)),
    "rgba16": (4, 2, (0, 1, 2)),
    "bgra16": (4, 2, (2, 1, 0)),
    "mono16": (1, 2, (0, 0, 0)),
    "16UC1": (1, 2, (0, 0, 0)),
}

SUPPORTED_ENCODINGS: tuple[str, ...] = tuple(_RAW)
"""Raw ``sensor_msgs/Image`` encodings understood (compressed: anything Pillow decodes)."""


def message_to_rgb(msg: Any) -> npt.NDArray[np.uint8]:
    """Convert an ``Image`` or ``CompressedImage`` message to an (H, W, 3) uint8 RGB array.

    Raises:
        InputError: Unknown encoding or format, zero size, truncated or undecodable data.

    """
    if hasattr(msg, "format"):
        return compressed_to_rgb(msg)
    return image_to_rgb(msg)


def image_to_rgb(msg: Any) -> npt.NDArray[np.uint8]:
    """Convert a raw ``sensor_msgs/msg/Image`` to RGB uint8 (16-bit: high byte kept).

    Raises:
        InputError: Unknown encoding, zero size, or fewer bytes than height * step.

    """
    encoding = str(msg.encoding)
    spec = _RAW.get(encoding)
    if spec is None:
        raise InputError(
            f"image encoding {encoding!r} is not supported; expected one of "
            f"{', '.join(SUPPORTED_ENCODINGS)}"
        )
    channels, depth, order = spec
    height, width, step = int(msg.height), int(msg.width), int(msg.step)
    if height <= 0 or width <= 0:
        raise InputError(f"image of size {width}x{height}: expected a non-empty image")
    row = width * channels * depth
    if step < row:
        raise InputError(f"image step {step} < width*channels*bytes = {row} ({encoding})")
    data = np.frombuffer(memoryview(msg.data).cast("B"), dtype=np.uint8)
    if data.size < step * (height - 1) + row:
        raise InputError(
            f"image data has {data.size} bytes, expected {step * height} "
            f"({width}x{height} {encoding}, step {step})"
        )
    rows = np.lib.stride_tricks.as_strided(data, shape=(height, row), strides=(step, 1))
    if depth == 1:
        pixels = rows.reshape(height, width, channels)
    else:
        # keep the most significant byte of each 16-bit channel
        high = 0 if msg.is_bigendian else 1
        pixels = rows.reshape(height, width, channels, 2)[..., high]
    return np.ascontiguousarray(pixels[:, :, list(order)], dtype=np.uint8)


def compressed_to_rgb(msg: Any) -> npt.NDArray[np.uint8]:
    """Decode a ``sensor_msgs/msg/CompressedImage`` (JPEG, PNG, ...) to RGB uint8.

    Raises:
        InputError: A depth image (``compressedDepth``), empty or undecodable data.

    """
    from PIL import Image, UnidentifiedImageError

    fmt = str(msg.format)
    if "compressedDepth" in fmt:
        raise InputError(f"compressed image format {fmt!r} is a depth image, not a camera image")
    data = bytes(memoryview(msg.data).cast("B"))
    if not data:
        raise InputError(f"compressed image ({fmt!r}) has no data")
    try:
        with Image.open(io.BytesIO(data)) as image:
            rgb = np.asarray(image.convert("RGB"), dtype=np.uint8)
    except (UnidentifiedImageError, OSError, ValueError) as err:
        raise InputError(
            f"compressed image ({fmt!r}, {len(data)} bytes) cannot be decoded: {err}"
        ) from err
    if rgb.ndim != 3 or rgb.shape[0] == 0 or rgb.shape[1] == 0:
        raise InputError(f"compressed image ({fmt!r}) decoded to shape {rgb.shape}")
    return np.ascontiguousarray(rgb)
