"""The soak's cameras: their frames, their topics, their publishers, and each one's delivery.

``benchmarks/soak_nodes.py --cameras N`` runs N cameras named ``front``, ``left``,
``rear``, ``right`` (the first N); the nodes get ``cameras: front,left,rear`` and
subscribe each camera's ``<name>/image`` in their namespace. One camera (the default) is
the unnamed camera on :data:`bench_ros_latency.CAMERA`, as before. A camera publishes
from the soak's process, or (``--camera-processes``) from a process of its own, as a
robot's camera drivers do (:func:`publish_camera`): one Python process that serialises
three 921,600-byte frames 30 times a second could itself be what falls behind.
"""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import bench_ros_latency as brl
import numpy as np

CAMERA_NAMES = ("front", "left", "rear", "right")
"""The ``--cameras N`` cameras: the first N."""

SCENE_SECONDS = 20.0


def camera_topics(cameras: int) -> dict[str, str]:
    """The cameras of ``--cameras N``: name -> the topic it publishes.

    Args:
        cameras: How many (1 to 4).

    Returns:
        ``{"": bench_ros_latency.CAMERA}`` for one camera (the nodes' unnamed ``image``
        input, remapped onto it); else ``{name: /surprise_memory/<name>/image}`` for the
        first N of :data:`CAMERA_NAMES` (the nodes' default topic for a named camera).

    Raises:
        ValueError: N is not 1 to 4.

    """
    if not 1 <= cameras <= len(CAMERA_NAMES):
        raise ValueError(f"--cameras {cameras}: 1 to {len(CAMERA_NAMES)}")
    if cameras == 1:
        return {"": brl.CAMERA}
    return {name: f"{brl.NS}/{name}/image" for name in CAMERA_NAMES[:cameras]}


class CameraFrames:
    """The published frames: a slow pan over a scene that changes every 20 s.

    The scenes are smooth (noise at 1/8 of the size, upscaled), so their JPEG has about
    the size of a camera's (a 640x480 frame of pure noise would be 500 KB).

    Args:
        size: (width, height).
        fps: The camera's rate (the pan moves with camera time).
        compressed: CompressedImage JPEG instead of Image rgb8.
        seed: The scenes' seed (each camera its own).
        frame_id: The header's ``frame_id``.

    """

    def __init__(
        self,
        size: tuple[int, int],
        fps: float,
        compressed: bool,
        seed: int = 7,
        frame_id: str = "camera",
    ) -> None:
        import cv2

        rng = np.random.default_rng(seed)
        w, h = size
        self._size = size
        self._fps = fps
        self._compressed = compressed
        self._frame_id = frame_id
        self._scenes = [
            cv2.resize(
                rng.integers(0, 256, size=(h // 8, w // 4, 3), dtype=np.uint8),
                (w * 2, h),
                interpolation=cv2.INTER_LINEAR,
            )
            for _ in range(3)
        ]
        self._last: tuple[tuple[int, int], Any] | None = None

    def frame(self, k: int, stamp_ns: int) -> Any:
        """The message of frame ``k`` (an Image, or a CompressedImage JPEG) at ``stamp_ns``."""
        from sensor_msgs.msg import CompressedImage

        from surprise_memory.memory.store.frame_files import encode_jpeg
        from surprise_memory.nodes.messages import image_msg_from_rgb, ns_to_time

        t = k / self._fps
        scene = int(t // SCENE_SECONDS) % len(self._scenes)
        off = int(t * 20) % self._size[0]  # a slow pan across the scene
        key = (scene, off)
        if self._last is None or self._last[0] != key:  # the pan moves every few frames
            rgb = np.ascontiguousarray(self._scenes[scene][:, off : off + self._size[0]], np.uint8)
            if self._compressed:
                msg = CompressedImage(format="rgb8; jpeg compressed bgr8")
                msg.data = encode_jpeg(rgb, 90)
            else:
                msg = image_msg_from_rgb(rgb, stamp_ns, self._frame_id)
            self._last = (key, msg)
        msg = self._last[1]
        msg.header.stamp = ns_to_time(stamp_ns)
        msg.header.frame_id = self._frame_id
        return msg


def publish_camera(
    name: str,
    topic: str,
    *,
    fps: float,
    size: tuple[int, int],
    compressed: bool,
    subscribers: int,
    seed: int,
    out: Path,
) -> None:
    """A ``--camera-processes`` camera: publish at ``fps`` until SIGINT, then write a count.

    As the soak's own camera: sensor-data QoS, the first frame once ``subscribers``
    subscriptions are there, stamps on the camera's schedule.

    Args:
        name: The camera's name (its ``frame_id``).
        topic: Where it publishes.
        fps: Its rate.
        size: (width, height).
        compressed: JPEG ``CompressedImage`` instead of rgb8 ``Image``.
        subscribers: Subscriptions to wait for.
        seed: Its scenes' seed.
        out: JSON file: ``published`` and ``first_frame_monotonic`` (None: none sent).

    """
    import rclpy
    from rclpy.qos import qos_profile_sensor_data
    from rclpy.signals import SignalHandlerOptions
    from sensor_msgs.msg import CompressedImage, Image

    frames = CameraFrames(size, fps, compressed, seed=seed, frame_id=name or "camera")
    rclpy.init(signal_handler_options=SignalHandlerOptions.NO)
    stop: list[bool] = []  # SIGINT ends the loop, then the count is written
    signal.signal(signal.SIGINT, lambda *_: stop.append(True))
    node = rclpy.create_node(f"soak_camera_{name or 'camera'}")
    pub = node.create_publisher(
        CompressedImage if compressed else Image, topic, qos_profile_sensor_data
    )
    published, first = 0, None
    try:
        t0 = time.monotonic()
        next_frame, stamp0 = t0, time.time_ns()
        while not stop:
            now = time.monotonic()
            if now >= next_frame:
                k = round((next_frame - t0) * fps)  # the camera's schedule
                if published or pub.get_subscription_count() >= subscribers:
                    first = now if first is None else first
                    pub.publish(frames.frame(k, stamp0 + round(k * 1e9 / fps)))
                    published += 1
                next_frame += 1.0 / fps
            else:
                time.sleep(min(next_frame - now, 0.05))
    finally:
        out.write_text(json.dumps({"published": published, "first_frame_monotonic": first}))
        node.destroy_node()
        rclpy.try_shutdown()


def count_frames(topics: Mapping[str, str], compressed: bool, out: Path) -> None:
    """The ``--bare-subscriber`` process: count each camera's distinct frames until SIGINT.

    Args:
        topics: Camera name -> topic (:func:`camera_topics`).
        compressed: JPEG ``CompressedImage`` instead of rgb8 ``Image``.
        out: JSON file: ``frames_in`` (all cameras) and ``cameras`` (name -> count).

    """
    import rclpy
    from rclpy.executors import ExternalShutdownException
    from rclpy.qos import qos_profile_sensor_data
    from sensor_msgs.msg import CompressedImage, Image

    stamps: dict[str, set[tuple[int, int]]] = {name: set() for name in topics}
    rclpy.init()
    node = rclpy.create_node("soak_bare_subscriber")
    for name, topic in topics.items():
        seen = stamps[name]
        node.create_subscription(
            CompressedImage if compressed else Image,
            topic,
            lambda m, seen=seen: seen.add((m.header.stamp.sec, m.header.stamp.nanosec)),
            qos_profile_sensor_data,
        )
    try:
        rclpy.spin(node)
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        counts = {name: len(s) for name, s in stamps.items()}
        out.write_text(json.dumps({"frames_in": sum(counts.values()), "cameras": counts}))
        rclpy.try_shutdown()


def camera_delivery(
    published: Mapping[str, int],
    values: Mapping[str, str],
    loss_warnings: Mapping[str, int],
    bare: Mapping[str, int] | None,
) -> dict[str, dict[str, Any]]:
    """One node's delivery per named camera, from its last ``/diagnostics`` values.

    Args:
        published: Camera name -> frames it published.
        values: The node's last diagnostics key -> value (``front.camera_frames_received``,
            ``front.camera_frames_lost``, ``front.camera_frames_lost_in_transport``).
        loss_warnings: Camera name -> periods the node said WARN "camera <name>: camera
            frames lost".
        bare: Camera name -> frames the bare subscriber counted (None: none ran).

    Returns:
        Camera name -> ``published``, ``received`` (what the node's subscription
        delivered), ``delivered`` (received / published), ``lost`` and
        ``lost_in_transport`` (the node's own counts), ``estimated`` (received /
        (received + lost)), ``loss_warnings`` and ``bare`` (the bare subscriber's share,
        None without it).

    """

    def count(key: str) -> int:
        return int(values.get(key, 0) or 0)

    out: dict[str, dict[str, Any]] = {}
    for name, sent in published.items():
        received = count(f"{name}.camera_frames_received")
        lost = count(f"{name}.camera_frames_lost")
        out[name] = {
            "published": sent,
            "received": received,
            "delivered": received / sent if sent else float("nan"),
            "lost": lost,
            "lost_in_transport": count(f"{name}.camera_frames_lost_in_transport"),
            "estimated": received / (received + lost) if received + lost else float("nan"),
            "loss_warnings": loss_warnings.get(name, 0),
            "bare": None if bare is None else (bare.get(name, 0) / sent if sent else 0.0),
        }
    return out
