"""Per-frame cost of the frame path: ring buffer, window sampler, image message conversion.

Run: ``python benchmarks/bench_frames.py [--reps N]`` (inside the venv; the ROS messages
come from rclpy's ``sensor_msgs`` when importable, else from ``rosbags``' type store).

Figures (median over ``--reps`` rounds, each round a mean over many calls):

* ``FrameRingBuffer.push`` of a prepared 256x256 frame, and ``latest(64)`` (a view, no copy);
* ``WindowSampler.push`` per frame at M=64, stride 1, frames already at the model size (the
  encoder node's per-frame work after preparation) and with the encoder's geometric
  preparation of a 640x480 frame (resize shortest edge to 292, centre crop 256) on insert;
* ``frame_from_image_msg``: ``sensor_msgs/Image`` rgb8 and bgr8 at 640x480, and a JPEG
  ``CompressedImage`` of the same size, to a :class:`~surprise_memory.perception.frames.Frame`.
"""

from __future__ import annotations

import argparse
import functools
import io
import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt

from surprise_memory.perception.frames import Frame, frame_from_image_msg
from surprise_memory.perception.window import FrameRingBuffer, WindowSampler

WIDTH, HEIGHT = 640, 480
CROP = 256  # V-JEPA-2 ViT-L input size
M = 64  # paper window
_T0 = 1_700_000_000 * 10**9


def _per_call_us(fn: Callable[[int], object], calls: int, reps: int) -> tuple[float, float, float]:
    """(median, min, max) over ``reps`` rounds of the mean microseconds of ``fn(i)``."""
    fn(0)
    means = []
    k = 1
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn(k)
            k += 1
        means.append((time.perf_counter() - t0) / calls * 1e6)
    return statistics.median(means), min(means), max(means)


def _camera_images(count: int, rng: np.random.Generator) -> list[npt.NDArray[np.uint8]]:
    """Camera-like 640x480 RGB images: smooth gradients plus noise (JPEG-compressible)."""
    yy, xx = np.mgrid[0:HEIGHT, 0:WIDTH]
    out = []
    for _ in range(count):
        a, b = rng.uniform(0.1, 0.5, size=2)
        base = np.stack([xx * a, yy * b, (xx + yy) * 0.2], axis=-1)
        img = base + rng.normal(0, 6, size=base.shape)
        out.append(np.clip(img, 0, 255).astype(np.uint8))
    return out


def bench_ring_buffer(reps: int = 5, calls: int = 2000) -> dict[str, Any]:
    """Ring buffer and window sampler cost per frame (microseconds, median/min/max)."""
    rng = np.random.default_rng(0)
    prepared = [rng.integers(0, 256, (CROP, CROP, 3), dtype=np.uint8) for _ in range(8)]
    ring = FrameRingBuffer(M, CROP, CROP, window=M)
    for i in range(M):
        ring.push(Frame(prepared[i % 8], _T0 + i))
    base = _T0 + M

    def push(i: int) -> None:
        ring.push(Frame(prepared[i % 8], base + i))

    push_us = _per_call_us(push, calls, reps)
    latest_us = _per_call_us(lambda i: ring.latest(M), calls * 5, reps)

    sampler = WindowSampler(M, (CROP, CROP))
    for i in range(M):  # past the warm-up: every push returns a full window (a view)
        sampler.push(Frame(prepared[i % 8], _T0 + i))
    sampler_us = _per_call_us(lambda i: sampler.push(Frame(prepared[i % 8], base + i)), calls, reps)

    from surprise_memory.perception.encoders import resize_shortest_edge_and_crop

    def prepare(rgb: npt.NDArray[np.uint8]) -> npt.NDArray[np.uint8]:
        # the encoder's VideoEncoder.prepare_frame, without building a ViT-L to get it
        import torch

        x = torch.from_numpy(rgb).permute(2, 0, 1)
        return np.ascontiguousarray(resize_shortest_edge_and_crop(x, CROP).permute(1, 2, 0))

    camera = _camera_images(4, rng)
    full = WindowSampler(M, (CROP, CROP), transform=prepare)
    for i in range(M):
        full.push(Frame(camera[i % 4], _T0 + i))
    full_us = _per_call_us(
        lambda i: full.push(Frame(camera[i % 4], base + i)), max(50, calls // 10), reps
    )
    return {
        "ring_push_us": push_us,
        "ring_latest_us": latest_us,
        "sampler_push_us": sampler_us,
        "sampler_push_prepare_us": full_us,
        "shape": [CROP, CROP, 3],
        "window": M,
    }


def _message_types() -> tuple[str, Any, Any]:
    """(source, Image, CompressedImage) message classes: rclpy's, else rosbags'."""
    try:
        from sensor_msgs.msg import CompressedImage, Image

        return "rclpy sensor_msgs", Image, CompressedImage
    except ImportError:
        from rosbags.typesys import Stores, get_typestore

        ts = get_typestore(Stores.LATEST)
        return (
            "rosbags",
            ts.types["sensor_msgs/msg/Image"],
            ts.types["sensor_msgs/msg/CompressedImage"],
        )


def _make_messages(rgb: npt.NDArray[np.uint8]) -> tuple[str, dict[str, Any]]:
    """rgb8, bgr8 and JPEG messages of one image, in the available message classes."""
    from PIL import Image as PilImage

    source, image_cls, compressed_cls = _message_types()
    jpeg = io.BytesIO()
    PilImage.fromarray(rgb).save(jpeg, format="JPEG", quality=90)
    h, w = rgb.shape[:2]
    msgs: dict[str, Any] = {}
    if source == "rosbags":
        from rosbags.typesys import Stores, get_typestore

        ts = get_typestore(Stores.LATEST)
        header = ts.types["std_msgs/msg/Header"](
            stamp=ts.types["builtin_interfaces/msg/Time"](sec=1, nanosec=0), frame_id="camera"
        )
        for enc, arr in (("rgb8", rgb), ("bgr8", rgb[:, :, ::-1])):
            data = np.ascontiguousarray(arr).reshape(-1)
            msgs[enc] = image_cls(header, h, w, enc, 0, w * 3, data)
        msgs["jpeg"] = compressed_cls(header, "jpeg", np.frombuffer(jpeg.getvalue(), np.uint8))
        return source, msgs
    for enc, arr in (("rgb8", rgb), ("bgr8", rgb[:, :, ::-1])):
        m = image_cls(height=h, width=w, encoding=enc, is_bigendian=0, step=w * 3)
        m.data = np.ascontiguousarray(arr).tobytes()
        m.header.stamp.sec, m.header.frame_id = 1, "camera"
        msgs[enc] = m
    c = compressed_cls(format="jpeg")
    c.data = jpeg.getvalue()
    c.header.stamp.sec, c.header.frame_id = 1, "camera"
    msgs["jpeg"] = c
    return source, msgs


def _convert(msg: Any, _call: int) -> Frame:
    return frame_from_image_msg(msg)


def bench_conversion(reps: int = 5, calls: int = 50) -> dict[str, Any]:
    """``frame_from_image_msg`` per message, 640x480 (microseconds, median/min/max)."""
    rgb = _camera_images(1, np.random.default_rng(1))[0]
    source, msgs = _make_messages(rgb)
    out: dict[str, Any] = {"messages": source, "size": [WIDTH, HEIGHT]}
    for name, msg in msgs.items():
        frame = frame_from_image_msg(msg)
        if name != "jpeg":  # raw conversions must be exact
            assert np.array_equal(frame.rgb, rgb), name
        out[f"{name}_us"] = _per_call_us(functools.partial(_convert, msg), calls, reps)
    out["jpeg_bytes"] = len(bytes(msgs["jpeg"].data))
    return out


def main() -> None:
    """Print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=5, help="rounds (median taken)")
    args = parser.parse_args()
    ring = bench_ring_buffer(args.reps)
    conv = bench_conversion(args.reps)
    print(f"{'figure':<62} {'median us':>10} {'min':>8} {'max':>8}")
    rows = [
        ("FrameRingBuffer.push 256x256", ring["ring_push_us"]),
        ("FrameRingBuffer.latest(64) (view)", ring["ring_latest_us"]),
        ("WindowSampler.push, M=64, prepared 256x256 frame", ring["sampler_push_us"]),
        ("WindowSampler.push, M=64, + prepare 640x480 -> 256", ring["sampler_push_prepare_us"]),
        (f"frame_from_image_msg Image rgb8 640x480 ({conv['messages']})", conv["rgb8_us"]),
        ("frame_from_image_msg Image bgr8 640x480", conv["bgr8_us"]),
        (f"frame_from_image_msg CompressedImage JPEG ({conv['jpeg_bytes']} B)", conv["jpeg_us"]),
    ]
    for name, (med, lo, hi) in rows:
        print(f"{name:<62} {med:>10.1f} {lo:>8.1f} {hi:>8.1f}")


if __name__ == "__main__":
    main()
