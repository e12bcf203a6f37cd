"""Settings of ``go_to_episode``: an episode's pose as a navigation goal (Nav2)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from surprise_memory.config.schema import ComponentConfig, setting
from surprise_memory.errors import ConfigError

__all__ = ["GOAL_FACINGS", "GOAL_TRANSPORTS", "NavigationConfig"]

GOAL_TRANSPORTS = ("auto", "action", "topic")
"""How a goal is sent: ``auto`` = the action where nav2_msgs is installed, else the topic."""

GOAL_FACINGS = ("camera", "robot")
"""Which way a goal faces: where the episode's camera looked, or the robot's heading then."""


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
        "along the direction it faces (goal_facing; a request may give its own).",
        low=0.0,
        high=100.0,
    )
    goal_facing: str = setting(
        "camera",
        "Which way a goal faces: camera = where the episode's camera looked (its optical "
        "axis on the ground; the robot's heading where the camera's pose is unknown), "
        "robot = the robot's heading at the episode.",
        choices=GOAL_FACINGS,
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
    goal_action_type: str = setting(
        "nav2_msgs/action/NavigateToPose",
        "The action type of goal_action (package/action/Name): one with NavigateToPose's "
        "fields (goal: pose; feedback: distance_remaining, estimated_time_remaining, "
        "navigation_time, number_of_recoveries).",
        read_only=True,
    )
    navigator_node: str = setting(
        "bt_navigator",
        "With goal_transport topic: the node that must subscribe goal_topic for a goal to "
        "be sent (Nav2's bt_navigator; a name, or /namespace/name). Other subscribers "
        "(ros2 bag record, ros2 topic echo) do not count.",
        read_only=True,
    )
    goal_timeout_seconds: float = setting(
        5.0,
        "How long a request waits for the navigator (the action server and its answer, or "
        "navigator_node on goal_topic). No server or navigator by then: no goal is sent. "
        "Sent but not answered by then: the answer is pending, and the navigator is asked "
        "at once to cancel a late acceptance (navigation_status tells the outcome).",
        low=0.1,
        high=120.0,
    )
    fixed_frames: str = setting(
        "map",
        "Comma-separated frames whose origin is the same in every session (map, earth). "
        "A pose in any other frame (odom) belongs to the session (boot) that stored it: "
        "an episode of another session posed there gets no goal.",
    )

    map_id: str = setting(
        "",
        "The map the robot is localised on now (a name of yours, e.g. the map file's): "
        "stored with each episode, and a goal is refused for an episode recorded on another "
        "map. Empty = unknown (episodes get no map; none is refused for its map).",
    )
    max_goal_uncertainty_m: float = setting(
        1.0,
        "A goal is refused for an episode whose pose was more uncertain than this: the "
        "horizontal 1-sigma in metres (sqrt of the largest eigenvalue of the pose "
        "covariance's xy block, from odometry or pose_covariance_topic). An unknown "
        "uncertainty (a tf pose) is not refused. 0 = no limit.",
        low=0.0,
        high=1000.0,
    )

    def validate(self) -> None:
        """The action type names a package, ``action`` and a type; the map id is printable."""
        if len(self.map_id) > 256 or not self.map_id.isprintable():
            raise ConfigError(f"map_id={self.map_id!r}: must be a printable string (at most 256)")
        parts = self.goal_action_type.split("/")
        if len(parts) != 3 or parts[1] != "action" or not all(p.isidentifier() for p in parts):
            raise ConfigError(
                f"goal_action_type={self.goal_action_type!r}: expected package/action/Name "
                "(e.g. nav2_msgs/action/NavigateToPose)"
            )
        if not self.navigator_node.strip("/"):
            raise ConfigError("navigator_node='': name the node that takes goals (bt_navigator)")

    @property
    def fixed_frame_names(self) -> tuple[str, ...]:
        """:attr:`fixed_frames` as names (blanks dropped)."""
        return tuple(f.strip() for f in self.fixed_frames.split(",") if f.strip())
