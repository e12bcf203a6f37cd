"""The memory node's ``go_to_episode`` service from any rclpy program.

:class:`GoToEpisodeClient` asks the memory node to send the robot to an episode (by id, or
the best hit of a text/time/place query) and returns what it did as a
:class:`~surprise_memory.agents.navigation_tool.NavigationResult` (with the goal's id and
state); a refusal (nothing of ours runs) raises
:class:`~surprise_memory.memory.navigation.GoalRefusedError` with the node's reason. It
follows and cancels the goals through the node's ``navigation_status`` and
``cancel_navigation`` (beside ``go_to_episode``). It is the
:class:`~surprise_memory.agents.navigation_tool.Navigator` of the agent functions
``navigate_to_episode``, ``navigation_status`` and ``stop_navigation``, and what
``surprise-memory goto`` calls. Like
:class:`~surprise_memory.agents.ros_client.EpisodicMemoryClient`, it calls from a private
node, so it works from any callback of the host node.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Sequence

from geometry_msgs.msg import PoseWithCovarianceStamped
from rclpy.node import Node

from surprise_memory.agents.navigation_tool import NavigationResult
from surprise_memory.errors import InputError
from surprise_memory.memory.navigation import GoalRefusedError
from surprise_memory.memory.navigation_goals import GoalStatus
from surprise_memory.memory.pose import Pose
from surprise_memory.nodes.goal_messages import goal_status_from_msg
from surprise_memory.nodes.messages import (
    ns_to_time,
    place_status_from_msg,
    pose_from_msg,
    time_to_ns,
)
from surprise_memory.nodes.qos import ROBOT_POSE
from surprise_memory.nodes.service_caller import ServiceCaller
from surprise_memory.srv import CancelNavigation, GoToEpisode, NavigationStatus

__all__ = ["GoToEpisodeClient", "RobotPoseWatch", "result_from_response"]


def result_from_response(response: GoToEpisode.Response) -> NavigationResult:
    """A ``go_to_episode`` response that sent a goal (or a dry run) in plain Python types."""
    ep = response.episode
    return NavigationResult(
        episode_id=ep.id,
        robot_id=ep.robot_id,
        episode_stamp_ns=time_to_ns(ep.header.stamp),
        episode_pose=pose_from_msg(ep.pose, ep.header.frame_id),
        goal=pose_from_msg(response.goal.pose, response.goal.header.frame_id),
        sent_via=response.sent_via,
        message=response.message,
        goal_id=response.goal_id,
        state=response.state,
        preempted=response.preempted,
        place_status=place_status_from_msg(ep),
    )


class GoToEpisodeClient:
    """Client of ``go_to_episode``, usable from any callback of the caller's node.

    Args:
        node: The host node (its context and namespace are used; nothing is added to it).
        service: Name of the service; a relative name resolves in the host's namespace.
            ``navigation_status`` and ``cancel_navigation`` are beside it.
        timeout: Seconds to wait for the service and its answer; the node itself waits
            up to its ``goal_timeout_seconds`` for Nav2, so keep this longer.

    """

    def __init__(
        self,
        node: Node,
        service: str = "/surprise_memory/go_to_episode",
        timeout: float = 15.0,
    ) -> None:
        self._timeout = timeout
        base = service.rsplit("/", 1)[0]
        prefix = f"{base}/" if base or service.startswith("/") else ""
        self._caller = ServiceCaller(node, GoToEpisode, service)
        self._status = ServiceCaller(node, NavigationStatus, f"{prefix}navigation_status")
        self._cancel = ServiceCaller(node, CancelNavigation, f"{prefix}cancel_navigation")

    def go_to_episode(
        self, episode_id: str, *, standoff_m: float | None = None, dry_run: bool = False
    ) -> NavigationResult:
        """Send the robot to an episode by id (the agent tool's :class:`Navigator` call).

        Raises:
            GoalRefusedError: The node sent no goal (its message says why).
            ServiceTimeoutError: The node did not answer in time.

        """
        return self.go_to(episode_id=episode_id, standoff_m=standoff_m, dry_run=dry_run)

    def go_to(
        self,
        *,
        episode_id: str | None = None,
        text: str | None = None,
        start: int | None = None,
        end: int | None = None,
        near: Sequence[float] | None = None,
        near_frame: str | None = None,
        radius: float | None = None,
        robot_id: str | None = None,
        allow_other_robots: bool = False,
        standoff_m: float | None = None,
        dry_run: bool = False,
        camera: str | None = None,
        trust_pose: bool = False,
    ) -> NavigationResult:
        """Send the robot to an episode: by id, or the best hit of the query fields.

        Args:
            episode_id: The episode (not with query fields).
            text: What happened, in words (the node embeds it).
            start: Earliest trigger stamp, int ns.
            end: Latest trigger stamp, int ns.
            near: (x, y, z) in metres, in ``near_frame``.
            near_frame: Frame of ``near`` (None = the poses' frame).
            radius: Metres around ``near`` (None = nearest first).
            robot_id: Whose episodes (None = the node's robot).
            allow_other_robots: Allow another robot's episode.
            standoff_m: Metres short of the pose (None = the node's setting).
            dry_run: Make the goal, send nothing.
            camera: Only the episodes this camera saw (None = every camera's).
            trust_pose: Go even to an episode from another map than the node's, or whose
                pose was more uncertain than its max_goal_uncertainty_m.

        Returns:
            The goal: ``state`` ``running`` (accepted), ``sent`` (topic), or ``pending``
            (the navigator did not answer in time; the node asks it to cancel the goal if
            it accepts late: :meth:`navigation_status` tells the outcome).

        Raises:
            InputError: A field is invalid (nothing was sent to the node).
            GoalRefusedError: No goal of ours runs: none was sent, or the navigator
                rejected it (the message says why).
            ServiceTimeoutError: The node did not answer in time.

        """
        request = GoToEpisode.Request()
        request.episode_id = episode_id or ""
        request.text = text or ""
        for name, value in (("start", start), ("end", end)):
            if value is not None:
                if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                    raise InputError(f"{name}={value!r}: must be int nanoseconds >= 0")
                setattr(request, name, ns_to_time(value))
        if near is not None:
            xyz = [float(v) for v in near]
            if len(xyz) != 3 or not all(math.isfinite(v) for v in xyz):
                raise InputError(f"near={near!r}: expected three finite numbers (x, y, z)")
            request.use_location = True
            request.location.x, request.location.y, request.location.z = xyz
            request.location_frame = near_frame or ""
            request.radius = float(radius or 0.0)
        elif radius is not None or near_frame is not None:
            raise InputError("radius and near_frame need near")
        request.robot_id = robot_id or ""
        request.camera = camera or ""
        request.allow_other_robots = bool(allow_other_robots)
        if standoff_m is not None:
            if not math.isfinite(standoff_m) or standoff_m < 0:
                raise InputError(f"standoff_m={standoff_m!r}: must be a finite number >= 0")
            request.standoff = float(standoff_m)
        request.dry_run = bool(dry_run)
        request.trust_pose = bool(trust_pose)
        response = self._caller.call(request, self._timeout)
        if not response.success and response.state not in ("pending", "unknown"):
            raise GoalRefusedError(f"go_to_episode: no goal: {response.message}")
        return result_from_response(response)

    def navigation_status(self, goal_id: str = "") -> GoalStatus:
        """Where a goal of the node stands ("" = the latest).

        Raises:
            GoalRefusedError: The node sent no goal with that id (or none yet).
            ServiceTimeoutError: The node did not answer in time.

        """
        request = NavigationStatus.Request(goal_id=goal_id)
        response = self._status.call(request, self._timeout)
        status = goal_status_from_msg(response.status)
        if not response.success or status is None:
            raise GoalRefusedError(f"navigation_status: {response.message}")
        return status

    def stop_navigation(self, goal_id: str = "") -> tuple[bool, GoalStatus]:
        """Cancel a goal of the node by id, or the current one ("").

        Returns:
            Whether the navigator confirmed the cancel (the goal was in its
            ``goals_canceling``, or ended CANCELED) or the goal had finished, and the
            goal's status after it: where the navigator refused or did not answer in
            time, False, and the status's message says which (the goal may still run).

        Raises:
            GoalRefusedError: No such goal, no current goal, or a goal on the topic.
            ServiceTimeoutError: The node did not answer in time.

        """
        request = CancelNavigation.Request(goal_id=goal_id)
        response = self._cancel.call(request, self._timeout)
        status = goal_status_from_msg(response.status)
        if status is None:
            raise GoalRefusedError(f"cancel_navigation: {response.message}")
        return bool(response.success), status

    def destroy(self) -> None:
        """Remove the service clients and their private node (idempotent)."""
        self._caller.destroy()
        self._status.destroy()
        self._cancel.destroy()


class RobotPoseWatch:
    """The robot's latest localised pose, from a ``PoseWithCovarianceStamped`` topic.

    AMCL's ``/amcl_pose`` on a Nav2 robot: what the MCP server tells a person approving a
    goal (the distance from the robot). Only the latest pose is kept.

    Args:
        node: A spun node; the subscription is added to it.
        topic: The topic.
        on_first: Called once with the first pose received (an operator's log line: the
            pose reaches this process; until then a person is told the distance is unknown).

    """

    def __init__(
        self, node: Node, topic: str, on_first: Callable[[Pose], None] | None = None
    ) -> None:
        self._node = node
        self._lock = threading.Lock()
        self._latest: Pose | None = None
        self._on_first = on_first
        self._subscription = node.create_subscription(
            PoseWithCovarianceStamped, topic, self._on_pose, ROBOT_POSE
        )

    def _on_pose(self, msg: PoseWithCovarianceStamped) -> None:
        pose = pose_from_msg(msg.pose.pose, msg.header.frame_id)
        with self._lock:
            first, self._latest = self._latest is None, pose
        if first and self._on_first is not None:
            self._on_first(pose)

    def latest(self) -> Pose | None:
        """The last pose received (None: none yet)."""
        with self._lock:
            return self._latest

    def destroy(self) -> None:
        """Remove the subscription from the node."""
        self._node.destroy_subscription(self._subscription)
