"""A node's camera intake on ``/diagnostics``: the camera's rate, what arrived, what was lost.

Every node that takes camera frames (``encoder_node``, ``memory_node``, ``pipeline_node``)
has one :class:`CameraDelivery`. Its subscription (:func:`~.qos.subscribe_camera`) tells it
of every message and of the middleware's sample-lost status; the node tells it the stamp
of every frame it accepts. The frames lost are counted

* by the **publisher's sequence numbers** where rclpy passes them (``MessageInfo``, Iron
  and later; Fast DDS fills them): exact, every frame lost wherever it was lost, pauses
  of the camera no loss (or by the middleware's count where that is larger); frames lost
  after the last one received count once a later one arrives;
* else by the **stamps** (:class:`~surprise_memory.perception.delivery.FrameLossEstimator`,
  ROS-free, O(1) per frame: ROS headers have no sequence number), or by the middleware's
  count where that is larger.

Of them, the **middleware's sample-lost status** (DDS sequence gaps the reader saw; Fast
DDS reports it) says how many were lost in transport (a middleware that drops large
frames: doc/guides/large-frames.md); the rest were overwritten in
the subscription's own queue (a node too slow for the camera: a busy CPU) or never sent.
The level rule is :func:`~surprise_memory.health.camera_loss_finding`.

Reported every period: ``camera_rate_hz`` (from the stamps), ``camera_received_hz``,
``camera_loss`` and ``camera_loss_in_transport`` (shares of the camera's frames in the
last period), the running totals ``camera_frames_received`` (messages delivered),
``camera_frames_lost`` and ``camera_frames_lost_in_transport``, and
``camera_loss_counted_by`` (``sequence numbers`` or ``stamps``); with several cameras each
has its own, its keys prefixed with its name (``front.camera_loss``) and its WARN naming
it. The subscription's
callbacks and the diagnostics timer run in the executor's default callback group in
every host, one at a time.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from surprise_memory.health import Finding, camera_loss_finding
from surprise_memory.nodes.diagnostics import NodeStats
from surprise_memory.perception.delivery import DeliveryCounts, FrameLossEstimator

__all__ = ["CameraDelivery"]

_NO_SEQUENCE = 2**63  # rmw's "unsupported" is UINT64_MAX; 0 means none either


class CameraDelivery:
    """Counts a node's camera delivery (sequence numbers, stamps, middleware) and reports it.

    Args:
        stats: The host's counters (a check and values are registered on them).
        warn_above: ``camera_loss_warn``: WARN above this share lost in a period.
        camera: The camera's name: its keys' prefix (``front.``) and its findings' subject;
            "" = the one unnamed camera (the keys as they have always been).

    """

    def __init__(self, stats: NodeStats, warn_above: float, camera: str = "") -> None:
        self._estimator = FrameLossEstimator()
        self._warn_above = warn_above
        self._prefix = f"{camera}." if camera else ""
        self._camera = camera
        self._subscription: Any = None
        self._delivered = 0  # messages the subscription delivered
        self._in_transport = 0  # the middleware's count
        self._by_sequence = 0  # lost, by the publisher's sequence numbers
        self._sequenced = 0  # messages that carried one
        self._last_sequence: int | None = None
        self._one_publisher = True
        # at the end of the last period: the counts, and that period's shares
        self._previous = (0, 0)  # delivered, in transport
        self._judged = DeliveryCounts()
        self._lost = 0
        self._loss = 0.0
        self._loss_in_transport = 0.0
        self._counted_by = "stamps"
        stats.add_check(self._health)
        stats.add_values(self._values)

    @property
    def warn_above(self) -> float:
        """``camera_loss_warn``: the share lost in a period above which it WARNs."""
        return self._warn_above

    @property
    def period_ns(self) -> int | None:
        """The camera's estimated frame period (None before the first frames)."""
        return self._estimator.period_ns

    @property
    def frames_seen(self) -> int:
        """Distinct frames observed so far (the ``i``-th has index ``i``, from 0)."""
        return self._estimator.frames_seen

    def missing_between(self, first: int, last: int) -> int | None:
        """Frames lost between two observed frames (by index), once settled, else None.

        See :meth:`~surprise_memory.perception.delivery.FrameLossEstimator.missing_between`.
        """
        return self._estimator.missing_between(first, last)

    def watch(self, subscription: Any) -> None:
        """A new camera subscription (activate): the frames before it are not loss.

        Its publisher count decides whether the sequence numbers count.
        """
        self._subscription = subscription
        self._last_sequence = None

    def delivered(self, sequence: int | None) -> None:
        """Count a message the subscription delivered, with its publisher's sequence number.

        Args:
            sequence: ``publication_sequence_number`` of its ``MessageInfo``; None, 0 or
                rmw's "unsupported" when unknown. A number not above the last one (a
                restarted publisher) starts counting afresh.

        """
        self._delivered += 1
        if sequence is None or not 0 < sequence < _NO_SEQUENCE or not self._one_publisher:
            return
        last = self._last_sequence
        self._last_sequence = sequence
        self._sequenced += 1
        if last is not None and sequence > last:
            self._by_sequence += sequence - last - 1

    def observe(self, stamp_ns: int) -> None:
        """Count a frame the node accepted (its header stamp)."""
        self._estimator.update(stamp_ns)

    def lost_in_transport(self, count: int) -> None:
        """Count frames the middleware reports lost in transport.

        The sample-lost events of :func:`~surprise_memory.nodes.qos.subscribe_camera`.
        """
        self._in_transport += count

    def _health(self, delta: Mapping[str, int]) -> list[Finding | None]:
        now = (self._delivered, self._in_transport)
        delivered, in_transport = (a - b for a, b in zip(now, self._previous, strict=True))
        self._previous = now
        judged = self._estimator.counts
        by_stamps = judged.since(self._judged).fraction_lost  # over the frames it judged
        self._judged = judged
        # the total lost: the larger count (they see some of the same frames, at times
        # in different periods), so a period's share is the increase of that total
        if self._sequenced and self._sequenced == self._delivered:  # each had its number
            self._counted_by = "sequence numbers"
            total = max(self._by_sequence, self._in_transport)
        else:
            self._counted_by = "stamps"
            total = max(judged.lost, self._in_transport)
        lost = max(0, total - self._lost, in_transport)
        self._lost = max(self._lost, total)
        expected = delivered + lost
        transport = in_transport / expected if expected else 0.0
        if self._counted_by == "stamps":  # the stamps' share over the frames they judged
            self._loss = max(by_stamps, transport)
        else:
            self._loss = lost / expected if expected else 0.0
        self._loss_in_transport = min(self._loss, transport)
        self._follow_publishers()
        finding = camera_loss_finding(
            self._loss,
            self._received_hz(),
            self._estimator.camera_hz,
            self._warn_above,
            in_transport=self._loss_in_transport,
        )
        if finding is not None and self._camera:
            finding = Finding(finding.level, f"camera {self._camera}: {finding.reason}")
        return [finding]

    def _follow_publishers(self) -> None:
        """Sequence numbers of two publishers interleave: count by stamps while there are."""
        if self._subscription is None:
            return
        one = self._subscription.get_publisher_count() <= 1
        if one != self._one_publisher:
            self._one_publisher = one
            self._last_sequence = None

    def _received_hz(self) -> float | None:
        """The camera's rate less the last period's loss (None before the rate is known)."""
        camera_hz = self._estimator.camera_hz
        return None if camera_hz is None else camera_hz * (1.0 - self._loss)

    def _values(self) -> dict[str, object]:
        camera_hz = self._estimator.camera_hz
        received_hz = self._received_hz()
        values = {
            "camera_rate_hz": "" if camera_hz is None else f"{camera_hz:.2f}",
            "camera_received_hz": "" if received_hz is None else f"{received_hz:.2f}",
            "camera_loss": f"{self._loss:.4f}",
            "camera_loss_in_transport": f"{self._loss_in_transport:.4f}",
            "camera_frames_received": self._previous[0],
            "camera_frames_lost": self._lost,
            "camera_frames_lost_in_transport": self._previous[1],
            "camera_loss_counted_by": self._counted_by,
        }
        return {self._prefix + k: v for k, v in values.items()}
