"""What the nodes share: parameters from the config schema, stamps, pose and diagnostics."""

from __future__ import annotations

import math
import threading
from collections import Counter
from typing import Any

from builtin_interfaces.msg import Time
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from geometry_msgs.msg import Pose as PoseMsg
from rcl_interfaces.msg import (
    FloatingPointRange,
    IntegerRange,
    ParameterDescriptor,
    SetParametersResult,
)
from rclpy.clock import Clock
from rclpy.clock_type import ClockType
from rclpy.node import Node
from rclpy.parameter import Parameter

from surprise_memory.config import CameraConfig, ComponentConfig, Setting, settings_of
from surprise_memory.errors import ConfigError, SurpriseMemoryError
from surprise_memory.pose import Pose

__all__ = [
    "NodeStats",
    "declare_settings",
    "ns_to_time",
    "pose_from_msg",
    "pose_to_msg",
    "time_to_ns",
]


def time_to_ns(stamp: Time) -> int:
    """builtin_interfaces/Time -> int nanoseconds."""
    return int(stamp.sec) * 1_000_000_000 + int(stamp.nanosec)


def ns_to_time(ns: int) -> Time:
    """Int nanoseconds -> builtin_interfaces/Time (negative clamps to zero)."""
    ns = max(int(ns), 0)
    return Time(sec=ns // 1_000_000_000, nanosec=ns % 1_000_000_000)


def pose_to_msg(pose: Pose) -> PoseMsg:
    """Core Pose -> geometry_msgs/Pose (the frame goes into the enclosing header)."""
    msg = PoseMsg()
    msg.position.x, msg.position.y, msg.position.z = pose.x, pose.y, pose.z
    o = msg.orientation
    o.x, o.y, o.z, o.w = pose.qx, pose.qy, pose.qz, pose.qw
    return msg


def pose_from_msg(msg: PoseMsg, frame_id: str) -> Pose:
    """geometry_msgs/Pose in ``frame_id`` -> core Pose."""
    p, o = msg.position, msg.orientation
    return Pose(p.x, p.y, p.z, o.x, o.y, o.z, o.w, frame_id)


def _descriptor(spec: Setting) -> ParameterDescriptor:
    desc = ParameterDescriptor(
        name=spec.name, description=spec.description, read_only=spec.read_only
    )
    if spec.type is float and (spec.low is not None or spec.high is not None):
        desc.floating_point_range = [
            FloatingPointRange(
                from_value=float(spec.low if spec.low is not None else -math.inf),
                to_value=float(spec.high if spec.high is not None else math.inf),
                step=0.0,
            )
        ]
    elif spec.type is int and (spec.low is not None or spec.high is not None):
        desc.integer_range = [
            IntegerRange(
                from_value=int(spec.low if spec.low is not None else -(2**63)),
                to_value=int(spec.high if spec.high is not None else 2**63 - 1),
                step=1,
            )
        ]
    if spec.choices:
        desc.additional_constraints = "one of: " + ", ".join(spec.choices)
    return desc


def declare_settings(node: Node, *config_types: type[ComponentConfig]) -> dict[str, Any]:
    """Declare every setting of the given configs as a parameter; return their values.

    Each parameter gets the setting's default, type, description, range and read-only flag
    (``ros2 param describe`` shows them). Values come from the params file / command line.

    Raises:
        ConfigError: A parameter was given a value of the wrong type.

    """
    values: dict[str, Any] = {}
    for cls in config_types:
        for spec in settings_of(cls):
            try:
                param = node.declare_parameter(spec.name, spec.default, _descriptor(spec))
            except Exception as exc:  # rclpy raises several types for a bad override
                raise ConfigError(f"parameter {spec.name}: {exc}") from exc
            values[spec.name] = param.value
    return values


def settings_change_validator(
    *config_types: type[ComponentConfig],
) -> Any:
    """A parameter callback that validates changes with the config's own rules."""
    specs = {s.name: s for cls in config_types for s in settings_of(cls)}

    def validate(params: list[Parameter[Any]]) -> SetParametersResult:
        for p in params:
            spec = specs.get(p.name)
            if spec is None:
                continue
            try:
                spec.check(p.value)
            except ConfigError as exc:
                return SetParametersResult(successful=False, reason=str(exc))
        return SetParametersResult(successful=True)

    return validate


class NodeStats:
    """Counters of a node (frames in, rejections by reason, ...) published as diagnostics.

    The counts go to ``/diagnostics`` (diagnostic_msgs/DiagnosticArray, the ROS convention
    read by rqt_robot_monitor and Foxglove) every ``period_s`` seconds of wall time. Nodes
    count from their callbacks and worker threads alike, hence the lock.
    """

    def __init__(self, node: Node, period_s: float = 5.0) -> None:
        self._node = node
        self._lock = threading.Lock()
        self._counts: Counter[str] = Counter()
        self._values: dict[str, str] = {}
        self._pub = node.create_publisher(DiagnosticArray, "/diagnostics", 10)
        # wall time: with use_sim_time the counters must still come when a bag has ended
        steady = Clock(clock_type=ClockType.STEADY_TIME)
        self._timer = node.create_timer(period_s, self.publish, clock=steady)

    def count(self, key: str, n: int = 1) -> int:
        """Add ``n`` to a counter; return its new value."""
        with self._lock:
            self._counts[key] += n
            return self._counts[key]

    def set(self, **values: str) -> None:
        """Set reported values (model name, latency, ...)."""
        with self._lock:
            self._values.update(values)

    def reject(self, reason: str, detail: str) -> None:
        """Count a rejected input and log it, throttled."""
        total = self.count(f"rejected_{reason}")
        self._node.get_logger().warning(
            f"rejected ({reason}): {detail} [{total} so far]", throttle_duration_sec=5.0
        )

    def publish(self) -> None:
        """Publish the counters now."""
        with self._lock:
            items = [(k, str(v)) for k, v in sorted(self._counts.items())]
            items += sorted(self._values.items())
        status = DiagnosticStatus(
            level=DiagnosticStatus.OK,
            name=f"surprise_memory: {self._node.get_name()}",
            hardware_id=self._node.get_fully_qualified_name(),
            message="running",
        )
        status.values = [KeyValue(key=k, value=v) for k, v in items]
        msg = DiagnosticArray()
        msg.header.stamp = self._node.get_clock().now().to_msg()
        msg.status = [status]
        self._pub.publish(msg)


def run_node(factory: Any, args: list[str] | None = None) -> int:
    """``main()`` of a node: init, build, spin until Ctrl-C or shutdown, clean up.

    A node whose parameters are invalid, or whose model or store cannot be opened, exits
    with status 2 and a one-line reason instead of a stack trace. ``factory()`` builds the
    node; its ``close()`` method, if it has one, runs before the node is destroyed. A node
    with an ``executor_threads`` attribute above 1 is spun by a multi-threaded executor
    (its callback groups say what may run in parallel).
    """
    import signal
    import sys

    import rclpy
    from rclpy.executors import (
        ExternalShutdownException,
        MultiThreadedExecutor,
        SingleThreadedExecutor,
    )
    from rclpy.signals import SignalHandlerOptions

    # SIGINT/SIGTERM raise KeyboardInterrupt instead of shutting the context down at once,
    # so that close() can still publish what is pending (the gate's last event, episodes);
    # spin_once with a timeout returns to Python often enough for the signal to land. Set
    # both explicitly: a process started in the background inherits SIGINT ignored.
    def interrupt(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGINT, interrupt)
    signal.signal(signal.SIGTERM, interrupt)
    rclpy.init(args=args, signal_handler_options=SignalHandlerOptions.NO)
    try:
        node = factory()
    except SurpriseMemoryError as exc:
        print(f"{type(exc).__name__}: {exc}", file=sys.stderr)
        rclpy.try_shutdown()
        return 2
    threads = getattr(node, "executor_threads", 1)
    executor = MultiThreadedExecutor(threads) if threads > 1 else SingleThreadedExecutor()
    executor.add_node(node)
    try:
        while rclpy.ok():
            executor.spin_once(timeout_sec=0.1)
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        close = getattr(node, "close", None)
        if close is not None:
            try:
                close()
            except Exception as exc:  # shutting down anyway: report, do not trace
                print(f"while closing: {type(exc).__name__}: {exc}", file=sys.stderr)
        executor.shutdown()
        node.destroy_node()
        rclpy.try_shutdown()
    return 0


def image_msg_from_rgb(rgb: Any, stamp_ns: int = 0, frame_id: str = "") -> Any:
    """An (H, W, 3) uint8 RGB array -> sensor_msgs/Image (rgb8)."""
    import numpy as np
    from sensor_msgs.msg import Image

    arr = np.ascontiguousarray(rgb, dtype=np.uint8)
    if arr.ndim != 3 or arr.shape[2] != 3:
        raise ValueError(f"expected an (H, W, 3) uint8 RGB array, got shape {arr.shape}")
    msg = Image(height=arr.shape[0], width=arr.shape[1], encoding="rgb8", is_bigendian=0)
    msg.step = arr.shape[1] * 3
    msg.data = arr.tobytes()
    msg.header.stamp = ns_to_time(stamp_ns)
    msg.header.frame_id = frame_id
    return msg


class StampOrder:
    """Watches that a stream's stamps increase, as every node's core objects require.

    ``check(stamp)``: an equal stamp is a duplicate (rejected and counted: False); an
    earlier one means time went backwards (a bag restarted or looped): one warning, a
    counted reset, ``on_reset()``, and the item is accepted as the start of a new sequence.
    ``commit(stamp)`` records an item the node actually used.
    """

    def __init__(self, node: Node, stats: NodeStats, on_reset: Any) -> None:
        self._node = node
        self._stats = stats
        self._on_reset = on_reset
        self._last: int | None = None

    def check(self, stamp_ns: int) -> bool:
        """True when the item may be used (after a reset if time went backwards)."""
        last = self._last
        if last is None or stamp_ns > last:
            return True
        if stamp_ns == last:
            self._stats.reject("duplicate_stamp", f"stamp {stamp_ns} ns seen twice")
            return False
        self._node.get_logger().warning(
            f"time went backwards ({last} -> {stamp_ns} ns): a bag restarted or looped? "
            "Starting a new sequence."
        )
        self._stats.count("resets")
        self._on_reset()
        return True

    def commit(self, stamp_ns: int) -> None:
        """Record the stamp of an item that was used."""
        self._last = stamp_ns


def frame_from_msg(msg: Any, stats: NodeStats) -> Any:
    """A camera message as a core Frame, or None (counted and logged) when unusable."""
    from surprise_memory.frames import frame_from_image_msg

    stats.count("frames_in")
    try:
        return frame_from_image_msg(msg)
    except SurpriseMemoryError as exc:
        stats.reject("image", str(exc))
        return None


def subscribe_camera(node: Node, camera: CameraConfig, callback: Any) -> Any:
    """Subscribe ``callback`` to the node's ``image`` input (Image, or CompressedImage).

    Sensor-data QoS (best effort, keep last 5) unless the params file overrides it, e.g.
    ``qos_overrides./camera/image_raw.subscription.reliability: reliable``.
    """
    from rclpy.qos import qos_profile_sensor_data
    from rclpy.qos_overriding_options import QoSOverridingOptions
    from sensor_msgs.msg import CompressedImage, Image

    msg_type = CompressedImage if camera.image_transport == "compressed" else Image
    return node.create_subscription(
        msg_type,
        "image",
        callback,
        qos_profile_sensor_data,
        qos_overriding_options=QoSOverridingOptions.with_default_policies(),
    )
