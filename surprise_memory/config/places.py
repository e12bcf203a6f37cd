"""Settings of the place keyframes: the latest view of every place and direction passed.

Beside the paper's surprise episodes, the memory keeps one frame per place cell and
viewing direction (:class:`~surprise_memory.memory.places.PlaceKeyframeSelector` decides
which), replaced when the robot comes back, at most ``place_history`` per place; their
number grows with the area covered, not with time (``place_history`` is the store's
setting, :class:`~surprise_memory.config.memory.StoreConfig`). See
``doc/guides/places.md``.

Defaults, from ``benchmarks/bench_place_keyframes.py`` (RESULTS.md, "Place keyframes"):
2 m cells and 8 sectors of 45 degrees keep about one frame per 2 m of new route and
direction (a camera's view changes little within 2 m or 45 degrees; RAVEN found a 250x
sparser sampling of frames still answers NaVQA within about 10 %), and a month of the
same loop adds nothing after ``place_history`` passes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from surprise_memory.config.schema import ComponentConfig, setting

__all__ = ["PlacesConfig"]


@dataclass(frozen=True)
class PlacesConfig(ComponentConfig):
    """Which frames become place keyframes, and how many views of a place are kept.

    Also when the latest view of a place still shows what an episode showed.
    """

    component: ClassVar[str] = "places"

    place_keyframes: bool = setting(
        True,
        "Keep place keyframes beside the surprise episodes: the latest view of every place "
        "cell and viewing direction the robot passed (kind 'place' in the store). "
        "memory_node then takes the robot's pose from tf (map_frame <- robot_frame), else "
        "odometry (odom_topic).",
        read_only=True,
    )
    place_cell_m: float = setting(
        2.0,
        "Side of a place cell in metres (a square of the pose frame's x-y grid).",
        low=0.1,
        high=1000.0,
        read_only=True,
    )
    place_sectors: int = setting(
        8,
        "Viewing directions per place cell: the camera's viewing yaw (else the robot's) "
        "falls in one of this many equal sectors, the first centred on yaw 0.",
        low=1,
        high=64,
        read_only=True,
    )
    place_revisit_seconds: float = setting(
        300.0,
        "Least time between two keyframes of the same place: a place is kept again when the "
        "robot comes back (or is still there) this long after its last keyframe, so its "
        "latest view is at most this old plus the time until the robot passes again.",
        low=0.0,
        high=30 * 86400.0,
    )
    place_min_interval_seconds: float = setting(
        0.5,
        "Least time between two keyframes of one camera (bounds the write rate whatever the "
        "speed or the pose does).",
        low=0.0,
        high=3600.0,
    )
    place_max_jump_m: float = setting(
        1.0,
        "A move between two consecutive frames' poses longer than this, and faster than "
        "place_max_speed_mps, is a pose jump (a relocalisation): no keyframe until the pose "
        "has been continuous for place_settle_seconds.",
        low=0.01,
        high=10_000.0,
    )
    place_max_speed_mps: float = setting(
        5.0,
        "Fastest the robot moves, in m/s; see place_max_jump_m.",
        low=0.01,
        high=1000.0,
    )
    place_settle_seconds: float = setting(
        2.0,
        "After a pose jump (or a change of the pose's frame), keep no keyframe until the "
        "pose has been continuous for this long.",
        low=0.0,
        high=3600.0,
    )
    place_pose_max_age_seconds: float = setting(
        0.5,
        "A pose whose own stamp is further than this from the frame's is stale: no keyframe.",
        low=0.0,
        high=60.0,
    )
    place_status_radius_m: float = setting(
        2.0,
        "'Is it still there?': keyframes within this distance of an episode's pose (same "
        "frame, viewing direction within one sector) count as views of its place.",
        low=0.01,
        high=1000.0,
    )
    place_status_pass_seconds: float = setting(
        30.0,
        "'Is it still there?': the views of a place taken within this many seconds before "
        "its newest are the robot's latest pass by it, and the best of them is compared "
        "(driving by, the robot looks at a thing, then past it while still within the "
        "radius). 0 = the newest view alone.",
        low=0.0,
        high=3600.0,
    )
    place_still_there_similarity: float = setting(
        0.91,
        "'Is it still there?': the latest pass by a place still shows what an episode showed "
        "when the best of its views has at least this cosine with the episode's picture. "
        "Chosen on our synthetic QA world's validation worlds with the synthetic-trained-tiny "
        "embedder (benchmarks/bench_place_status.py, RESULTS.md); choose it again for "
        "another embedder.",
        low=-1.0,
        high=1.0,
    )
