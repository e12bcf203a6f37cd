"""The one frame type of the project and its conversion from ROS images.

* :class:`Frame`: RGB uint8 pixels + stamp in integer nanoseconds.
* :func:`frame_from_image_msg`: ``sensor_msgs/Image`` or ``CompressedImage`` -> :class:`Frame`,
  through the ``rosbags-image`` library, which reads rclpy's message objects and the
  messages ``rosbags`` deserialises from bags alike (duck-typed: ``header``, ``encoding``,
  ``height``, ``width``, ``step``, ``is_bigendian``, ``data``; or ``format``, ``data``). No
  cv_bridge: the PyPI port is broken under numpy 2.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

import numpy as np
import numpy.typing as npt

from surprise_memory.errors import InputError
from surprise_memory.stamps import stamp_to_ns

__all__ = [
    "COLOR_ENCODINGS",
    "CompressedFrame",
    "Frame",
    "RgbArray",
    "compressed_frame_from_msg",
    "frame_from_image_msg",
    "rgb_from_image_msg",
]

RgbArray = npt.NDArray[np.uint8]

COLOR_ENCODINGS: frozenset[str] = frozenset(
    {
        "rgb8",
        "bgr8",
        "rgba8",
        "bgra8",
        "mono8",
        "mono16",
        "rgb16",
        "bgr16",
        "rgba16",
        "bgra16",
        "bayer_rggb8",
        "bayer_bggr8",
        "bayer_gbrg8",
        "bayer_grbg8",
    }
)
"""``sensor_msgs/Image`` encodings converted to RGB (16-bit values scaled to 8 bits)."""

_BYTES_PER_PIXEL = {
    "rgb8": 3,
    "bgr8": 3,
    "rgba8": 4,
    "bgra8": 4,
    "mono8": 1,
    "mono16": 2,
    "rgb16": 6,
    "bgr16": 6,
    "rgba16": 8,
    "bgra16": 8,
}
_DEPTH_ENCODINGS = frozenset({"16UC1", "32FC1", "mono16_depth", "8UC1"})


@dataclass(frozen=True)
class Frame:
    """One camera image: RGB uint8 pixels and the stamp of its source message.

    Attributes:
        rgb: (H, W, 3) uint8 array, RGB order.
        stamp_ns: Stamp in integer nanoseconds (the message header's, or the video's
            presentation time), never the time it was received.
        frame_id: The camera frame of the source message, "" when unknown.

    Raises:
        InputError: ``rgb`` is not a non-empty (H, W, 3) uint8 array, or ``stamp_ns`` is
            not an integer.

    """

    rgb: npt.NDArray[np.uint8]
    stamp_ns: int
    frame_id: str = ""

    def __post_init__(self) -> None:
        _check_rgb(self.rgb, "Frame.rgb")
        if isinstance(self.stamp_ns, bool) or not isinstance(self.stamp_ns, int | np.integer):
            raise InputError(f"Frame.stamp_ns={self.stamp_ns!r}: must be integer nanoseconds")
        object.__setattr__(self, "stamp_ns", int(self.stamp_ns))


@dataclass(frozen=True)
class CompressedFrame:
    """A camera image kept as it came over the wire (JPEG or PNG bytes), decoded on demand.

    The memory node holds these for the seconds an episode may reach back, and decodes only
    the few frames an episode keeps: a 640x480 JPEG is about 50 KB against 900 KB decoded.

    Attributes:
        data: The compressed bytes (JPEG or PNG, checked by their magic bytes).
        stamp_ns: Stamp of the source message, integer nanoseconds.
        frame_id: The camera frame of the source message, "" when unknown.
        format: The message's ``format`` field (e.g. ``"rgb8; jpeg compressed bgr8"``).

    Raises:
        InputError: ``data`` is neither JPEG nor PNG.

    """

    data: bytes
    stamp_ns: int
    frame_id: str = ""
    format: str = "jpeg"

    def __post_init__(self) -> None:
        _check_compressed(self.data, self.format)

    @property
    def nbytes(self) -> int:
        """Bytes held."""
        return len(self.data)

    def decode(self) -> Frame:
        """The frame's pixels as a :class:`Frame`.

        Raises:
            InputError: The bytes cannot be decoded (see :func:`rgb_from_image_msg`).

        """
        return Frame(rgb=_rgb_from_compressed(self), stamp_ns=self.stamp_ns, frame_id=self.frame_id)


def _check_compressed(data: bytes, fmt: str) -> None:
    head = bytes(data[:8]) if len(data) else b""
    if not (head.startswith(b"\xff\xd8\xff") or head.startswith(b"\x89PNG")):
        raise InputError(
            f"compressed image (format {fmt!r}, {len(data)} bytes) is neither JPEG nor PNG"
        )


def _check_rgb(rgb: Any, what: str) -> None:
    if not isinstance(rgb, np.ndarray):
        raise InputError(f"{what}: expected a numpy array, got {type(rgb).__name__}")
    if rgb.dtype != np.uint8 or rgb.ndim != 3 or rgb.shape[2] != 3:
        raise InputError(f"{what}: expected an (H, W, 3) uint8 array, got {rgb.dtype} {rgb.shape}")
    if rgb.shape[0] == 0 or rgb.shape[1] == 0:
        raise InputError(f"{what}: empty image {rgb.shape}")


# --------------------------------------------------------------------------- conversions


def _stamp_ns(msg: Any) -> tuple[int, str]:
    header = getattr(msg, "header", None)
    if header is None:
        return 0, ""
    return stamp_to_ns(header.stamp), str(header.frame_id)


class _PackedImage:
    """The fields rosbags-image reads, with row padding removed (see rgb_from_image_msg)."""

    def __init__(self, msg: Any, data: bytes | npt.NDArray[np.uint8]) -> None:
        self.encoding = msg.encoding
        self.height = msg.height
        self.width = msg.width
        self.is_bigendian = msg.is_bigendian
        self.data = data


def rgb_from_image_msg(msg: Any) -> RgbArray:
    """Convert a ``sensor_msgs/Image`` or ``CompressedImage`` to an RGB uint8 array.

    Works on rclpy message objects and on ``rosbags`` deserialised messages. Rows padded
    beyond ``width * bytes_per_pixel`` (``step`` larger) are unpadded first.

    Args:
        msg: An Image (encodings in :data:`COLOR_ENCODINGS`) or a CompressedImage (JPEG or
            PNG, colour or grey).

    Returns:
        A new (H, W, 3) uint8 C-contiguous RGB array (it does not share the message's
        buffer).

    Raises:
        InputError: Depth or unknown encoding, zero-sized image, ``step``/``data`` length
            not matching the size, undecodable compressed data.

    """
    if hasattr(msg, "format"):
        return _rgb_from_compressed(msg)
    return _rgb_from_raw(msg)


def _rgb_from_raw(msg: Any) -> RgbArray:
    from rosbags.image import ImageError, image_to_cvimage

    encoding = str(msg.encoding)
    height, width, step = int(msg.height), int(msg.width), int(msg.step)
    if encoding in _DEPTH_ENCODINGS or encoding[:1].isdigit():
        raise InputError(
            f"image encoding {encoding!r} is a depth/generic image; expected a colour or mono "
            f"camera image ({', '.join(sorted(COLOR_ENCODINGS))})"
        )
    if encoding not in COLOR_ENCODINGS:
        raise InputError(
            f"unsupported image encoding {encoding!r}; expected one of "
            f"{', '.join(sorted(COLOR_ENCODINGS))}"
        )
    if height == 0 or width == 0:
        raise InputError(f"empty image: {width}x{height} ({encoding})")
    row = width * _BYTES_PER_PIXEL.get(encoding, 1)
    data = np.frombuffer(msg.data, dtype=np.uint8)
    if step < row:
        raise InputError(
            f"image step={step} is smaller than width*bytes_per_pixel={row} ({width}x{height} "
            f"{encoding})"
        )
    if data.size != step * height:
        raise InputError(
            f"image data holds {data.size} bytes, expected step*height={step}*{height}="
            f"{step * height} ({width}x{height} {encoding})"
        )
    if step != row:
        data = np.ascontiguousarray(data.reshape(height, step)[:, :row]).reshape(-1)
    try:
        rgb = image_to_cvimage(cast(Any, _PackedImage(msg, data)), "rgb8")
    except ImageError as err:  # pragma: no cover - encodings are checked above
        raise InputError(f"cannot convert {encoding!r} image: {err}") from err
    return np.array(rgb, dtype=np.uint8, order="C", copy=True)


def _rgb_from_compressed(msg: Any) -> RgbArray:
    from rosbags.image import ImageError, compressed_image_to_cvimage

    fmt = str(msg.format)
    if "compresseddepth" in fmt.lower().replace(" ", ""):
        raise InputError(f"compressed depth image ({fmt!r}) refused; expected a colour image")
    _check_compressed(msg.data, fmt)
    try:
        # no colour conversion in the library: grey PNG/JPEG decode to 2-D, colour to BGR
        img = compressed_image_to_cvimage(msg)
    except (AssertionError, ImageError, ValueError) as err:
        raise InputError(f"cannot decode compressed image (format {fmt!r}): {err}") from err
    if img is None or img.size == 0:
        raise InputError(f"compressed image (format {fmt!r}) decoded to an empty image")
    channels = 1 if img.ndim == 2 else img.shape[2]
    if channels not in (1, 3, 4) or img.dtype != np.uint8:
        raise InputError(f"compressed image decoded to unsupported {img.dtype} {img.shape}")
    if channels == 1:
        grey = img.reshape(img.shape[0], img.shape[1], 1)
        return np.ascontiguousarray(np.repeat(grey, 3, axis=2))
    return np.ascontiguousarray(img[:, :, 2::-1])  # BGR(A) -> RGB


def frame_from_image_msg(msg: Any) -> Frame:
    """Convert a ``sensor_msgs/Image`` or ``CompressedImage`` to a :class:`Frame`.

    The stamp and frame_id come from the message header (``header.stamp.sec``/``nanosec``).

    Args:
        msg: The image message (rclpy or rosbags).

    Returns:
        The frame, owning its pixels.

    Raises:
        InputError: See :func:`rgb_from_image_msg`.

    """
    stamp_ns, frame_id = _stamp_ns(msg)
    return Frame(rgb=rgb_from_image_msg(msg), stamp_ns=stamp_ns, frame_id=frame_id)


def compressed_frame_from_msg(msg: Any) -> CompressedFrame:
    """Keep a ``sensor_msgs/CompressedImage`` without decoding it (see :class:`CompressedFrame`).

    Args:
        msg: The message (rclpy or rosbags).

    Returns:
        The frame, owning a copy of the bytes.

    Raises:
        InputError: A compressed depth image, or bytes that are neither JPEG nor PNG.

    """
    fmt = str(msg.format)
    if "compresseddepth" in fmt.lower().replace(" ", ""):
        raise InputError(f"compressed depth image ({fmt!r}) refused; expected a colour image")
    stamp_ns, frame_id = _stamp_ns(msg)
    return CompressedFrame(bytes(msg.data), stamp_ns, frame_id, fmt)
