"""``navigate_to_episode``, ``navigation_status``, ``stop_navigation``: "take me there".

DAAAM's agent answers "take me to where the chemical spill happened yesterday" with two
calls: ``search_episodic_memory`` (:class:`~surprise_memory.agents.tool.EpisodicMemoryTool`)
finds the episode, then ``navigate_to_episode(episode_id)`` (:class:`NavigateToEpisodeTool`)
sends the robot there. The tool has the same shape as the search tool
(:class:`~surprise_memory.agents.function_tool.FunctionTool`: flat strict OpenAI
``signature``, nested ``schema``, DAAAM's no-op setters; ``execute`` never raises) and
works through a :class:`Navigator`: on a robot,
:class:`~surprise_memory.agents.ros_navigation.GoToEpisodeClient`, the memory node's
``go_to_episode`` service, which checks the episode, transforms its pose into the
navigation frame and sends the Nav2 goal. Each goal has an id: ``navigation_status(goal_id)``
(:class:`NavigationStatusTool`) says where it stands (running with the distance remaining,
succeeded, aborted, preempted by a later goal, ...) and ``stop_navigation(goal_id)``
(:class:`StopNavigationTool`) cancels it ("" = the current goal). ROS-free: the navigator
is the only ROS part.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass
from typing import Any, Protocol

from surprise_memory.agents.function_tool import FunctionTool
from surprise_memory.errors import InputError, SurpriseMemoryError
from surprise_memory.memory.navigation_goals import GoalStatus, cancel_line
from surprise_memory.memory.places import PlaceStatus
from surprise_memory.memory.pose import Pose, yaw_of

__all__ = [
    "GoalIdTool",
    "NavigateToEpisodeTool",
    "NavigationResult",
    "NavigationStatusTool",
    "Navigator",
    "StopNavigationTool",
    "goal_json",
    "status_json",
]

_PARAMETERS = ("episode_id",)


@dataclass(frozen=True)
class NavigationResult:
    """A goal made for an episode, and how it was sent.

    Attributes:
        episode_id: The episode.
        robot_id: The robot that stored it.
        episode_stamp_ns: Its trigger stamp, int ns.
        episode_pose: Its stored pose (in its own frame).
        goal: The goal, in the navigation frame (``goal.frame_id``).
        sent_via: ``action /navigate_to_pose`` or ``topic /goal_pose``; "" = not sent
            (a dry run).
        message: The memory's one-line account.
        goal_id: The goal's id ("" = not sent).
        state: ``running`` (accepted), ``sent`` (topic), ``pending`` (the navigator did not
            answer in time: asked to cancel it if it accepts late; follow it by id); "" =
            not sent.
        preempted: The earlier goal this one preempted ("" = none).
        place_status: When the episode's place was last seen and whether it still looks
            the same; None for a place keyframe, an episode without a pose, or a store
            without place keyframes.

    """

    episode_id: str
    robot_id: str
    episode_stamp_ns: int
    episode_pose: Pose
    goal: Pose
    sent_via: str
    message: str
    goal_id: str = ""
    state: str = ""
    preempted: str = ""
    place_status: PlaceStatus | None = None


class Navigator(Protocol):
    """What sends the robot to an episode (the memory node's ``go_to_episode``)."""

    def go_to_episode(
        self, episode_id: str, *, standoff_m: float | None = None, dry_run: bool = False
    ) -> NavigationResult:
        """Send the robot to the episode's place, or raise ``InputError`` saying why not."""
        ...

    def navigation_status(self, goal_id: str = "") -> GoalStatus:
        """Where a goal stands ("" = the latest), or raise ``InputError`` (no such goal)."""
        ...

    def stop_navigation(self, goal_id: str = "") -> tuple[bool, GoalStatus]:
        """Cancel a goal ("" = the current one): confirmed by the navigator?, and the goal."""
        ...


def goal_json(pose: Pose) -> dict[str, Any]:
    """A pose as the tools give it: frame, ``[x, y, z]`` metres, yaw in degrees, quaternion."""
    return {
        "frame": pose.frame_id,
        "position": [round(v, 3) for v in pose.position],
        "yaw_deg": round(math.degrees(yaw_of(pose)), 1),
        "orientation": [round(v, 4) for v in (pose.qx, pose.qy, pose.qz, pose.qw)],
    }


def status_json(status: GoalStatus) -> dict[str, Any]:
    """A goal's status as the tools give it (distance and time left while it runs)."""
    out: dict[str, Any] = {
        "goal_id": status.goal_id,
        "episode_id": status.episode_id,
        "state": status.state,
        "done": status.done,
        "message": status.message,
    }
    if status.preempted_by:
        out["preempted_by"] = status.preempted_by
    if status.done:
        return out
    if math.isfinite(status.distance_remaining_m):
        out["distance_remaining_m"] = round(status.distance_remaining_m, 2)
    if math.isfinite(status.eta_s):
        out["estimated_time_remaining_s"] = round(status.eta_s, 1)
    return out


class NavigateToEpisodeTool(FunctionTool):
    """Send the robot to where an episode happened, for an LLM agent.

    Args:
        navigator: Sends the goal (e.g.
            :class:`~surprise_memory.agents.ros_navigation.GoToEpisodeClient`).
        standoff_m: Stop this many metres short of the episode's pose, facing where the
            robot faced then; None = the memory node's ``goal_standoff_meters``.
        name: Function name shown to the agent.

    Raises:
        InputError: ``standoff_m`` is negative or not finite.

    """

    def __init__(
        self,
        navigator: Navigator,
        *,
        standoff_m: float | None = None,
        name: str = "navigate_to_episode",
    ) -> None:
        if standoff_m is not None and not (math.isfinite(standoff_m) and standoff_m >= 0):
            raise InputError(f"standoff_m={standoff_m!r}: must be a finite number >= 0 or None")
        self._navigator = navigator
        self._standoff_m = standoff_m
        super().__init__(name)

    # ------------------------------------------------------------------ what DAAAM reads
    @property
    def description(self) -> str:
        """What the tool does, for the model."""
        return (
            "Send the robot to where an episode of its episodic memory happened: a "
            "navigation goal at the pose the robot had then. Take the episode's id from "
            "search_episodic_memory. Returns the goal sent ([x, y, z] in metres, the frame, "
            "the heading) and its goal_id, or an error saying why none was sent (the episode "
            "has no known position, is another robot's, or the navigation stack did not "
            "take it). Navigation goes on after the call returns: follow it with "
            "navigation_status(goal_id), stop it with stop_navigation(goal_id). A new goal "
            "replaces the robot's current one. With state 'pending' the navigation stack "
            "did not answer in time: do not send it again blindly, ask navigation_status."
        )

    @property
    def parameters(self) -> dict[str, Any]:
        """The JSON schema of the arguments, in OpenAI's strict form."""
        return {
            "type": "object",
            "properties": {
                "episode_id": {
                    "type": "string",
                    "description": "The id of the episode to go to, as returned by "
                    "search_episodic_memory.",
                }
            },
            "required": list(_PARAMETERS),
            "additionalProperties": False,
        }

    # ------------------------------------------------------------------ calling
    def execute(self, **kwargs: Any) -> dict[str, Any]:
        """Run one call; never raises.

        Args:
            **kwargs: ``episode_id``.

        Returns:
            ``sent`` (true), ``goal_id``, ``state`` (running, sent or pending),
            ``episode_id``, ``robot``, ``goal``, ``via``, ``message``, and ``preempted``
            where it replaced a running goal; or ``sent`` (false) and ``error`` when no
            goal of ours can run.

        """
        try:
            return self._execute(kwargs)
        except SurpriseMemoryError as exc:
            return {"sent": False, "error": str(exc)}
        except Exception as exc:  # an agent loop must never see a raise
            return {"sent": False, "error": f"{type(exc).__name__}: {exc}"}

    def preview(self, **kwargs: Any) -> NavigationResult:
        """The goal a call would send, sent nowhere (the navigator's dry run).

        What a person is shown before approving the call
        (:mod:`surprise_memory.agents.mcp_approval`); the arguments are checked as
        :meth:`execute` checks them.

        Args:
            **kwargs: ``episode_id``.

        Returns:
            The episode and the goal made for it (``sent_via`` empty).

        Raises:
            SurpriseMemoryError: The arguments are wrong, or no goal can be made (why).

        """
        episode_id = self._episode_id(kwargs)
        return self._navigator.go_to_episode(episode_id, standoff_m=self._standoff_m, dry_run=True)

    @staticmethod
    def _episode_id(kwargs: dict[str, Any]) -> str:
        unknown = sorted(set(kwargs) - set(_PARAMETERS))
        if unknown:
            raise InputError(f"unknown arguments {unknown}; allowed: {list(_PARAMETERS)}")
        episode_id = kwargs.get("episode_id")
        if not isinstance(episode_id, str) or not episode_id:
            raise InputError(f"episode_id={episode_id!r}: must be an episode id (a string)")
        return episode_id

    def _execute(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        episode_id = self._episode_id(kwargs)
        result = self._navigator.go_to_episode(episode_id, standoff_m=self._standoff_m)
        out = {
            "sent": bool(result.sent_via),
            "goal_id": result.goal_id,
            "state": result.state,
            "episode_id": result.episode_id,
            "robot": result.robot_id,
            "goal": goal_json(result.goal),
            "via": result.sent_via,
            "message": result.message,
        }
        if result.preempted:
            out["preempted"] = result.preempted
        return out


_GOAL_ID = {
    "type": "object",
    "properties": {
        "goal_id": {
            "type": "string",
            "description": "The goal's id, as navigate_to_episode returned it; an empty "
            "string for the robot's current (latest) goal.",
        }
    },
    "required": ["goal_id"],
    "additionalProperties": False,
}


class GoalIdTool(FunctionTool):
    """Base of the tools with one argument, ``goal_id``, answered by the navigator.

    Args:
        navigator: Answers the call.
        name: Function name shown to the agent.

    """

    def __init__(self, navigator: Navigator, name: str) -> None:
        self._navigator = navigator
        super().__init__(name)

    @property
    def parameters(self) -> dict[str, Any]:
        """The JSON schema of the arguments, in OpenAI's strict form."""
        return copy.deepcopy(_GOAL_ID)

    def execute(self, **kwargs: Any) -> dict[str, Any]:
        """Run one call; never raises (an error comes back as ``{"error": message}``)."""
        try:
            unknown = sorted(set(kwargs) - {"goal_id"})
            if unknown:
                raise InputError(f"unknown arguments {unknown}; allowed: ['goal_id']")
            goal_id = kwargs.get("goal_id", "")
            if not isinstance(goal_id, str):
                raise InputError(f"goal_id={goal_id!r}: must be a string ('' = the current)")
            return self._call(goal_id)
        except SurpriseMemoryError as exc:
            return {"error": str(exc)}
        except Exception as exc:  # an agent loop must never see a raise
            return {"error": f"{type(exc).__name__}: {exc}"}

    def _call(self, goal_id: str) -> dict[str, Any]:
        raise NotImplementedError


class NavigationStatusTool(GoalIdTool):
    """Where a navigation goal stands, for an LLM agent (``navigation_status(goal_id)``).

    Args:
        navigator: Answers (e.g.
            :class:`~surprise_memory.agents.ros_navigation.GoToEpisodeClient`).
        name: Function name shown to the agent.

    """

    def __init__(self, navigator: Navigator, *, name: str = "navigation_status") -> None:
        super().__init__(navigator, name)

    @property
    def description(self) -> str:
        """What the tool does, for the model."""
        return (
            "Where a navigation goal sent by navigate_to_episode stands: its state (pending, "
            "running, succeeded, aborted, canceled, preempted by a later goal, rejected, "
            "cancelled_after_late_acceptance, unknown), whether it is done, and while it "
            "runs the distance remaining in metres and the estimated time left."
        )

    def _call(self, goal_id: str) -> dict[str, Any]:
        return status_json(self._navigator.navigation_status(goal_id))


class StopNavigationTool(GoalIdTool):
    """Cancel a navigation goal, for an LLM agent (``stop_navigation(goal_id)``).

    Args:
        navigator: Cancels (e.g.
            :class:`~surprise_memory.agents.ros_navigation.GoToEpisodeClient`).
        name: Function name shown to the agent.

    """

    def __init__(self, navigator: Navigator, *, name: str = "stop_navigation") -> None:
        super().__init__(navigator, name)

    @property
    def description(self) -> str:
        """What the tool does, for the model."""
        return (
            "Stop the robot's navigation to an episode: cancel the goal sent by "
            "navigate_to_episode (by its goal_id, or the current goal with an empty "
            "string). Only goals sent through navigate_to_episode are cancelled. Returns "
            "stopped: true only when the navigation stack confirmed the cancel (or the goal "
            "had ended); false when it refused or did not confirm it: then the goal may "
            "still run (its state and message say so; follow it with navigation_status)."
        )

    def _call(self, goal_id: str) -> dict[str, Any]:
        stopped, status = self._navigator.stop_navigation(goal_id)
        return {"stopped": stopped, "cancel": cancel_line(stopped, status), **status_json(status)}
