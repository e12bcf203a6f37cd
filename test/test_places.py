"""The place keyframe selector: which frames become the latest view of a place, and why not."""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterator

import pytest

from surprise_memory.config import ConfigError, PlacesConfig
from surprise_memory.errors import InputError
from surprise_memory.memory import places
from surprise_memory.memory.camera_view import yaw_pose
from surprise_memory.memory.places import (
    SKIP_REASONS,
    PlaceCell,
    PlaceKeyframeSelector,
    parse_place_key,
    place_cell,
    place_key,
    sector_of,
)
from surprise_memory.memory.pose import Pose
from surprise_memory.stamps import NS_PER_SECOND

HZ = 5


def loop_route(
    side_m: float, speed: float, passes: int, *, start_s: float = 0.0, frame: str = "map"
) -> Iterator[tuple[int, Pose]]:
    """(stamp, pose) at HZ of a robot driving a square of ``side_m`` counter-clockwise."""
    per_side = round(side_m / speed * HZ)
    t = start_s
    corners = [(0.0, 0.0), (side_m, 0.0), (side_m, side_m), (0.0, side_m)]
    for _ in range(passes):
        for i, (x0, y0) in enumerate(corners):
            x1, y1 = corners[(i + 1) % 4]
            yaw = math.atan2(y1 - y0, x1 - x0)
            for k in range(per_side):
                f = k / per_side
                yield (
                    round(t * NS_PER_SECOND),
                    yaw_pose(x0 + f * (x1 - x0) + 0.3, y0 + f * (y1 - y0) + 0.3, 0.0, yaw, frame),
                )
                t += 1.0 / HZ


def run(selector: PlaceKeyframeSelector, route: Iterator[tuple[int, Pose]]) -> list[str]:
    return [d.place_key for s, p in route if (d := selector.push(s, p)) is not None]


# --- keys and sectors -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("yaw_deg", "sectors", "sector"),
    [(0, 8, 0), (22.4, 8, 0), (22.6, 8, 1), (-22.4, 8, 0), (-22.6, 8, 7), (180, 8, 4),
     (90, 4, 1), (-90, 4, 3), (44.9, 4, 0), (45.1, 4, 1), (359, 1, 0)],
)  # fmt: skip
def test_sector_of(yaw_deg: float, sectors: int, sector: int) -> None:
    assert sector_of(math.radians(yaw_deg), sectors) == sector


@pytest.mark.parametrize(
    ("x", "y", "cell_m", "ix", "iy"),
    [(0.1, 0.1, 2.0, 0, 0), (1.99, -0.01, 2.0, 0, -1), (-2.0, 4.0, 2.0, -1, 2),
     (7.5, 7.5, 5.0, 1, 1)],
)  # fmt: skip
def test_place_cell_and_its_key_round_trip(
    x: float, y: float, cell_m: float, ix: int, iy: int
) -> None:
    cell = place_cell(yaw_pose(x, y, 0.0, 0.0, "map"), math.pi, cell_m, 8)
    assert (cell.ix, cell.iy, cell.sector) == (ix, iy, 4)
    assert parse_place_key(cell.key) == cell
    assert place_key(cell) == cell.key
    assert cell.with_sector(9).sector == 1 and cell.shifted(1, -1).iy == iy - 1


@pytest.mark.parametrize("key", ["", "map", "map@2m:1,2:3", "map@2:1,2:3/8", "@2m:0,0:0/8",
                                 "map@2m:1,2:8/8", "map@xm:1,2:3/8", "map@0m:1,2:1/8"])  # fmt: skip
def test_a_bad_place_key_is_refused(key: str) -> None:
    with pytest.raises(InputError, match="place key"):
        parse_place_key(key)


def test_a_frame_with_at_signs_keeps_its_key() -> None:
    cell = PlaceCell("robot@site/map", 2.5, -3, 4, 2, 6)
    assert parse_place_key(cell.key) == cell


# --- what is kept -------------------------------------------------------------------------


@pytest.mark.parametrize(("cell_m", "length_m"), [(1.0, 20.0), (2.0, 20.0), (5.0, 47.0)])
def test_a_straight_drive_keeps_one_frame_per_cell(cell_m: float, length_m: float) -> None:
    selector = PlaceKeyframeSelector(PlacesConfig(place_cell_m=cell_m))
    speed = 1.0
    keys = [
        d.place_key
        for i in range(round(length_m / speed * HZ))
        if (d := selector.push(i * NS_PER_SECOND // HZ, yaw_pose(0.1 + i / HZ, 0.2, 0, 0, "map")))
    ]
    assert len(keys) == len(set(keys)) == math.floor((0.1 + length_m - 1 / HZ) / cell_m) + 1
    skipped = selector.skipped
    assert skipped["recent_place"] + skipped["too_soon"] == round(length_m * HZ) - len(keys)


@pytest.mark.parametrize("sectors", [1, 4, 8, 12])
def test_turning_in_place_keeps_one_frame_per_sector(sectors: int) -> None:
    selector = PlaceKeyframeSelector(PlacesConfig(place_sectors=sectors))
    kept = [  # a turn in 36 s, a degree each 0.1 s
        d
        for i in range(360)
        if (d := selector.push(i * 10**8, yaw_pose(0.5, 0.5, 0, math.radians(i), "map")))
    ]
    assert sorted(d.cell.sector for d in kept) == list(range(sectors))


def test_the_cameras_viewing_yaw_wins_over_the_robots() -> None:
    selector = PlaceKeyframeSelector(PlacesConfig(place_sectors=4))
    robot = yaw_pose(0.5, 0.5, 0, 0.0, "map")
    front = selector.push(0, robot, "front", view_yaw=0.0)
    left = selector.push(0, robot, "left", view_yaw=math.pi / 2)
    assert front is not None and left is not None
    assert (front.cell.sector, left.cell.sector) == (0, 1)
    assert left.camera == "left" and left.pose == robot


@pytest.mark.parametrize("history", [1, 3])
def test_driving_the_same_loop_adds_nothing_after_the_first_pass_but_history(history: int) -> None:
    # a 40 m square at 1 m/s: 160 s a pass, longer than place_revisit_seconds (60 s), so
    # every pass refreshes every place; the store keeps `history` views of each
    selector = PlaceKeyframeSelector(PlacesConfig(place_history=history))
    stored: dict[str, deque[int]] = {}
    counts = []
    places = []
    for n in range(12):
        start = n * 160.0
        for s, p in loop_route(40.0, 1.0, 1, start_s=start):
            d = selector.push(s, p)
            if d is not None:
                stored.setdefault(d.place_key, deque(maxlen=history)).append(s)
        counts.append(sum(len(v) for v in stored.values()))
        places.append(len(stored))
    assert places == [places[0]] * 12  # the same places every pass
    assert counts[history - 1 :] == [places[0] * history] * (12 - history + 1)  # flat
    assert places[0] == pytest.approx(4 * 40 / 2.0, abs=6)  # about one per 2 m cell


def test_a_revisit_within_place_revisit_seconds_keeps_nothing() -> None:
    selector = PlaceKeyframeSelector(
        PlacesConfig(place_revisit_seconds=600.0, place_min_interval_seconds=0.0)
    )
    first = run(selector, loop_route(40.0, 1.0, 1))
    again = run(selector, loop_route(40.0, 1.0, 2, start_s=160.0))  # 160-480 s: too soon
    later = run(selector, loop_route(40.0, 1.0, 1, start_s=800.0))
    assert first and not again and sorted(later) == sorted(first)


def test_standing_still_refreshes_the_view_once_per_revisit_period() -> None:
    selector = PlaceKeyframeSelector(PlacesConfig(place_revisit_seconds=60.0))
    pose = yaw_pose(1.0, 1.0, 0.0, 0.0, "map")
    kept = [t for t in range(0, 3600 * HZ) if selector.push(t * NS_PER_SECOND // HZ, pose)]
    assert len(kept) == 60  # an hour: one view a minute, which the store's history bounds


def test_the_min_interval_bounds_one_cameras_rate() -> None:
    selector = PlaceKeyframeSelector(PlacesConfig(place_cell_m=0.1, place_max_speed_mps=100))
    # 10 m/s through 0.1 m cells: a new place every frame (0.2 s), one in three kept (0.5 s)
    kept = [
        d
        for i in range(10 * HZ)
        if (d := selector.push(i * NS_PER_SECOND // HZ, yaw_pose(10 * i / HZ, 0, 0, 0, "map")))
    ]
    assert len(kept) == math.ceil(10 * HZ / 3)
    assert selector.skipped["too_soon"] == 10 * HZ - len(kept)


# --- what is refused, counted -----------------------------------------------------------


def test_no_pose_keeps_nothing_and_says_so() -> None:
    selector = PlaceKeyframeSelector()
    assert all(selector.push(i * NS_PER_SECOND, None) is None for i in range(50))
    assert selector.kept == 0 and selector.skipped["no_pose"] == 50
    assert set(selector.skipped) == set(SKIP_REASONS)


@pytest.mark.parametrize(
    "pose",
    [
        Pose(math.nan, 0.0, 0.0, frame_id="map"),
        Pose(0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, "map"),  # zero rotation
        Pose(1.0, 2.0, 0.0),  # no frame
    ],
)
def test_an_invalid_pose_keeps_nothing(pose: Pose) -> None:
    selector = PlaceKeyframeSelector()
    assert selector.push(0, pose) is None
    assert selector.skipped["invalid_pose"] == 1 and selector.kept == 0


def test_a_stale_pose_or_one_of_another_session_keeps_nothing() -> None:
    selector = PlaceKeyframeSelector(session_id="boot-b")
    pose = yaw_pose(0.5, 0.5, 0.0, 0.0, "odom")
    assert selector.push(10 * NS_PER_SECOND, pose, pose_stamp_ns=9 * NS_PER_SECOND) is None
    assert selector.push(11 * NS_PER_SECOND, pose, pose_session_id="boot-a") is None
    assert selector.skipped["stale_pose"] == 1 and selector.skipped["other_session"] == 1
    assert selector.push(12 * NS_PER_SECOND, pose, pose_stamp_ns=12 * NS_PER_SECOND - 1000,
                         pose_session_id="boot-b") is not None  # fmt: skip


def test_disabled_keeps_nothing() -> None:
    selector = PlaceKeyframeSelector(PlacesConfig(place_keyframes=False))
    assert run(selector, loop_route(40.0, 1.0, 1)) == []
    assert selector.skipped["disabled"] == 800


def test_a_pose_jump_does_not_flood_the_memory() -> None:
    # a localiser that hesitates between two hypotheses 60 m apart for 30 s, flipping at
    # each frame while the robot drives: every flip is a jump, and nothing is kept until
    # the pose has been continuous for place_settle_seconds
    selector = PlaceKeyframeSelector(PlacesConfig(place_settle_seconds=2.0))
    t = 0
    for i in range(10 * HZ):  # 10 s of trusted driving first
        selector.push(t, yaw_pose(i / HZ, 0.5, 0, 0, "map"))
        t += NS_PER_SECOND // HZ
    before = selector.kept
    flood = []
    for i in range(30 * HZ):
        x = 10 + i / HZ + (0.0 if i % 2 else 60.0)
        flood.append(selector.push(t, yaw_pose(x, 0.5, 0, 0, "map")))
        t += NS_PER_SECOND // HZ
    assert all(d is None for d in flood)
    assert selector.skipped["pose_jump"] == 30 * HZ
    assert selector.kept == before
    settled = []
    for i in range(10 * HZ):  # it settles on the second hypothesis
        settled.append(selector.push(t, yaw_pose(100 + i / HZ, 0.5, 0, 0, "map")))
        t += NS_PER_SECOND // HZ
    kept_after = [d for d in settled if d is not None]
    assert selector.skipped["pose_jump"] == 30 * HZ + 1  # 39.8 m -> 100 m
    assert selector.skipped["settling"] == 2 * HZ - 1  # the frames of the next 2 s
    assert len(kept_after) == 4  # 100..110 m after 2 s of settling: cells 51..54
    assert before == 5


def test_a_change_of_pose_frame_is_a_jump() -> None:
    selector = PlaceKeyframeSelector(PlacesConfig(place_settle_seconds=1.0))
    assert selector.push(0, yaw_pose(0.5, 0.5, 0, 0, "map")) is not None
    assert selector.push(NS_PER_SECOND, yaw_pose(0.5, 0.5, 0, 0, "odom")) is None
    assert selector.skipped["pose_jump"] == 1
    assert selector.push(3 * NS_PER_SECOND, yaw_pose(0.5, 0.5, 0, 0, "odom")) is not None


def test_a_gap_in_the_poses_is_not_a_jump_when_the_robot_could_have_driven_it() -> None:
    selector = PlaceKeyframeSelector(PlacesConfig(place_max_speed_mps=2.0))
    selector.push(0, yaw_pose(0.5, 0.5, 0, 0, "map"))
    # 30 m in 20 s (no pose meanwhile): 1.5 m/s, a drive, not a jump
    assert selector.push(20 * NS_PER_SECOND, yaw_pose(30.5, 0.5, 0, 0, "map")) is not None
    assert selector.skipped["pose_jump"] == 0


def test_time_going_back_starts_the_camera_anew() -> None:
    selector = PlaceKeyframeSelector()
    run(selector, loop_route(40.0, 1.0, 1, start_s=1000.0))
    assert selector.push(0, yaw_pose(0.5, 0.5, 0, 0, "map")) is None
    assert selector.skipped["time_back"] == 1
    selector.reset()
    assert selector.places_remembered == 0
    assert selector.push(NS_PER_SECOND, yaw_pose(0.5, 0.5, 0, 0, "map")) is not None


def test_reconfiguring_the_grid_forgets_the_places() -> None:
    selector = PlaceKeyframeSelector()
    run(selector, loop_route(40.0, 1.0, 1))
    assert selector.places_remembered > 0
    selector.reconfigure(PlacesConfig(place_history=5))
    assert selector.places_remembered > 0 and selector.config.place_history == 5
    selector.reconfigure(PlacesConfig(place_cell_m=4.0))
    assert selector.places_remembered == 0


def test_a_stamp_must_be_int_nanoseconds() -> None:
    with pytest.raises(InputError, match="stamp_ns"):
        PlaceKeyframeSelector().push(1.5, None)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("field", "value"),
    [("place_cell_m", 0.0), ("place_sectors", 0), ("place_history", 0),
     ("place_still_there_similarity", 1.5), ("place_keyframes", 1)],
)  # fmt: skip
def test_bad_settings_are_refused(field: str, value: object) -> None:
    with pytest.raises(ConfigError, match=field):
        PlacesConfig(**{field: value})  # type: ignore[arg-type]


def test_the_places_remembered_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(places, "RECENT_PLACES", 10)
    selector = PlaceKeyframeSelector(PlacesConfig(place_min_interval_seconds=0.0))
    kept = run(selector, loop_route(40.0, 1.0, 1))
    assert len(kept) > 10 and selector.places_remembered == 10
