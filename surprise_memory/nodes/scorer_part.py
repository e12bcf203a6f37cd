"""The scorer's work inside a node: embeddings in; scores, gated events with poses out.

:class:`ScorerPart` is hosted by ``scorer_node`` (embeddings from the ``embedding`` topic)
and by ``pipeline_node`` (embeddings handed over in memory by the encoder). Either way it
publishes ``surprise`` and ``events`` and looks the event poses up the same way (tf, else
odometry: :class:`~surprise_memory.nodes.pose_source.PoseSource`). Each camera of the
``cameras`` setting is scored apart: its own Gaussian window, robust threshold, gate,
habituation and budget, so that a pan of one camera says nothing of another's statistics.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from surprise_memory.config import (
    BudgetConfig,
    CamerasConfig,
    CameraSpec,
    ComponentConfig,
    GateConfig,
    HabituationConfig,
    PoseConfig,
    ScorerConfig,
)
from surprise_memory.errors import InputError
from surprise_memory.health import Finding, pose_finding, untrained_finding
from surprise_memory.msg import FrameEmbedding, SurpriseEvent, SurpriseScore
from surprise_memory.nodes.camera_inputs import not_one_of
from surprise_memory.nodes.diagnostics import NodeStats
from surprise_memory.nodes.messages import ns_to_time, pose_to_msg, time_to_ns
from surprise_memory.nodes.parameters import Applier
from surprise_memory.nodes.pose_source import PoseSource
from surprise_memory.nodes.qos import LATCHED, overridable
from surprise_memory.nodes.runtime import StampOrder
from surprise_memory.stamps import ns_to_seconds
from surprise_memory.surprise.decisions import Decision
from surprise_memory.surprise.gate import SurpriseGate, SurpriseTrigger
from surprise_memory.surprise.scorer import SurpriseScorer
from surprise_memory.surprise.trigger_filter import TriggerFilter

__all__ = ["ScorerPart"]


@dataclass
class _CameraScoring:
    """One camera's scoring state: what no other camera's frames may change."""

    spec: CameraSpec
    scorer: SurpriseScorer
    gate: SurpriseGate
    filter: TriggerFilter
    order: StampOrder
    frame_id: str = ""  # the optical frame of its newest embedding


class ScorerPart:
    """Scores each embedding (SurpriseScorer) and gates events (SurpriseGate), per camera.

    Publishes ``surprise`` (every scored frame) and ``events`` (reliable, transient
    local), each naming its camera. Stamps come from the embeddings only, so a bag played
    with ``--clock`` and ``use_sim_time`` gives the same results as a live run. A camera's
    stamp going backwards (a looped bag) resets that camera's scorer and gate with one
    warning. An embedding of a camera the ``cameras`` setting does not name is rejected,
    counted.

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
        """Configure: each camera's scorer, gate and filters; pose sources, publishers."""
        self._scorer_cfg = ScorerConfig.from_mapping(values)
        self._gate_cfg = GateConfig.from_mapping(values)
        self._habituation = HabituationConfig.from_mapping(values)
        self._budget = BudgetConfig.from_mapping(values)
        self._cameras = {
            spec.name: self._camera_scoring(spec)
            for spec in CamerasConfig.from_mapping(values).specs
        }
        self._encoder = ("", True)  # model and pretrained flag of the latest embedding
        self._pose_source: str | None = None  # of the latest event
        self._stats.add_check(self._health)
        self._poses = PoseSource(self._node, self._stats, PoseConfig.from_mapping(values))
        self._stats.add_values(self._applied)
        self._score_pub = self._node.create_publisher(SurpriseScore, "surprise", 10)
        self._event_pub = self._node.create_publisher(
            SurpriseEvent, "events", LATCHED, qos_overriding_options=overridable()
        )

    def _camera_scoring(self, spec: CameraSpec) -> _CameraScoring:
        # habituation and rate budget, both off by default
        gate = SurpriseGate.from_config(self._gate_cfg)
        stream = _CameraScoring(
            spec,
            SurpriseScorer.from_config(self._scorer_cfg),
            gate,
            TriggerFilter(self._habituation, self._budget, gate.max_delay_ns),
            StampOrder(self._node, self._stats, lambda: self._reset(spec.name)),
        )
        return stream

    @property
    def poses(self) -> PoseSource:
        """The robot's and cameras' poses (tf, odometry), shared with the place keyframes."""
        return self._poses

    def appliers(self) -> dict[type[ComponentConfig], Applier]:
        """Live changes (window, warm-up, NMS and the frame names are read-only)."""
        return {
            GateConfig: self._apply_gate,
            HabituationConfig: lambda c: self._apply_filter(c, self._budget),
            BudgetConfig: lambda c: self._apply_filter(self._habituation, c),
            PoseConfig: self._poses.reconfigure,
        }

    def subscribe(self) -> None:
        """Activate: odometry in, when an odometry topic is set."""
        self._poses.subscribe()

    # --- live parameter changes (LiveSettings)
    def _apply_gate(self, config: GateConfig) -> None:
        for stream in self._cameras.values():
            stream.gate.gamma = config.gamma  # tau from the next frame on

    def _apply_filter(self, habituation: HabituationConfig, budget: BudgetConfig) -> None:
        """New habituation/budget filters; the old ones' held triggers are decided first.

        The new filters start afresh (no remembered events, an empty rate window): their
        rules would not hold over what the old ones remembered under other settings.
        """
        for stream in self._cameras.values():
            self._decide(stream, stream.filter.flush())
            stream.filter = TriggerFilter(habituation, budget, stream.gate.max_delay_ns)
        self._habituation, self._budget = habituation, budget

    def _applied(self) -> dict[str, object]:
        """The writable settings as the live objects use them (``applied.<name>``)."""
        gate = next(iter(self._cameras.values())).gate
        values: dict[str, object] = {
            "gamma": gate.gamma,
            "pose_tolerance_seconds": self._poses.tolerance_seconds,
            **self._habituation.as_dict(),
            **self._budget.as_dict(),
        }
        return {f"applied.{k}": v for k, v in values.items() if k != "habituation_memory"}

    def _reset(self, camera: str) -> None:
        stream = self._cameras[camera]
        stream.scorer.reset()
        stream.gate.reset()
        stream.filter.reset()
        self._poses.clear()

    def _health(self, delta: Mapping[str, int]) -> list[Finding | None]:
        return [
            untrained_finding("encoder", self._encoder[1]),
            pose_finding(self._pose_source),
        ]

    def on_embedding(self, msg: FrameEmbedding) -> None:
        """Score one embedding (stamps increasing per camera); publish what its gate decides."""
        stamp = time_to_ns(msg.header.stamp)
        self._stats.count("embeddings_in")
        if msg.padded_frames:  # a warm-up window (clip_warmup: pad): not what s(t) assumes
            self._stats.count("padded_skipped")
            return
        stream = self._cameras.get(msg.camera)
        if stream is None:
            self._stats.reject("embedding", not_one_of(msg.camera, self._cameras))
            return
        if not stream.order.check(stamp):
            return
        z = np.asarray(msg.embedding, dtype=np.float64)
        scorer = stream.scorer
        deviation = z - scorer.mean if stream.filter.needs_latent and scorer.ready else None
        try:
            result = scorer.update(z)
        except InputError as exc:
            self._stats.reject("embedding", str(exc))
            return
        stream.order.commit(stamp)
        stream.frame_id = msg.header.frame_id
        self._encoder = (msg.model, msg.pretrained)
        if result is None:
            return
        triggers = stream.gate.push(stamp, result.score, result.kl)
        if deviation is not None:
            stream.filter.observe(stamp, deviation)
        self._stats.count_camera("frames_scored", msg.camera)
        out = SurpriseScore(
            header=msg.header,
            score=result.score,
            kl=result.kl,
            threshold=stream.gate.threshold,
            history=stream.gate.history_size,
            camera=msg.camera,
        )
        self._score_pub.publish(out)
        self._decide(stream, stream.filter.push(stamp, triggers, self._poses.position_at))

    def _decide(self, stream: _CameraScoring, decisions: list[Decision]) -> None:
        for decision in decisions:
            if decision.kept:
                self._publish_event(stream, decision.trigger)
            else:
                self._stats.count(f"suppressed_{decision.reason}")

    def _publish_event(self, stream: _CameraScoring, trigger: SurpriseTrigger) -> None:
        robot = self._poses.robot_pose(trigger.stamp_ns)
        pose, source = robot
        sigma = None if pose is None else self._poses.sigma_at(trigger.stamp_ns, source)
        camera, camera_source = self._poses.camera_pose(
            trigger.stamp_ns, robot, stream.spec, stream.frame_id
        )
        event = SurpriseEvent(
            score=trigger.score,
            kl=trigger.kl,
            threshold=trigger.threshold,
            decided=ns_to_time(trigger.decided_ns),
            pose_valid=pose is not None,
            pose_source=source,
            pose_sigma_m=0.0 if sigma is None else sigma,
            pose_sigma_valid=sigma is not None,
            encoder_model=self._encoder[0],
            encoder_pretrained=self._encoder[1],
            camera=stream.spec.name,
            camera_frame_id=stream.frame_id,
            camera_pose_valid=camera is not None,
            camera_pose_source=camera_source,
        )
        event.header.stamp = ns_to_time(trigger.stamp_ns)
        if pose is not None:
            event.header.frame_id = pose.frame_id
            event.pose = pose_to_msg(pose)
        else:
            event.pose.orientation.w = 1.0
        if camera is not None:
            event.camera_pose = pose_to_msg(camera)
        else:
            event.camera_pose.orientation.w = 1.0
        self._event_pub.publish(event)
        if self._on_event is not None:
            self._on_event(event)
        self._pose_source = source
        self._stats.count_camera("events", stream.spec.name)
        seen = f" by {stream.spec.label}" if stream.spec.name else ""
        self._node.get_logger().info(
            f"event{seen} at {ns_to_seconds(trigger.stamp_ns):.3f} s: score "
            f"{trigger.score:.3f} > tau {trigger.threshold:.3f} (pose: {source}; camera "
            f"pose: {camera_source})"
        )

    def flush(self) -> None:
        """Publish the events still pending in the gates (end of a bag, shutdown)."""
        if "_cameras" not in self.__dict__:  # configure failed before the gates were built
            return
        for stream in self._cameras.values():
            last = stream.gate.last_stamp_ns or 0
            position = self._poses.position_at
            self._decide(stream, stream.filter.push(last, stream.gate.flush(), position))
            self._decide(stream, stream.filter.flush())
