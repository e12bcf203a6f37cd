"""A node's counters and health, published on ``/diagnostics`` (``diagnostic_msgs``).

The level rules are ROS-free (:mod:`surprise_memory.health`); this module gathers what
they judge — counters per period, publisher counts and ages of the inputs, the checks a
node registers (thread alive, untrained weights, pose source) — and publishes one
``DiagnosticStatus`` per node with the level, a message giving the reasons and the counters
as key-values.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping

from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from rclpy.node import Node

from surprise_memory.config import NodeConfig
from surprise_memory.health import Finding, InputWatch, Level, PeriodCounts, summarize
from surprise_memory.nodes.clock import steady_clock

__all__ = ["HealthCheck", "NodeStats"]

HealthCheck = Callable[[Mapping[str, int]], Iterable[Finding | None]]
"""A node's own check: the counters' increase in the last period -> findings."""


class NodeStats:
    """Counters of a node (frames in, rejections by reason, ...) and its health level.

    Every ``diagnostics_period_seconds`` of wall time the node publishes one status on
    ``/diagnostics`` (diagnostic_msgs/DiagnosticArray, read by rqt_robot_monitor,
    Foxglove and a robot's aggregator): level OK / WARN / ERROR, a message with the
    reasons, and the counters and values as key-values (plus ``level`` and
    ``period_s``). Nodes count from their callbacks and worker threads alike, hence the
    lock.

    Args:
        node: The node that publishes.
        config: Its diagnostics settings (period, input silence).

    """

    def __init__(self, node: Node, config: NodeConfig | None = None) -> None:
        config = config or NodeConfig()
        self._node = node
        self._lock = threading.Lock()
        self._counts: Counter[str] = Counter()
        self._values: dict[str, str] = {}
        self._period = PeriodCounts()
        self._period_s = config.diagnostics_period_seconds
        self._silent_after_s = config.input_silent_seconds
        self._checks: list[HealthCheck] = []
        self._watches: list[InputWatch] = []
        self._providers: list[Callable[[], Mapping[str, object]]] = []
        self.level = Level.OK
        self.message = "starting"
        self._pub = node.create_publisher(DiagnosticArray, "/diagnostics", 10)
        # wall time: with use_sim_time the counters must still come when a bag has ended
        steady = steady_clock()
        self._timer = node.create_timer(self._period_s, self.publish, clock=steady)

    def count(self, key: str, n: int = 1) -> int:
        """Add ``n`` to a counter; return its new value."""
        with self._lock:
            self._counts[key] += n
            return self._counts[key]

    def count_camera(self, key: str, camera: str, n: int = 1) -> None:
        """Count for the node and, with a named camera, for that camera (``<name>.<key>``)."""
        self.count(key, n)
        if camera:
            self.count(f"{camera}.{key}", n)

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

    def add_values(self, provider: Callable[[], Mapping[str, object]]) -> None:
        """Report the values ``provider()`` gives at every period (e.g. settings in use)."""
        self._providers.append(provider)

    @property
    def input_silent_seconds(self) -> float:
        """How long a streaming input may stay silent before a WARN."""
        return self._silent_after_s

    def add_check(self, check: HealthCheck) -> None:
        """Register a check run at every period (see :mod:`surprise_memory.health`)."""
        self._checks.append(check)

    def watch_input(self, topic: str, missing: str, *, streaming: bool) -> InputWatch:
        """Watch an input topic: WARN when it has no publisher (or, streaming, goes silent).

        Args:
            topic: The topic as the node subscribes it; resolved here with the node's
                namespace and remappings (``image:=/camera/image_raw``).
            missing: What its absence means ("no encoder").
            streaming: True for a stream that should never pause (camera, embeddings);
                False for sparse topics (events), judged by their publishers only.

        Returns:
            The watch; call :meth:`seen` with it from the topic's callback.

        """
        watch = InputWatch(
            self._node.resolve_topic_name(topic),
            missing,
            self._silent_after_s if streaming else None,
            time.monotonic_ns(),
        )
        self._watches.append(watch)
        return watch

    @staticmethod
    def seen(watch: InputWatch) -> None:
        """Note that a watched input delivered a message now."""
        watch.seen(time.monotonic_ns())

    def set_input_silent_seconds(self, seconds: float) -> None:
        """Change how long a streaming input may stay silent (applied at the next period)."""
        self._silent_after_s = seconds
        for watch in self._watches:
            if watch.silent_after_s is not None:
                watch.silent_after_s = seconds

    def restart_inputs(self) -> None:
        """Count input silence from now (the node was paused and resumes)."""
        now = time.monotonic_ns()
        for watch in self._watches:
            watch.restart(now)

    def findings(self) -> list[Finding | None]:
        """Run the input watches and the node's checks over the period that just ended."""
        with self._lock:
            counts = dict(self._counts)
        delta = self._period.advance(counts)
        now = time.monotonic_ns()
        found: list[Finding | None] = []
        for watch in self._watches:
            found.append(watch.check(self._node.count_publishers(watch.topic), now))
        for check in self._checks:
            try:
                found.extend(check(delta))
            except Exception as exc:  # a broken check must not stop the reports
                found.append(Finding(Level.ERROR, f"health check failed: {exc}"))
        return found

    def publish(self) -> None:
        """Judge the period that just ended and publish the status now."""
        self.level, self.message = summarize(self.findings())
        with self._lock:
            items = [(k, str(v)) for k, v in sorted(self._counts.items())]
            items += sorted(self._values.items())
        for provider in self._providers:
            items += sorted((k, str(v)) for k, v in provider().items())
        items += [("level", self.level.name), ("period_s", f"{self._period_s:g}")]
        status = DiagnosticStatus(
            level=bytes([int(self.level)]),
            name=f"surprise_memory: {self._node.get_name()}",
            hardware_id=self._node.get_fully_qualified_name(),
            message=self.message,
        )
        status.values = [KeyValue(key=k, value=v) for k, v in items]
        msg = DiagnosticArray()
        msg.header.stamp = self._node.get_clock().now().to_msg()
        msg.status = [status]
        self._pub.publish(msg)
