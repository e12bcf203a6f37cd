"""The one frame type of the project, its conversion from ROS images, and frame buffers.

* :class:`Frame`: RGB uint8 pixels + stamp in integer nanoseconds.
* :func:`frame_from_image_msg`: ``sensor_msgs/Image`` or ``CompressedImage`` -> :class:`Frame`,
  through the ``rosbags-image`` library, which reads rclpy's message objects and the
  messages ``rosbags`` deserialises from bags alike (duck-typed: ``header``, ``encoding``,
  ``height``, ``width``, ``step``, ``is_bigendian``, ``data``; or ``format``, ``data``). No
  cv_bridge: the PyPI port is broken under numpy 2.
* :class:`FrameRingBuffer`: a preallocated ring of fixed-size frames whose ``latest(m)``
  is one contiguous array *view* (no copy per window), and whose frames can be looked up
  by stamp (episodes).
* :class:`WindowSampler`: the encoder's input policy over a ring buffer (input rate,
  stride, warm-up), one frame in, at most one window out.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

import numpy as np
import numpy.typing as npt

from surprise_memory.config import EncoderConfig
from surprise_memory.errors import ConfigError, InputError

__all__ = [
    "COLOR_ENCODINGS",
    "Frame",
    "FrameRingBuffer",
    "Window",
    "WindowSampler",
    "frame_from_image_msg",
    "rgb_from_image_msg",
]

RgbArray = npt.NDArray[np.uint8]
FrameTransform = Callable[[RgbArray], RgbArray]

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
    stamp = header.stamp
    return int(stamp.sec) * 1_000_000_000 + int(stamp.nanosec), str(header.frame_id)


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
    data = bytes(msg.data[:8]) if len(msg.data) else b""
    if not (data.startswith(b"\xff\xd8\xff") or data.startswith(b"\x89PNG")):
        raise InputError(
            f"compressed image (format {fmt!r}, {len(msg.data)} bytes) is neither JPEG nor PNG"
        )
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


# --------------------------------------------------------------------------- ring buffer


class FrameRingBuffer:
    """Preallocated ring of the ``capacity`` most recent frames, all of one fixed size.

    Storage is one uint8 array of ``capacity + window - 1`` slots. Frame i goes to slot
    ``i % capacity``; the first ``window - 1`` slots are also mirrored after the end, so
    the last m <= ``window`` frames are always one contiguous slice: :meth:`latest`
    returns a read-only view, with no per-window copy. Memory:
    ``(capacity + window - 1) * height * width * 3`` bytes (64 frames at 256x256 for the
    encoder: 25 MB).

    The size is fixed so that windows are cheap: every frame is brought to
    ``(height, width)`` once, on insert, by ``transform`` (the video encoder passes its
    geometric preprocessing, resize-shortest-edge + centre crop, so a window is already at
    the model's input size). Without a transform, frames must already have that size.

    Args:
        capacity: Frames held (oldest dropped first).
        height: Stored frame height.
        width: Stored frame width.
        window: Largest m that :meth:`latest` serves as a contiguous view (<= capacity).
        transform: Optional ``rgb -> rgb`` applied on insert; its output must be
            (height, width, 3) uint8.

    Raises:
        ConfigError: A size is out of range.

    """

    def __init__(
        self,
        capacity: int,
        height: int,
        width: int,
        *,
        window: int = 1,
        transform: FrameTransform | None = None,
    ) -> None:
        for name, value in (("capacity", capacity), ("height", height), ("width", width)):
            if value < 1:
                raise ConfigError(f"{name}={value}: must be >= 1")
        if not 1 <= window <= capacity:
            raise ConfigError(f"window={window}: must be in 1..capacity={capacity}")
        self._capacity = capacity
        self._window = window
        self._shape = (height, width, 3)
        self._transform = transform
        self._slots = np.zeros((capacity + window - 1, height, width, 3), dtype=np.uint8)
        self._stamps = np.zeros(capacity, dtype=np.int64)
        self._frame_ids = [""] * capacity
        self._count = 0  # frames pushed since the last clear

    @property
    def capacity(self) -> int:
        """Frames held at most."""
        return self._capacity

    @property
    def frame_shape(self) -> tuple[int, int, int]:
        """(height, width, 3) of every stored frame."""
        return self._shape

    @property
    def window(self) -> int:
        """Largest m that :meth:`latest` serves."""
        return self._window

    def __len__(self) -> int:
        return min(self._count, self._capacity)

    @property
    def last_stamp_ns(self) -> int | None:
        """Stamp of the newest frame (None when empty)."""
        if self._count == 0:
            return None
        return int(self._stamps[(self._count - 1) % self._capacity])

    def clear(self) -> None:
        """Forget every frame (the storage stays allocated)."""
        self._count = 0

    def push(self, frame: Frame) -> None:
        """Add a frame (after ``transform``), dropping the oldest when full.

        Args:
            frame: The frame; its stamp must be later than the newest held frame's.

        Raises:
            InputError: Stamp not increasing, or the (transformed) frame has the wrong
                size. The buffer is unchanged then.

        """
        last = self.last_stamp_ns
        if last is not None and frame.stamp_ns <= last:
            raise InputError(
                f"frame stamp {frame.stamp_ns} ns is not after the newest buffered frame "
                f"({last} ns); clear() the buffer when time jumps back"
            )
        rgb = frame.rgb if self._transform is None else self._transform(frame.rgb)
        if rgb.shape != self._shape or rgb.dtype != np.uint8:
            raise InputError(
                f"frame of {rgb.dtype} {rgb.shape} does not fit the buffer's {self._shape} uint8"
                + ("" if self._transform is None else " after its transform")
            )
        slot = self._count % self._capacity
        self._slots[slot] = rgb
        if slot < self._window - 1:
            self._slots[self._capacity + slot] = rgb
        self._stamps[slot] = frame.stamp_ns
        self._frame_ids[slot] = frame.frame_id
        self._count += 1

    def latest(self, m: int) -> RgbArray:
        """The m most recent frames, oldest first, as one contiguous read-only view.

        The view is valid until the next ``push`` overwrites its slots (after
        ``capacity - m + 1`` more pushes at the earliest); copy it to keep it longer.

        Args:
            m: Number of frames, 1 <= m <= min(window, len(self)).

        Returns:
            (m, height, width, 3) uint8 view into the buffer.

        Raises:
            InputError: m out of range.

        """
        if not 1 <= m <= min(self._window, len(self)):
            raise InputError(
                f"latest({m}): the buffer holds {len(self)} frames and serves windows of at "
                f"most {self._window}"
            )
        end = (self._count - 1) % self._capacity + 1  # one past the newest slot
        start = end - m
        if start < 0:  # wraps: read the mirror after the end instead
            start += self._capacity
            end += self._capacity
        view = self._slots[start:end]
        view.flags.writeable = False
        return view

    def latest_stamps(self, m: int) -> npt.NDArray[np.int64]:
        """Stamps (ns) of the m most recent frames, oldest first (a copy)."""
        n = len(self)
        if not 1 <= m <= n:
            raise InputError(f"latest_stamps({m}): the buffer holds {n} frames")
        idx = (np.arange(self._count - m, self._count)) % self._capacity
        return self._stamps[idx].copy()

    def _order(self) -> npt.NDArray[np.int64]:
        """Slot indices of the held frames, oldest first."""
        n = len(self)
        return np.arange(self._count - n, self._count, dtype=np.int64) % self._capacity

    def between(self, start_ns: int, end_ns: int) -> list[Frame]:
        """Held frames with ``start_ns <= stamp <= end_ns``, oldest first, as copies.

        Args:
            start_ns: First stamp, inclusive.
            end_ns: Last stamp, inclusive.

        Returns:
            The frames (possibly none).

        Raises:
            InputError: ``end_ns < start_ns``.

        """
        if end_ns < start_ns:
            raise InputError(f"between({start_ns}, {end_ns}): end before start")
        order = self._order()
        stamps = self._stamps[order]
        lo = int(np.searchsorted(stamps, start_ns, side="left"))
        hi = int(np.searchsorted(stamps, end_ns, side="right"))
        return [self._frame_at(int(s)) for s in order[lo:hi]]

    def around(self, stamp_ns: int, count: int) -> list[Frame]:
        """The ``count`` held frames centred on the one nearest ``stamp_ns`` (copies).

        Centred means ``count // 2`` frames before the nearest one when available; the
        selection is shifted to stay inside the buffer, so fewer frames come back only
        when fewer are held.

        Args:
            stamp_ns: The stamp to centre on (e.g. an event's peak frame).
            count: Frames wanted (>= 1).

        Returns:
            Up to ``count`` frames, oldest first (none when the buffer is empty).

        Raises:
            InputError: ``count < 1``.

        """
        if count < 1:
            raise InputError(f"around(count={count}): must be >= 1")
        order = self._order()
        if order.size == 0:
            return []
        stamps = self._stamps[order]
        i = int(np.searchsorted(stamps, stamp_ns))
        if i == stamps.size or (i > 0 and stamp_ns - stamps[i - 1] <= stamps[i] - stamp_ns):
            i -= 1
        lo = max(0, min(i - count // 2, order.size - count))
        return [self._frame_at(int(s)) for s in order[lo : lo + count]]

    def _frame_at(self, slot: int) -> Frame:
        return Frame(
            rgb=self._slots[slot].copy(),
            stamp_ns=int(self._stamps[slot]),
            frame_id=self._frame_ids[slot],
        )


# --------------------------------------------------------------------------- sampler


@dataclass(frozen=True)
class Window:
    """One encoder window decided by :class:`WindowSampler`.

    Attributes:
        stamp_ns: Stamp of the newest frame: the embedding of this window carries it.
        frames: (M, h, w, 3) uint8, oldest first; a read-only view into the ring buffer
            (valid until the next push) or, while padding, a new array.
        padded: Leading frames that repeat the first frame (warm-up 'pad'), else 0.

    """

    stamp_ns: int
    frames: RgbArray
    padded: int = 0


class WindowSampler:
    """The encoder's input policy: input rate, window of M frames, stride and warm-up.

    ``push(frame)`` keeps the frame when the input rate allows it (a deadline that advances
    by 1/``input_fps`` per kept frame and never lets two kept frames come closer than half
    a period, so jitter neither drops nor doubles frames), stores it (after ``transform``)
    in a :class:`FrameRingBuffer` of M frames, and returns a :class:`Window` on every
    ``stride``-th kept frame. Before M frames are held, warm-up ``'pad'`` returns windows
    whose missing leading frames repeat the first frame; ``'wait'`` returns nothing until
    the window is full. Stride counts from the first window.

    Args:
        clip_frames: M.
        frame_shape: (h, w) of the stored frames (the encoder's input size).
        stride: Return a window every k-th kept frame.
        input_fps: Keep at most this rate (Hz); 0 keeps every frame.
        warmup: 'pad' or 'wait'.
        transform: ``rgb -> rgb`` of shape ``frame_shape`` (e.g.
            ``VideoEncoder.prepare_frame``).

    Raises:
        ConfigError: A setting is out of range.

    """

    def __init__(
        self,
        clip_frames: int,
        frame_shape: tuple[int, int],
        *,
        stride: int = 1,
        input_fps: float = 0.0,
        warmup: str = "pad",
        transform: FrameTransform | None = None,
    ) -> None:
        cfg = EncoderConfig(
            clip_frames=clip_frames, clip_stride=stride, input_fps=input_fps, clip_warmup=warmup
        )
        self._m = cfg.clip_frames
        self._stride = cfg.clip_stride
        self._period_ns = 0 if cfg.input_fps == 0 else round(1e9 / cfg.input_fps)
        self._pad = cfg.clip_warmup == "pad"
        self._buffer = FrameRingBuffer(
            self._m, frame_shape[0], frame_shape[1], window=self._m, transform=transform
        )
        self._due_ns = -math.inf
        self._since_window = 0
        self._windows = 0

    @classmethod
    def from_config(
        cls,
        config: EncoderConfig,
        frame_shape: tuple[int, int],
        transform: FrameTransform | None = None,
    ) -> WindowSampler:
        """Build a sampler from the encoder config (clip_frames, clip_stride, ...)."""
        return cls(
            config.clip_frames,
            frame_shape,
            stride=config.clip_stride,
            input_fps=config.input_fps,
            warmup=config.clip_warmup,
            transform=transform,
        )

    @property
    def buffer(self) -> FrameRingBuffer:
        """The ring buffer of the kept frames."""
        return self._buffer

    @property
    def windows_emitted(self) -> int:
        """Windows returned since the last reset."""
        return self._windows

    def reset(self) -> None:
        """Forget every frame (e.g. when time jumps back)."""
        self._buffer.clear()
        self._due_ns = -math.inf
        self._since_window = 0
        self._windows = 0

    def push(self, frame: Frame) -> Window | None:
        """Offer one frame; return the window to encode now, if any.

        Args:
            frame: The next camera frame (stamps increasing).

        Returns:
            A window, or None (frame skipped by the input rate, stride, or warm-up 'wait').

        Raises:
            InputError: Stamp not increasing or frame unusable; the sampler is unchanged.

        """
        if frame.stamp_ns < self._due_ns:
            last = self._buffer.last_stamp_ns
            if last is not None and frame.stamp_ns <= last:
                raise InputError(
                    f"frame stamp {frame.stamp_ns} ns is not after the last kept frame "
                    f"({last} ns); reset() when time jumps back"
                )
            return None
        self._buffer.push(frame)
        if self._period_ns:
            self._due_ns = max(
                self._due_ns + self._period_ns, frame.stamp_ns + self._period_ns // 2
            )
        held = len(self._buffer)
        if held < self._m and not self._pad:
            return None
        if self._windows and self._since_window + 1 < self._stride:
            self._since_window += 1
            return None
        self._since_window = 0
        self._windows += 1
        if held >= self._m:
            return Window(frame.stamp_ns, self._buffer.latest(self._m))
        frames = self._buffer.latest(held)
        pad = np.repeat(frames[:1], self._m - held, axis=0)
        return Window(frame.stamp_ns, np.concatenate([pad, frames]), padded=self._m - held)
