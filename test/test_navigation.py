"""An episode as a navigation goal (core): the geometry against hand-computed poses, the refusals.

Quaternions are (x, y, z, w). A yaw of a about +z is (0, 0, sin(a/2), cos(a/2)); a pitch
of b about +y is (0, sin(b/2), 0, cos(b/2)); "yaw then pitch" is their product
q_yaw * q_pitch, written out by hand below.
"""

from __future__ import annotations

import dataclasses
import math
import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from surprise_memory.config import NavigationConfig
from surprise_memory.errors import ConfigError, InputError, StoreError
from surprise_memory.memory.camera_view import CameraView, mounting_pose
from surprise_memory.memory.navigation import (
    GoalQuery,
    GoalRefusedError,
    check_query_times,
    check_session,
    choose_episode,
    goal_from_episode,
    standoff_pose,
)
from surprise_memory.memory.navigation_goals import GoalBook, GoalStatus, cancel_line
from surprise_memory.memory.places import PLACE
from surprise_memory.memory.pose import Pose, compose
from surprise_memory.memory.store import EpisodeRecord, EpisodeStore
from surprise_memory.memory.store.records import check_session_id, host_session_id
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
    episode, partial = choose_episode(store, GoalQuery(**fields), "me", NOW)  # type: ignore[arg-type]
    assert partial == ""  # a folder store answers whole
    return episode.id


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


def test_a_query_may_choose_a_place_keyframe_and_goes_where_its_camera_looked(
    store: EpisodeStore,
) -> None:
    """Chosen on purpose: a thing that stands still ("the red door") is only in a place
    keyframe, so a goal's query ranks both kinds; the goal is the keyframe's pose."""
    door = np.ones(DIM) / math.sqrt(DIM)  # what no surprise episode showed (cosine 0.45)
    t = T0 + 35 * S
    store.add(
        [Frame(np.full((8, 8, 3), 35, np.uint8), t)], door[None, :], stamp_ns=t, surprise=0.0,
        pose=yawed(30.0, 4.0, 90.0), embedder_model=MODEL, embedder_pretrained=True,
        episode_id="view_door", robot_id="me", kind=PLACE, place_key="map@2m:15,2:2/8",
    )  # fmt: skip
    assert _pick(store, embedding=door.astype(np.float32), embedder_model=MODEL) == "view_door"
    assert _pick(store, near=(29.0, 4.0, 0.0), near_frame="map") == "view_door"
    assert _pick(store, episode_id="view_door") == "view_door"
    episode, _ = choose_episode(
        store, GoalQuery(embedding=door.astype(np.float32), embedder_model=MODEL), "me", NOW
    )
    goal = goal_from_episode(episode, "map", own_robot="me", now_ns=NOW)
    assert_pose(goal.pose, yawed(30.0, 4.0, 90.0))


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


# --- frames of a session --------------------------------------------------------------------

BOOT = "boot-1"


def in_session(pose: Pose, session: str) -> EpisodeRecord:
    return dataclasses.replace(record(pose), session_id=session)


@pytest.mark.parametrize(
    ("frame", "stored_in", "fixed", "refused"),
    [
        ("odom", "boot-0", ("map",), True),  # another boot's odom: its origin is gone
        ("odom", "", ("map",), True),  # unknown session (a recording, an old store)
        ("odom", BOOT, ("map",), False),  # this boot's odom: tf gives today's map <- odom
        ("map", "boot-0", ("map",), False),  # map holds in every session
        ("map", "", ("map",), False),
        ("odom", "boot-0", ("map", "odom"), False),  # odom declared fixed
        ("earth", "boot-0", ("map",), True),  # any frame not declared fixed
    ],
)
def test_a_pose_in_a_frame_of_another_session_is_refused(
    frame: str, stored_in: str, fixed: tuple[str, ...], refused: bool
) -> None:
    ep = in_session(yawed(1.0, 0.0, 0.0, frame), stored_in)
    kwargs = {"transform": yawed(10.0, 5.0, 90.0)} if frame != "map" else {}
    if not refused:
        check_session(ep, BOOT, fixed, "map")
        goal = goal_from_episode(ep, "map", session_id=BOOT, fixed_frames=fixed, **kwargs)
        assert goal.pose.frame_id == "map"
        return
    with pytest.raises(GoalRefusedError) as info:
        goal_from_episode(ep, "map", session_id=BOOT, fixed_frames=fixed, **kwargs)
    message = str(info.value)
    assert f"is posed in {frame!r}, a frame that starts anew each session" in message
    assert "it needs a pose in 'map'" in message and f"not this one ({BOOT})" in message
    assert (stored_in or "unknown session") in message
    assert "\n" not in message
    # without a session to compare with (None), nothing is checked
    goal_from_episode(ep, "map", fixed_frames=fixed, **kwargs)


@pytest.mark.parametrize("stored_in", ["boot-0", ""], ids=["another_boot", "a_recording"])
def test_a_refusal_in_a_session_frame_names_what_is_missing(stored_in: str) -> None:
    """Navigating in odom itself, an odom pose of another session needs a fixed frame (or,
    for a recording, odom declared fixed), never "a pose in 'odom'", which it has."""
    ep = in_session(yawed(1.0, 0.0, 0.0, "odom"), stored_in)
    with pytest.raises(GoalRefusedError) as info:
        check_session(ep, BOOT, ("map",), "odom")
    message = str(info.value)
    assert "it needs a pose in 'odom'" not in message
    assert "it needs a pose in a fixed frame ('odom' is not one, fixed_frames: map)" in message
    recording = "or, for a recording whose 'odom' is its own, 'odom' declared fixed"
    assert (f"{recording} (--fixed-frames odom)" in message) == (stored_in == "")
    # navigating in map: a pose in map, or for a recording odom both fixed and navigated in
    with pytest.raises(GoalRefusedError) as info:
        check_session(ep, BOOT, ("map",), "map")
    message = str(info.value)
    assert "it needs a pose in 'map' (store episodes in the map frame" in message
    wanted = f"{recording} (--navigation-frame odom --fixed-frames odom)"
    assert (wanted in message) == (stored_in == "")


def test_session_ids_are_this_boots_and_checked() -> None:
    session = host_session_id()
    assert session == host_session_id()  # one per process at least, the boot's on Linux
    boot = Path("/proc/sys/kernel/random/boot_id")
    if boot.exists():
        assert session == f"boot-{boot.read_text().strip()}"
    assert check_session_id("") == "" and check_session_id(session) == session
    for bad in ("two words", "x" * 129, "tab\t", "new\nline"):
        with pytest.raises(InputError, match="session_id"):
            check_session_id(bad)


def test_navigation_settings_are_checked() -> None:
    config = NavigationConfig(fixed_frames=" map, earth ,,")
    assert config.fixed_frame_names == ("map", "earth")
    assert NavigationConfig().goal_action_type == "nav2_msgs/action/NavigateToPose"
    assert NavigationConfig().navigator_node == "bt_navigator"
    for bad in ("nav2_msgs/NavigateToPose", "nav2_msgs/msg/NavigateToPose", "a/action/b c"):
        with pytest.raises(ConfigError, match="goal_action_type"):
            NavigationConfig(goal_action_type=bad)
    with pytest.raises(ConfigError, match="navigator_node"):
        NavigationConfig(navigator_node="/")


# --- the goals a node sent ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("confirmed", "state", "message", "line"),
    [
        (
            True,
            "canceled",
            "the navigator's result",
            "cancelled: goal g: canceled (the navigator's result)",
        ),
        (
            False,
            "running",
            "the navigator refused the cancel",
            "not cancelled (the navigator refused the cancel): goal g: running, 2.00 m to go",
        ),
        (
            True,
            "running",
            "the navigator accepted the cancel",
            "cancel accepted by the navigator, not ended yet: goal g: running, 2.00 m to go",
        ),
        (True, "succeeded", "", "nothing to cancel: goal g: succeeded"),
        (False, "succeeded", "r", "not cancelled: goal g: succeeded (r)"),
    ],
)
def test_a_cancel_is_called_cancelled_only_where_the_navigator_confirmed_it(
    confirmed: bool, state: str, message: str, line: str
) -> None:
    status = GoalStatus("g", state=state, message=message, distance_remaining_m=2.0)
    assert cancel_line(confirmed, status) == line


def test_goal_book_one_goal_at_a_time_and_final_states_kept() -> None:
    book = GoalBook(keep=3)
    assert book.get() is None and book.active() is None
    book.add(GoalStatus("a", episode_id="ep", state="pending"))
    assert book.update("a", state="running", distance_remaining_m=4.0) is not None
    book.add(GoalStatus("b"))  # sent: "a" runs on until "b" is taken
    assert book.get("a").state == "running" and book.get().goal_id == "b"  # type: ignore[union-attr]
    (earlier,) = book.preempt_others("b")
    assert earlier.goal_id == "a" and earlier.state == "running"
    a = book.get("a")
    assert a is not None and a.state == "preempted" and a.preempted_by == "b" and a.done
    assert a.progress_line() == "goal a: preempted by b"  # each thing once
    # the navigator's "aborted" for a preempted goal does not change what its caller is told
    assert book.update("a", state="aborted").state == "preempted"  # type: ignore[union-attr]
    assert book.update("a", force=True, message="m").message == "m"  # type: ignore[union-attr]
    assert book.preempt_others("b") == []
    book.update("b", state="running", distance_remaining_m=2.5, eta_s=7.2)
    assert book.get("b").progress_line() == "goal b: running, 2.50 m to go, about 7 s left"  # type: ignore[union-attr]
    assert book.counts() == {"preempted": 1, "running": 1}
    assert book.active().goal_id == "b"  # type: ignore[union-attr]
    book.add(GoalStatus("c"))
    book.add(GoalStatus("d"))  # keep=3: "a" is forgotten
    assert book.get("a") is None and book.update("a", state="aborted") is None
    with pytest.raises(ValueError, match="state='flying'"):
        GoalStatus("x", state="flying")


def test_goal_book_wait_returns_on_a_change_or_at_the_deadline() -> None:
    book = GoalBook()
    book.add(GoalStatus("g", state="running"))
    timer = threading.Timer(0.2, lambda: book.update("g", state="succeeded"))
    timer.start()
    try:
        final = book.wait("g", 30.0)
    finally:
        timer.join()
    assert final is not None and final.state == "succeeded"
    book.add(GoalStatus("h", state="running"))
    assert book.wait("h", 0.05).state == "running"  # type: ignore[union-attr]
    assert book.wait("nope", 0.05) is None


# --- where the camera looked (issue 42) ---------------------------------------------------


def with_camera(pose: Pose, name: str, mount_deg: float | None, frame: str = "") -> EpisodeRecord:
    camera = None if mount_deg is None else compose(pose, mounting_pose(mount_deg))
    view = CameraView(name, f"{name}_optical", camera)
    if frame and camera is not None:
        view = dataclasses.replace(view, pose=dataclasses.replace(camera, frame_id=frame))
    return dataclasses.replace(record(pose), camera=view)


@pytest.mark.parametrize("mount", [0.0, 90.0, 180.0, -135.0])
def test_the_goal_faces_where_the_camera_looked_and_stands_off_along_it(mount: float) -> None:
    robot = yawed(1.0, 2.0, 30.0)
    ep = with_camera(robot, "side", mount)
    goal = goal_from_episode(ep, "map", standoff_m=2.0)
    view = math.radians(30.0 + mount)
    back = (1.0 - 2.0 * math.cos(view), 2.0 - 2.0 * math.sin(view), 0.0)
    assert_pose(goal.pose, dataclasses.replace(yawed(*back[:2], 30.0 + mount), z=0.0))
    assert "facing where camera 'side' looked" in goal.note
    # the option that keeps the robot's heading: the stored pose, backed off along it
    kept = goal_from_episode(ep, "map", standoff_m=2.0, facing="robot")
    assert_pose(kept.pose, standoff_pose(robot, 2.0))
    assert kept.note == ""


def test_the_camera_direction_survives_a_transform_to_the_navigation_frame() -> None:
    ep = with_camera(yawed(1.0, 0.0, 0.0, "odom"), "left", 90.0)  # looks along +y in odom
    goal = goal_from_episode(ep, "map", transform=yawed(10.0, 5.0, 90.0, "map"))
    assert_pose(goal.pose, yawed(10.0, 6.0, 180.0))  # +y in odom is -x in map


def test_an_unknown_camera_direction_keeps_the_robot_heading() -> None:
    robot = yawed(1.0, 2.0, 30.0)
    for ep, note in (
        (with_camera(robot, "rear", None), "camera 'rear''s direction is unknown"),
        (with_camera(robot, "rear", 180.0, frame="odom"), "direction is unknown"),  # other frame
        (with_camera(robot, "", None), ""),  # a one-camera robot: as before cameras
    ):
        goal = goal_from_episode(ep, "map")
        assert_pose(goal.pose, robot)
        assert (note in goal.note) if note else goal.note == ""
    with pytest.raises(GoalRefusedError, match="camera or robot"):
        goal_from_episode(record(robot), "map", facing="sideways")
    assert NavigationConfig().goal_facing == "camera"
    with pytest.raises(ConfigError, match="goal_facing"):
        NavigationConfig(goal_facing="left")
