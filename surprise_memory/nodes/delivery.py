"""A node's camera intake on ``/diagnostics``: the camera's rate, what arrived, what was lost.

Every node that takes camera frames (``encoder_node``, ``memory_node``, ``pipeline_node``)
has one :class:`CameraDelivery`, fed with the stamp of each frame it accepts. Two counts of
the frames lost, the larger of which is reported:

* from the stamps (:class:`~surprise_memory.perception.delivery.FrameLossEstimator`,
  ROS-free, O(1) per frame): every frame lost, wherever (judged once 64 gaps are in);
* from the middleware's sample-lost status (:func:`~.qos.subscribe_camera`; Fast DDS and
  Cyclone DDS report it): the frames lost in transport, a middleware that drops large
  frames (README "Large camera frames: middleware settings"). Exact even where so few
  frames arrive that the stamps say little.

What the stamps count beyond transport was overwritten in the subscription's own queue (a
node too slow for the camera: a busy CPU) or never sent by the camera. The level rule is
:func:`~surprise_memory.health.camera_loss_finding`.

Reported every period: ``camera_rate_hz`` (estimated), ``camera_received_hz``,
``camera_loss`` and ``camera_loss_in_transport`` (shares of the camera's frames in the
last period), and the running totals ``camera_frames_received``, ``camera_frames_lost``
and ``camera_frames_lost_in_transport``. The feed, the sample-lost events and the
diagnostics timer run in the executor's default callback group in every host, one at a
time.
"""

from __future__ import annotations

from collections.abc import Mapping

from surprise_memory.health import Finding, camera_loss_finding
from surprise_memory.nodes.diagnostics import NodeStats
from surprise_memory.perception.delivery import DeliveryCounts, FrameLossEstimator

__all__ = ["CameraDelivery"]


class CameraDelivery:
    """Estimates a node's camera delivery from frame stamps and the middleware, reports it.

    Args:
        stats: The host's counters (a check and values are registered on them).
        warn_above: ``camera_loss_warn``: WARN above this share lost in a period.

    """

    def __init__(self, stats: NodeStats, warn_above: float) -> None:
        self._estimator = FrameLossEstimator()
        self._warn_above = warn_above
        self._received = 0  # frames accepted
        self._in_transport = 0  # the middleware's count
        # the totals at the end of the last period, and that period's shares
        self._totals = (0, 0, 0)  # received, lost, lost in transport
        self._judged = DeliveryCounts()  # the stamps' counts at the end of the last period
        self._loss = 0.0
        self._loss_in_transport = 0.0
        stats.add_check(self._health)
        stats.add_values(self._values)

    @property
    def period_ns(self) -> int | None:
        """The camera's estimated frame period (None before the first frames)."""
        return self._estimator.period_ns

    def observe(self, stamp_ns: int) -> None:
        """Count a frame the node accepted (its header stamp)."""
        self._received += 1
        self._estimator.update(stamp_ns)

    def lost_in_transport(self, count: int) -> None:
        """Count frames the middleware reports lost in transport.

        The ``on_lost`` of :func:`~surprise_memory.nodes.qos.subscribe_camera`.
        """
        self._in_transport += count

    def _health(self, delta: Mapping[str, int]) -> list[Finding | None]:
        # each share over its own consistent counts: the stamps' over the frames they
        # judged (the first 64 gaps come in one period), the middleware's over the frames
        # taken in the period and those it lost
        judged = self._estimator.counts
        by_stamps = judged.since(self._judged).fraction_lost
        self._judged = judged
        received = self._received - self._totals[0]
        in_transport = self._in_transport - self._totals[2]
        by_transport = in_transport / (received + in_transport) if in_transport else 0.0
        self._loss = max(by_stamps, by_transport)
        self._loss_in_transport = by_transport
        self._totals = (
            self._received,
            max(judged.lost, self._in_transport),
            self._in_transport,
        )
        camera_hz = self._estimator.camera_hz
        return [
            camera_loss_finding(
                self._loss,
                None if camera_hz is None else camera_hz * (1.0 - self._loss),
                camera_hz,
                self._warn_above,
                in_transport=self._loss_in_transport,
            )
        ]

    def _values(self) -> dict[str, object]:
        camera_hz = self._estimator.camera_hz
        received, lost, in_transport = self._totals
        return {
            "camera_rate_hz": "" if camera_hz is None else f"{camera_hz:.2f}",
            "camera_received_hz": ""
            if camera_hz is None
            else f"{camera_hz * (1.0 - self._loss):.2f}",
            "camera_loss": f"{self._loss:.4f}",
            "camera_loss_in_transport": f"{self._loss_in_transport:.4f}",
            "camera_frames_received": received,
            "camera_frames_lost": lost,
            "camera_frames_lost_in_transport": in_transport,
        }
