"""A navigation goal from a host node to Nav2, and the tf lookup it may need first.

* :class:`TransformLookup`: the pose of a frame in the navigation frame from tf (tf2_ros
  where it is installed; without it every lookup is a clear refusal).
* :class:`GoalSender`: sends a ``geometry_msgs/PoseStamped`` goal through Nav2's
  ``NavigateToPose`` action (where ``nav2_msgs`` is installed) or publishes it on the goal
  topic (what RViz's goal tool does), and says which; a goal that reaches no navigator
  within the timeout is refused, never reported as sent.

Both take a host node (the memory node, or the CLI's short-lived node) whose executor
spins in another thread than the caller's: they wait with deadlines, from any thread.
"""

from __future__ import annotations

import importlib
import threading
import time
from typing import Any

from geometry_msgs.msg import PoseStamped
from rclpy.duration import Duration
from rclpy.time import Time

from surprise_memory.config import NavigationConfig
from surprise_memory.errors import ConfigError
from surprise_memory.memory.navigation import GoalRefusedError
from surprise_memory.memory.pose import Pose
from surprise_memory.nodes.messages import pose_to_msg
from surprise_memory.nodes.qos import GOAL

__all__ = ["GoalSender", "TransformLookup", "goal_msg", "navigate_to_pose_action"]

_POLL_S = 0.02


def navigate_to_pose_action() -> Any:
    """Nav2's ``NavigateToPose`` action type, or None where ``nav2_msgs`` is not installed."""
    try:
        return importlib.import_module("nav2_msgs.action").NavigateToPose
    except ImportError:
        return None


def goal_msg(node: Any, pose: Pose) -> PoseStamped:
    """A goal pose as Nav2 takes it: in its frame, stamped now by the node's clock (as RViz)."""
    msg = PoseStamped(pose=pose_to_msg(pose))
    msg.header.frame_id = pose.frame_id
    msg.header.stamp = node.get_clock().now().to_msg()
    return msg


class TransformLookup:
    """Poses of frames in another frame, from tf (``/tf``, ``/tf_static``) heard by the node.

    Subscribes tf for as long as it is open (a context manager): a goal is rare, and
    listening all the time cost the memory node 16-60 % of a core at 130 tf messages/s
    (measured by hand, 2-core machine under load), against 0.5 % without.

    Args:
        node: The host node (its executor delivers ``/tf``, in another thread than the
            caller's).

    """

    def __init__(self, node: Any) -> None:
        self._buffer: Any = None
        self._listener: Any = None
        try:
            from tf2_ros import Buffer, TransformListener
        except ImportError:
            return
        self._buffer = Buffer()
        self._listener = TransformListener(self._buffer, node, spin_thread=False)

    def __enter__(self) -> TransformLookup:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop listening to tf (idempotent; what was heard stays for lookups)."""
        if self._listener is not None:
            self._listener.unregister()
            self._listener = None

    def lookup(
        self, target: str, source: str, stamp_ns: int, wait_s: float = 0.0
    ) -> tuple[Pose, str]:
        """The pose of ``source`` in ``target`` at ``stamp_ns`` (``target <- source``).

        The buffer holds tf from the moment this lookup opened, an episode may be days
        old: where tf holds no transform at its stamp, the latest one is used and the
        note says so (a static transform, e.g. ``map -> odom`` with a fixed map, holds at
        every stamp; a moving one is off by the drift since the episode).

        Args:
            target: The navigation frame.
            source: The episode's frame.
            stamp_ns: The episode's stamp.
            wait_s: How long to wait for tf to connect the two frames (nothing is heard
                before the lookup opened).

        Returns:
            The transform as a pose in ``target``, and a note ("" when exact).

        Raises:
            GoalRefusedError: tf2_ros is not installed, or tf did not connect the frames
                within ``wait_s``.

        """
        if self._buffer is None:
            raise GoalRefusedError(
                f"the episode's pose is in {source!r}, navigation in {target!r}, and tf2_ros is "
                "not installed here to transform it (install tf2_ros, or navigate in "
                f"{source!r}: navigation_frame)"
            )
        from tf2_ros import ExtrapolationException, TransformException

        buffer = self._buffer
        try:
            buffer.can_transform(target, source, Time(), timeout=Duration(seconds=wait_s))
            try:
                tf = buffer.lookup_transform(target, source, Time(nanoseconds=stamp_ns))
                note = ""
            except ExtrapolationException:
                tf = buffer.lookup_transform(target, source, Time())
                note = (
                    f"{target} <- {source} from tf's latest transform: tf holds none at the "
                    "episode's time"
                )
        except TransformException as exc:
            raise GoalRefusedError(
                f"no transform from the episode's frame {source!r} to the navigation frame "
                f"{target!r} ({type(exc).__name__}: {' '.join(str(exc).split())})"
            ) from None
        t, q = tf.transform.translation, tf.transform.rotation
        return Pose(t.x, t.y, t.z, q.x, q.y, q.z, q.w, target), note


class GoalSender:
    """Sends goals to Nav2: the ``NavigateToPose`` action, or the goal topic.

    Args:
        node: The host node.
        config: ``goal_transport``, ``goal_action``, ``goal_topic``.
        callback_group: Of the action client (its answers must be taken by another
            executor thread than the one waiting in :meth:`send`).

    Raises:
        ConfigError: ``goal_transport: action`` where nav2_msgs is not installed.

    """

    def __init__(self, node: Any, config: NavigationConfig, callback_group: Any = None) -> None:
        action = None if config.goal_transport == "topic" else navigate_to_pose_action()
        if action is None and config.goal_transport == "action":
            raise ConfigError(
                "goal_transport=action: nav2_msgs is not installed (install Nav2, or use "
                "goal_transport topic or auto)"
            )
        self._action: Any = action
        self._action_name = ""
        self._client: Any = None
        self._publisher: Any = None
        if action is not None:
            from rclpy.action.client import ActionClient

            self._client = ActionClient(
                node, action, config.goal_action, callback_group=callback_group
            )
            self._action_name = node.resolve_topic_name(config.goal_action)
        else:
            self._publisher = node.create_publisher(PoseStamped, config.goal_topic, GOAL)
        self.via = (
            f"action {self._action_name}"
            if self._client is not None
            else f"topic {self._publisher.topic_name}"
        )
        """How goals go: ``action /navigate_to_pose`` or ``topic /goal_pose``."""

    def send(self, goal: PoseStamped, timeout_s: float) -> str:
        """Send one goal; returns how it went (``action /navigate_to_pose``, ...).

        Through the action: waits for the server and for it to accept the goal (the
        navigation itself is not waited for). On the topic: waits for a subscriber, then
        for it to acknowledge the message (reliable QoS).

        Raises:
            GoalRefusedError: No navigator within ``timeout_s``, or it rejected the goal: the
                goal was not sent (or, after a timeout on the answer, may not have arrived).

        """
        if self._client is not None:
            return self._send_action(goal, timeout_s)
        deadline = time.monotonic() + timeout_s
        while self._publisher.get_subscription_count() == 0:
            if time.monotonic() >= deadline:
                raise GoalRefusedError(
                    f"nothing subscribes {self._publisher.topic_name} within {timeout_s:g} s: is "
                    "Nav2 running (same ROS_DOMAIN_ID)? Goal not sent"
                )
            time.sleep(_POLL_S)
        self._publisher.publish(goal)
        left = max(deadline - time.monotonic(), 0.5)
        if not self._publisher.wait_for_all_acked(Duration(seconds=left)):
            raise GoalRefusedError(
                f"the goal on {self._publisher.topic_name} was not acknowledged within "
                f"{timeout_s:g} s: it may not have arrived"
            )
        return self.via

    def _send_action(self, goal: PoseStamped, timeout_s: float) -> str:
        name = self._action_name
        start = time.monotonic()
        if not self._client.wait_for_server(timeout_sec=timeout_s):
            raise GoalRefusedError(
                f"no NavigateToPose server on {name} within {timeout_s:g} s: is Nav2 running? "
                "Goal not sent"
            )
        request = self._action.Goal()
        request.pose = goal
        done = threading.Event()
        future = self._client.send_goal_async(request)
        future.add_done_callback(lambda _: done.set())
        if not done.wait(max(timeout_s - (time.monotonic() - start), 0.5)):
            raise GoalRefusedError(
                f"Nav2 ({name}) did not answer the goal within {timeout_s:g} s: it may still run"
            )
        handle = future.result()
        if handle is None or not handle.accepted:
            raise GoalRefusedError(f"Nav2 ({name}) rejected the goal")
        return self.via

    def destroy(self) -> None:
        """Remove the action client (its entities are not in the node's lists)."""
        if self._client is not None:
            self._client.destroy()
            self._client = None
