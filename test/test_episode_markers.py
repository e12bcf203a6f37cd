"""What each stored episode looks like on a display, and which episodes get a marker.

The pieces of a marker are checked against values worked out by hand; the choice of the
newest episodes runs on both store backends (SQLite folder, PostgreSQL), with pages
smaller than the request and episodes sharing a stamp across a page boundary.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from surprise_memory.config import ConfigError, DisplayConfig, StoreConfig
from surprise_memory.memory.episode_markers import (
    LABEL_HEIGHT,
    LABEL_RISE,
    SHAFT_WIDTH,
    episode_label,
    episode_marker,
    level_rgba,
    newest_episodes,
    short_id,
    surprise_level,
)
from surprise_memory.memory.pose import Pose
from surprise_memory.memory.pose_trust import PoseTrust
from surprise_memory.memory.store import EpisodeRecord, EpisodeStoreBackend, open_store
from surprise_memory.perception.frames import Frame

S = 1_000_000_000
ORIGIN = 1_700_000_000 * S
ID = "ep-0001700000012500000000-a1b2c3"


def _record(
    *,
    stamp_ns: int = ORIGIN + 12_500_000_000,
    surprise: float = 3.0,
    threshold: float = 2.0,
    pose: Pose | None = None,
) -> EpisodeRecord:
    pose = pose if pose is not None else Pose(1.0, 2.0, 0.5, 0.0, 0.0, 0.6, 0.8, "map")
    return EpisodeRecord(
        id=ID,
        stamp_ns=stamp_ns,
        start_ns=stamp_ns - S,
        end_ns=stamp_ns + S,
        pose=pose,
        pose_valid=True,
        surprise=surprise,
        threshold=threshold,
        frame_stamps_ns=(stamp_ns,),
        frame_paths=(f"frames/{ID}/00.jpg",),
        encoder_model="m",
        encoder_pretrained=False,
        embedder_model="e",
        embedder_pretrained=False,
        created_wall_ns=0,
    )


@pytest.mark.parametrize(
    ("surprise", "threshold", "level"),
    [
        (2.0, 2.0, 0.0),  # at the threshold
        (3.0, 2.0, 0.5),
        (4.0, 2.0, 1.0),  # twice the threshold
        (9.0, 2.0, 1.0),  # clipped
        (1.0, 2.0, 0.0),  # below (a baseline gate's trigger): clipped
        (3.0, math.nan, None),  # threshold unknown
        (3.0, 0.0, None),
        (3.0, -1.0, None),
        (math.inf, 2.0, None),
    ],
)
def test_surprise_level_is_the_rise_above_the_threshold(
    surprise: float, threshold: float, level: float | None
) -> None:
    assert surprise_level(surprise, threshold) == level


def test_colours_run_from_yellow_to_red_and_grey_without_a_scale() -> None:
    assert level_rgba(0.0) == (1.0, 1.0, 0.0, 1.0)
    assert level_rgba(0.5) == (1.0, 0.5, 0.0, 1.0)
    assert level_rgba(1.0) == (1.0, 0.0, 0.0, 1.0)
    grey = level_rgba(None)
    assert grey[0] == grey[1] == grey[2] and 0.0 < grey[0] < 1.0


def test_label_gives_seconds_since_the_origin_short_id_surprise_and_threshold() -> None:
    assert short_id(ID) == "a1b2c3"
    assert short_id("door") == "door"
    assert episode_label(_record(), ORIGIN) == "12.5 s  a1b2c3\nsurprise 3.00 (tau 2.00)"
    no_tau = episode_label(_record(threshold=math.nan), ORIGIN)
    assert no_tau.endswith("(tau ?)")
    # no origin known: seconds of the stamp itself
    assert episode_label(_record(stamp_ns=7 * S), None).startswith("7.0 s  a1b2c3")


@pytest.mark.parametrize(
    ("trust", "tail"),
    [
        (PoseTrust(0.25, "lab"), "(tau 2.00)  ±0.25 m  map lab"),
        (PoseTrust(0.25, ""), "(tau 2.00)  ±0.25 m"),
        (PoseTrust(None, "lab"), "(tau 2.00)  map lab"),
        (PoseTrust(), "(tau 2.00)"),  # unknown: the label as before
    ],
)
def test_label_shows_the_poses_uncertainty_and_map_where_known(trust: PoseTrust, tail: str) -> None:
    record = dataclasses.replace(_record(), pose_trust=trust)
    assert episode_label(record, ORIGIN).endswith(tail)


def test_marker_sits_at_the_pose_and_grows_with_the_surprise() -> None:
    marker = episode_marker(_record(surprise=3.0, threshold=2.0), ORIGIN, size_m=0.5)
    assert marker is not None
    assert marker.episode_id == ID and marker.frame_id == "map"
    assert marker.position == (1.0, 2.0, 0.5)
    assert marker.orientation == (0.0, 0.0, 0.6, 0.8)
    assert marker.length_m == pytest.approx(0.75)  # level 0.5: 1.5 x the size
    assert marker.width_m == pytest.approx(0.5 * SHAFT_WIDTH)
    assert marker.rgba == (1.0, 0.5, 0.0, 1.0)
    assert marker.label_position == pytest.approx((1.0, 2.0, 0.5 + 0.5 * LABEL_RISE))
    assert marker.label_height_m == pytest.approx(0.5 * LABEL_HEIGHT)
    assert marker.label.startswith("12.5 s  a1b2c3")
    unknown = episode_marker(_record(threshold=math.nan), ORIGIN, size_m=2.0)
    assert unknown is not None and unknown.length_m == 2.0 and unknown.rgba == level_rgba(None)


@pytest.mark.parametrize(
    "pose",
    [
        None,  # pose_valid false
        Pose(math.nan, 0.0, 0.0, frame_id="map"),
        Pose(0.0, 0.0, 0.0, frame_id=""),  # nowhere to place it
    ],
    ids=["no pose", "not finite", "no frame"],
)
def test_no_marker_for_an_episode_without_a_usable_pose(pose: Pose | None) -> None:
    record = _record(pose=pose or Pose(frame_id="map"))
    if pose is None:
        record = EpisodeRecord(**{**record.__dict__, "pose_valid": False})
    assert episode_marker(record, ORIGIN, size_m=0.5) is None


def test_display_settings_are_checked() -> None:
    assert DisplayConfig().marker_max_episodes == 500
    with pytest.raises(ConfigError, match="marker_size_m"):
        DisplayConfig(marker_size_m=0.0)
    with pytest.raises(ConfigError, match="episode_preview_fps"):
        DisplayConfig(episode_preview_fps=-1.0)


def _add(store: EpisodeStoreBackend, stamp_ns: int, robot_id: str = "r1") -> str:
    frames = [Frame(np.full((8, 8, 3), 100, np.uint8), stamp_ns + i) for i in range(2)]
    rng = np.random.default_rng(stamp_ns % 1000)
    record = store.add(
        frames,
        rng.standard_normal((2, 8)),
        stamp_ns=stamp_ns,
        surprise=1.0,
        embedder_model="e",
        embedder_pretrained=False,
        robot_id=robot_id,
    )
    return record.id


def test_newest_episodes_reads_pages_on_both_backends(store_location: str) -> None:
    # a cap of 3 per query: every request below needs several pages
    with open_store(store_location, StoreConfig(max_results_cap=3, default_max_results=3)) as db:
        stamps = [10, 20, 30, 30, 30, 40, 50, 60]  # three episodes share stamp 30
        ids = {s_i: _add(db, (s + 100) * S) for s_i, s in enumerate(stamps)}
        other = _add(db, 170 * S, robot_id="r2")  # the newest, another robot's
        newest_first = [ids[i] for i in (7, 6, 5)]
        got = newest_episodes(db, 5, robot_id="r1")
        assert [r.id for r in got[:3]] == newest_first
        assert {r.id for r in got[3:]} <= {ids[2], ids[3], ids[4]} and len(got) == 5
        everything = newest_episodes(db, 100, robot_id="r1")
        assert sorted(r.id for r in everything) == sorted(ids.values())  # ties not skipped
        stamps_seen = [r.stamp_ns for r in everything]
        assert stamps_seen == sorted(stamps_seen, reverse=True)
        assert newest_episodes(db, 1)[0].id == other  # every robot's
        assert newest_episodes(db, 0) == []
