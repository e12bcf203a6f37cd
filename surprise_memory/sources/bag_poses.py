"""Poses from a bag: odometry, pose and tf messages turned into pose lookups.

:class:`BagPoseReader` builds the lookup behind :meth:`BagSource.pose_lookup
<surprise_memory.sources.bag.BagSource.pose_lookup>` from an odometry topic
(``nav_msgs/msg/Odometry``), a ``geometry_msgs/msg/PoseStamped`` or
``PoseWithCovarianceStamped`` topic (e.g. ``/amcl_pose``), or from ``/tf``. For tf, how far
it goes: the chain from ``map_frame`` down to ``base_frame`` is found among the edges of
``/tf_static`` (all of it) and of the first ``tf_scan_messages`` messages of ``/tf``, any
number of hops (typically direct ``map -> base_link``, or ``map -> odom -> base_link``).
Static edges are constant; each dynamic edge is interpolated on its own at the query stamp
(within its maximum gap) and the edges are composed. There is no tf "time travel", no
extrapolation, and a tree that changes its parents during the bag is not followed.

Messages come one at a time from a :data:`MessageStream` (the bag source's reader);
samples are read lazily as queries advance.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Generator, Iterator, Mapping, Sequence
from typing import Any

from surprise_memory.errors import InputError
from surprise_memory.memory.pose import Pose
from surprise_memory.memory.pose_trust import SigmaBuffer, position_sigma_m
from surprise_memory.sources.pose_lookup import (
    ChainedPoseLookup,
    PoseLookup,
    Sample,
    SampledPoseLookup,
)
from surprise_memory.stamps import stamp_to_ns

__all__ = [
    "ODOMETRY_TYPE",
    "POSE_STAMPED_TYPES",
    "POSE_TYPES",
    "TF_TYPES",
    "BagPoseReader",
    "MessageStream",
    "strip_frame",
]

ODOMETRY_TYPE = "nav_msgs/msg/Odometry"
"""Message type of an odometry topic."""
POSE_STAMPED_TYPES = (
    "geometry_msgs/msg/PoseStamped",
    "geometry_msgs/msg/PoseWithCovarianceStamped",
)
"""Message types of a pose topic (e.g. ``/amcl_pose``)."""
TF_TYPES = ("tf2_msgs/msg/TFMessage", "tf/msg/tfMessage")
"""Message types of ``/tf`` and ``/tf_static`` (ROS 2 and ROS 1)."""

POSE_TYPES = (ODOMETRY_TYPE, *POSE_STAMPED_TYPES, *TF_TYPES)
"""Message types :meth:`BagSource.pose_lookup` accepts."""

MessageStream = Callable[[Sequence[str]], Generator[tuple[int, Any], None, None]]
"""``(log time, message)`` of some topics of a bag, deserialized, in log order."""


_SIGMAS_KEPT = (
    4096  # covariances kept behind the newest pose pulled: 40 s at 100 Hz (read per episode)
)


def strip_frame(frame: str) -> str:
    """A frame name without its leading slash."""
    return str(frame).lstrip("/")  # ROS 1 tf frames often carry a leading slash


class BagPoseReader:
    """Pose lookups from the odometry, pose and tf topics of one bag.

    Args:
        messages: Reads ``(log time, message)`` of some topics of the bag.
        topic_types: Every topic of the bag and its message type.

    """

    def __init__(self, messages: MessageStream, topic_types: Mapping[str, str]) -> None:
        self._messages = messages
        self._types = dict(topic_types)

    def lookup(
        self,
        pose_topic: str,
        *,
        map_frame: str,
        base_frame: str,
        max_gap_ns: int,
        parent_max_gap_ns: int | None,
        interpolate: bool,
        history_ns: int | None,
        tf_scan_messages: int,
    ) -> PoseLookup:
        """Build a pose lookup from a topic of the bag (arguments of :meth:`BagSource.pose_lookup`).

        Args:
            pose_topic: An odometry, pose or tf topic of the bag.
            map_frame: Fixed frame of the tf chain.
            base_frame: Robot frame of the tf chain.
            max_gap_ns: Largest time from a query to a usable sample (the chain's last,
                fastest edge, and odometry/pose topics).
            parent_max_gap_ns: The same for the other dynamic tf edges; None: ``max_gap_ns``.
            interpolate: Interpolate between samples (else nearest).
            history_ns: Samples kept behind the newest query; ``None`` keeps all.
            tf_scan_messages: Messages of ``/tf`` read to find the chain's edges.

        Returns:
            A lookup that reads its samples lazily; close it when done.

        Raises:
            InputError: The topic is not a pose type, or no tf chain joins ``map_frame``
                to ``base_frame``.

        """
        msgtype = self._types[pose_topic]
        kwargs: dict[str, Any] = {
            "max_gap_ns": max_gap_ns,
            "interpolate": interpolate,
            "history_ns": history_ns,
        }
        if msgtype == ODOMETRY_TYPE or msgtype in POSE_STAMPED_TYPES:
            peek = self._messages([pose_topic])  # the frames, named by the first message
            try:
                first = next(peek, None)
            finally:
                peek.close()
            msg = first[1] if first else None
            sigmas = SigmaBuffer(_SIGMAS_KEPT)  # their covariances, where the type has one
            return SampledPoseLookup(
                self._topic_poses(pose_topic, sigmas),
                sigmas=sigmas,
                frame_id=strip_frame(msg.header.frame_id) if msg else "",
                child_frame_id=strip_frame(getattr(msg, "child_frame_id", "")) if msg else "",
                **kwargs,
            )
        if msgtype in TF_TYPES:
            return self._tf_lookup(
                pose_topic,
                map_frame=strip_frame(map_frame),
                base_frame=strip_frame(base_frame),
                parent_max_gap_ns=max_gap_ns if parent_max_gap_ns is None else parent_max_gap_ns,
                scan=tf_scan_messages,
                **kwargs,
            )
        raise InputError(
            f"pose topic {pose_topic!r} has type {msgtype}, expected one of {', '.join(POSE_TYPES)}"
        )

    def _topic_poses(self, topic: str, sigmas: SigmaBuffer) -> Generator[Sample, None, None]:
        for log_ns, msg in self._messages([topic]):
            stamp = stamp_to_ns(msg.header.stamp) or log_ns  # zero stamp: the log time
            with_cov = msg.pose if hasattr(msg.pose, "covariance") else None
            pose = msg.pose.pose if hasattr(msg.pose, "pose") else msg.pose
            if with_cov is not None:  # Odometry, PoseWithCovarianceStamped
                try:
                    sigma = position_sigma_m(with_cov.covariance)
                except InputError:  # not 6x6: unknown, as the live node takes it
                    sigma = None
                sigmas.add(stamp, sigma, strip_frame(msg.header.frame_id))
            yield stamp, _pose(pose.position, pose.orientation, msg.header.frame_id)

    def _tf_edges(self, topic: str, scan: int) -> tuple[dict[tuple[str, str], Pose], set[Any]]:
        static: dict[tuple[str, str], Pose] = {}
        if "/tf_static" in self._types and self._types["/tf_static"] in TF_TYPES:
            for log_ns, msg in self._messages(["/tf_static"]):
                for tf in msg.transforms:
                    edge = (strip_frame(tf.header.frame_id), strip_frame(tf.child_frame_id))
                    static[edge] = _transform_pose(tf, log_ns)[1]
        dynamic: set[tuple[str, str]] = set()
        if topic != "/tf_static":
            messages = self._messages([topic])
            try:
                for _, msg in itertools.islice(messages, scan):
                    for tf in msg.transforms:
                        dynamic.add(
                            (strip_frame(tf.header.frame_id), strip_frame(tf.child_frame_id))
                        )
            finally:
                messages.close()
        return static, dynamic

    def _tf_lookup(
        self,
        topic: str,
        *,
        map_frame: str,
        base_frame: str,
        parent_max_gap_ns: int,
        scan: int,
        **kwargs: Any,
    ) -> PoseLookup:
        static, dynamic = self._tf_edges(topic, scan)
        parent_of = {child: parent for parent, child in (*static, *dynamic)}
        chain: list[tuple[str, str]] = []
        frame = base_frame
        while frame != map_frame and frame in parent_of and len(chain) <= len(parent_of):
            chain.append((parent_of[frame], frame))
            frame = parent_of[frame]
        if frame != map_frame:
            edges = ", ".join(f"{p}->{c}" for p, c in sorted({*static, *dynamic})) or "none"
            raise InputError(
                f"no tf chain {map_frame} -> ... -> {base_frame} in {topic} (first {scan} "
                f"messages) and /tf_static; edges found: {edges}. Expected a direct edge or a "
                "chain such as map->odom->base_link (set map_frame/base_frame to match)"
            )
        chain.reverse()  # from the map frame outwards
        links: list[PoseLookup] = []
        for i, edge in enumerate(chain):
            if edge in dynamic:
                link_kwargs = dict(kwargs)
                if i < len(chain) - 1:
                    link_kwargs["max_gap_ns"] = parent_max_gap_ns
                links.append(
                    SampledPoseLookup(
                        self._edge_poses(topic, edge),
                        frame_id=edge[0],
                        child_frame_id=edge[1],
                        **link_kwargs,
                    )
                )
            else:
                links.append(SampledPoseLookup.constant(static[edge], edge[1]))
        return links[0] if len(links) == 1 else ChainedPoseLookup(links)

    def _edge_poses(self, topic: str, edge: tuple[str, str]) -> Iterator[Sample]:
        for log_ns, msg in self._messages([topic]):
            for tf in msg.transforms:
                if (strip_frame(tf.header.frame_id), strip_frame(tf.child_frame_id)) == edge:
                    yield _transform_pose(tf, log_ns)


def _pose(position: Any, orientation: Any, frame: str) -> Pose:
    return Pose(
        float(position.x),
        float(position.y),
        float(position.z),
        float(orientation.x),
        float(orientation.y),
        float(orientation.z),
        float(orientation.w),
        frame_id=strip_frame(frame),
    )


def _transform_pose(tf: Any, log_ns: int) -> Sample:
    stamp = stamp_to_ns(tf.header.stamp) or log_ns
    t = tf.transform
    return stamp, _pose(t.translation, t.rotation, tf.header.frame_id)
