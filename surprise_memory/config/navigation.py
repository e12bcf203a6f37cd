"""Settings of ``go_to_episode``: an episode's pose as a navigation goal (Nav2)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from surprise_memory.config.schema import ComponentConfig, setting

__all__ = ["GOAL_TRANSPORTS", "NavigationConfig"]

GOAL_TRANSPORTS = ("auto", "action", "topic")
"""How a goal is sent: ``auto`` = the action where nav2_msgs is installed, else the topic."""


@dataclass(frozen=True)
class NavigationConfig(ComponentConfig):
    """How the memory node turns an episode into a navigation goal (``go_to_episode``)."""

    component: ClassVar[str] = "navigation"

    navigation_frame: str = setting(
        "map",
        "Frame of the navigation goals (Nav2's global frame). An episode whose pose is in "
        "another frame is transformed with tf; without a transform no goal is sent.",
    )
    goal_standoff_meters: float = setting(
        0.0,
        "Default stand-off: the goal stops this many metres short of the episode's pose "
        "along the robot's heading then, facing the same way (a request may give its own).",
        low=0.0,
        high=100.0,
    )
    goal_transport: str = setting(
        "auto",
        "How a goal is sent: action (nav2_msgs NavigateToPose on goal_action), topic "
        "(geometry_msgs/PoseStamped on goal_topic, as RViz's goal tool), or auto (the "
        "action where nav2_msgs is installed, else the topic).",
        choices=GOAL_TRANSPORTS,
        read_only=True,
    )
    goal_topic: str = setting(
        "/goal_pose",
        "Topic of PoseStamped goals (Nav2's bt_navigator subscribes /goal_pose).",
        read_only=True,
    )
    goal_action: str = setting(
        "/navigate_to_pose", "Nav2's NavigateToPose action server.", read_only=True
    )
    goal_timeout_seconds: float = setting(
        5.0,
        "How long a goal waits for Nav2 (the action server and its acceptance, or a "
        "subscriber of goal_topic) before it is refused as not sent.",
        low=0.1,
        high=120.0,
    )
