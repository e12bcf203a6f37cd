"""The synthetic recording: deterministic by seed, events visible, ground truth beside it."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from surprise_memory.errors import ConfigError
from surprise_memory.offline.synthetic import (
    DIMMING_AFTER_S,
    EVENT_KINDS,
    GROUND_TRUTH_FORMAT,
    MODEL_SCENE,
    ScriptedEvent,
    SyntheticScene,
    default_events,
    ground_truth,
    model_events,
    model_scene,
    render_frame,
    synthetic_frames,
    synthetic_odometry,
    write_synthetic_bag,
)
from surprise_memory.sources import open_source
from surprise_memory.sources.pose_lookup import yaw_of

NS = 1_000_000_000
SCENE = SyntheticScene(seed=7, duration_s=20.0, fps=5.0, width=64, height=48)


def frames_at(scene: SyntheticScene, times: list[float]) -> list[np.ndarray]:
    return [render_frame(scene, round(t * scene.fps)).rgb.astype(float) for t in times]


def test_same_seed_same_recording_other_seed_differs() -> None:
    a = [f.rgb for f in synthetic_frames(SCENE)]
    b = [f.rgb for f in synthetic_frames(SyntheticScene(seed=7, duration_s=20.0, fps=5.0,
                                                         width=64, height=48))]  # fmt: skip
    assert len(a) == SCENE.frame_count == 100
    assert all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))
    other = render_frame(SyntheticScene(seed=8, duration_s=20.0, fps=5.0, width=64, height=48), 3)
    assert not np.array_equal(other.rgb, a[3])
    # random access gives the same frame as the stream
    frame = render_frame(SCENE, 42)
    np.testing.assert_array_equal(frame.rgb, a[42])
    assert frame.stamp_ns == SCENE.start_ns + 42 * NS // 5
    assert frame.rgb.shape == (48, 64, 3) and frame.rgb.dtype == np.uint8
    assert frame.frame_id == "camera"


def only(kind: str) -> SyntheticScene:
    """SCENE with only its event of ``kind``."""
    events = tuple(e for e in SCENE.scripted_events if e.kind == kind)
    return SyntheticScene(seed=7, duration_s=20.0, fps=5.0, width=64, height=48, events=events)


def changed(a: SyntheticScene, b: SyntheticScene, t: float) -> float:
    """Fraction of pixels that differ between the two scenes' frames at ``t`` s."""
    i = round(t * SCENE.fps)
    diff = np.abs(render_frame(a, i).rgb.astype(int) - render_frame(b, i).rgb.astype(int))
    return float((diff.sum(axis=-1) > 0).mean())


@pytest.mark.parametrize(
    ("kind", "lo", "hi"),
    [("object_appears", 0.05, 0.15), ("person_crosses", 0.03, 0.3), ("camera_pan", 0.5, 1.0)],
)
def test_each_event_changes_the_picture_from_its_time(kind: str, lo: float, hi: float) -> None:
    quiet = SyntheticScene(seed=7, duration_s=20.0, fps=5.0, width=64, height=48, events=())
    scene = only(kind)
    (event,) = scene.scripted_events
    # the same pixels (noise included) until the event, then a change of the expected size
    assert changed(quiet, scene, event.start_s - 0.2) == 0.0
    assert lo <= changed(quiet, scene, (event.start_s + event.end_s) / 2 + 0.2) <= hi


def test_light_change_dims_the_picture() -> None:
    (light,) = only("light_change").scripted_events
    before, after = frames_at(SCENE, [light.start_s - 0.2, light.end_s + 0.2])
    assert after.mean() / before.mean() == pytest.approx(0.55, abs=0.05)


def test_odometry_drives_and_turns_with_the_pan() -> None:
    samples = list(synthetic_odometry(SCENE))
    assert len(samples) == 20 * 20 + 1
    assert samples[1].stamp_ns - samples[0].stamp_ns == NS // 20
    pan = next(e for e in SCENE.scripted_events if e.kind == "camera_pan")
    before = [s for s in samples if s.stamp_ns < SCENE.start_ns + pan.start_s * NS]
    after = [s for s in samples if s.stamp_ns > SCENE.start_ns + pan.end_s * NS]
    assert yaw_of(before[-1].pose) == pytest.approx(0.0)
    assert yaw_of(after[0].pose) == pytest.approx(math.pi / 2)
    assert before[-1].pose.y == pytest.approx(0.0)
    assert after[-1].pose.y > after[0].pose.y  # driving along +y after a left turn
    step = math.dist(samples[10].pose.position, samples[11].pose.position)
    assert step == pytest.approx(0.5 / 20)
    assert all(s.pose.frame_id == "odom" and s.child_frame_id == "base_link" for s in samples)
    assert list(synthetic_odometry(SCENE)) == samples


def test_ground_truth_beside_the_bag(tmp_path: Path) -> None:
    scene = SyntheticScene(seed=1, duration_s=4.0, fps=10.0, width=32, height=24)
    recording = write_synthetic_bag(tmp_path / "rec", scene, storage="mcap")
    assert recording.ground_truth == tmp_path / "rec.ground_truth.json"
    assert (recording.frames, recording.odometry) == (40, 81)
    truth = json.loads(recording.ground_truth.read_text())
    assert truth == ground_truth(scene)
    assert truth["format"] == GROUND_TRUTH_FORMAT
    assert truth["image_topic"] == "/camera/image_raw" and truth["odom_topic"] == "/odom"
    assert truth["frame_count"] == 40 and truth["start_ns"] == scene.start_ns
    names = [e["name"] for e in truth["events"]]
    assert names == ["object_appears", "light_change", "camera_pan", "person_crosses"]
    for event, scripted in zip(truth["events"], default_events(4.0), strict=True):
        assert event["start_s"] == scripted.start_s and event["end_s"] == scripted.end_s
        assert event["start_ns"] == scene.start_ns + round(scripted.start_s * NS)
        assert event["end_ns"] >= event["start_ns"]
        assert event["description"] == EVENT_KINDS[event["name"]]
        assert len(event["position"]) == 3
    # robot positions along the path: it has driven 0.5 m/s * 1 s by the first event
    assert truth["events"][0]["position"][0] == pytest.approx(0.5, abs=0.03)
    source = open_source(recording.path)
    assert [f.stamp_ns for f in source][:2] == [scene.start_ns, scene.start_ns + NS // 10]
    with pytest.raises(ConfigError, match="exists already"):
        write_synthetic_bag(tmp_path / "rec", scene)


def test_custom_events_and_validation() -> None:
    events = (
        ScriptedEvent("light_change", 1.0, 1.0, "lamp off"),
        ScriptedEvent("light_change", 2.0, 2.0, "lamp on"),
    )
    scene = SyntheticScene(duration_s=3.0, width=32, height=24, events=events)
    levels = [render_frame(scene, i).rgb.mean() for i in (5, 15, 25)]
    assert levels[1] / levels[0] == pytest.approx(0.55, abs=0.05)
    assert levels[2] == pytest.approx(levels[0], rel=0.05)  # the light came back
    assert [e["description"] for e in ground_truth(scene)["events"]] == ["lamp off", "lamp on"]
    with pytest.raises(ConfigError, match="event kind 'explosion'"):
        SyntheticScene(events=(ScriptedEvent("explosion", 1.0, 1.0),))
    with pytest.raises(ConfigError, match="end_s <= duration_s"):
        SyntheticScene(duration_s=5.0, events=(ScriptedEvent("camera_pan", 4.0, 6.0),))
    with pytest.raises(ConfigError, match="fps=0"):
        SyntheticScene(fps=0)
    with pytest.raises(ConfigError, match="frame index 30"):
        render_frame(scene, 30)
    with pytest.raises(ConfigError, match="storage='zip'"):
        write_synthetic_bag(Path("unused"), scene, storage="zip")


def test_the_models_scenes_sway_less_and_flicker_only_while_the_light_dims() -> None:
    light = only("light_change")
    (ev,) = light.scripted_events
    cue = SyntheticScene(seed=7, duration_s=20.0, fps=5.0, width=64, height=48,
                         events=light.scripted_events, **MODEL_SCENE)  # fmt: skip
    assert cue.flicker and cue.sway_px < SCENE.sway_px
    plain = SyntheticScene(seed=7, duration_s=20.0, fps=5.0, width=64, height=48,
                           events=light.scripted_events, sway_px=cue.sway_px)  # fmt: skip
    # the same pixels before the dimming and once it is over; rolling bands during it
    assert changed(plain, cue, ev.start_s - 0.2) == 0.0
    assert changed(plain, cue, ev.end_s + DIMMING_AFTER_S + 0.4) == 0.0
    mid = round((ev.start_s + ev.end_s + DIMMING_AFTER_S) / 2 * SCENE.fps)
    bands = render_frame(cue, mid).rgb.astype(float).mean(axis=(1, 2))
    flat = render_frame(plain, mid).rgb.astype(float).mean(axis=(1, 2))
    assert np.abs(bands / flat - 1.0).max() > 0.15
    with pytest.raises(ConfigError, match="sway_px"):
        SyntheticScene(sway_px=-1.0)


def test_in_the_models_scenes_each_event_shows_from_its_start() -> None:
    models = {k: v for k, v in MODEL_SCENE.items() if k in ("abrupt_pan", "person_from")}
    plain = SyntheticScene(seed=7, duration_s=20.0, fps=5.0, width=64, height=48, events=())
    for kind in ("camera_pan", "person_crosses"):
        (ev,) = only(kind).scripted_events
        eased = only(kind)
        sharp = SyntheticScene(seed=7, duration_s=20.0, fps=5.0, width=64, height=48,
                               events=(ev,), **models)  # fmt: skip
        assert changed(plain, sharp, ev.start_s - 0.2) == 0.0  # nothing before the start
        # one frame after the start: the models' scene has changed more than the default's
        assert changed(plain, sharp, ev.start_s + 0.2) > changed(plain, eased, ev.start_s + 0.2)
    # the person steps out inside V-JEPA-2's centre crop (17 % cut off each side)
    (walk,) = only("person_crosses").scripted_events
    sharp = SyntheticScene(seed=7, duration_s=20.0, fps=5.0, width=64, height=48,
                           events=(walk,), **models)  # fmt: skip
    i = round((walk.start_s + 0.2) * SCENE.fps)
    cols = np.flatnonzero(
        (render_frame(sharp, i).rgb.astype(int) - render_frame(plain, i).rgb.astype(int)).any(
            axis=(0, 2)
        )
    )
    assert cols.min() > 0.17 * 64 and cols.max() < 0.83 * 64
    # the pan blurs: fewer sharp vertical edges mid-pan than in the same view once it is over
    (pan,) = only("camera_pan").scripted_events
    sharp = SyntheticScene(seed=7, duration_s=20.0, fps=5.0, width=64, height=48,
                           events=(pan,), noise=0.0, **models)  # fmt: skip
    [mid] = frames_at(sharp, [(pan.start_s + pan.end_s) / 2])
    [done] = frames_at(sharp, [pan.end_s + 0.4])
    edges = [np.abs(np.diff(f.astype(float), axis=1)).mean() for f in (mid, done)]
    assert edges[0] < 0.8 * edges[1]
    # the same odometry as an eased pan, apart from the ramp: a quarter turn in the end
    last = list(synthetic_odometry(sharp))[-1]
    assert yaw_of(last.pose) == pytest.approx(math.pi / 2)


def test_in_the_models_scenes_the_object_comes_last() -> None:
    kinds = [e.kind for e in model_events(60.0)]
    assert kinds[-1] == "object_appears" and sorted(kinds) == sorted(
        k for k in EVENT_KINDS if k != "panel_passes"
    )
    scene = model_scene(1000)
    assert scene.scripted_events == model_events(60.0)
    assert scene.abrupt_pan and scene.flicker and scene.person_from > 0
    with pytest.raises(ConfigError, match="person_from"):
        SyntheticScene(person_from=1.5)
