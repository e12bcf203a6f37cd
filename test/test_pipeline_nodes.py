"""The three node executables over real DDS: camera in, scores, events, episodes, retrieval.

The nodes run with the tiny model presets (random weights). What they publish is compared
with the core objects run in this process on the same frames: the nodes only convert
messages, so the results must be the same.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import rclpy
import synthetic_frames as sf
import yaml
from diagnostic_msgs.msg import DiagnosticArray
from nav_msgs.msg import Odometry
from rclpy.node import Node
from rclpy.qos import QoSProfile, ReliabilityPolicy
from ros_helpers import (
    FIXTURES,
    node_executable,
    peer_process,
    spin_until,
    wait_for_publishers,
    wait_for_subscribers,
)
from rosbags.rosbag2 import Writer
from rosbags.typesys import Stores, get_typestore
from sensor_msgs.msg import Image

from surprise_memory.agents.ros_client import EpisodicMemoryClient
from surprise_memory.config import EncoderConfig, GateConfig, ScorerConfig
from surprise_memory.errors import InputError
from surprise_memory.msg import Episode, FrameEmbedding, SurpriseEvent, SurpriseScore
from surprise_memory.nodes.messages import image_msg_from_rgb, ns_to_time, time_to_ns
from surprise_memory.offline.pipeline import PipelineSettings, process
from surprise_memory.offline.run_record import load_run_record
from surprise_memory.perception.encoders import VideoEncoder
from surprise_memory.surprise.gate import SurpriseGate, SurpriseTrigger
from surprise_memory.surprise.scorer import SurpriseScorer

NS = "/surprise_memory"
RELIABLE = QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE)
CAMERA = "/test_camera/image_raw"


@dataclass
class Received:
    embeddings: list[FrameEmbedding] = field(default_factory=list)
    scores: list[SurpriseScore] = field(default_factory=list)
    events: list[SurpriseEvent] = field(default_factory=list)
    episodes: list[Episode] = field(default_factory=list)
    diagnostics: dict[str, dict[str, str]] = field(default_factory=dict)
    subscriptions: list[Any] = field(default_factory=list)
    """The subscriptions to the pipeline's outputs (embedding, surprise, events, episodes)."""

    def on_diag(self, msg: DiagnosticArray) -> None:
        for status in msg.status:
            self.diagnostics[status.name.split(": ")[-1]] = {
                kv.key: kv.value for kv in status.values
            }

    def count(self, node: str, key: str) -> int:
        return int(self.diagnostics.get(node, {}).get(key, 0))


@pytest.fixture(scope="module")
def core_reference() -> dict[str, Any]:
    """Embeddings and events of the core objects on the test stream."""
    config = EncoderConfig(**sf.ENCODER)
    encoder = VideoEncoder.from_config(config)
    sampler = encoder.make_sampler(config)
    scorer = SurpriseScorer.from_config(ScorerConfig.from_mapping(sf.SCORER))
    gate = SurpriseGate.from_config(GateConfig.from_mapping(sf.SCORER))
    embeddings, events = {}, []
    from surprise_memory.perception.frames import Frame

    for t, rgb in zip(sf.stamps(), sf.scene_change_rgb(), strict=True):
        window = sampler.push(Frame(rgb, t))
        if window is None:
            continue
        z = encoder.encode_window(window.frames, prepared=True)
        embeddings[t] = z
        r = scorer.update(z)
        if r is not None:
            events += gate.push(t, r.score, r.kl)
    change = sf.stamps()[sf.CHANGE_AT]
    assert any(abs(e.stamp_ns - change) <= 4 * 10**9 // sf.FPS for e in events), events
    return {"embeddings": embeddings, "events": events}


def _start_nodes(tmp_path: Path, store: Path, extra: dict[str, Any]) -> list[list[str]]:
    params = tmp_path / "params.yaml"
    # a JSON round trip gives every node its own copies: YAML aliases break rcl's parser
    values = json.loads(json.dumps(sf.node_params(str(store), CAMERA, **extra)))
    params.write_text(yaml.safe_dump(values))
    commands = []
    for name in ("encoder_node", "scorer_node", "memory_node"):
        args = [node_executable(name), "--ros-args", "--params-file", str(params)]
        args += ["-r", f"__ns:={NS}", "-r", f"image:={CAMERA}"]
        commands.append(args)
    return commands


def _subscribe(node: Node, got: Received) -> None:
    got.subscriptions = [
        node.create_subscription(msg_type, f"{NS}/{topic}", on_msg, RELIABLE)
        for msg_type, topic, on_msg in (
            (FrameEmbedding, "embedding", got.embeddings.append),
            (SurpriseScore, "surprise", got.scores.append),
            (SurpriseEvent, "events", got.events.append),
            (Episode, "episodes", got.episodes.append),
        )
    ]
    node.create_subscription(DiagnosticArray, "/diagnostics", got.on_diag, 50)


def _core_events(embeddings: list[np.ndarray], stamps: list[int]) -> list[SurpriseTrigger]:
    scorer = SurpriseScorer.from_config(ScorerConfig.from_mapping(sf.SCORER))
    gate = SurpriseGate.from_config(GateConfig.from_mapping(sf.SCORER))
    events: list[SurpriseTrigger] = []
    for t, z in zip(stamps, embeddings, strict=True):
        r = scorer.update(z)
        if r is not None:
            events += gate.push(t, r.score, r.kl)
    return events


def _check_against_core(got: Received, ref: dict[str, Any]) -> None:
    # every embedding equals the core's for the window ending at its stamp
    stamps = [time_to_ns(m.header.stamp) for m in got.embeddings]
    assert stamps == sorted(set(stamps)) and set(stamps) <= set(ref["embeddings"])
    for msg in got.embeddings:
        expected = ref["embeddings"][time_to_ns(msg.header.stamp)]
        np.testing.assert_allclose(np.asarray(msg.embedding), expected, rtol=1e-5, atol=1e-6)
        assert msg.model.startswith("random:tiny") and not msg.pretrained
    # a score for every embedding after the scorer's warm-up
    assert len(got.scores) == len(stamps) - sf.SCORER["window"]
    # the scorer node's events are the core's on the embeddings it received; a window the
    # encoder dropped under load (latest wins, counted) is the only allowed difference
    dropped = got.count("encoder_node", "windows_dropped")
    assert dropped == len(ref["embeddings"]) - len(stamps)
    want = _core_events([np.asarray(m.embedding) for m in got.embeddings], stamps)
    if dropped == 0:
        assert [e.stamp_ns for e in want] == [e.stamp_ns for e in ref["events"]]
    have = [(time_to_ns(e.header.stamp), e.score) for e in got.events]
    assert [s for s, _ in have] == [e.stamp_ns for e in want][: len(have)]
    assert len(have) >= len(want) - 1  # the last may wait for a frame past its NMS radius
    for (_, a), e in zip(have, want, strict=False):
        assert a == pytest.approx(e.score, rel=1e-5)
    change = sf.stamps()[sf.CHANGE_AT]
    assert any(abs(s - change) <= 4 * 10**9 // sf.FPS for s, _ in have), have


def publish_stream(node: Node, camera: Any, odom: Any, each: Any = None) -> None:
    """Publish the test stream at camera rate, each frame with an odometry pose (x = 5 cm/frame).

    ``each(i, stamp)``, if given, runs before frame ``i`` is published (e.g. a tf broadcast).
    """
    for i, (t, msg) in enumerate(sf.scene_change_frames()):
        if each is not None:
            each(i, t)
        o = Odometry()
        o.header.stamp, o.header.frame_id = ns_to_time(t), "odom"
        o.pose.pose.position.x, o.pose.pose.orientation.w = 0.05 * i, 1.0
        odom.publish(o)
        camera.publish(msg)
        spin_until(node, lambda: False, 1.0 / sf.FPS)


def _wait_and_check(node: Node, got: Received, ref: dict[str, Any]) -> None:
    """Wait until every window is published or counted as dropped and an episode is stored,
    then compare with the core."""
    n_windows = len(ref["embeddings"])

    def all_windows() -> bool:
        return len(got.embeddings) + got.count("encoder_node", "windows_dropped") >= n_windows

    if not spin_until(node, all_windows, 60.0):
        have = {time_to_ns(m.header.stamp) for m in got.embeddings}
        missing = sorted(set(ref["embeddings"]) - have)
        raise AssertionError(
            f"{len(got.embeddings)} embeddings + "
            f"{got.count('encoder_node', 'windows_dropped')} dropped < {n_windows} windows; "
            f"missing stamps {missing[:10]}{'...' if len(missing) > 10 else ''}; "
            f"encoder {got.diagnostics.get('encoder_node')}"
        )
    assert spin_until(node, lambda: len(got.episodes) >= 1, 30.0), "no episode"
    # the scorer's last scores come after the last embedding: wait for them too
    scored = len(got.embeddings) - sf.SCORER["window"]
    spin_until(node, lambda: len(got.scores) >= scored, 10.0)
    _check_against_core(got, ref)


def driver(name: str) -> tuple[Node, Received, Any, Any]:
    """rclpy initialised and a test node: what it receives, its camera and odometry publishers."""
    rclpy.init()
    node = Node(name)
    got = Received()
    _subscribe(node, got)
    camera = node.create_publisher(Image, CAMERA, RELIABLE)
    odom = node.create_publisher(Odometry, "/odom", RELIABLE)
    return node, got, camera, odom


def test_live_pipeline_over_dds(tmp_path: Path, core_reference: dict[str, Any]) -> None:
    store = tmp_path / "store"
    node, got, camera, odom = driver("pipeline_test")
    client = EpisodicMemoryClient(node, f"{NS}/retrieve_episodes", timeout=20.0)
    commands = _start_nodes(tmp_path, store, {})
    try:
        with (
            peer_process(commands[0], tmp_path, "encoder_node") as enc,
            peer_process(commands[1], tmp_path, "scorer_node") as sco,
            peer_process(commands[2], tmp_path, "memory_node") as mem,
        ):
            wait_for_subscribers(node, camera, 2, timeout=60)
            wait_for_subscribers(node, odom, 1, timeout=60)
            wait_for_publishers(node, got.subscriptions, 1, timeout=60)
            spin_until(node, lambda: len(got.diagnostics) >= 3, 10.0)
            publish_stream(node, camera, odom)
            _wait_and_check(node, got, core_reference)

            # each event has the odometry pose at its stamp
            for e in got.events:
                assert e.pose_valid and e.pose_source == "odometry"
                i = sf.stamps().index(time_to_ns(e.header.stamp))
                assert e.pose.position.x == pytest.approx(0.05 * i)
                assert e.encoder_model.startswith("random:tiny")

            # an episode of 8 frames around its trigger, written to the store
            ep = got.episodes[0]
            trigger = time_to_ns(ep.header.stamp)
            assert trigger in [time_to_ns(e.header.stamp) for e in got.events]
            assert len(ep.frame_stamps) == 8 and len(ep.frame_uris) == 8
            assert time_to_ns(ep.start) <= trigger <= time_to_ns(ep.end)
            assert all((store / uri).is_file() for uri in ep.frame_uris)
            assert ep.pose_valid and not ep.frames

            # retrieval over the service, through the client
            found = client.retrieve(start=trigger - 10**8, end=trigger + 10**8, include_images=True)
            assert [e.id for e in found] == [ep.id]
            # the stored JPEGs travel as they are (CompressedImage), decoded only here
            images = found[0].decode_images()
            assert len(found[0].jpegs) == 8 and all(j[:2] == b"\xff\xd8" for j in found[0].jpegs)
            assert len(images) == 8 and images[0].shape == (sf.SIZE, sf.SIZE, 3)
            near = client.retrieve(near=(ep.pose.position.x, 0.0, 0.0), radius=0.01)
            assert [e.id for e in near] == [ep.id]
            assert len(client.retrieve(text="a yellow square", k=3)) >= 1
            by_image = client.retrieve(image=images[3], k=1)
            assert len(by_image) == 1 and by_image[0].score > 0.5
            with pytest.raises(InputError, match="refused"):
                client.retrieve(start=trigger, end=trigger - 1)
            with pytest.raises(InputError, match="radius"):
                client.retrieve(near=(0, 0, 0), radius=-1.0)

            # bad input over the wire: counted and skipped, the nodes keep running
            last = sf.stamps()[-1]
            rgb = np.zeros((sf.SIZE, sf.SIZE, 3), np.uint8)
            bad = [image_msg_from_rgb(rgb, last + 10**7 * k, "camera") for k in range(1, 5)]
            bad[0].encoding = "weird16"
            bad[1].width = bad[1].height = 0
            bad[1].data = b""
            bad[2].step = 7
            bad[3].header.stamp = ns_to_time(last - 10**9)  # back in time
            for msg in bad:
                camera.publish(msg)
            assert spin_until(
                node, lambda: got.count("encoder_node", "rejected_image") >= 3, 20.0
            ), got.diagnostics.get("encoder_node")
            assert spin_until(node, lambda: got.count("memory_node", "resets") >= 1, 20.0)
            assert got.count("memory_node", "rejected_image") >= 3
            assert all(p.poll() is None for p in (enc, sco, mem)), "a node died on bad input"
    finally:
        client.destroy()
        node.destroy_node()
        rclpy.shutdown()


def _write_bag(path: Path) -> None:
    store = get_typestore(Stores.ROS2_KILTED)
    image_t = store.types["sensor_msgs/msg/Image"]
    header_t = store.types["std_msgs/msg/Header"]
    time_t = store.types["builtin_interfaces/msg/Time"]
    with Writer(path, version=8) as writer:
        conn = writer.add_connection(CAMERA, image_t.__msgtype__, typestore=store)
        for t, rgb in zip(sf.stamps(), sf.scene_change_rgb(), strict=True):
            stamp = time_t(sec=t // 10**9, nanosec=t % 10**9)
            msg = image_t(
                header=header_t(stamp=stamp, frame_id="camera"),
                height=rgb.shape[0],
                width=rgb.shape[1],
                encoding="rgb8",
                is_bigendian=0,
                step=rgb.shape[1] * 3,
                data=rgb.reshape(-1),
            )
            writer.write(conn, t, store.serialize_cdr(msg, image_t.__msgtype__))


def test_bag_replay_with_sim_time_gives_the_live_results(
    tmp_path: Path, core_reference: dict[str, Any]
) -> None:
    bag = tmp_path / "bag"
    _write_bag(bag)
    rclpy.init()
    node = Node("replay_test")
    got = Received()
    _subscribe(node, got)
    commands = _start_nodes(tmp_path, tmp_path / "store", {"use_sim_time": True})
    player = [str(FIXTURES / "bag_player.py"), str(bag), "--wait-subscribers", "2"]
    try:
        with (
            peer_process(commands[0], tmp_path, "encoder_node"),
            peer_process(commands[1], tmp_path, "scorer_node"),
            peer_process(commands[2], tmp_path, "memory_node"),
        ):
            # the outputs' publishers matched first: an embedding sent before is lost to us
            wait_for_publishers(node, got.subscriptions, 1, timeout=60)
            spin_until(node, lambda: len(got.diagnostics) >= 3, 20.0)
            with peer_process(player, tmp_path, "bag_player") as play:
                assert spin_until(node, lambda: play.poll() is not None, 60.0)
                assert play.returncode == 0
            _wait_and_check(node, got, core_reference)
            assert all(not math.isnan(e.score) for e in got.events)
    finally:
        node.destroy_node()
        rclpy.shutdown()

    # the offline command on the same bag with the same settings: the same events
    settings = {**sf.ENCODER, **sf.SCORER, **sf.EPISODE, **sf.EMBEDDER}
    process(bag, tmp_path / "offline_store", PipelineSettings.from_mapping(settings))
    offline = load_run_record(tmp_path / "offline_store")["events"]
    core = core_reference["events"]
    # the offline run also flushes the gate at the end of the bag: at most one more event
    assert [e["stamp_ns"] for e in offline][: len(core)] == [e.stamp_ns for e in core]
    assert len(core) <= len(offline) <= len(core) + 1
    for a, b in zip(offline, core, strict=False):
        assert a["score"] == pytest.approx(b.score, rel=1e-5)
    if got.count("encoder_node", "windows_dropped") == 0:
        live = [time_to_ns(e.header.stamp) for e in got.events]
        assert live == [e["stamp_ns"] for e in offline][: len(live)]
        assert len(live) >= len(offline) - 1
