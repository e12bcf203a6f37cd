"""Frames: ROS image conversion (rosbags message types), ring buffer, window sampler."""

from __future__ import annotations

import cv2
import numpy as np
import numpy.typing as npt
import pytest
from rosbags.typesys import Stores, get_typestore

from surprise_memory.errors import ConfigError, InputError
from surprise_memory.perception.frames import Frame, frame_from_image_msg, rgb_from_image_msg
from surprise_memory.perception.window import FrameRingBuffer, Window, WindowSampler

TS = get_typestore(Stores.LATEST)
Image = TS.types["sensor_msgs/msg/Image"]
CompressedImage = TS.types["sensor_msgs/msg/CompressedImage"]
Header = TS.types["std_msgs/msg/Header"]
Time = TS.types["builtin_interfaces/msg/Time"]

RNG = np.random.default_rng(7)
RGB = RNG.integers(0, 256, (5, 7, 3), dtype=np.uint8)


def header(stamp_ns: int = 1_500_000_123, frame_id: str = "cam") -> object:
    return Header(
        stamp=Time(sec=stamp_ns // 1_000_000_000, nanosec=stamp_ns % 1_000_000_000),
        frame_id=frame_id,
    )


def image(
    pixels: np.ndarray, encoding: str, *, step: int | None = None, big: bool = False
) -> object:
    h, w = pixels.shape[:2]
    raw = np.ascontiguousarray(pixels)
    if big:
        raw = raw.byteswap()
    data = raw.view(np.uint8).reshape(h, -1)
    row = data.shape[1]
    if step is not None and step > row:
        data = np.concatenate([data, np.full((h, step - row), 77, np.uint8)], axis=1)
    return Image(
        header=header(),
        height=h,
        width=w,
        encoding=encoding,
        is_bigendian=int(big),
        step=step or row,
        data=np.ascontiguousarray(data).reshape(-1),
    )


def compressed(pixels_bgr: np.ndarray, ext: str, fmt: str) -> object:
    ok, buf = cv2.imencode(ext, pixels_bgr)
    assert ok
    return CompressedImage(header=header(), format=fmt, data=buf.reshape(-1))


MONO16 = (RGB[:, :, 0].astype(np.uint16) * 257).astype(np.uint16)


@pytest.mark.parametrize(
    ("pixels", "encoding", "expected"),
    [
        (RGB, "rgb8", RGB),
        (RGB[:, :, ::-1], "bgr8", RGB),
        (np.dstack([RGB, np.full((5, 7), 9, np.uint8)]), "rgba8", RGB),
        (np.dstack([RGB[:, :, ::-1], np.full((5, 7), 9, np.uint8)]), "bgra8", RGB),
        (RGB[:, :, 0], "mono8", np.repeat(RGB[:, :, :1], 3, axis=2)),
        (MONO16, "mono16", np.repeat(RGB[:, :, :1], 3, axis=2)),
        (RGB.astype(np.uint16) * 257, "rgb16", RGB),
    ],
)
def test_raw_encodings_convert_to_rgb(
    pixels: npt.NDArray[np.generic], encoding: str, expected: npt.NDArray[np.uint8]
) -> None:
    out = rgb_from_image_msg(image(pixels, encoding))
    assert out.dtype == np.uint8 and out.shape == (5, 7, 3) and out.flags.c_contiguous
    np.testing.assert_array_equal(out, expected)


def test_big_endian_mono16_and_padded_rows() -> None:
    np.testing.assert_array_equal(
        rgb_from_image_msg(image(MONO16, "mono16", big=True)), np.repeat(RGB[:, :, :1], 3, axis=2)
    )
    padded = image(RGB, "rgb8", step=7 * 3 + 5)
    np.testing.assert_array_equal(rgb_from_image_msg(padded), RGB)


@pytest.mark.parametrize(
    ("encoding", "tile"),
    [
        ("bayer_rggb8", [[200, 100], [100, 50]]),
        ("bayer_bggr8", [[50, 100], [100, 200]]),
        ("bayer_gbrg8", [[100, 50], [200, 100]]),
        ("bayer_grbg8", [[100, 200], [50, 100]]),
    ],
)
def test_bayer_is_demosaiced(encoding: str, tile: list[list[int]]) -> None:
    mosaic = np.tile(np.array(tile, np.uint8), (4, 5))  # a flat (200, 100, 50) scene
    out = rgb_from_image_msg(image(mosaic, encoding))
    assert out.shape == (8, 10, 3)
    np.testing.assert_array_equal(out, np.broadcast_to(np.uint8([200, 100, 50]), out.shape))


def test_mono16_scales_the_full_range_to_8_bits() -> None:
    values = np.array([[0, 255, 0x8000, 0xFF00, 0xFFFF]], np.uint16)
    for big in (False, True):
        out = rgb_from_image_msg(image(values, "mono16", big=big))[0, :, 0].astype(int)
        # value * 255 / 65535, truncated: within one level of the high byte
        assert out[0] == 0 and out[-1] == 255
        assert np.abs(out - (values[0] >> 8)).max() <= 1


def test_frame_from_message_keeps_stamp_and_frame_id() -> None:
    frame = frame_from_image_msg(image(RGB, "rgb8"))
    assert frame.stamp_ns == 1_500_000_123 and frame.frame_id == "cam"
    msg = image(RGB, "rgb8")
    out = frame_from_image_msg(msg).rgb
    out[0, 0] = 0  # owns its pixels: the message is unchanged
    assert bytes(msg.data[:3]) == RGB[0, 0].tobytes()


@pytest.mark.parametrize(
    ("msg", "match"),
    [
        (image(np.zeros((4, 4), np.uint16), "16UC1"), r"'16UC1' is a depth"),
        (image(np.zeros((4, 4), np.float32), "32FC1"), r"'32FC1' is a depth"),
        (image(RGB, "hsv8"), r"unsupported image encoding 'hsv8'"),
        (
            Image(
                header=header(),
                height=0,
                width=4,
                encoding="rgb8",
                is_bigendian=0,
                step=12,
                data=np.zeros(0, np.uint8),
            ),
            r"empty image",
        ),
        (
            Image(
                header=header(),
                height=5,
                width=7,
                encoding="rgb8",
                is_bigendian=0,
                step=21,
                data=np.zeros(21 * 5 - 1, np.uint8),
            ),
            r"104 bytes, expected step\*height=21\*5=105",
        ),
        (
            Image(
                header=header(),
                height=5,
                width=7,
                encoding="rgb8",
                is_bigendian=0,
                step=20,
                data=np.zeros(100, np.uint8),
            ),
            r"step=20 is smaller than width\*bytes_per_pixel=21",
        ),
    ],
)
def test_unusable_images_raise_input_error(msg: object, match: str) -> None:
    with pytest.raises(InputError, match=match):
        frame_from_image_msg(msg)


@pytest.mark.parametrize(("ext", "fmt"), [(".png", "png"), (".png", "rgb8; png compressed bgr8")])
def test_compressed_png_is_lossless(ext: str, fmt: str) -> None:
    frame = frame_from_image_msg(compressed(RGB[:, :, ::-1], ext, fmt))
    np.testing.assert_array_equal(frame.rgb, RGB)
    assert frame.stamp_ns == 1_500_000_123


def test_compressed_jpeg_and_grey_png() -> None:
    flat = np.full((16, 16, 3), (30, 120, 200), np.uint8)  # RGB
    out = rgb_from_image_msg(compressed(flat[:, :, ::-1], ".jpg", "jpeg"))
    assert np.abs(out.astype(int) - flat).max() <= 3  # colour order kept (lossy)
    grey = rgb_from_image_msg(compressed(RGB[:, :, 0], ".png", "mono8; png compressed mono8"))
    np.testing.assert_array_equal(grey, np.repeat(RGB[:, :, :1], 3, axis=2))


@pytest.mark.parametrize(
    ("fmt", "data", "match"),
    [
        ("16UC1; compressedDepth png", b"\x89PNG....", r"compressed depth"),
        ("jpeg", b"not an image", r"neither JPEG nor PNG"),
        ("jpeg", b"", r"neither JPEG nor PNG"),
        ("jpeg", b"\xff\xd8\xff\xe0broken", r"cannot decode|empty"),
    ],
)
def test_bad_compressed_images(fmt: str, data: bytes, match: str) -> None:
    msg = CompressedImage(header=header(), format=fmt, data=np.frombuffer(data, np.uint8))
    with pytest.raises(InputError, match=match):
        frame_from_image_msg(msg)


@pytest.mark.parametrize(
    ("rgb", "stamp", "match"),
    [
        (np.zeros((4, 4), np.uint8), 0, r"\(H, W, 3\) uint8"),
        (np.zeros((4, 4, 3), np.float32), 0, r"\(H, W, 3\) uint8"),
        (np.zeros((0, 4, 3), np.uint8), 0, r"empty"),
        (np.zeros((4, 4, 3), np.uint8), 1.5, r"integer nanoseconds"),
    ],
)
def test_frame_validates(rgb: np.ndarray, stamp: object, match: str) -> None:
    with pytest.raises(InputError, match=match):
        Frame(rgb=rgb, stamp_ns=stamp)  # type: ignore[arg-type]


def frame(i: int, size: tuple[int, int] = (2, 3)) -> Frame:
    return Frame(rgb=np.full((*size, 3), i % 256, np.uint8), stamp_ns=1000 * (i + 1))


@pytest.mark.parametrize("pushed", [1, 3, 5, 7, 8, 13, 40])
def test_latest_is_a_contiguous_view_in_order(pushed: int) -> None:
    buf = FrameRingBuffer(8, 2, 3, window=5)
    for i in range(pushed):
        buf.push(frame(i))
    assert len(buf) == min(pushed, 8)
    for m in range(1, min(pushed, 5) + 1):
        view = buf.latest(m)
        assert view.flags.c_contiguous and not view.flags.writeable
        assert np.shares_memory(view, buf._slots)  # no copy per window
        assert list(view[:, 0, 0, 0]) == [i % 256 for i in range(pushed - m, pushed)]
    assert buf.last_stamp_ns == 1000 * pushed
    with pytest.raises(InputError, match="serves windows of at most 5"):
        buf.latest(6)


def test_push_rejects_without_changing_state() -> None:
    buf = FrameRingBuffer(4, 2, 3)
    buf.push(frame(3))
    with pytest.raises(InputError, match="not after the newest"):
        buf.push(frame(3))
    with pytest.raises(InputError, match=r"does not fit the buffer's \(2, 3, 3\)"):
        buf.push(frame(5, size=(3, 3)))
    assert len(buf) == 1 and buf.last_stamp_ns == 4000
    with pytest.raises(ConfigError, match="window=5"):
        FrameRingBuffer(4, 2, 3, window=5)


def test_transform_on_insert() -> None:
    buf = FrameRingBuffer(3, 1, 1, transform=lambda rgb: np.ascontiguousarray(rgb[:1, :1]))
    buf.push(frame(2, size=(40, 30)))
    assert buf.latest(1).shape == (1, 1, 1, 3)


def test_sampler_pads_then_strides() -> None:
    s = WindowSampler(4, (2, 3), stride=2, warmup="pad")
    out = []
    for i in range(8):  # window frames are views valid until the next push: copy them
        w = s.push(frame(i))
        out.append(None if w is None else Window(w.stamp_ns, w.frames.copy(), w.padded))
    emitted = [i for i, w in enumerate(out) if w is not None]
    assert emitted == [0, 2, 4, 6]
    first = out[0]
    assert first is not None and first.padded == 3 and first.frames.shape == (4, 2, 3, 3)
    assert list(first.frames[:, 0, 0, 0]) == [0, 0, 0, 0]
    w2 = out[2]
    assert w2 is not None and list(w2.frames[:, 0, 0, 0]) == [0, 0, 1, 2] and w2.padded == 1
    w6 = out[6]
    assert w6 is not None and w6.padded == 0 and w6.stamp_ns == 7000
    assert list(w6.frames[:, 0, 0, 0]) == [3, 4, 5, 6]


def test_sampler_waits_for_a_full_window() -> None:
    s = WindowSampler(4, (2, 3), warmup="wait")
    emitted = [i for i in range(6) if s.push(frame(i)) is not None]
    assert emitted == [3, 4, 5]


@pytest.mark.parametrize(
    ("camera_hz", "target_hz", "expected"),
    [(30.0, 10.0, 10), (30.0, 15.0, 15), (30.0, 20.0, 20), (10.0, 30.0, 10), (30.0, 0.0, 30)],
)
def test_sampler_input_rate(camera_hz: float, target_hz: float, expected: int) -> None:
    s = WindowSampler(2, (2, 3), input_fps=target_hz)
    rng = np.random.default_rng(1)
    kept = 0
    for i in range(int(camera_hz * 3)):  # 3 s with +-2 ms jitter
        stamp = int(i * 1e9 / camera_hz + rng.integers(-2_000_000, 2_000_000)) + 10**9
        f = Frame(rgb=np.zeros((2, 3, 3), np.uint8), stamp_ns=stamp)
        before = len(s.buffer), s.buffer.last_stamp_ns
        s.push(f)
        kept += (len(s.buffer), s.buffer.last_stamp_ns) != before
    assert abs(kept - 3 * expected) <= 1


def test_sampler_time_going_back_raises_and_reset_recovers() -> None:
    s = WindowSampler(2, (2, 3), input_fps=10.0)
    s.push(frame(5))
    with pytest.raises(InputError, match="reset"):
        s.push(frame(1))
    s.reset()
    assert s.push(frame(1)) is not None
