"""Settings of a robot's link to a fleet store: the local copy, the backlog, the timeouts."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from surprise_memory.config.schema import ComponentConfig, setting

__all__ = ["DEFAULT_FLEET_LOCAL_STORE", "FleetConfig"]

DEFAULT_FLEET_LOCAL_STORE = "~/.ros/surprise_memory/fleet/{robot_id}"
"""Where a robot keeps its local copy when ``fleet_local_store`` is empty."""


@dataclass(frozen=True)
class FleetConfig(ComponentConfig):
    """How a live node writes to a fleet store (``store_path`` a PostgreSQL URI).

    The node commits each episode to a folder store on the robot first, then a sender
    delivers it to the server in order (:mod:`surprise_memory.memory.store.fleet`). With a
    folder ``store_path`` these settings are unused.
    """

    component: ClassVar[str] = "fleet"

    fleet_local_store: str = setting(
        "",
        "With a PostgreSQL store_path: the folder store on the robot where each episode is "
        "committed first (durable, crash-safe) and kept while the disk bound allows; the "
        "sender delivers its episodes to the server in order, and retrievals answer from it "
        "when the server cannot be reached. Empty = ~/.ros/surprise_memory/fleet/<robot_id>.",
        read_only=True,
    )
    fleet_local_max_bytes: int = setting(
        2 * 1024**3,
        "Most bytes (JPEG frames plus embeddings) of the robot's local copy. Past it, "
        "episodes already delivered go first (oldest first); only a backlog that alone fills "
        "it loses episodes (lowest surprise first, each named as not sent). Diagnostics "
        "ERROR when the backlog passes 80% of it.",
        low=1024 * 1024,
        high=1e15,
    )
    fleet_heartbeat_seconds: float = setting(
        1.0,
        "Seconds between two checks of the link to the fleet store while nothing waits to "
        "be sent; also the first wait before a failed delivery is tried again (doubling up "
        "to 5x).",
        low=0.1,
        high=3600.0,
    )
