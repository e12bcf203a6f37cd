"""``navigate_to_episode``: the agent's second call, "take me there", after the search.

DAAAM's agent answers "take me to where the chemical spill happened yesterday" with two
calls: ``search_episodic_memory`` (:class:`~surprise_memory.agents.tool.EpisodicMemoryTool`)
finds the episode, then ``navigate_to_episode(episode_id)`` (:class:`NavigateToEpisodeTool`)
sends the robot there. The tool has the same shape as the search tool
(:class:`~surprise_memory.agents.function_tool.FunctionTool`: flat strict OpenAI
``signature``, nested ``schema``, DAAAM's no-op setters; ``execute`` never raises) and
works through a :class:`Navigator`: on a robot,
:class:`~surprise_memory.agents.ros_navigation.GoToEpisodeClient`, the memory node's
``go_to_episode`` service, which checks the episode, transforms its pose into the
navigation frame and sends the Nav2 goal. ROS-free: the navigator is the only ROS part.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Protocol

from surprise_memory.agents.function_tool import FunctionTool
from surprise_memory.errors import InputError, SurpriseMemoryError
from surprise_memory.memory.pose import Pose, yaw_of

__all__ = ["NavigateToEpisodeTool", "NavigationResult", "Navigator", "goal_json"]

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

    """

    episode_id: str
    robot_id: str
    episode_stamp_ns: int
    episode_pose: Pose
    goal: Pose
    sent_via: str
    message: str


class Navigator(Protocol):
    """What sends the robot to an episode (the memory node's ``go_to_episode``)."""

    def go_to_episode(
        self, episode_id: str, *, standoff_m: float | None = None, dry_run: bool = False
    ) -> NavigationResult:
        """Send the robot to the episode's place, or raise ``InputError`` saying why not."""
        ...


def goal_json(pose: Pose) -> dict[str, Any]:
    """A pose as the tools give it: frame, ``[x, y, z]`` metres, yaw in degrees, quaternion."""
    return {
        "frame": pose.frame_id,
        "position": [round(v, 3) for v in pose.position],
        "yaw_deg": round(math.degrees(yaw_of(pose)), 1),
        "orientation": [round(v, 4) for v in (pose.qx, pose.qy, pose.qz, pose.qw)],
    }


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
            "the heading), or an error saying why none was sent (the episode has no known "
            "position, is another robot's, or the navigation stack did not take it). "
            "Navigation goes on after the call returns."
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
            ``{"sent": true, "episode_id", "robot", "goal": {...}, "via", "message"}``, or
            ``{"sent": false, "error": message}``.

        """
        try:
            return self._execute(kwargs)
        except SurpriseMemoryError as exc:
            return {"sent": False, "error": str(exc)}
        except Exception as exc:  # an agent loop must never see a raise
            return {"sent": False, "error": f"{type(exc).__name__}: {exc}"}

    def _execute(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        unknown = sorted(set(kwargs) - set(_PARAMETERS))
        if unknown:
            raise InputError(f"unknown arguments {unknown}; allowed: {list(_PARAMETERS)}")
        episode_id = kwargs.get("episode_id")
        if not isinstance(episode_id, str) or not episode_id:
            raise InputError(f"episode_id={episode_id!r}: must be an episode id (a string)")
        result = self._navigator.go_to_episode(episode_id, standoff_m=self._standoff_m)
        return {
            "sent": bool(result.sent_via),
            "episode_id": result.episode_id,
            "robot": result.robot_id,
            "goal": goal_json(result.goal),
            "via": result.sent_via,
            "message": result.message,
        }
