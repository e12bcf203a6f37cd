"""Place keyframes in a live node: every camera frame decided on, the kept ones written.

:class:`PlacesPart` is hosted by :class:`~surprise_memory.nodes.memory_part.MemoryPart`
(``memory_node`` and ``pipeline_node``). On each camera frame, in the camera's callback, it
takes the robot's newest pose without waiting
(:meth:`~surprise_memory.nodes.pose_source.PoseSource.recent_robot_pose`: tf, else
odometry) and the camera's viewing yaw, and asks the
:class:`~surprise_memory.memory.places.PlaceKeyframeSelector` (O(1)); a frame it keeps goes
to the place writer's bounded queue (full: dropped and counted) and its own thread
redacts, embeds (PE-Core, the episodes' embedder) and stores it as a record of kind
``place``. The camera path never waits for the embedder or the store; a store error is
counted and logged, throttled. ``/diagnostics`` reports the keyframes kept, written and
dropped, and, when none is kept, why (the most frequent reason of the period).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from surprise_memory.config import CameraSpec, ComponentConfig, PlacesConfig, PoseConfig
from surprise_memory.health import (
    Finding,
    Level,
    counted_finding,
    worker_finding,
)
from surprise_memory.memory.camera_view import CameraView
from surprise_memory.memory.places import (
    PLACE,
    PlaceKeyframeDecision,
    PlaceKeyframeSelector,
    place_keyframes_finding,
)
from surprise_memory.memory.store import EpisodeRecord, EpisodeStoreBackend
from surprise_memory.memory.store.records import host_session_id
from surprise_memory.memory.writer import EpisodeWriter
from surprise_memory.nodes.diagnostics import NodeStats
from surprise_memory.nodes.parameters import Applier
from surprise_memory.nodes.pose_source import PoseSource
from surprise_memory.perception.frames import CompressedFrame, Frame

__all__ = ["PENDING_PLACES", "PlacesPart"]

PENDING_PLACES = 8
"""Place keyframes waiting for the embedder: at most one a camera per
``place_min_interval_seconds``, so more waiting means the embedder or the store is behind."""


class Embed(Protocol):
    """Redacts and embeds frames (the host's, shared with the episodes)."""

    @property
    def model(self) -> tuple[str, bool]:
        """The embedder's model name and whether it has its trained weights."""
        ...

    def __call__(self, frames: Sequence[Frame]) -> tuple[list[Frame], npt.NDArray[np.float32]]:
        """The frames as stored and one unit embedding per frame."""
        ...


@dataclass(frozen=True)
class _PlaceFrame:
    """A kept frame on its way to the store."""

    frame: Frame | CompressedFrame
    decision: PlaceKeyframeDecision
    camera: CameraView


class PlacesPart:
    """Decides which camera frames become place keyframes and writes them off the camera path.

    Args:
        node: The host node (its logger).
        stats: The host's counters.
        values: The node's settings (places, cameras).
        store: The store the keyframes go to.
        embed: Redacts and embeds frames (the episodes' embedder, under its lock), and
            names its model (name, trained weights or not).
        own_poses: Make its own pose source (tf, odometry: ``memory_node``) when place
            keyframes are on; False: the host hands one over (:meth:`use_poses`).

    """

    def __init__(
        self,
        node: Any,
        stats: NodeStats,
        values: Mapping[str, Any],
        store: EpisodeStoreBackend,
        embed: Embed,
        *,
        own_poses: bool = True,
    ) -> None:
        from surprise_memory.config import CamerasConfig

        self._node = node
        self._stats = stats
        self._store = store
        self._embed = embed
        self._embedder = embed.model
        self._specs = {spec.name: spec for spec in CamerasConfig.from_mapping(values).specs}
        config = PlacesConfig.from_mapping(values)
        self._selector = PlaceKeyframeSelector(config, session_id=host_session_id())
        self._poses: PoseSource | None = None
        self._owns_poses = own_poses  # the pose settings are this part's to apply
        if own_poses and config.place_keyframes:  # tf and odometry only when used
            self._poses = PoseSource(node, stats, PoseConfig.from_mapping(values))
        self._no_pose = "no pose source"  # why the latest frame had no pose
        self._last_skipped = self._selector.skipped
        self._status = "on" if config.place_keyframes else "off"
        self._closing = False
        self._writer: EpisodeWriter[_PlaceFrame, EpisodeRecord] = EpisodeWriter(
            self._write,
            on_done=self._on_written,
            on_error=self._on_failed,
            capacity=PENDING_PLACES,
            name="places",
        )
        for key in ("place_keyframes_kept", "place_keyframes_written", "place_keyframes_dropped"):
            stats.count(key, 0)  # shown from the start, at 0
        stats.add_check(self._health)
        stats.add_values(self._values)

    @property
    def enabled(self) -> bool:
        """Whether place keyframes are on (``place_keyframes``, read at configure)."""
        return self._selector.config.place_keyframes

    @property
    def config(self) -> PlacesConfig:
        """The place settings in force (live changes included)."""
        return self._selector.config

    def use_poses(self, poses: PoseSource) -> None:
        """Take the robot's poses from the host's pose source (which subscribes and applies it)."""
        self._poses = poses

    def appliers(self) -> dict[type[ComponentConfig], Applier]:
        """Live changes of the place settings (and of the pose settings when owned)."""
        appliers: dict[type[ComponentConfig], Applier] = {PlacesConfig: self._selector.reconfigure}
        if self._owns_poses:  # with place keyframes off, memory_node uses no pose
            appliers[PoseConfig] = self._poses.reconfigure if self._poses else lambda c: None
        return appliers

    def subscribe(self) -> None:
        """Activate: odometry in, when this part owns its pose source."""
        if self._owns_poses and self._poses is not None:
            self._poses.subscribe()

    # --- camera path (executor thread): O(1), never waits
    def on_frame(self, frame: Frame | CompressedFrame, camera: str) -> None:
        """Decide about one camera frame; a kept one is queued for the place writer."""
        stamp = frame.stamp_ns
        if not self.enabled or self._poses is None:
            self._selector.push(stamp, None, camera)  # counted: disabled, or no pose
            return
        pose, pose_ns, source = self._poses.recent_robot_pose(stamp)
        spec = self._specs.get(camera, CameraSpec(camera))
        view = CameraView(camera, spec.frame or frame.frame_id)
        if pose is None:
            self._no_pose = source
        else:
            camera_pose = self._poses.camera_pose(pose_ns, (pose, source), spec, view.frame_id)[0]
            view = CameraView(camera, view.frame_id, camera_pose)
        decision = self._selector.push(
            stamp, pose, camera, view_yaw=view.yaw, pose_stamp_ns=None if pose is None else pose_ns
        )
        if decision is None:
            return
        self._stats.count("place_keyframes_kept")
        if not self._writer.put(_PlaceFrame(frame, decision, view)):
            self._stats.count("place_keyframes_dropped")
            self._node.get_logger().warning(
                f"place keyframe {decision.place_key} dropped: {PENDING_PLACES} waiting for "
                f"the embedder or the store (the current one for "
                f"{self._writer.busy_seconds:.1f} s)",
                throttle_duration_sec=5.0,
            )

    # --- the place writer's thread
    def _write(self, item: _PlaceFrame) -> EpisodeRecord:
        frame = item.frame.decode() if isinstance(item.frame, CompressedFrame) else item.frame
        frames, embeddings = self._embed([frame])
        decision = item.decision
        return self._store.add(
            frames,
            embeddings,
            stamp_ns=decision.stamp_ns,
            surprise=0.0,
            pose=decision.pose,
            embedder_model=self._embedder[0],
            embedder_pretrained=self._embedder[1],
            camera=item.camera,
            kind=PLACE,
            place_key=decision.place_key,
        )

    def _on_written(self, item: _PlaceFrame, record: EpisodeRecord) -> None:
        self._stats.count("place_keyframes_written")

    def _on_failed(self, item: _PlaceFrame, exc: BaseException) -> None:
        key = item.decision.place_key
        self._stats.reject("place_store", f"place keyframe {key}: {type(exc).__name__}: {exc}")

    # --- diagnostics (timer)
    def _health(self, delta: Mapping[str, int]) -> list[Finding | None]:
        skipped = self._selector.skipped
        period = {k: n - self._last_skipped.get(k, 0) for k, n in skipped.items()}
        self._last_skipped = skipped
        finding, self._status = place_keyframes_finding(
            delta.get("place_keyframes_kept", 0), period, self._no_pose
        )
        return [
            finding,
            worker_finding("place keyframe writer", self._writer.alive or self._closing),
            counted_finding(
                delta, "rejected_place_store", Level.ERROR, "place keyframe write(s) failed"
            ),
            counted_finding(
                delta, "place_keyframes_dropped", Level.WARN, "place keyframe(s) dropped"
            ),
        ]

    def _values(self) -> dict[str, object]:
        skipped = {f"place_skipped.{k}": n for k, n in self._selector.skipped.items() if n}
        applied = dict(self._selector.config.as_dict())  # the settings as the selector has them
        if self._owns_poses and self._poses is not None:
            applied["pose_tolerance_seconds"] = self._poses.tolerance_seconds
        applied = {f"applied.{k}": v for k, v in applied.items()}
        return {"place_keyframes": self._status, **skipped, **applied}

    def close(self, timeout: float) -> int:
        """Write the keyframes queued within ``timeout`` seconds, then stop the writer.

        Returns:
            How many were not written.

        """
        self._closing = True
        return self._writer.close(timeout=timeout)
