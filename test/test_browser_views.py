"""The memory browser's pure logic: search fields, the curve, why an episode was kept, the feed.

No server here (test_browser_http.py and test_browser_page.py run the real one): these are
the functions the routes call, checked directly on ground truth.
"""

from __future__ import annotations

import asyncio
import json
import math

import numpy as np
import pytest

from surprise_memory.browser.live import ChangeFeed
from surprise_memory.browser.run_notes import surprise_curve, why_kept
from surprise_memory.browser.views import frame_url, search_query, thumbnail_url, timeline_columns
from surprise_memory.errors import InputError
from surprise_memory.memory.episodes import trigger_frame_index
from surprise_memory.memory.pose import Pose
from surprise_memory.memory.store.records import EpisodeRecord
from surprise_memory.memory.store.summary import EpisodeSummary

S = 1_000_000_000
ORIGIN = 1_700_000_000 * S


def _summary(i: int, *, pose: bool = True, threshold: float = 1.0) -> EpisodeSummary:
    return EpisodeSummary(
        id=f"ep-{i}",
        robot_id="rover-1" if i % 2 else "rover-2",
        stamp_ns=ORIGIN + i * S,
        surprise=2.0 + i,
        threshold=threshold,
        pose_valid=pose,
        x=float(i) if pose else 0.0,
        y=-1.0 if pose else 0.0,
        z=0.5 if pose else 0.0,
        pose_frame="map" if pose else "",
    )


def _record(stamp_ns: int = ORIGIN + 10 * S, **kw: object) -> EpisodeRecord:
    fields: dict[str, object] = {
        "id": "ep-10",
        "stamp_ns": stamp_ns,
        "start_ns": ORIGIN + 8 * S,
        "end_ns": ORIGIN + 12 * S,
        "pose": Pose(1.0, 2.0, 0.0, frame_id="map"),
        "pose_valid": True,
        "surprise": 3.0,
        "threshold": 2.0,
        "frame_stamps_ns": tuple(ORIGIN + 8 * S + k * S // 2 for k in range(9)),
        "frame_paths": (),
        "encoder_model": "facebook/vjepa2-vitl-fpc64-256",
        "encoder_pretrained": True,
        "embedder_model": "PE-Core-L-14-336:meta",
        "embedder_pretrained": True,
        "created_wall_ns": 0,
    }
    fields.update(kw)
    return EpisodeRecord(**fields)  # type: ignore[arg-type]


# ------------------------------------------------------------------------- search fields
@pytest.mark.parametrize(
    ("params", "want"),
    [
        ({}, {"start_ns": None, "end_ns": None, "near": None, "max_results": 12}),
        ({"start": "12.5", "end": "20s"}, {"start_ns": ORIGIN + 12_500_000_000}),
        ({"start": "1700000012500000000ns"}, {"start_ns": ORIGIN + 12_500_000_000}),
        ({"end": "2023-11-14T22:13:32.5Z"}, {"end_ns": 1_700_000_012_500_000_000}),
        ({"near": "3.5,-1", "radius": "2"}, {"near": (3.5, -1.0, 0.0), "radius_m": 2.0}),
        ({"near": "1,2,3", "near_frame": "odom"}, {"near": (1.0, 2.0, 3.0), "near_frame": "odom"}),
        ({"robot_id": "rover-3", "k": "5"}, {"robot_id": "rover-3", "max_results": 5}),
        ({"start": "  ", "robot_id": ""}, {"start_ns": None, "robot_id": None}),
        ({}, {"kinds": None}),  # both kinds
        ({"kind": "both"}, {"kinds": None}),
        ({"kind": "place"}, {"kinds": frozenset({"place"})}),
        ({"kind": "episode"}, {"kinds": frozenset({"episode"})}),
    ],
)
def test_search_fields_become_the_query(params: dict[str, str], want: dict[str, object]) -> None:
    query = search_query(params, ORIGIN, max_results_cap=100)
    for name, value in want.items():
        assert getattr(query, name) == value, name


@pytest.mark.parametrize(
    ("params", "needle"),
    [
        ({"start": "noon"}, "time 'noon'"),
        ({"start": "2023-11-14T22:13:32"}, "needs a zone"),
        ({"start": "30", "end": "10"}, "the end is before the start"),
        ({"near": "1;2"}, "near '1;2'"),
        ({"near": "nan,1"}, "near 'nan,1'"),
        ({"near": "1,2", "radius": "0"}, "radius '0'"),
        ({"near": "1,2", "radius": "far"}, "radius 'far'"),
        ({"radius": "3"}, "a radius needs a place"),
        ({"k": "0"}, "k '0'"),
        ({"k": "101"}, "1..100"),
        ({"k": "-3"}, "k '-3'"),
        ({"k": "²"}, "k '²'"),  # str.isdigit accepts it, int() does not (was a 500)
        ({"k": "１"}, "k '１'"),  # a full-width digit
        ({"start": "1e300"}, "time '1e300'"),
        ({"robot_id": "../etc"}, "robot_id='../etc'"),
        ({"near_frame": "map"}, "near"),
        ({"kind": "places"}, "kind 'places': expected episode, place or both"),
    ],
)
def test_malformed_search_fields_are_refused_by_name(params: dict[str, str], needle: str) -> None:
    with pytest.raises(InputError) as err:
        search_query(params, ORIGIN, max_results_cap=100)
    assert needle in str(err.value)


def test_a_relative_time_needs_an_origin() -> None:
    with pytest.raises(InputError, match="no episode yet"):
        search_query({"start": "5"}, None, max_results_cap=100)


# ------------------------------------------------------------------------- what is sent
def test_timeline_columns_are_json_without_nan() -> None:
    summaries = [_summary(1), _summary(2, pose=False, threshold=math.nan)]
    cols = timeline_columns(summaries, ORIGIN)
    assert cols["id"] == ["ep-1", "ep-2"] and cols["robot"] == ["rover-1", "rover-2"]
    assert cols["t"] == [1.0, 2.0] and cols["surprise"] == [3.0, 4.0]
    assert cols["threshold"] == [1.0, None]
    assert (cols["x"], cols["y"], cols["frame"]) == ([1.0, None], [-1.0, None], ["map", None])
    json.dumps(cols, allow_nan=False)
    assert timeline_columns([], ORIGIN)["id"] == []


def test_the_timeline_names_each_camera_and_where_it_looked_and_search_filters_by_it() -> None:
    """Issue 42: the browser's camera column and filter, the map's viewing arrows."""
    seen = _summary(1)._replace(camera="rear", view_yaw=math.pi / 2)
    unknown = _summary(3)._replace(camera="front")  # its direction unknown (NaN)
    cols = timeline_columns([seen, unknown, _summary(2, pose=False)], ORIGIN)
    assert cols["camera"] == ["rear", "front", ""] and cols["view"] == [90.0, None, None]
    json.dumps(cols, allow_nan=False)
    assert search_query({"camera": "rear"}, ORIGIN, max_results_cap=100).camera == "rear"
    assert search_query({}, ORIGIN, max_results_cap=100).camera is None
    with pytest.raises(InputError, match="camera='rear left'"):
        search_query({"camera": "rear left"}, ORIGIN, max_results_cap=100)


def test_the_thumbnail_is_the_frame_nearest_the_trigger_and_urls_quote_the_id() -> None:
    assert thumbnail_url(_record()) == "/api/episodes/ep-10/frames/4"
    assert thumbnail_url(_record(stamp_ns=ORIGIN + 8 * S + S // 5)) == frame_url("ep-10", 0)
    assert thumbnail_url(_record(stamp_ns=ORIGIN + 8 * S + S // 4)) == frame_url(
        "ep-10", 0
    )  # a tie
    assert trigger_frame_index((), ORIGIN) == 0
    assert frame_url("ep.1_a-b", 3) == "/api/episodes/ep.1_a-b/frames/3"
    assert frame_url("a/../b", 0) == "/api/episodes/a%2F..%2Fb/frames/0"


def test_the_curve_keeps_each_buckets_peak_and_the_decisions() -> None:
    n = 10_000
    rng = np.random.default_rng(0)
    score = rng.uniform(0.0, 1.0, n)
    peaks = [1234, 5678, 9001]
    score[peaks] = [5.0, 6.0, 7.0]
    tau = np.full(n, 2.0)
    tau[:50] = np.nan  # before the gate's warm-up
    triggered = np.zeros(n, dtype=np.int64)
    triggered[peaks] = 1
    suppressed = np.full(n, "", dtype="<U16")
    suppressed[4000] = "habituation"
    scores = {
        "stamp_ns": ORIGIN + np.arange(n, dtype=np.int64) * S // 10,
        "score": score,
        "tau": tau,
        "triggered": triggered,
        "suppressed": suppressed,
    }
    curve = surprise_curve(scores, ORIGIN - 5 * S, points=500)
    assert len(curve["t"]) == len(curve["score"]) == len(curve["tau"]) <= 500
    assert curve["frames"] == n
    assert sorted(curve["score"])[-3:] == [5.0, 6.0, 7.0]  # no peak lost to the cut
    assert curve["t"] == sorted(curve["t"])
    assert curve["events"] == pytest.approx([5 + p / 10 for p in peaks])
    assert curve["suppressed"] == [{"t": pytest.approx(405.0), "reason": "habituation"}]
    assert curve["tau"][0] is None and curve["tau"][-1] == 2.0
    json.dumps(curve, allow_nan=False)
    small = surprise_curve({k: v[:10] for k, v in scores.items()}, None, points=500)
    assert small["t"][0] == 0.0 and len(small["t"]) == 10


def test_why_an_episode_was_kept_from_its_run_record() -> None:
    rec = _record()
    run = {
        "settings": {
            "gate": {"gamma": 1.5, "nms_seconds": 1.0},
            "habituation": {"habituation": True, "habituation_similarity": 0.5},
            "budget": {"max_episodes_per_minute": 2.0, "budget_window_seconds": 60.0},
            "baseline": {"gate_mode": "surprise"},
        },
        "events": [
            {"stamp_ns": rec.stamp_ns, "decided_ns": rec.stamp_ns + 1_100_000_000, "kl": 0.04}
        ],
        "suppressed": [
            {"stamp_ns": ORIGIN + 70 * S, "reason": "habituation", "similar_to_ns": rec.stamp_ns},
            {"stamp_ns": ORIGIN + 90 * S, "reason": "budget", "similar_to_ns": None},
        ],
    }
    why = why_kept(rec, run, ORIGIN)
    assert why[0].startswith("Surprise s = 3.000 was above the threshold τ = 2.000 (1.50 × τ")
    assert "1.5 × 1.4826 × MAD" in why[0] and "±1 s" in why[0]
    assert why[1].startswith("Decided 1.10 s after its peak") and "KL 0.04" in why[1]
    assert "θ = 0.5" in why[2] and "1 later candidate(s) were suppressed" in why[2]
    assert "70.00 s" in why[2]
    assert "2 episodes per minute" in why[3] and "1 candidate(s)" in why[3]
    assert len(why) == 4


def test_why_kept_without_a_run_record_or_by_a_baseline_or_untrained() -> None:
    bare = why_kept(_record(threshold=math.nan, encoder_pretrained=False), None, ORIGIN)
    assert bare[0] == "Surprise s = 3.000 at the trigger (no threshold recorded)."
    assert "random (untrained) weights" in bare[1] and "No run record" in bare[2]
    baseline = why_kept(_record(), {"settings": {"baseline": {"gate_mode": "uniform"}}}, ORIGIN)
    assert baseline[0].startswith("Stored by the uniform baseline gate")


# ------------------------------------------------------------------------- the live feed
def _drain(queue: asyncio.Queue[str | None]) -> list[tuple[str, object]]:
    out = []
    while not queue.empty():
        message = queue.get_nowait()
        if message is None:
            out.append(("end", None))
            continue
        name, data = message.strip().split("\n")
        out.append((name.removeprefix("event: "), json.loads(data.removeprefix("data: "))))
    return out


def test_the_feed_tells_pages_what_was_added_and_removed() -> None:
    async def run() -> None:
        feed = ChangeFeed(queue_size=4)
        feed.reset([_summary(1), _summary(2)], ORIGIN)
        page = feed.subscribe()
        assert _drain(page) == [("hello", {"count": 2})]
        feed.update([_summary(1), _summary(2)], ORIGIN)  # nothing changed: nothing sent
        assert _drain(page) == []
        feed.update([_summary(2), _summary(3)], ORIGIN)
        ((name, data),) = _drain(page)
        assert name == "episodes" and data["removed"] == ["ep-1"]  # type: ignore[index]
        assert data["added"]["id"] == ["ep-3"] and data["count"] == 2  # type: ignore[index]
        feed.update([_summary(2), _summary(3)], ORIGIN - S)  # a new origin moves every time
        assert _drain(page) == [("resync", {"count": 2})]

        slow = feed.subscribe()  # a page that stops reading: bounded, then told to resync
        for i in range(5, 12):  # seven additions, one episode each
            feed.update([_summary(k) for k in range(2, i)], ORIGIN - S)
        missed = _drain(slow)
        assert len(missed) == 4 and missed[0] == ("resync", {"count": 6})
        assert [name for name, _ in missed[1:]] == ["episodes"] * 3
        assert _drain(page)[0][0] == "resync"  # it did not read either

        stream = feed.stream(feed.subscribe())
        assert await anext(stream) == "retry: 2000\n\n"
        assert (await anext(stream)).startswith("event: hello")
        feed.close()
        with pytest.raises(StopAsyncIteration):
            await anext(stream)
        assert feed.pages == 2  # the closed stream left; the two others end with the feed
        assert _drain(page) == [("end", None)]

    asyncio.run(run())
