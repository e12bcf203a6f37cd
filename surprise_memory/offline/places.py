"""Place keyframes in an offline run: the live node's selector, on a recording's poses.

``surprise-memory process`` keeps, beside the surprise episodes, the place keyframes the
live ``memory_node`` would have kept (:mod:`~surprise_memory.memory.places`): every frame
is decided on by the same :class:`~surprise_memory.memory.places.PlaceKeyframeSelector`
with the recording's pose at its stamp (``--pose-topic``, ``--fixed-frames``), and a kept
frame is blurred (``redact_faces``), embedded and stored in line: offline, nothing waits
on a camera. Without poses nothing is kept and the run record says why (the selector's
skip reasons, as ``/diagnostics`` says them live).

A recording's poses are its own boot's: the selector takes them as this run's session,
and each place keyframe is stored with the session unknown, as the run's episodes are.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Protocol

import numpy as np
import numpy.typing as npt

from surprise_memory.config import PlacesConfig
from surprise_memory.memory.camera_view import CameraView
from surprise_memory.memory.places import PLACE, PlaceKeyframeSelector
from surprise_memory.memory.pose import Pose
from surprise_memory.memory.store import EpisodeStoreBackend
from surprise_memory.perception.frames import Frame

__all__ = ["OfflinePlaces"]

EmbedFrames = Callable[[list[Frame]], tuple[list[Frame], npt.NDArray[np.float32]]]
"""Frames -> (the frames as stored: blurred where faces are, their unit embeddings)."""


class ViewOf(Protocol):
    """Where the camera looked at a pose (the run's camera spec and mounting yaw)."""

    def __call__(self, pose: Pose | None, frame_id: str) -> CameraView:
        """The camera's view at ``pose`` (its frame ``frame_id`` where the spec has none)."""
        ...


class OfflinePlaces:
    """Decides on every frame of a run and stores the kept ones as place keyframes.

    Args:
        config: The place settings (``place_keyframes`` false: nothing kept, counted).
        store: The run's store.
        pose_at: The recording's pose at a stamp; None = unknown (nothing kept, counted
            ``no_pose``).
        embed: Blurs and embeds a kept frame (the run's redactor and embedder).
        view_of: The camera's view at a pose.
        embedder: The embedder's model name and whether it is trained (for the record).
        id_tag: Place keyframe ids ``pl-<stamp, 19 digits>-<tag>`` (a re-run of an
            interrupted recording finds and removes them as it does its episodes); None =
            random ids.

    """

    def __init__(
        self,
        config: PlacesConfig,
        store: EpisodeStoreBackend,
        pose_at: Callable[[int], Pose | None],
        embed: EmbedFrames,
        view_of: ViewOf,
        *,
        embedder: tuple[str, bool],
        id_tag: str | None = None,
    ) -> None:
        self._selector = PlaceKeyframeSelector(config)
        self._store = store
        self._pose_at = pose_at
        self._embed = embed
        self._view_of = view_of
        self._embedder = embedder
        self._id_tag = id_tag
        self.stored = 0

    @property
    def skipped(self) -> Mapping[str, int]:
        """Frames not kept, by reason (only the reasons that occurred)."""
        return {k: n for k, n in self._selector.skipped.items() if n}

    def push(self, frame: Frame, camera: str) -> None:
        """Decide about one frame (in stamp order); store it when kept.

        Raises:
            StoreError: The store cannot be written (the run stops, as for an episode).

        """
        if not self._selector.config.place_keyframes:  # counted as such: no pose to look up
            self._selector.push(frame.stamp_ns, None, camera)
            return
        pose = self._pose_at(frame.stamp_ns)
        view = self._view_of(pose, frame.frame_id)
        decision = self._selector.push(frame.stamp_ns, pose, camera, view_yaw=view.yaw)
        if decision is None:
            return
        frames, embeddings = self._embed([frame])
        self._store.add(
            frames,
            embeddings,
            stamp_ns=decision.stamp_ns,
            surprise=0.0,
            pose=decision.pose,
            embedder_model=self._embedder[0],
            embedder_pretrained=self._embedder[1],
            episode_id=self._id_tag and f"pl-{decision.stamp_ns:019d}-{self._id_tag}",
            session_id="",  # a recording's poses are its own boot's
            camera=view,
            kind=PLACE,
            place_key=decision.place_key,
        )
        self.stored += 1
