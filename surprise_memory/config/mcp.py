"""Settings of the MCP server (``surprise-memory mcp``): transport, address, what it offers.

Not a node's settings: the MCP server is a command, so these are options of ``mcp`` only
(built from this dataclass like every other option), not ROS parameters or YAML entries.
The bearer token of the HTTP transport is not a setting: a secret does not belong on a
command line (``ps`` shows it); the command reads it from the environment or a file.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from surprise_memory.config.schema import ComponentConfig, setting

__all__ = ["MCP_TRANSPORTS", "NAVIGATION_APPROVALS", "McpConfig"]

MCP_TRANSPORTS = ("stdio", "http")
"""How an MCP client reaches the server: stdio (the client starts it) or streamable HTTP."""

NAVIGATION_APPROVALS = ("elicit", "none")
"""Who approves an agent's goal: the person (MCP elicitation), or nobody (an autonomous agent)."""


@dataclass(frozen=True)
class McpConfig(ComponentConfig):
    """The MCP server: its transport and address, the frames it sends, navigation."""

    component: ClassVar[str] = "mcp"

    transport: str = setting(
        "stdio",
        "stdio: the client starts the server and speaks on its standard input and output "
        "(desktop assistants, IDE agents); http: streamable HTTP on http_host:http_port, "
        "path /mcp, for clients on other processes or machines.",
        choices=MCP_TRANSPORTS,
    )
    http_host: str = setting(
        "127.0.0.1",
        "Address the HTTP transport listens on. Loopback (the default) is this machine "
        "only; any other address needs a bearer token (the server refuses to start "
        "without one), and every request must carry it.",
    )
    http_port: int = setting(
        8770,
        "TCP port of the HTTP transport (0 = any free port, printed at start).",
        low=0,
        high=65535,
    )
    allow_navigation: bool = setting(
        False,
        "Offer navigate_to_episode, navigation_status and stop_navigation (through the "
        "memory node's go_to_episode; not with --store). Off, the server is read-only. "
        "Every goal sent and every stop is logged on standard error.",
    )
    navigation_approval: str = setting(
        "elicit",
        "With --allow-navigation, who approves each navigate_to_episode goal before it is "
        "sent. elicit: the person, asked through the MCP client (elicitation) with the "
        "episode, its time and age, its pose and the goal; declined, cancelled or "
        "unanswered, nothing is sent; a client that cannot ask is refused. none: nobody, "
        "for an autonomous agent (said at start and in every goal's log line and answer).",
        choices=NAVIGATION_APPROVALS,
    )
    approval_timeout_seconds: float = setting(
        120.0,
        "With navigation_approval elicit: seconds to wait for the person's answer; "
        "unanswered by then, no goal is sent.",
        low=1.0,
        high=3600.0,
    )
    robot_pose_topic: str = setting(
        "/amcl_pose",
        "With --node and navigation approval: a geometry_msgs/PoseWithCovarianceStamped "
        "topic (AMCL's, reliable and transient local) whose latest pose is the robot's "
        "current pose, so the person is told the distance to the goal (when in the goal's "
        "frame); empty = none (the distance is said to be unknown).",
    )
    image_episodes: int = setting(
        3,
        "With include_images, how many of a search's best episodes send frames.",
        low=1,
        high=20,
    )
    frames_per_episode: int = setting(
        3,
        "With include_images, frames sent per episode of a search (evenly spaced); "
        "get_episode and an episode resource send every frame.",
        low=1,
        high=64,
    )
    mcp_query_device: str = setting(
        "cpu",
        "Device of the query embedder of a store served in-process (auto, cpu, cuda, "
        "cuda:N): one text or image at a time, so the CPU leaves the robot's GPU to its "
        "nodes. Through the memory node, the node embeds.",
    )
    service_timeout_seconds: float = setting(
        15.0,
        "Through the memory node: seconds to wait for its services and their answer "
        "(go_to_episode itself waits up to the node's goal_timeout_seconds for Nav2).",
        low=0.5,
        high=600.0,
    )
