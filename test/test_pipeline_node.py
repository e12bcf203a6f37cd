"""pipeline_node over real DDS: the one-process pipeline equals the three-node split.

Both shapes run as real processes, one after the other, with the same parameters (the
tiny presets, random weights from the same seeds), on the same camera frames and odometry
published over DDS at camera rate. What each publishes and stores is compared: the same
embeddings, the same surprise scores, the same events (peak stamps, scores, odometry
poses) and the same episodes (trigger, frame stamps, surprise, pose, PE-Core embeddings
and the JPEG files in the store). The encoder's queue is deep enough for the whole stream,
so no window may be dropped in either shape and the comparison is exact up to float
rounding. A second test drives ``pipeline_node`` through its real lifecycle services.
"""

from __future__ import annotations

import json
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import rclpy
import synthetic_frames as sf
import yaml
from lifecycle_msgs.msg import Transition
from rclpy.node import Node
from ros_helpers import (
    node_executable,
    peer_process,
    spin_until,
    wait_for_publishers,
    wait_for_subscribers,
)
from sensor_msgs.msg import Image
from test_node_lifecycle import NS as LIFECYCLE_NS
from test_node_lifecycle import _Manager
from test_pipeline_nodes import CAMERA, NS, RELIABLE, Received, driver, publish_stream
from test_scorer_pose import HAVE_TF2, _transform

from surprise_memory.agents.ros_navigation import GoToEpisodeClient
from surprise_memory.memory.navigation import GoalRefusedError
from surprise_memory.memory.store import EpisodeRecord, open_store
from surprise_memory.msg import SurpriseScore
from surprise_memory.nodes.messages import time_to_ns

SHAPES = {
    "split": ("encoder_node", "scorer_node", "memory_node"),
    "one_process": ("pipeline_node",),
}
CAMERA_NODES = {"split": 2, "one_process": 1}  # camera subscriptions: encoder + memory, or one
N_WINDOWS = sf.N_FRAMES - sf.ENCODER["clip_frames"] + 1  # stride 1, warm-up 'wait'
# every window of the stream fits the encoder's queue: nothing is dropped; counters each second
SETTINGS = {"encoder_queue": 256, "diagnostics_period_seconds": 1.0}


@dataclass
class Run:
    """What one shape published and stored."""

    got: Received
    records: list[EpisodeRecord]
    embeddings: dict[str, np.ndarray]  # episode id -> its frames' PE-Core embeddings
    jpegs: dict[str, list[bytes]]  # episode id -> its stored JPEG files
    diagnostics: dict[str, str]  # the counters of the node that encodes


def _params(tmp_path: Path, shape: str, store: Path, **extra: Any) -> Path:
    path = tmp_path / f"{shape}.yaml"
    # a JSON round trip gives every node its own copies: YAML aliases break rcl's parser
    values = json.loads(json.dumps(sf.node_params(str(store), CAMERA, **SETTINGS, **extra)))
    path.write_text(yaml.safe_dump(values))
    return path


def _run(tmp_path: Path, shape: str) -> Run:
    store = tmp_path / shape / "store"
    params = _params(tmp_path, shape, store)
    encoder = SHAPES[shape][0]
    node, got, camera, odom = driver(f"{shape}_test")
    try:
        with ExitStack() as stack:
            procs = [
                stack.enter_context(peer_process(_args(name, params), tmp_path, name))
                for name in SHAPES[shape]
            ]
            wait_for_subscribers(node, camera, CAMERA_NODES[shape], timeout=90)
            wait_for_subscribers(node, odom, 1, timeout=60)
            wait_for_publishers(node, got.subscriptions, 1, timeout=60)
            nodes = set(SHAPES[shape])
            assert spin_until(node, lambda: nodes <= set(got.diagnostics), 20.0)
            publish_stream(node, camera, odom)
            assert spin_until(node, lambda: len(got.embeddings) >= N_WINDOWS, 60.0), (
                len(got.embeddings),
                got.diagnostics,
            )
            want_scores = N_WINDOWS - sf.SCORER["window"]
            assert spin_until(node, lambda: len(got.scores) >= want_scores, 30.0)
            # every event decided before the end of the stream gets its episode
            assert spin_until(
                node, lambda: bool(got.events) and len(got.episodes) >= len(got.events), 30.0
            ), (len(got.events), len(got.episodes))
            spin_until(node, lambda: False, 1.5)  # nothing more should come
            spin_until(node, lambda: False, 2.0)  # a diagnostics period: the final counters
            diagnostics = dict(got.diagnostics[encoder])
            assert all(p.poll() is None for p in procs), "a node died"
    finally:
        node.destroy_node()
        rclpy.shutdown()
    return _read_store(got, store, diagnostics)


def _args(name: str, params: Path) -> list[str]:
    args = [node_executable(name), "--ros-args", "--params-file", str(params)]
    return [*args, "-r", f"__ns:={NS}", "-r", f"image:={CAMERA}"]


def _read_store(got: Received, store: Path, diagnostics: dict[str, str]) -> Run:
    with open_store(store, read_only=True) as db:
        held = (db.get(i) for i in db.episode_ids())  # the episodes, not place keyframes
        records = sorted((r for r in held if r.kind == "episode"), key=lambda r: r.stamp_ns)
        embeddings = {r.id: db.embeddings(r.id) for r in records}
    jpegs = {r.id: [(store / p).read_bytes() for p in r.frame_paths] for r in records}
    return Run(got, records, embeddings, jpegs, diagnostics)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Run]:
    tmp_path = tmp_path_factory.mktemp("shapes")
    return {shape: _run(tmp_path, shape) for shape in SHAPES}


def test_nothing_was_dropped(runs: dict[str, Run]) -> None:
    for shape, run in runs.items():
        assert int(run.diagnostics.get("windows_dropped", 0)) == 0, shape
        assert int(run.diagnostics.get("embeddings_dropped", 0)) == 0, shape
        assert len(run.got.embeddings) == N_WINDOWS, shape


def test_same_embeddings_and_scores(runs: dict[str, Run]) -> None:
    split, one = runs["split"].got, runs["one_process"].got
    stamps = [time_to_ns(m.header.stamp) for m in split.embeddings]
    assert [time_to_ns(m.header.stamp) for m in one.embeddings] == stamps
    assert stamps == sorted(set(stamps)) and stamps[-1] == sf.stamps()[-1]
    for a, b in zip(split.embeddings, one.embeddings, strict=True):
        assert (a.model, a.pretrained, a.window_frames) == (b.model, b.pretrained, b.window_frames)
        # the catch-up batches may differ between the runs: equal up to float rounding
        np.testing.assert_allclose(np.asarray(b.embedding), a.embedding, rtol=1e-5, atol=1e-6)
    assert [time_to_ns(s.header.stamp) for s in one.scores] == [
        time_to_ns(s.header.stamp) for s in split.scores
    ]
    for a, b in zip(split.scores, one.scores, strict=True):
        assert b.score == pytest.approx(a.score, rel=1e-4)
        assert b.threshold == pytest.approx(a.threshold, rel=1e-4, nan_ok=True)
        assert b.history == a.history


def test_same_events(runs: dict[str, Run]) -> None:
    split, one = runs["split"].got, runs["one_process"].got
    assert split.events, "the stream has a scene change: at least one event"
    assert [time_to_ns(e.header.stamp) for e in one.events] == [
        time_to_ns(e.header.stamp) for e in split.events
    ]
    change = sf.stamps()[sf.CHANGE_AT]
    assert any(abs(time_to_ns(e.header.stamp) - change) <= 4 * 10**9 // sf.FPS for e in one.events)
    for a, b in zip(split.events, one.events, strict=True):
        assert b.score == pytest.approx(a.score, rel=1e-4)
        assert b.threshold == pytest.approx(a.threshold, rel=1e-4, nan_ok=True)
        assert b.pose_valid and a.pose_valid
        assert b.pose_source == a.pose_source == "odometry"
        assert b.header.frame_id == a.header.frame_id == "odom"
        assert b.pose.position.x == pytest.approx(a.pose.position.x)
        assert b.encoder_model == a.encoder_model and not b.encoder_pretrained


def test_same_episodes_published_and_stored(runs: dict[str, Run]) -> None:
    split, one = runs["split"], runs["one_process"]
    published = {
        shape: [
            (time_to_ns(e.header.stamp), [time_to_ns(t) for t in e.frame_stamps])
            for e in run.got.episodes
        ]
        for shape, run in runs.items()
    }
    assert published["one_process"] == published["split"]
    # the stores: the episodes published while running, plus at most one that shutdown
    # stored (an event the gate still held when the stream ended)
    live = {t for t, _ in published["split"]}
    pairs = [
        (a, b)
        for a in split.records
        for b in one.records
        if a.stamp_ns == b.stamp_ns and a.stamp_ns in live
    ]
    assert len(pairs) == len(live) >= 1
    for a, b in pairs:
        assert b.frame_stamps_ns == a.frame_stamps_ns and len(b.frame_stamps_ns) == 8
        assert (b.start_ns, b.end_ns) == (a.start_ns, a.end_ns)
        assert b.surprise == pytest.approx(a.surprise, rel=1e-4)
        assert b.pose_valid and b.pose.position == pytest.approx(a.pose.position)
        assert (b.encoder_model, b.embedder_model) == (a.encoder_model, a.embedder_model)
        # the same frames, kept as the same pixels: the same JPEG files and PE-Core vectors
        assert one.jpegs[b.id] == split.jpegs[a.id]
        np.testing.assert_allclose(one.embeddings[b.id], split.embeddings[a.id], atol=1e-5)
    for run in (split, one):
        assert len(live) <= len(run.records) <= len(live) + 1


def test_the_pipeline_node_over_its_lifecycle_services(tmp_path: Path) -> None:
    ns = LIFECYCLE_NS
    params = _params(tmp_path, "lifecycle", tmp_path / "store", autostart=False)
    args = [node_executable("pipeline_node"), "--ros-args", "--params-file", str(params)]
    args += ["-r", f"__ns:={ns}", "-r", f"image:={CAMERA}"]
    rclpy.init()
    node = Node("pipeline_lifecycle_test")
    scores: list[SurpriseScore] = []
    node.create_subscription(SurpriseScore, f"{ns}/surprise", scores.append, RELIABLE)
    camera = node.create_publisher(Image, CAMERA, RELIABLE)
    frames = sf.scene_change_frames()
    try:
        with peer_process(args, tmp_path, "pipeline_node") as proc:
            manager = _Manager(node, "pipeline_node")
            manager.wait()
            manager.configure_then_activate(f"{ns}/episodes", camera.get_subscription_count)
            wait_for_subscribers(node, camera, 1)
            for _, msg in frames[:40]:
                camera.publish(msg)
                spin_until(node, lambda: False, 1.0 / sf.FPS)
            want = 40 - sf.ENCODER["clip_frames"] + 1 - sf.SCORER["window"]
            assert spin_until(node, lambda: len(scores) >= want, 30.0), len(scores)
            _go_to_episode_is_served(node, ns)
            assert manager.transition(Transition.TRANSITION_DEACTIVATE)
            assert spin_until(node, lambda: camera.get_subscription_count() == 0, 10.0)
            manager.cleanup_configure_shutdown(f"{ns}/surprise")
            assert proc.poll() is None
    finally:
        node.destroy_node()
        rclpy.shutdown()
    assert len(scores) == want
    stamps = [time_to_ns(s.header.stamp) for s in scores]
    assert stamps == sorted(stamps) and np.isfinite([s.score for s in scores]).all()
    assert (tmp_path / "store").is_dir()


def _go_to_episode_is_served(node: Node, ns: str) -> None:
    """pipeline_node serves go_to_episode as memory_node does (test_go_to_episode.py)."""
    client = GoToEpisodeClient(node, f"{ns}/go_to_episode", timeout=20.0)
    try:
        with pytest.raises(GoalRefusedError, match="random weights"):  # its embedder's
            client.go_to(text="a yellow square")
        with pytest.raises(GoalRefusedError, match="no episode of robot"):
            client.go_to(start=sf.T0, end=sf.T0 + 10**9)
    finally:
        client.destroy()


@pytest.mark.skipif(not HAVE_TF2, reason="tf2_ros is not installed (it comes with an apt ROS 2)")
def test_the_pipeline_node_takes_event_poses_from_tf(tmp_path: Path) -> None:
    """The pose source works as in scorer_node: tf at the peak stamp wins over odometry."""
    from tf2_ros import TransformBroadcaster

    params = _params(tmp_path, "tf", tmp_path / "store")
    node, got, camera, odom = driver("pipeline_tf_test")
    tf = TransformBroadcaster(node)
    try:
        with peer_process(_args("pipeline_node", params), tmp_path, "pipeline_node") as proc:
            wait_for_subscribers(node, camera, 1, timeout=90)
            wait_for_subscribers(node, tf.pub_tf)
            wait_for_publishers(node, got.subscriptions, 1, timeout=60)
            # each transform just before its frame, as a robot's tf leads its camera
            publish_stream(node, camera, odom, lambda i, t: tf.sendTransform(_transform(t, i)))
            assert spin_until(node, lambda: bool(got.episodes), 60.0), "no episode"
            assert proc.poll() is None
    finally:
        node.destroy_node()
        rclpy.shutdown()
    for e in got.events:
        i = sf.stamps().index(time_to_ns(e.header.stamp))
        assert e.pose_valid and e.pose_source == "tf", e.pose_source
        assert e.header.frame_id == "map" and e.pose.position.y == pytest.approx(0.05 * i)
    episode = got.episodes[0]
    assert episode.pose_valid and episode.header.frame_id == "map"
    assert episode.pose.position.y == pytest.approx(
        0.05 * sf.stamps().index(time_to_ns(episode.header.stamp))
    )
