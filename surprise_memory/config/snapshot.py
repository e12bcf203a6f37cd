"""Settings of the snapshot trigger: stored episodes ask rosbag2's recorder for a snapshot."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import ClassVar

from surprise_memory.config.schema import ComponentConfig, setting
from surprise_memory.errors import ConfigError

__all__ = ["SnapshotConfig"]

_SERVICE_RE = re.compile(r"(~?/)?[A-Za-z_][A-Za-z0-9_]*(/[A-Za-z_][A-Za-z0-9_]*)*")


@dataclass(frozen=True)
class SnapshotConfig(ComponentConfig):
    """The memory node as the event trigger of ``ros2 bag record --snapshot-mode``.

    Off while ``snapshot_service`` is empty. See ``doc/guides/snapshots.md``.
    """

    component: ClassVar[str] = "snapshot"

    snapshot_service: str = setting(
        "",
        "rosbag2 recorder's snapshot service (rosbag2_interfaces/srv/Snapshot), e.g. "
        "/rosbag2_recorder/snapshot; each stored episode asks it to write its buffer to a "
        "bag. Empty = off.",
        read_only=True,
    )
    snapshot_hold_seconds: float = setting(
        10.0,
        "A snapshot is asked this long after the stored episode that wants it; episodes "
        "stored meanwhile share the call (a burst of events makes one snapshot). Keep it "
        "below snapshot_buffer_seconds minus the episode window.",
        low=0.0,
        high=3600.0,
    )
    snapshot_buffer_seconds: float = setting(
        30.0,
        "Seconds of data the recorder's buffer holds (its --max-cache-size for the recorded "
        "topics' rate); the node warns when hold plus episode window exceed it.",
        low=0.1,
        high=86400.0,
    )
    snapshot_aftermath_seconds: float = setting(
        0.0,
        "Ask once more this long after each snapshot, to keep what followed the event "
        "(0 = no second snapshot).",
        low=0.0,
        high=3600.0,
    )
    snapshot_timeout_seconds: float = setting(
        10.0,
        "A snapshot not answered within this many seconds counts as failed.",
        low=0.1,
        high=600.0,
    )

    def validate(self) -> None:
        """The service name must be a ROS name."""
        name = self.snapshot_service
        if name and not _SERVICE_RE.fullmatch(name):
            raise ConfigError(
                f"snapshot_service={name!r}: not a ROS service name (e.g. "
                "/rosbag2_recorder/snapshot)"
            )
