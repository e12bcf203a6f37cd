"""Where an event's poses come from: the robot's (tf, else odometry) and its camera's.

:class:`PoseSource` is the scorer's: it holds the tf buffer (where tf2_ros is installed)
and the odometry buffer, and answers

* the robot's pose at a stamp: tf ``map_frame <- robot_frame``, else the
  ``pose_covariance_topic`` (``geometry_msgs/PoseWithCovarianceStamped``, AMCL's
  ``/amcl_pose``), else the odometry, else none with the reason;
* that pose's horizontal uncertainty (:func:`~surprise_memory.memory.pose_trust.position_sigma_m`):
  the covariance of the message the pose came from; for a tf pose, that of the newest
  ``pose_covariance_topic`` message at or before the stamp in ``map_frame`` (the
  localiser's belief), else unknown;
* the camera's pose at that stamp, in the robot pose's frame: tf ``map_frame <- camera
  frame`` where the robot's came from tf; else the robot's pose and the camera's mounting
  from tf (``robot_frame <- camera frame``, e.g. ``/tf_static``); else the robot's pose
  turned by the camera's configured ``yaw=``
  (:func:`~surprise_memory.memory.camera_view.mounting_pose`); else none with the reason.
"""

from __future__ import annotations

from typing import Any

from geometry_msgs.msg import PoseWithCovarianceStamped
from nav_msgs.msg import Odometry
from rclpy.time import Time as RclpyTime

from surprise_memory.config import CameraSpec, PoseConfig
from surprise_memory.errors import InputError
from surprise_memory.memory.camera_view import mounting_pose
from surprise_memory.memory.pose import Pose, PoseBuffer, compose
from surprise_memory.memory.pose_trust import SigmaBuffer, position_sigma_m
from surprise_memory.nodes.diagnostics import NodeStats
from surprise_memory.nodes.messages import pose_from_msg, time_to_ns
from surprise_memory.nodes.qos import ODOMETRY, overridable
from surprise_memory.stamps import NS_PER_SECOND

__all__ = ["PoseSource"]


class PoseSource:
    """The robot's and the cameras' poses by stamp, from tf and odometry.

    Args:
        node: The host node (the tf listener and the odometry subscription).
        stats: Its counters (odometry rejections).
        config: The pose settings.

    """

    def __init__(self, node: Any, stats: NodeStats, config: PoseConfig) -> None:
        self._node = node
        self._stats = stats
        self._config = config
        gap = round(config.pose_tolerance_seconds * NS_PER_SECOND)
        self._odometry = PoseBuffer(max_gap_ns=gap)
        self._located = PoseBuffer(max_gap_ns=gap)  # pose_covariance_topic's poses
        self._odometry_sigmas = SigmaBuffer()
        self._located_sigmas = SigmaBuffer()
        self._tf_buffer = self._make_tf_buffer()

    @property
    def config(self) -> PoseConfig:
        """The pose settings in force."""
        return self._config

    @property
    def tolerance_seconds(self) -> float:
        """The odometry's largest gap to a stamp, as applied."""
        return self._odometry.max_gap_ns / NS_PER_SECOND

    def reconfigure(self, config: PoseConfig) -> None:
        """Apply new pose settings live (the tolerance; the frame names are read-only)."""
        gap = round(config.pose_tolerance_seconds * NS_PER_SECOND)
        self._odometry.max_gap_ns = self._located.max_gap_ns = gap
        self._config = config

    def subscribe(self) -> None:
        """Activate: odometry in, when an odometry topic is set."""
        if self._config.odom_topic:
            self._node.create_subscription(
                Odometry,
                self._config.odom_topic,
                self._on_odometry,
                ODOMETRY,
                qos_overriding_options=overridable(),
            )
        if self._config.pose_covariance_topic:
            # best effort and volatile: matches AMCL's reliable, transient-local publisher
            self._node.create_subscription(
                PoseWithCovarianceStamped,
                self._config.pose_covariance_topic,
                self._on_located,
                ODOMETRY,
                qos_overriding_options=overridable(),
            )

    def clear(self) -> None:
        """Forget the odometry and located poses (time went backwards)."""
        for buffer in (self._odometry, self._located, self._odometry_sigmas, self._located_sigmas):
            buffer.clear()

    def _make_tf_buffer(self) -> Any:
        try:
            from tf2_ros import Buffer, TransformListener
        except ImportError:
            self._node.get_logger().warning(
                "tf2_ros is not installed: event poses come from odometry on "
                f"'{self._config.odom_topic}' only"
            )
            return None
        buffer = Buffer()
        # the node's own executor delivers /tf and /tf_static (spin_thread=False): a second
        # executor of tf2's would also take this node's callbacks, in whichever thread wins
        self._tf_listener = TransformListener(buffer, self._node, spin_thread=False)
        return buffer

    def _on_odometry(self, msg: Odometry) -> None:
        self._take(msg, "odometry", self._odometry, self._odometry_sigmas)

    def _on_located(self, msg: PoseWithCovarianceStamped) -> None:
        self._take(msg, "located_pose", self._located, self._located_sigmas)

    def _take(self, msg: Any, what: str, poses: PoseBuffer, sigmas: SigmaBuffer) -> None:
        """A pose with its covariance into its buffers (a non-finite one counted, dropped)."""
        pose = pose_from_msg(msg.pose.pose, msg.header.frame_id)
        if not pose.is_finite():
            self._stats.reject(what, f"{what} pose with NaN/inf values: {pose}")
            return
        stamp = time_to_ns(msg.header.stamp)
        poses.add(stamp, pose)
        sigmas.add(stamp, _sigma(msg.pose.covariance), pose.frame_id)

    def _lookup(self, target: str, source: str, stamp_ns: int) -> Pose:
        """The transform ``target <- source`` at the stamp, a pose in ``target`` (or raises).

        No timeout: this runs in the executor thread that delivers /tf, so waiting here
        could only wait for itself. The gate decides an event nms_seconds after its peak,
        which is the time tf has to reach the peak stamp.
        """
        tf = self._tf_buffer.lookup_transform(target, source, RclpyTime(nanoseconds=stamp_ns))
        t, q = tf.transform.translation, tf.transform.rotation
        return Pose(t.x, t.y, t.z, q.x, q.y, q.z, q.w, target)

    def robot_pose(self, stamp_ns: int) -> tuple[Pose | None, str]:
        """The robot pose at the stamp: tf, else odometry, else none (with the reason)."""
        cfg = self._config
        reason = "tf2_ros not installed"
        if self._tf_buffer is not None:
            try:
                return self._lookup(cfg.map_frame, cfg.robot_frame, stamp_ns), "tf"
            except Exception as exc:  # tf2 raises several lookup/extrapolation errors
                reason = f"tf: {type(exc).__name__}"
        pose = self._located.lookup(stamp_ns)
        if pose is not None:
            return pose, "pose_covariance"
        pose = self._odometry.lookup(stamp_ns)
        if pose is not None:
            return pose, "odometry"
        if not cfg.odom_topic:
            return None, f"no pose ({reason}; no odometry topic)"
        return None, f"no pose ({reason}; no odometry within {cfg.pose_tolerance_seconds} s)"

    def recent_robot_pose(self, stamp_ns: int) -> tuple[Pose | None, int, str]:
        """The robot's pose for a frame that just came, without waiting (place keyframes).

        tf's newest ``map_frame <- robot_frame`` (a frame's own stamp is often newer than
        tf, and waiting is not allowed on the camera path), else the odometry at the
        stamp, else the newest odometry; the caller judges the pose's age by its stamp.

        Args:
            stamp_ns: The frame's stamp.

        Returns:
            The pose, its own stamp (``stamp_ns`` for a static transform) and its source
            (``tf``, ``odometry``), or None, 0 and why there is none.

        """
        cfg = self._config
        reason = "tf2_ros not installed"
        if self._tf_buffer is not None:
            try:
                tf = self._tf_buffer.lookup_transform(cfg.map_frame, cfg.robot_frame, RclpyTime())
            except Exception as exc:  # tf2's lookup/connectivity errors
                reason = f"tf: {type(exc).__name__}"
            else:
                t, q = tf.transform.translation, tf.transform.rotation
                robot = Pose(t.x, t.y, t.z, q.x, q.y, q.z, q.w, cfg.map_frame)
                return robot, time_to_ns(tf.header.stamp) or stamp_ns, "tf"
        pose = self._odometry.lookup(stamp_ns)
        if pose is not None:
            return pose, stamp_ns, "odometry"
        latest = self._odometry.latest
        if latest is not None:
            return latest[1], latest[0], "odometry"
        topic = f"no odometry on '{cfg.odom_topic}'" if cfg.odom_topic else "no odometry topic"
        return None, 0, f"{reason}; {topic}"

    def sigma_at(self, stamp_ns: int, source: str) -> float | None:
        """The uncertainty (metres, 1-sigma) of the pose :meth:`robot_pose` found; None = unknown.

        Args:
            stamp_ns: The stamp.
            source: Where that pose came from (``tf``, ``pose_covariance``, ``odometry``).

        """
        gap = self._odometry.max_gap_ns
        if source == "odometry":
            return self._odometry_sigmas.nearest(stamp_ns, gap)
        if source == "pose_covariance":
            return self._located_sigmas.nearest(stamp_ns, gap)
        if source == "tf":
            return self._located_sigmas.latest_at(stamp_ns, self._config.map_frame)
        return None

    def position_at(self, stamp_ns: int) -> tuple[float, float, float] | None:
        """The robot's position at the stamp (None when no pose is known)."""
        pose = self.robot_pose(stamp_ns)[0]
        return None if pose is None else pose.position

    def camera_pose(
        self,
        stamp_ns: int,
        robot: tuple[Pose | None, str],
        camera: CameraSpec,
        frame: str,
    ) -> tuple[Pose | None, str]:
        """A camera's optical frame at the stamp, in the robot pose's frame (see module doc).

        Args:
            stamp_ns: The event's stamp.
            robot: :meth:`robot_pose` at that stamp.
            camera: The camera's settings (its ``yaw=``).
            frame: Its optical frame (the configured one, else its images').

        Returns:
            The pose and where it came from (``tf``, ``tf mounting``, ``mounting yaw``), or
            None and why not.

        """
        pose, source = robot
        if pose is None:
            return None, "no robot pose"
        reason = "tf2_ros not installed"
        if self._tf_buffer is not None and frame:
            if source == "tf":
                try:
                    return self._lookup(self._config.map_frame, frame, stamp_ns), "tf"
                except Exception as exc:  # tf2's lookup/extrapolation errors
                    reason = f"tf: {type(exc).__name__}"
            try:
                mount = self._lookup(self._config.robot_frame, frame, stamp_ns)
                return compose(pose, mount), "tf mounting"
            except Exception as exc:
                reason = f"tf: {type(exc).__name__}"
        elif not frame:
            reason = "the camera's frame is unknown"
        if camera.yaw_deg is not None:
            return compose(pose, mounting_pose(camera.yaw_deg)), "mounting yaw"
        return None, f"no camera pose ({reason}; no yaw= in cameras)"


def _sigma(covariance: Any) -> float | None:
    """A message's covariance as an uncertainty (None: unknown, or not 36 entries)."""
    try:
        return position_sigma_m(list(covariance))
    except InputError:
        return None
