"""``surprise-memory export`` (issue 30): episodes as an MCAP recording, read back three ways.

A store written by ``process`` (frames, odometry poses, ``scores.csv``) is exported; the
file is read back with ``rosbags`` and with the ``mcap`` reader, holds every topic with the
stored JPEG bytes, poses, markers, the surprise curve and the metadata, and
``surprise-memory process`` takes it as input (round trip). The same episodes exported
from a PostgreSQL copy of the store give the same frames.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from browser_helpers import processed_store
from rosbags.highlevel import AnyReader
from test_cli import TINY  # the tiny offline models (random weights, CPU)

from surprise_memory.memory.episodes import trigger_frame_index
from surprise_memory.memory.places import EPISODE, PLACE
from surprise_memory.memory.snapshot import SnapshotNote
from surprise_memory.memory.store import EpisodeStore
from surprise_memory.memory.store.migrate import migrate_store
from surprise_memory.offline.export import (
    EXPORT_PLACE_TF_CHILD,
    EXPORT_TF_CHILD,
    EXPORT_TOPICS,
    PLACE_TOPICS,
)
from surprise_memory.offline.run_record import load_run_record, read_scores

REPO = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": str(REPO)}
FRAMES, POSE = EXPORT_TOPICS["frames"][0], EXPORT_TOPICS["pose"][0]


def run(cwd: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [sys.executable, "-m", "surprise_memory", *args],
        cwd=cwd,
        env=ENV,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    if check and proc.returncode != 0:
        pytest.fail(f"{args[0]} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}")
    return proc


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = processed_store(
        tmp_path_factory.mktemp("export"), seconds=10.0, episode_frames=4, place_keyframes=True
    )
    with EpisodeStore(path) as s:
        first = min((s.get(i) for i in s.episode_ids() if s.get(i).kind == EPISODE),
                    key=lambda r: r.stamp_ns)  # fmt: skip
        s.note_snapshot([first.id], SnapshotNote("event", 5, 6, True))
    return path


@pytest.fixture(scope="module")
def exported(store: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    cwd = tmp_path_factory.mktemp("exported")
    out = run(cwd, "export", str(store), "--out", "episodes", "--start", "0")
    assert "wrote" in out.stdout and FRAMES in out.stdout
    return cwd / "episodes"


def test_rosbags_reads_every_topic_back(store: Path, exported: Path) -> None:
    with EpisodeStore(store, read_only=True) as s:
        every = sorted((s.get(i) for i in s.episode_ids()), key=lambda r: r.stamp_ns)
        records = [r for r in every if r.kind == EPISODE]
        places = [r for r in every if r.kind == PLACE]
        place_jpegs = [s.frame_jpeg(r.id, 0) for r in places]
        # every frame at its stamp (the windows of close episodes interleave)
        frames_in = sorted(
            ((stamp, s.frame_jpeg(r.id, i)) for r in records
             for i, stamp in enumerate(r.frame_stamps_ns)),
            key=lambda x: x[0],
        )  # fmt: skip
    scores = read_scores(store / "scores.csv")
    assert len(records) >= 2, "the synthetic run should store a few episodes"
    got: dict[str, list[tuple[int, object]]] = {}
    with AnyReader([exported]) as reader:
        want = dict(EXPORT_TOPICS.values()) | dict(PLACE_TOPICS.values())
        assert {c.topic: c.msgtype for c in reader.connections} == want
        for conn, t, raw in reader.messages():
            got.setdefault(conn.topic, []).append((t, reader.deserialize(raw, conn.msgtype)))
    # the offline run's place keyframes, on their own topics, apart from the episodes
    assert len(places) > 0
    assert [bytes(m.data) for _, m in got[PLACE_TOPICS["places"][0]]] == place_jpegs
    assert [t for t, _ in got[PLACE_TOPICS["place_pose"][0]]] == [r.stamp_ns for r in places]
    frames = got[FRAMES]
    assert [bytes(m.data) for _, m in frames] == [j for _, j in frames_in]  # not re-encoded
    stamps = [t for t, _ in frames_in]
    assert [t for t, _ in frames] == stamps  # logged at their stamps, in order
    assert [m.header.stamp.sec * 10**9 + m.header.stamp.nanosec for _, m in frames] == stamps
    poses = got[POSE]
    assert [t for t, _ in poses] == [r.stamp_ns for r in records]
    for (_, msg), rec in zip(poses, records, strict=True):
        assert msg.header.frame_id == rec.pose.frame_id
        assert msg.pose.position.x == pytest.approx(rec.pose.x)
    tfs = [m.transforms[0] for _, m in got["/tf"]]
    assert [tf.child_frame_id for tf in tfs].count(EXPORT_TF_CHILD) == len(records)
    assert [tf.child_frame_id for tf in tfs].count(EXPORT_PLACE_TF_CHILD) == len(places)
    assert tfs[0].header.frame_id == records[0].pose.frame_id
    markers = got[EXPORT_TOPICS["markers"][0]]
    arrows = [m for m in markers[-1][1].markers if m.ns == "episodes"]
    assert len(markers) == len(records) and len(arrows) == len(records)
    # the curve around each trigger: every scores.csv row within an episode's window
    curve = got[EXPORT_TOPICS["score"][0]]
    tau = got[EXPORT_TOPICS["threshold"][0]]
    inside = [
        (int(t), float(s))
        for t, s in zip(scores["stamp_ns"], scores["score"], strict=True)
        for r in records
        if r.start_ns <= t <= r.end_ns
    ]
    assert [(t, m.data) for t, m in curve] == sorted(inside, key=lambda x: x[0])
    assert len(tau) == len(curve) and len(curve) > len(records)
    infos = [m.status[0] for _, m in got[EXPORT_TOPICS["info"][0]]]
    every_info = [{kv.key: kv.value for kv in status.values} for status in infos]
    assert sorted(v["id"] for v in every_info) == sorted(r.id for r in every)  # places too
    ids = {r.id for r in records}
    values = [v for v in every_info if v["id"] in ids]
    assert [v["id"] for v in values] == [r.id for r in records]
    assert values[0]["embedder_model"] == records[0].embedder_model
    assert json.loads(values[0]["snapshots"])[0]["success"] is True
    assert json.loads(values[1]["snapshots"]) == []
    for v, r in zip(values, records, strict=True):  # its picture: the trigger's frame
        index = trigger_frame_index(r.frame_stamps_ns, r.stamp_ns)
        assert v["trigger_frame"] == str(index)
        assert v["trigger_frame_stamp_ns"] == str(r.frame_stamps_ns[index])


def test_the_mcap_reader_reads_it_back(exported: Path) -> None:
    from mcap.reader import make_reader

    (path,) = exported.glob("*.mcap")
    counts: dict[str, int] = {}
    with path.open("rb") as f:
        reader = make_reader(f)
        for schema, channel, message in reader.iter_messages():
            assert channel.message_encoding == "cdr" and schema is not None and message.data
            assert schema.encoding == "ros2msg" and schema.data  # definitions inside
            topics = {**EXPORT_TOPICS, **PLACE_TOPICS}.values()
            assert (channel.topic, schema.name) in set(topics)
            counts[channel.topic] = counts.get(channel.topic, 0) + 1
    assert set(counts) == {topic for topic, _ in topics}


def test_process_takes_the_export_as_input(exported: Path, tmp_path: Path) -> None:
    with AnyReader([exported]) as reader:
        frames = sum(c.msgcount for c in reader.connections if c.topic == FRAMES)
    args = ["--image-topic", FRAMES, "--pose-topic", POSE, *TINY]
    run(tmp_path, "process", str(exported), "--out", "again", *args)
    record = load_run_record(tmp_path / "again")
    assert record["status"] == "complete"
    assert record["summary"]["frames"] == frames


def test_by_id_and_from_postgresql(store: Path, pg_url: str, tmp_path: Path) -> None:
    with EpisodeStore(store, read_only=True) as s:
        first = next(i for i in s.episode_ids() if s.get(i).kind == EPISODE)
        jpegs = [s.frame_jpeg(first, i) for i in range(len(s.get(first).frame_paths))]
    migrate_store(str(store), pg_url)
    run(tmp_path, "export", pg_url, "--out", "one", "--id", first)
    with AnyReader([tmp_path / "one"]) as reader:
        got = [bytes(reader.deserialize(raw, c.msgtype).data) for c, _, raw in reader.messages()
               if c.topic == FRAMES]  # fmt: skip
    assert got == jpegs


def test_bad_requests_say_why_in_one_line(store: Path, tmp_path: Path) -> None:
    for args, needle in (
        (["--id", "ep-nope"], "no episode 'ep-nope'"),
        (["--start", "1e9"], "no episode matches"),
        (["--near", "1,2,3,4"], "near '1,2,3,4'"),
    ):
        proc = run(tmp_path, "export", str(store), "--out", "x", *args, check=False)
        assert proc.returncode == 1 and needle in proc.stderr, proc.stderr
        assert "Traceback" not in proc.stderr and not (tmp_path / "x").exists()
    (tmp_path / "taken").mkdir()
    proc = run(tmp_path, "export", str(store), "--out", "taken", check=False)
    assert proc.returncode == 1 and "exists" in proc.stderr


def test_each_camera_gets_its_own_frames_topic_and_its_pose(tmp_path: Path) -> None:
    """A robot with several cameras: one frames topic per camera, the images in its optical
    frame, the camera's pose in /tf beside the robot's, the arrow along its view (issue 42)."""
    import math

    import numpy as np

    from surprise_memory.memory.camera_view import CameraView, mounting_pose
    from surprise_memory.memory.pose import Pose, compose
    from surprise_memory.offline.export import export_episodes, frames_topic
    from surprise_memory.perception.frames import Frame

    rng = np.random.default_rng(3)
    robot = Pose(2.0, 1.0, 0.0, frame_id="map")
    with EpisodeStore(tmp_path / "store") as s:
        for i, (name, yaw) in enumerate((("front", 0.0), ("rear", 180.0), ("", None))):
            pose = None if yaw is None else compose(robot, mounting_pose(yaw))
            frames = [
                Frame(rng.integers(0, 255, (12, 16, 3), dtype=np.uint8), i * 10**9 + j)
                for j in range(2)
            ]
            s.add(
                frames,
                rng.standard_normal((2, 8)),
                stamp_ns=i * 10**9,
                surprise=2.0,
                threshold=1.0,
                pose=robot,
                embedder_model="m",
                embedder_pretrained=False,
                camera=CameraView(name, f"{name or 'cam'}_optical", pose),
            )
        records = [s.get(e) for e in s.episode_ids()]
        summary = export_episodes(s, records, tmp_path / "out")
    assert frames_topic("") == FRAMES and frames_topic("rear").endswith("/rear/compressed")
    for camera in ("front", "rear", ""):
        assert summary.messages[frames_topic(camera)] == 2
    got: dict[str, list[object]] = {}
    with AnyReader([tmp_path / "out"]) as reader:
        for conn, _, raw in reader.messages():
            got.setdefault(conn.topic, []).append(reader.deserialize(raw, conn.msgtype))
    assert {m.header.frame_id for m in got[frames_topic("rear")]} == {"rear_optical"}
    assert {m.header.frame_id for m in got[FRAMES]} == {"cam_optical"}
    children = [[t.child_frame_id for t in m.transforms] for m in got["/tf"]]
    assert children == [[EXPORT_TF_CHILD, f"{EXPORT_TF_CHILD}/camera"]] * 2 + [[EXPORT_TF_CHILD]]
    arrows = [m for m in got[EXPORT_TOPICS["markers"][0]][-1].markers if m.ns == "episodes"]
    yaws = [2 * math.atan2(a.pose.orientation.z, a.pose.orientation.w) for a in arrows]
    assert [abs(math.remainder(y, 2 * math.pi)) for y in yaws] == pytest.approx(
        [0.0, math.pi, 0.0], abs=1e-6
    )
    info = [{kv.key: kv.value for kv in m.status[0].values} for m in got[EXPORT_TOPICS["info"][0]]]
    assert [(v["camera"], v["view_yaw_deg"]) for v in info] == [
        ("front", "0.0"),
        ("rear", "180.0"),
        ("", ""),
    ]


def test_place_keyframes_are_exported_apart_and_marked(tmp_path: Path) -> None:
    """A place keyframe's frame goes on the place topic, its pose on the place pose topic
    and under its own tf child, its info says kind place; no marker, no curve (issue 47)."""
    import numpy as np

    from surprise_memory.memory.pose import Pose
    from surprise_memory.offline.export import (
        EXPORT_PLACE_TF_CHILD,
        PLACE_TOPICS,
        export_episodes,
        places_topic,
    )
    from surprise_memory.perception.frames import Frame

    rng = np.random.default_rng(4)
    at = Pose(3.0, 5.0, 0.0, frame_id="map")
    with EpisodeStore(tmp_path / "store") as s:
        for i, kind in enumerate(("episode", "place", "place")):
            n = 2 if kind == "episode" else 1
            s.add(
                [Frame(rng.integers(0, 255, (12, 16, 3), dtype=np.uint8), i * 10**9 + j)
                 for j in range(n)],
                rng.standard_normal((n, 8)), stamp_ns=i * 10**9, surprise=2.0 * (kind == "episode"),
                threshold=1.0, pose=at, embedder_model="m", embedder_pretrained=False,
                kind=kind, place_key="" if kind == "episode" else f"map@2m:1,2:{i}/8",
            )  # fmt: skip
        summary = export_episodes(s, [s.get(e) for e in s.episode_ids()], tmp_path / "out")
    assert places_topic("") == PLACE_TOPICS["places"][0]
    assert summary.messages[PLACE_TOPICS["places"][0]] == 2 and summary.messages[FRAMES] == 2
    assert summary.messages[PLACE_TOPICS["place_pose"][0]] == 2 and summary.messages[POSE] == 1
    got: dict[str, list[object]] = {}
    with AnyReader([tmp_path / "out"]) as reader:
        for conn, _, raw in reader.messages():
            got.setdefault(conn.topic, []).append(reader.deserialize(raw, conn.msgtype))
    children = [m.transforms[0].child_frame_id for m in got["/tf"]]
    assert children == [EXPORT_TF_CHILD, EXPORT_PLACE_TF_CHILD, EXPORT_PLACE_TF_CHILD]
    info = [{kv.key: kv.value for kv in m.status[0].values} for m in got[EXPORT_TOPICS["info"][0]]]
    assert [(v["kind"], v["place_key"]) for v in info] == [
        ("episode", ""), ("place", "map@2m:1,2:1/8"), ("place", "map@2m:1,2:2/8"),
    ]  # fmt: skip
    assert len(got[EXPORT_TOPICS["markers"][0]]) == 1  # the episode's only
    assert len(got[EXPORT_TOPICS["score"][0]]) == 1
