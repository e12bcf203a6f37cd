"""The diagnostics levels (surprise_memory.health): OK / WARN / ERROR and their reasons."""

from __future__ import annotations

from surprise_memory.health import (
    Finding,
    InputWatch,
    Level,
    PeriodCounts,
    camera_loss_finding,
    counted_finding,
    pose_finding,
    summarize,
    untrained_finding,
    window_span_finding,
    worker_finding,
)
from surprise_memory.memory.places import place_keyframes_finding

S = 10**9


def test_no_finding_is_ok_running() -> None:
    assert summarize([]) == (Level.OK, "running")
    assert summarize([None, None]) == (Level.OK, "running")


def test_worst_level_wins_and_every_reason_is_listed_worst_first() -> None:
    level, message = summarize(
        [Finding(Level.WARN, "a"), None, Finding(Level.ERROR, "b"), Finding(Level.WARN, "c")]
    )
    assert level == Level.ERROR
    assert message == "b; a; c"


def test_a_reason_found_twice_is_listed_once() -> None:
    # pipeline_node: the encoder's part and the scorer's part both see untrained weights
    twice = untrained_finding("encoder", False)
    level, message = summarize([twice, Finding(Level.WARN, "windows dropped"), twice])
    assert level == Level.WARN
    assert message == "encoder weights are untrained; windows dropped"


def test_levels_have_the_diagnostic_status_numbers() -> None:
    assert (Level.OK, Level.WARN, Level.ERROR) == (0, 1, 2)


def test_period_counts_say_what_happened_in_the_last_period_only() -> None:
    period = PeriodCounts()
    assert period.advance({"windows_dropped": 3}) == {"windows_dropped": 3}
    delta = period.advance({"windows_dropped": 3, "rejected_store": 1})
    assert delta == {"windows_dropped": 0, "rejected_store": 1}
    assert counted_finding(delta, "windows_dropped", Level.WARN, "windows dropped") is None
    found = counted_finding(delta, "rejected_store", Level.ERROR, "store write(s) failed")
    assert found == Finding(Level.ERROR, "1 store write(s) failed in the last period")
    assert counted_finding({}, "missing", Level.WARN, "x") is None


def test_untrained_weights_warn() -> None:
    assert untrained_finding("encoder", True) is None
    assert untrained_finding("encoder", False) == Finding(
        Level.WARN, "encoder weights are untrained"
    )


def test_a_dead_worker_is_an_error() -> None:
    assert worker_finding("episode writer", True) is None
    found = worker_finding("episode writer", False)
    assert found is not None and found.level == Level.ERROR
    assert "episode writer" in found.reason


def test_pose_fallen_back_warns() -> None:
    assert pose_finding(None) is None
    assert pose_finding("tf") is None
    odom = pose_finding("odometry")
    assert odom is not None and odom.level == Level.WARN and "odometry" in odom.reason
    none = pose_finding("no pose (tf: LookupException; no odometry topic)")
    assert none is not None and none.level == Level.WARN and "LookupException" in none.reason


def test_an_input_without_publisher_says_what_is_missing() -> None:
    watch = InputWatch("embedding", "no encoder", 5.0, start_ns=0)
    found = watch.check(publishers=0, now_ns=1 * S)
    assert found == Finding(Level.WARN, "no encoder: no publisher on 'embedding'")
    assert watch.check(publishers=1, now_ns=1 * S) is None


def test_a_silent_stream_warns_after_its_limit() -> None:
    watch = InputWatch("image", "no camera", 5.0, start_ns=0)
    assert watch.check(1, now_ns=5 * S) is None
    found = watch.check(1, now_ns=7 * S)
    assert found is not None and found.level == Level.WARN
    assert found.reason == "no camera: nothing on 'image' for 7 s since start"
    watch.seen(10 * S)
    assert watch.check(1, now_ns=14 * S) is None
    found = watch.check(1, now_ns=16 * S)
    assert found is not None and found.reason == "no camera: nothing on 'image' for 6 s"
    watch.restart(20 * S)  # paused and resumed: silence counts from the resume
    assert watch.check(1, now_ns=24 * S) is None


def test_a_sparse_input_is_judged_by_its_publishers_only() -> None:
    watch = InputWatch("events", "no scorer", None, start_ns=0)
    assert watch.check(1, now_ns=3600 * S) is None
    found = watch.check(0, now_ns=3600 * S)
    assert found is not None and found.reason == "no scorer: no publisher on 'events'"


def test_camera_loss_warns_above_the_setting_with_the_rates_and_where_to_read() -> None:
    assert camera_loss_finding(0.05, 28.5, 30.0, 0.05) is None
    assert camera_loss_finding(0.0, None, None, 0.0) is None
    found = camera_loss_finding(0.81, 5.7, 30.0, 0.05)
    assert found == Finding(
        Level.WARN,
        "camera frames lost: 81% in the last period (5.7 of 30.0 Hz received); see "
        "doc/guides/large-frames.md",
    )
    unknown = camera_loss_finding(0.5, None, 30.0, 0.05)
    assert unknown is not None and "Hz received" not in unknown.reason
    split = camera_loss_finding(0.81, 5.7, 30.0, 0.05, in_transport=0.8)
    assert split is not None and split.reason.startswith(
        "camera frames lost: 81% in the last period (5.7 of 30.0 Hz received; 80% in "
        "transport, 1% in this node's queue or never sent); see doc/guides/large-frames.md"
    )


def test_windows_missing_frames_warn_with_their_span() -> None:
    assert window_span_finding(None, 0.05) is None
    assert window_span_finding((0.05, 2.2, 2.1), 0.05) is None
    found = window_span_finding((0.5, 4.2, 2.1), 0.05)
    assert found is not None and found.level == Level.WARN
    assert found.reason.startswith("encoder windows span 4.20 s instead of 2.10 s (50% of")


def test_place_keyframes_say_why_none_was_kept() -> None:
    # kept: the count, no finding
    assert place_keyframes_finding(3, {"no_pose": 9}) == (None, "3 kept")
    assert place_keyframes_finding(0, {}) == (None, "no frames")
    # the most frequent reason of the period; a pose problem is a WARN, with the source's why
    finding, status = place_keyframes_finding(
        0, {"no_pose": 9, "recent_place": 2}, "tf: LookupException; no odometry on '/odom'"
    )
    assert status == (
        "none kept: no pose (no tf, no odometry): tf: LookupException; no odometry on '/odom'"
    )
    assert finding == Finding(Level.WARN, f"place keyframes {status}")
    for reason, text in [
        ("other_session", "pose from another boot"),
        ("pose_jump", "pose jump (relocalisation)"),
        ("stale_pose", "stale pose"),
    ]:
        finding, status = place_keyframes_finding(0, {reason: 5, "recent_place": 1})
        assert finding is not None and finding.level == Level.WARN and text in status
    # the usual case (places seen recently) or keyframes off: said, not a WARN
    finding, status = place_keyframes_finding(0, {"recent_place": 40, "no_pose": 1})
    assert finding is None and "place_revisit_seconds" in status
    assert place_keyframes_finding(0, {"disabled": 5})[0] is None
