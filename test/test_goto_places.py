"""``surprise-memory goto --store`` says how old the latest view of its target's place is
(issue 47): last seen how long ago, and whether it still looks the same.

The store is a real SQLite folder written here (episodes and place keyframes as in
test_store_places.py); the command runs as a subprocess from a folder outside the
repository, so the colcon install is what runs. The dry runs need no ROS; the goal sent
for real goes over DDS to a node named as Nav2's navigator (marked ``ros``).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from test_store_places import AT, DIM, _episode, _place

from surprise_memory.memory.camera_view import yaw_pose
from surprise_memory.memory.place_status import place_status_line
from surprise_memory.memory.places import PlaceStatus
from surprise_memory.memory.store import EpisodeStore
from surprise_memory.stamps import duration_text

CHANGED = yaw_pose(21.0, 5.0, 0.0, 0.0, "map")
UNSEEN = yaw_pose(41.0, 5.0, 0.0, 0.0, "map")
HOUR = 3600.0


def goto(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``surprise-memory goto`` as its own process."""
    return subprocess.run(
        [sys.executable, "-m", "surprise_memory", "goto", *args],
        cwd=cwd,  # never the repository root: the colcon install is what is imported
        env=os.environ.copy(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _unit(v: np.ndarray) -> np.ndarray:
    return v / np.linalg.norm(v)


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A store whose episodes (a day old) were seen again alike, seen again changed, or
    never again; and a store of episodes only (no place keyframes: processed offline)."""
    tmp = tmp_path_factory.mktemp("goto_places")
    rng = np.random.default_rng(147)
    same, other = _unit(rng.standard_normal(DIM)), rng.standard_normal(DIM)
    other = _unit(other - (other @ same) * same)
    changed = 0.5 * same + np.sqrt(0.75) * other  # cosine 0.5 with `same`
    made = time.time()  # every stamp from this one reading of the clock
    day_ago = made - 24 * HOUR
    with EpisodeStore(tmp / "places") as s:
        ids = {
            "kept": _episode(s, rng, day_ago, AT, embeddings=np.tile(same, (8, 1))).id,
            "changed": _episode(s, rng, day_ago + 1, CHANGED, embeddings=np.tile(same, (8, 1))).id,
            "unseen": _episode(s, rng, day_ago + 2, UNSEEN).id,
        }
        ids["view_kept"] = _place(s, rng, made - 3 * HOUR, AT, embedding=same).id
        ids["view_changed"] = _place(s, rng, made - 600, CHANGED, embedding=changed).id
    with EpisodeStore(tmp / "episodes") as s:
        ids["alone"] = _episode(s, rng, day_ago, AT).id
    return {"places": tmp / "places", "episodes": tmp / "episodes", "ids": ids, "made": made}


_UNIT_S = {"d": 86400.0, "h": HOUR, "min": 60.0, "s": 1.0}


def _assert_age(line: str, pattern: str, since_made_s: float, made: float) -> None:
    """``line`` matches ``pattern`` (its age as the group ``age``), and that age is the one
    written (``since_made_s`` before the store was made) plus the time the test has taken
    since, less what two units leave out (a loaded machine runs the commands slowly)."""
    match = re.fullmatch(pattern, line)
    assert match is not None, line
    parts = match.group("age").split()
    shown = sum(float(n) * _UNIT_S[u] for n, u in zip(parts[::2], parts[1::2], strict=True))
    taken = time.time() - made
    assert since_made_s - 60.0 <= shown <= since_made_s + taken + 1.0, (line, taken)


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0.0, "0 s"),
        (0.4, "0 s"),
        (45.0, "45 s"),
        (59.6, "1 min"),
        (725.0, "12 min 5 s"),
        (3 * HOUR + 12 * 60 + 5, "3 h 12 min"),  # two units: the seconds are noise here
        (86400.0 + 30, "1 d"),  # no "0 h"
        (12 * 86400.0 + 4 * HOUR, "12 d 4 h"),
        (-HOUR, "1 h"),  # the caller says which way
        (float("nan"), "unknown"),
    ],
)
def test_a_duration_reads_in_its_two_largest_units(seconds: float, text: str) -> None:
    assert duration_text(seconds) == text


def test_the_line_says_the_age_from_now_and_never_a_negative_one() -> None:
    s, now = 10**9, 100 * 86400 * 10**9
    seen = PlaceStatus("map@2m:1,2:0/8", now - 3 * 3600 * s, 0.414, False, "v")
    assert place_status_line(seen, now - 86400 * s, now) == (
        "its place was last seen 3 h ago (looks different now, similarity 0.41)"
    )
    unseen = PlaceStatus("map@2m:1,2:0/8", now - 12 * 86400 * s, None, None)
    assert place_status_line(unseen, now - 12 * 86400 * s, now) == (
        "its place was not seen since the episode (12 d ago)"
    )
    # stamps of another clock (sim time ahead of this machine's): said, not "-5 min ago"
    ahead = PlaceStatus("map@2m:1,2:0/8", now + 300 * s, 0.9, True, "v")
    assert place_status_line(ahead, now - s, now) == (
        "its place was last seen 5 min after this machine's current time: another clock? "
        "(still looks the same, similarity 0.90)"
    )


def _dry(stores: dict[str, Any], tmp: Path, which: str, *args: str) -> str:
    proc = goto(
        tmp, "--id", stores["ids"][which], "--store", str(stores["places"]), "--dry-run",
        "--allow-other-robots", *args,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_goto_says_when_the_place_was_last_seen_and_if_it_looks_the_same(
    stores: dict[str, Any], tmp_path: Path
) -> None:
    made = stores["made"]
    kept = _dry(stores, tmp_path, "kept").splitlines()
    assert kept[2].startswith("dry run: not sent")
    _assert_age(
        kept[3],
        r"its place was last seen (?P<age>.+) ago \(still looks the same, similarity 1\.00\)",
        3 * HOUR,
        made,
    )
    changed = _dry(stores, tmp_path, "changed").splitlines()[3]
    _assert_age(
        changed,
        r"its place was last seen (?P<age>.+) ago \(looks different now, similarity 0\.50\)",
        600.0,
        made,
    )
    unseen = _dry(stores, tmp_path, "unseen").splitlines()[3]
    _assert_age(
        unseen, r"its place was not seen since the episode \((?P<age>.+) ago\)", 24 * HOUR, made
    )
    # the threshold is the reader's: at 0.4, the changed view still shows the episode
    lower = _dry(stores, tmp_path, "changed", "--place-still-there-similarity", "0.4")
    assert "(still looks the same, similarity 0.50)" in lower
    # JSON: the status and its line
    out = json.loads(_dry(stores, tmp_path, "kept", "--json"))
    status = out["place_status"]
    assert status["view_id"] == stores["ids"]["view_kept"] and status["still_there"] is True
    assert status["place_key"] == "map@2m:1,2:0/8" and status["text"].startswith("its place")


def test_no_line_for_a_place_keyframe_or_a_store_without_them(
    stores: dict[str, Any], tmp_path: Path
) -> None:
    view = _dry(stores, tmp_path, "view_kept").splitlines()
    assert len(view) == 3 and view[2].startswith("dry run: not sent")  # a view: no line
    proc = goto(
        tmp_path, "--id", stores["ids"]["alone"], "--store", str(stores["episodes"]),
        "--dry-run", "--allow-other-robots", "--json",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "place_status" not in json.loads(proc.stdout)  # no views kept: nothing to say


def test_place_settings_need_the_store(tmp_path: Path) -> None:
    """Through the memory node the status comes with the node's own settings: a setting
    for it here is refused rather than ignored, before any ROS is started."""
    proc = goto(tmp_path, "--id", "x", "--place-status-radius-m", "3")
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert "--place-status-radius-m: the place's status is looked up with --store" in proc.stderr


@pytest.mark.ros
def test_a_goal_sent_for_real_says_it_too(stores: dict[str, Any], tmp_path: Path) -> None:
    """A goal sent on the topic to a node named as Nav2's navigator: the same line."""
    import rclpy
    from geometry_msgs.msg import PoseStamped
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.qos import QoSProfile, ReliabilityPolicy

    context = rclpy.Context()
    rclpy.init(context=context)
    navigator = rclpy.create_node("bt_navigator", context=context)
    goals: list[Any] = []
    qos = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)
    navigator.create_subscription(PoseStamped, "/goal_pose", goals.append, qos)
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(navigator)
    spinner = threading.Thread(target=executor.spin, daemon=True)
    spinner.start()
    try:
        proc = goto(
            tmp_path, "--id", stores["ids"]["changed"], "--store", str(stores["places"]),
            "--allow-other-robots", "--goal-transport", "topic", "--goal-timeout-seconds", "10",
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        lines = proc.stdout.splitlines()
        assert "via topic /goal_pose: sent" in lines[2]
        assert lines[3].startswith("its place was last seen 10 min")
        assert "(looks different now, similarity 0.50)" in lines[3]
        deadline = time.monotonic() + 10
        while not goals and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(goals) == 1 and goals[0].pose.position.x == pytest.approx(21.0)
    finally:
        executor.shutdown()
        navigator.destroy_node()
        rclpy.shutdown(context=context)
        spinner.join(timeout=5)
