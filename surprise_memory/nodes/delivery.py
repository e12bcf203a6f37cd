"""A node's camera intake on ``/diagnostics``: the camera's rate, what arrived, what was lost.

Every node that takes camera frames (``encoder_node``, ``memory_node``, ``pipeline_node``)
has one :class:`CameraDelivery`, fed with the stamp of each frame it accepts; the counting
is :class:`~surprise_memory.perception.delivery.FrameLossEstimator` (ROS-free, O(1) per
frame), the level rule :func:`~surprise_memory.health.camera_loss_finding`. Frames lost in
transport (a middleware that drops large frames: README "Large camera frames: middleware
settings") and frames overwritten in the subscription's queue (a node too slow for the
camera) look the same from here, and both are loss.

Reported every period: ``camera_rate_hz`` (estimated), ``camera_received_hz`` and
``camera_loss`` (the share lost, both over the last period), and the running totals
``camera_frames_received`` and ``camera_frames_lost``. The feed and the diagnostics timer
run in the executor's default callback group in every host, one at a time.
"""

from __future__ import annotations

from collections.abc import Mapping

from surprise_memory.health import Finding, camera_loss_finding
from surprise_memory.nodes.diagnostics import NodeStats
from surprise_memory.perception.delivery import DeliveryCounts, FrameLossEstimator

__all__ = ["CameraDelivery"]


class CameraDelivery:
    """Estimates a node's camera delivery from frame stamps and reports it.

    Args:
        stats: The host's counters (a check and values are registered on them).
        warn_above: ``camera_loss_warn``: WARN above this share lost in a period.

    """

    def __init__(self, stats: NodeStats, warn_above: float) -> None:
        self._estimator = FrameLossEstimator()
        self._warn_above = warn_above
        self._previous = DeliveryCounts()
        self._period = DeliveryCounts()
        stats.add_check(self._health)
        stats.add_values(self._values)

    @property
    def period_ns(self) -> int | None:
        """The camera's estimated frame period (None before the first frames)."""
        return self._estimator.period_ns

    def observe(self, stamp_ns: int) -> None:
        """Count a frame the node accepted (its header stamp)."""
        self._estimator.update(stamp_ns)

    def _health(self, delta: Mapping[str, int]) -> list[Finding | None]:
        counts = self._estimator.counts
        self._period = counts.since(self._previous)
        self._previous = counts
        return [
            camera_loss_finding(
                self._period.fraction_lost,
                self._period.received_hz,
                self._estimator.camera_hz,
                self._warn_above,
            )
        ]

    def _values(self) -> dict[str, object]:
        camera_hz = self._estimator.camera_hz
        received_hz = self._period.received_hz
        return {
            "camera_rate_hz": "" if camera_hz is None else f"{camera_hz:.2f}",
            "camera_received_hz": "" if received_hz is None else f"{received_hz:.2f}",
            "camera_loss": f"{self._period.fraction_lost:.4f}",
            "camera_frames_received": self._previous.received,
            "camera_frames_lost": self._previous.lost,
        }
