"""An episode as a navigation goal (core): the geometry against hand-computed poses, the refusals.

Quaternions are (x, y, z, w). A yaw of a about +z is (0, 0, sin(a/2), cos(a/2)); a pitch
of b about +y is (0, sin(b/2), 0, cos(b/2)); "yaw then pitch" is their product
q_yaw * q_pitch, written out by hand below.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from surprise_memory.errors import InputError, StoreError
from surprise_memory.memory.navigation import (
    GoalQuery,
    GoalRefusedError,
    check_query_times,
    choose_episode,
    goal_from_episode,
    standoff_pose,
)
from surprise_memory.memory.pose import Pose
from surprise_memory.memory.store import EpisodeRecord, EpisodeStore
from surprise_memory.perception.frames import Frame

S = 1_000_000_000
T0 = 1_700_000_000 * S
NOW = T0 + 1000 * S
R2 = math.sqrt(0.5)  # sin 45 deg = cos 45 deg
MODEL = "PE-Core-L-14-336"


def yawed(x: float, y: float, yaw_deg: float, frame: str = "map", z: float = 0.0) -> Pose:
    a = math.radians(yaw_deg) / 2
    return Pose(x, y, z, 0.0, 0.0, math.sin(a), math.cos(a), frame)


def record(
    pose: Pose | None, *, robot: str = "me", end_ns: int = T0 + 2 * S, ep: str = "ep"
) -> EpisodeRecord:
    return EpisodeRecord(
        id=ep,
        stamp_ns=T0 + S,
        start_ns=T0,
        end_ns=end_ns,
        pose=pose if pose is not None else Pose(),
        pose_valid=pose is not None,
        surprise=3.0,
        threshold=1.0,
        frame_stamps_ns=(T0, end_ns),
        frame_paths=("frames/ep/00.jpg", "frames/ep/01.jpg"),
        encoder_model="v",
        encoder_pretrained=True,
        embedder_model=MODEL,
        embedder_pretrained=True,
        created_wall_ns=0,
        robot_id=robot,
    )


def assert_pose(got: Pose, want: Pose) -> None:
    assert got.frame_id == want.frame_id
    assert got.position == pytest.approx(want.position, abs=1e-9)
    q, w = (got.qx, got.qy, got.qz, got.qw), (want.qx, want.qy, want.qz, want.qw)
    assert q == pytest.approx(w, abs=1e-9) or q == pytest.approx(tuple(-c for c in w), abs=1e-9)


# --- geometry -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pose", "standoff", "want"),
    [
        # in the navigation frame already: the stored pose as it is
        (yawed(1.0, 2.0, 90.0), 0.0, Pose(1.0, 2.0, 0.0, 0.0, 0.0, R2, R2, "map")),
        # facing +y (yaw 90): 1.5 m back along -y, still facing +y
        (yawed(1.0, 2.0, 90.0), 1.5, Pose(1.0, 0.5, 0.0, 0.0, 0.0, R2, R2, "map")),
        # facing -x (yaw 180): back along +x
        (yawed(-3.0, 4.0, 180.0), 2.0, Pose(-1.0, 4.0, 0.0, 0.0, 0.0, 1.0, 0.0, "map")),
        # facing 45 deg: back along (-1, -1)/sqrt 2; z kept
        (
            yawed(0.0, 0.0, 45.0, z=0.3),
            math.sqrt(2.0),
            Pose(-1.0, -1.0, 0.3, 0.0, 0.0, math.sin(math.pi / 8), math.cos(math.pi / 8), "map"),
        ),
        # a quaternion of norm 2 comes out unit
        (
            Pose(5.0, 5.0, 0.0, 0.0, 0.0, 2.0, 2.0, "map"),
            0.0,
            Pose(5.0, 5.0, 0.0, 0, 0, R2, R2, "map"),
        ),
    ],
)
def test_goal_in_the_navigation_frame(pose: Pose, standoff: float, want: Pose) -> None:
    goal = goal_from_episode(record(pose), "map", standoff_m=standoff)
    assert_pose(goal.pose, want)
    assert goal.standoff_m == standoff and goal.episode.id == "ep"


def test_pitched_camera_backs_off_level_along_its_heading() -> None:
    # yaw 90 then pitch 30 deg (nose down): q = q_yaw * q_pitch
    s45, c45, s15, c15 = R2, R2, math.sin(math.radians(15)), math.cos(math.radians(15))
    q = (-s45 * s15, c45 * s15, s45 * c15, c45 * c15)
    pose = Pose(2.0, 3.0, 1.0, *q, "map")
    goal = goal_from_episode(record(pose), "map", standoff_m=2.0)
    # forward is (0, cos 30, -sin 30): level heading +y, so 2 m back along -y, z unchanged
    assert_pose(goal.pose, Pose(2.0, 1.0, 1.0, *q, "map"))


def test_vertical_forward_axis_has_no_heading() -> None:
    up = Pose(1.0, 1.0, 0.0, 0.0, -R2, 0.0, R2, "map")  # pitch -90: the x axis points up
    assert_pose(goal_from_episode(record(up), "map").pose, up)  # no stand-off: fine
    with pytest.raises(GoalRefusedError, match="vertical"):
        goal_from_episode(record(up), "map", standoff_m=1.0)


@pytest.mark.parametrize(
    ("standoff", "want"),
    [
        # odom pose (1, 0) facing +x; map <- odom: (10, 5) turned 90 deg. In map the robot
        # was at (10, 5) + R90 (1, 0) = (10, 6), facing +y (yaw 0 + 90).
        (0.0, Pose(10.0, 6.0, 0.0, 0.0, 0.0, R2, R2, "map")),
        # stand-off along the heading in map (+y): 2 m back to (10, 4)
        (2.0, Pose(10.0, 4.0, 0.0, 0.0, 0.0, R2, R2, "map")),
    ],
)
def test_goal_through_a_transform(standoff: float, want: Pose) -> None:
    map_from_odom = yawed(10.0, 5.0, 90.0, "map")
    goal = goal_from_episode(
        record(yawed(1.0, 0.0, 0.0, "odom")),
        "map",
        transform=map_from_odom,
        standoff_m=standoff,
        note="latest",
    )
    assert_pose(goal.pose, want)
    assert goal.note == "latest"


def test_transform_with_a_height_and_a_tilted_frame() -> None:
    # map <- odom: (0, 0, 1) and a roll of 180 deg about x: (x, y, z) -> (x, -y, 1 - z)
    map_from_odom = Pose(0.0, 0.0, 1.0, 1.0, 0.0, 0.0, 0.0, "map")
    goal = goal_from_episode(
        record(yawed(2.0, 3.0, 90.0, "odom", z=0.25)), "map", transform=map_from_odom
    )
    # q = (1,0,0,0) * (0,0,s45,c45) = (c45, -s45, 0, 0): facing -y, upside down
    assert_pose(goal.pose, Pose(2.0, -3.0, 0.75, R2, -R2, 0.0, 0.0, "map"))
    backed = standoff_pose(goal.pose, 1.0)  # facing -y: back along +y
    assert backed.position == pytest.approx((2.0, -2.0, 0.75))


# --- refusals -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("ep", "kwargs", "needle"),
    [
        (record(None), {}, "no valid pose"),
        (record(Pose(math.nan, 0.0, 0.0, frame_id="map")), {}, "invalid stored pose"),
        (record(Pose(1.0, 0.0, 0.0, 0, 0, 0, 0, "map")), {}, "invalid stored pose"),
        (record(Pose(1.0, 0.0, 0.0)), {}, "names no frame"),
        (record(yawed(1.0, 0.0, 0.0, "odom")), {}, "no transform between them"),
        (
            record(yawed(1.0, 0.0, 0.0, "odom")),
            {"transform": yawed(0, 0, 0, "world")},
            "not in 'map'",
        ),
        (record(yawed(1.0, 0.0, 0.0), robot="other"), {"own_robot": "me"}, "another robot"),
        (record(yawed(1.0, 0.0, 0.0), end_ns=NOW + S), {"now_ns": NOW}, "after the robot's"),
        (record(yawed(1.0, 0.0, 0.0)), {"now_ns": 0}, "sim time without /clock"),
        (record(yawed(1.0, 0.0, 0.0)), {"standoff_m": -1.0}, "standoff=-1.0"),
        (record(yawed(1.0, 0.0, 0.0)), {"standoff_m": math.nan}, "standoff=nan"),
    ],
)
def test_no_goal_rather_than_a_wrong_one(ep: EpisodeRecord, kwargs: dict, needle: str) -> None:
    with pytest.raises(GoalRefusedError, match=needle) as info:
        goal_from_episode(ep, "map", **kwargs)
    assert isinstance(info.value, InputError)


def test_another_robots_episode_when_asked() -> None:
    ep = record(yawed(1.0, 0.0, 0.0), robot="other")
    goal = goal_from_episode(ep, "map", own_robot="me", allow_other_robots=True, now_ns=NOW)
    assert goal.pose.position == (1.0, 0.0, 0.0)


def test_query_times_after_now_are_refused() -> None:
    check_query_times(T0, NOW, NOW)  # up to now: fine
    check_query_times(None, None, NOW)
    with pytest.raises(GoalRefusedError, match=r"end time is 5\.0 s after"):
        check_query_times(T0, NOW + 5 * S, NOW)
    with pytest.raises(GoalRefusedError, match="start time"):
        check_query_times(NOW + 1, None, NOW)


# --- choosing the episode from a real store ------------------------------------------------

DIM = 5


@pytest.fixture
def store(tmp_path: Path) -> Iterator[EpisodeStore]:
    """Four episodes of robot 'me' (one without a pose, one in odom) and one of robot 'other'."""
    rows = [  # id, seconds, pose, robot, concept axis
        ("near", 10, yawed(0.0, 0.0, 0.0), "me", 0),
        ("far", 20, yawed(20.0, 0.0, 0.0), "me", 1),
        ("blind", 30, None, "me", 2),
        ("odom", 40, yawed(5.0, 5.0, 0.0, "odom"), "me", 3),
        ("theirs", 50, yawed(1.0, 0.0, 0.0), "other", 4),
    ]
    with EpisodeStore(tmp_path / "store") as st:
        st.note_origin(T0)
        for name, sec, pose, robot, axis in rows:
            t = T0 + sec * S
            st.add(
                [Frame(np.full((8, 8, 3), sec, np.uint8), t + j * S // 10) for j in range(2)],
                np.tile(np.eye(DIM)[axis], (2, 1)),
                stamp_ns=t,
                surprise=1.0,
                pose=pose,
                embedder_model=MODEL,
                embedder_pretrained=True,
                episode_id=name,
                robot_id=robot,
            )
        yield st


def _pick(store: EpisodeStore, **fields: object) -> str:
    return choose_episode(store, GoalQuery(**fields), "me", NOW).id  # type: ignore[arg-type]


def test_choose_by_id_time_place_and_embedding(store: EpisodeStore) -> None:
    assert _pick(store, episode_id="far") == "far"
    assert _pick(store, start_ns=T0 + 15 * S, end_ns=T0 + 25 * S) == "far"
    assert _pick(store, end_ns=T0 + 60 * S) == "odom"  # newest first, this robot's only
    assert _pick(store, near=(19.0, 0.0, 0.0), near_frame="map") == "far"
    axis = np.eye(DIM, dtype=np.float32)[1]
    assert _pick(store, embedding=axis, embedder_model=MODEL) == "far"  # not "theirs"
    # an id of another robot's episode is returned; goal_from_episode refuses it
    assert _pick(store, episode_id="theirs") == "theirs"


def test_other_robots_only_when_asked(store: EpisodeStore) -> None:
    with pytest.raises(GoalRefusedError, match="another robot's memory"):
        _pick(store, robot_id="other", end_ns=NOW)
    assert _pick(store, robot_id="other", end_ns=NOW, allow_other_robots=True) == "theirs"
    assert _pick(store, end_ns=NOW, allow_other_robots=True) == "theirs"  # every robot's
    theirs = np.eye(DIM, dtype=np.float32)[4]  # what only the other robot saw
    with pytest.raises(GoalRefusedError, match="no episode of robot 'me'"):
        _pick(store, embedding=theirs, embedder_model=MODEL, start_ns=T0 + 45 * S)
    best = _pick(store, embedding=theirs, embedder_model=MODEL, allow_other_robots=True)
    assert best == "theirs"


@pytest.mark.parametrize(
    ("fields", "error", "needle"),
    [
        ({}, GoalRefusedError, "say which episode"),
        ({"episode_id": "far", "end_ns": NOW}, GoalRefusedError, "not both"),
        ({"episode_id": "far", "radius_m": 2.0}, GoalRefusedError, "not both"),
        ({"episode_id": "../x"}, GoalRefusedError, "not an episode id"),
        ({"episode_id": "missing"}, StoreError, "missing"),
        ({"start_ns": NOW + S}, GoalRefusedError, "has not happened yet"),
        ({"start_ns": T0 + 100 * S, "end_ns": T0 + 200 * S}, GoalRefusedError, "no episode of"),
        ({"robot_id": "bad id"}, InputError, "robot_id"),
        ({"near": (0.0, 0.0, 0.0), "radius_m": -1.0}, InputError, "radius_m"),
    ],
)
def test_choose_refusals(
    store: EpisodeStore, fields: dict, error: type[Exception], needle: str
) -> None:
    with pytest.raises(error, match=needle):
        _pick(store, **fields)
