"""A node's counters, published on ``/diagnostics`` (``diagnostic_msgs/DiagnosticArray``)."""

from __future__ import annotations

import threading
from collections import Counter

from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from rclpy.clock import Clock
from rclpy.clock_type import ClockType
from rclpy.node import Node

__all__ = ["NodeStats"]


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
