"""Settings of the place keyframes: the latest view of every place and direction passed.

Beside the paper's surprise episodes, the memory keeps one frame per place cell and
viewing direction (:class:`~surprise_memory.memory.places.PlaceKeyframeSelector` decides
which), replaced when the robot comes back, at most ``place_history`` per place; their
number grows with the area covered, not with time. See ``doc/guides/places.md``.

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
        "cell and viewing direction the robot passed (kind 'place' in the store).",
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
    place_history: int = setting(
        3,
        "Views kept per place (cell and direction) and robot: a new keyframe of a place "
        "deletes its oldest beyond this many.",
        low=1,
        high=1000,
    )
    place_revisit_seconds: float = setting(
        60.0,
        "Least time between two keyframes of the same place: a place is kept again when the "
        "robot comes back (or is still there) this long after its last keyframe.",
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
    place_still_there_similarity: float = setting(
        0.8,
        "'Is it still there?': the latest view of a place still shows what an episode showed "
        "when their embeddings' cosine is at least this (a placeholder until chosen on the QA "
        "validation worlds).",
        low=-1.0,
        high=1.0,
    )
