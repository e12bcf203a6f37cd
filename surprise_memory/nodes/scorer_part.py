"""The scorer's work inside a node: embeddings in; scores, gated events with poses out.

:class:`ScorerPart` is hosted by ``scorer_node`` (embeddings from the ``embedding`` topic)
and by ``pipeline_node`` (embeddings handed over in memory by the encoder). Either way it
publishes ``surprise`` and ``events`` and looks the event poses up the same way (tf, else
odometry).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
from nav_msgs.msg import Odometry
from rclpy.time import Time as RclpyTime

from surprise_memory.config import (
    BudgetConfig,
    ComponentConfig,
    GateConfig,
    HabituationConfig,
    PoseConfig,
    ScorerConfig,
)
from surprise_memory.errors import InputError
from surprise_memory.health import Finding, pose_finding, untrained_finding
from surprise_memory.memory.pose import Pose, PoseBuffer
from surprise_memory.msg import FrameEmbedding, SurpriseEvent, SurpriseScore
from surprise_memory.nodes.diagnostics import NodeStats
from surprise_memory.nodes.messages import ns_to_time, pose_from_msg, pose_to_msg, time_to_ns
from surprise_memory.nodes.parameters import Applier
from surprise_memory.nodes.qos import LATCHED, ODOMETRY, overridable
from surprise_memory.nodes.runtime import StampOrder
from surprise_memory.stamps import NS_PER_SECOND, ns_to_seconds
from surprise_memory.surprise.decisions import Decision
from surprise_memory.surprise.gate import SurpriseGate, SurpriseTrigger
from surprise_memory.surprise.scorer import SurpriseScorer
from surprise_memory.surprise.trigger_filter import TriggerFilter

__all__ = ["ScorerPart"]


class ScorerPart:
    """Scores each embedding (SurpriseScorer) and gates events (SurpriseGate).

    Publishes ``surprise`` (every scored frame) and ``events`` (reliable, transient
    local). Stamps come from the embeddings only, so a bag played with ``--clock`` and
    ``use_sim_time`` gives the same results as a live run. A stamp going backwards (a
    looped bag) resets the scorer and gate with one warning.

    Args:
        node: The host node (publishers, subscriptions, tf listener, logger).
        stats: The host's counters.
        on_event: Also called with each published event (the pipeline node's memory).

    """

    def __init__(
        self,
        node: Any,
        stats: NodeStats,
        on_event: Callable[[SurpriseEvent], None] | None = None,
    ) -> None:
        self._node = node
        self._stats = stats
        self._on_event = on_event

    def setup(self, values: Mapping[str, Any]) -> None:
        """Configure: scorer, gate, filters, pose sources, publishers."""
        self._pose_cfg = PoseConfig.from_mapping(values)
        self._scorer = SurpriseScorer.from_config(ScorerConfig.from_mapping(values))
        self._gate = SurpriseGate.from_config(GateConfig.from_mapping(values))
        self._habituation = HabituationConfig.from_mapping(values)
        self._budget = BudgetConfig.from_mapping(values)
        # habituation and rate budget, both off by default
        self._filter = TriggerFilter(self._habituation, self._budget, self._gate.max_delay_ns)
        self._order = StampOrder(self._node, self._stats, self._reset)
        self._encoder = ("", True)  # model and pretrained flag of the latest embedding
        self._pose_source: str | None = None  # of the latest event
        self._stats.add_check(self._health)
        self._odometry = PoseBuffer(
            max_gap_ns=round(self._pose_cfg.pose_tolerance_seconds * NS_PER_SECOND)
        )
        self._stats.add_values(self._applied)
        self._tf_buffer = self._make_tf_buffer()
        self._score_pub = self._node.create_publisher(SurpriseScore, "surprise", 10)
        self._event_pub = self._node.create_publisher(
            SurpriseEvent, "events", LATCHED, qos_overriding_options=overridable()
        )

    def appliers(self) -> dict[type[ComponentConfig], Applier]:
        """Live changes (window, warm-up, NMS and the frame names are read-only)."""
        return {
            GateConfig: self._apply_gate,
            HabituationConfig: lambda c: self._apply_filter(c, self._budget),
            BudgetConfig: lambda c: self._apply_filter(self._habituation, c),
            PoseConfig: self._apply_pose,
        }

    def subscribe(self) -> None:
        """Activate: odometry in, when an odometry topic is set."""
        if self._pose_cfg.odom_topic:
            self._node.create_subscription(
                Odometry,
                self._pose_cfg.odom_topic,
                self._on_odometry,
                ODOMETRY,
                qos_overriding_options=overridable(),
            )

    def _make_tf_buffer(self) -> Any:
        try:
            from tf2_ros import Buffer, TransformListener
        except ImportError:
            self._node.get_logger().warning(
                "tf2_ros is not installed: event poses come from odometry on "
                f"'{self._pose_cfg.odom_topic}' only"
            )
            return None
        buffer = Buffer()
        # the node's own executor delivers /tf and /tf_static (spin_thread=False): a second
        # executor of tf2's would also take this node's callbacks, in whichever thread wins
        self._tf_listener = TransformListener(buffer, self._node, spin_thread=False)
        return buffer

    # --- live parameter changes (LiveSettings)
    def _apply_gate(self, config: GateConfig) -> None:
        self._gate.gamma = config.gamma  # tau from the next frame on

    def _apply_filter(self, habituation: HabituationConfig, budget: BudgetConfig) -> None:
        """A new habituation/budget filter; the old one's held triggers are decided first.

        The new filter starts afresh (no remembered events, an empty rate window): its
        rules would not hold over what the old one remembered under other settings.
        """
        self._decide(self._filter.flush())
        self._habituation, self._budget = habituation, budget
        self._filter = TriggerFilter(habituation, budget, self._gate.max_delay_ns)

    def _apply_pose(self, config: PoseConfig) -> None:
        self._odometry.max_gap_ns = round(config.pose_tolerance_seconds * NS_PER_SECOND)
        self._pose_cfg = config

    def _applied(self) -> dict[str, object]:
        """The writable settings as the live objects use them (``applied.<name>``)."""
        values: dict[str, object] = {
            "gamma": self._gate.gamma,
            "pose_tolerance_seconds": self._odometry.max_gap_ns / NS_PER_SECOND,
            **self._habituation.as_dict(),
            **self._budget.as_dict(),
        }
        return {f"applied.{k}": v for k, v in values.items() if k != "habituation_memory"}

    def _reset(self) -> None:
        self._scorer.reset()
        self._gate.reset()
        self._filter.reset()
        self._odometry.clear()

    def _on_odometry(self, msg: Odometry) -> None:
        pose = pose_from_msg(msg.pose.pose, msg.header.frame_id)
        if not pose.is_finite():
            self._stats.reject("odometry", f"odometry pose with NaN/inf values: {pose}")
            return
        self._odometry.add(time_to_ns(msg.header.stamp), pose)

    def _health(self, delta: Mapping[str, int]) -> list[Finding | None]:
        return [
            untrained_finding("encoder", self._encoder[1]),
            pose_finding(self._pose_source),
        ]

    def on_embedding(self, msg: FrameEmbedding) -> None:
        """Score one embedding (stamps increasing) and publish what the gate decides."""
        stamp = time_to_ns(msg.header.stamp)
        self._stats.count("embeddings_in")
        if msg.padded_frames:  # a warm-up window (clip_warmup: pad): not what s(t) assumes
            self._stats.count("padded_skipped")
            return
        if not self._order.check(stamp):
            return
        z = np.asarray(msg.embedding, dtype=np.float64)
        deviation = (
            z - self._scorer.mean if self._filter.needs_latent and self._scorer.ready else None
        )
        try:
            result = self._scorer.update(z)
        except InputError as exc:
            self._stats.reject("embedding", str(exc))
            return
        self._order.commit(stamp)
        self._encoder = (msg.model, msg.pretrained)
        if result is None:
            return
        triggers = self._gate.push(stamp, result.score, result.kl)
        if deviation is not None:
            self._filter.observe(stamp, deviation)
        self._stats.count("frames_scored")
        out = SurpriseScore(
            header=msg.header,
            score=result.score,
            kl=result.kl,
            threshold=self._gate.threshold,
            history=self._gate.history_size,
        )
        self._score_pub.publish(out)
        self._decide(self._filter.push(stamp, triggers, self._position_at))

    def _decide(self, decisions: list[Decision]) -> None:
        for decision in decisions:
            if decision.kept:
                self._publish_event(decision.trigger)
            else:
                self._stats.count(f"suppressed_{decision.reason}")

    def _position_at(self, stamp_ns: int) -> tuple[float, float, float] | None:
        pose = self._pose_at(stamp_ns)[0]
        return None if pose is None else pose.position

    def _publish_event(self, trigger: SurpriseTrigger) -> None:
        pose, source = self._pose_at(trigger.stamp_ns)
        event = SurpriseEvent(
            score=trigger.score,
            kl=trigger.kl,
            threshold=trigger.threshold,
            decided=ns_to_time(trigger.decided_ns),
            pose_valid=pose is not None,
            pose_source=source,
            encoder_model=self._encoder[0],
            encoder_pretrained=self._encoder[1],
        )
        event.header.stamp = ns_to_time(trigger.stamp_ns)
        if pose is not None:
            event.header.frame_id = pose.frame_id
            event.pose = pose_to_msg(pose)
        else:
            event.pose.orientation.w = 1.0
        self._event_pub.publish(event)
        if self._on_event is not None:
            self._on_event(event)
        self._pose_source = source
        self._stats.count("events")
        self._node.get_logger().info(
            f"event at {ns_to_seconds(trigger.stamp_ns):.3f} s: score {trigger.score:.3f} > "
            f"tau {trigger.threshold:.3f} (pose: {source})"
        )

    def _pose_at(self, stamp_ns: int) -> tuple[Pose | None, str]:
        """The robot pose at the stamp: tf, else odometry, else none (with the reason)."""
        cfg = self._pose_cfg
        reason = "tf2_ros not installed"
        if self._tf_buffer is not None:
            try:
                # no timeout: this runs in the executor thread that delivers /tf, so waiting
                # here could only wait for itself. The gate decides an event nms_seconds
                # after its peak, which is the time tf has to reach the peak stamp.
                tf = self._tf_buffer.lookup_transform(
                    cfg.map_frame, cfg.robot_frame, RclpyTime(nanoseconds=stamp_ns)
                )
                t, q = tf.transform.translation, tf.transform.rotation
                return Pose(t.x, t.y, t.z, q.x, q.y, q.z, q.w, cfg.map_frame), "tf"
            except Exception as exc:  # tf2 raises several lookup/extrapolation errors
                reason = f"tf: {type(exc).__name__}"
        pose = self._odometry.lookup(stamp_ns)
        if pose is not None:
            return pose, "odometry"
        if not cfg.odom_topic:
            return None, f"no pose ({reason}; no odometry topic)"
        return None, f"no pose ({reason}; no odometry within {cfg.pose_tolerance_seconds} s)"

    def flush(self) -> None:
        """Publish the events still pending in the gate (end of a bag, shutdown)."""
        if "_gate" not in self.__dict__:  # configure failed before the gate was built
            return
        last = self._gate.last_stamp_ns or 0
        self._decide(self._filter.push(last, self._gate.flush(), self._position_at))
        self._decide(self._filter.flush())
