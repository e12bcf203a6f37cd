"""When the memory node asks a bag recorder for a snapshot (issue 30): the ROS-free planner.

One call per burst: the first stored episode starts a hold, every episode stored within it
shares the call; an aftermath call follows each event call when asked for; calls never
overlap. The node over DDS with a recorder: test_snapshot_trigger.py.
"""

from __future__ import annotations

import pytest

from surprise_memory.config import ConfigError, SnapshotConfig
from surprise_memory.errors import InputError
from surprise_memory.memory.snapshot import SnapshotCall, SnapshotNote, SnapshotPlanner

S = 1_000_000_000


def test_a_burst_makes_one_call_and_a_later_episode_the_next() -> None:
    planner = SnapshotPlanner(hold_ns=10 * S)
    for t, eid in ((0, "a"), (3, "b"), (9, "c")):  # a burst within the hold
        planner.add(eid, t * S)
        assert planner.due(t * S) is None
    assert planner.waiting == 3
    assert planner.due(10 * S) == SnapshotCall("event", ("a", "b", "c"))
    assert planner.due(11 * S) is None and planner.waiting == 0
    planner.add("d", 12 * S)  # after the call: a call of its own, a hold later
    assert planner.due(21 * S) is None
    assert planner.due(22 * S) == SnapshotCall("event", ("d",))


def test_the_aftermath_call_follows_and_calls_never_overlap() -> None:
    planner = SnapshotPlanner(hold_ns=2 * S, aftermath_ns=5 * S)
    planner.add("a", 0)
    assert planner.due(2 * S, busy=True) is None  # the previous call is still unanswered
    assert planner.due(3 * S) == SnapshotCall("event", ("a",))
    planner.add("b", 4 * S)
    assert planner.due(6 * S) == SnapshotCall("event", ("b",))  # due first: its hold is over
    assert planner.due(8 * S) is None  # 3 s + 5 s: due strictly after
    assert planner.due(8 * S + 1) == SnapshotCall("aftermath", ("a",))
    assert planner.due(10 * S) is None
    assert planner.due(11 * S + 1) == SnapshotCall("aftermath", ("b",))  # 6 s + 5 s
    planner.reconfigure(0, 0)  # live: no hold, no aftermath
    planner.add("c", 12 * S)
    assert planner.due(12 * S) == SnapshotCall("event", ("c",))
    assert planner.due(99 * S) is None


@pytest.mark.parametrize(("hold", "aftermath"), [(-1, 0), (0, -1)])
def test_negative_durations_are_refused(hold: int, aftermath: int) -> None:
    with pytest.raises(InputError, match="must be >= 0"):
        SnapshotPlanner(hold, aftermath)


def test_a_note_is_checked_and_reads_as_json() -> None:
    note = SnapshotNote("aftermath", 5, 0, False, "no recorder serves /x/snapshot")
    assert note.as_dict() == {
        "kind": "aftermath",
        "requested_ns": 5,
        "answered_ns": 0,
        "success": False,
        "message": "no recorder serves /x/snapshot",
    }
    with pytest.raises(InputError, match="must be ns >= 0"):
        SnapshotNote("event", -1, 0, True)


@pytest.mark.parametrize("name", ["/rosbag2_recorder/snapshot", "~/snapshot", "snapshot", ""])
def test_service_names(name: str) -> None:
    assert SnapshotConfig(snapshot_service=name).snapshot_service == name


@pytest.mark.parametrize("name", ["/bad name", "//x", "/x/", "/1x"])
def test_a_service_name_that_is_no_ros_name_is_refused(name: str) -> None:
    with pytest.raises(ConfigError, match="snapshot_service"):
        SnapshotConfig(snapshot_service=name)
