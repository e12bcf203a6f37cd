"""scorer_node as a process over DDS: scores, events equal to the core's, poses, bad input."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import rclpy
import yaml
from diagnostic_msgs.msg import DiagnosticArray
from nav_msgs.msg import Odometry
from rclpy.node import Node
from rclpy.qos import QoSProfile, ReliabilityPolicy
from ros_helpers import node_executable, peer_process, spin_until, wait_for_subscribers

from surprise_memory.msg import FrameEmbedding, SurpriseEvent, SurpriseScore
from surprise_memory.nodes.messages import ns_to_time
from surprise_memory.surprise.gate import SurpriseGate
from surprise_memory.surprise.scorer import SurpriseScorer

NS = "/surprise_memory"
RELIABLE = QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE)
PARAMS = {"window": 8, "gamma": 2.0, "warmup": 16, "nms_seconds": 0.5}
FPS = 20
T0 = 1_700_000_000 * 10**9  # a realistic epoch stamp


def _stream(n: int, change_at: int, dim: int = 32) -> np.ndarray:
    """Smooth embeddings with one scene change (like a video encoder's window embeddings)."""
    rng = np.random.default_rng(3)
    base = np.where(np.arange(n)[:, None] < change_at, 0.0, 3.0) + 0.1 * rng.normal(size=(n, dim))
    kernel = np.ones(4) / 4
    return np.apply_along_axis(lambda c: np.convolve(c, kernel)[:n], 0, base).astype(np.float32)


def _core_events(z: np.ndarray, stamps: list[int]) -> list[tuple[int, float]]:
    scorer = SurpriseScorer(window=PARAMS["window"])
    gate = SurpriseGate(
        gamma=PARAMS["gamma"], warmup=PARAMS["warmup"], nms_seconds=PARAMS["nms_seconds"]
    )
    out = []
    for t, zi in zip(stamps, z, strict=True):
        r = scorer.update(zi)
        if r is not None:
            out += [(e.stamp_ns, e.score) for e in gate.push(t, r.score)]
    return out


def _embedding(stamp: int, z: np.ndarray, padded: int = 0) -> FrameEmbedding:
    msg = FrameEmbedding(model="test", pretrained=False, window_frames=8, padded_frames=padded)
    msg.header.stamp = ns_to_time(stamp)
    msg.header.frame_id = "camera"
    msg.embedding = z.tolist()
    return msg


def _counts(diag: list[DiagnosticArray]) -> dict[str, str]:
    for arr in reversed(diag):
        for status in arr.status:
            if "scorer_node" in status.name:
                return {kv.key: kv.value for kv in status.values}
    return {}


def test_scorer_node_over_dds(tmp_path: Path) -> None:
    params = tmp_path / "params.yaml"
    params.write_text(yaml.safe_dump({"/**/scorer_node": {"ros__parameters": PARAMS}}))
    n, change_at = 160, 100
    z = _stream(n, change_at)
    stamps = [T0 + i * 10**9 // FPS for i in range(n)]
    expected = _core_events(z, stamps)
    assert any(abs(s - stamps[change_at]) <= 3 * 10**9 // FPS for s, _ in expected), expected

    rclpy.init()
    node = Node("scorer_node_test")
    scores: list[SurpriseScore] = []
    events: list[SurpriseEvent] = []
    diag: list[DiagnosticArray] = []
    node.create_subscription(SurpriseScore, f"{NS}/surprise", scores.append, RELIABLE)
    node.create_subscription(SurpriseEvent, f"{NS}/events", events.append, RELIABLE)
    node.create_subscription(DiagnosticArray, "/diagnostics", diag.append, 10)
    emb_pub = node.create_publisher(FrameEmbedding, f"{NS}/embedding", RELIABLE)
    odom_pub = node.create_publisher(Odometry, "/odom", RELIABLE)
    args = [node_executable("scorer_node"), "--ros-args", "--params-file", str(params)]
    args += ["-r", f"__ns:={NS}"]
    try:
        with peer_process(args, tmp_path, "scorer_node") as proc:
            wait_for_subscribers(node, emb_pub)
            wait_for_subscribers(node, odom_pub)
            # warm-up windows padded with their first frame (clip_warmup: pad) come first:
            # never scored, so they change nothing below (issue 12, item 9)
            for k in range(7):
                stamp = T0 - (7 - k) * 10**9 // FPS
                emb_pub.publish(_embedding(stamp, 100.0 * z[0], padded=7 - k))
            for i in range(n):
                odom = Odometry()
                odom.header.stamp = ns_to_time(stamps[i])
                odom.header.frame_id = "odom"
                odom.pose.pose.position.x = i * 0.1  # 2 m/s along x
                odom.pose.pose.orientation.w = 1.0
                odom_pub.publish(odom)
                emb_pub.publish(_embedding(stamps[i], z[i]))
                spin_until(node, lambda: False, 0.005)
            # bad input: NaN, wrong dimension, duplicate stamp; then time going backwards
            bad = z[-1].copy()
            bad[0] = math.nan
            emb_pub.publish(_embedding(stamps[-1] + 1, bad))
            emb_pub.publish(_embedding(stamps[-1] + 2, np.zeros(5, np.float32)))
            emb_pub.publish(_embedding(stamps[-1], z[-1]))
            emb_pub.publish(_embedding(T0, z[0]))

            def settled() -> bool:
                c = _counts(diag)
                return int(c.get("resets", 0)) == 1 and len(scores) >= n - PARAMS["window"]

            assert spin_until(node, settled, timeout=30.0), _counts(diag)
            assert proc.poll() is None, "the node died on bad input"
    finally:
        node.destroy_node()
        rclpy.shutdown()

    # a score for every frame after the W warm-up frames, in order, stamps copied
    assert [m.header.stamp for m in scores] == [ns_to_time(s) for s in stamps[PARAMS["window"] :]]
    assert all(m.header.frame_id == "camera" for m in scores)
    assert all(math.isnan(m.threshold) for m in scores[: PARAMS["warmup"] - 1])
    assert all(not math.isnan(m.threshold) for m in scores[PARAMS["warmup"] :])
    # the same events as the core on the same stream (the last may still be pending)
    got = [(e.header.stamp.sec * 10**9 + e.header.stamp.nanosec, e.score) for e in events]
    assert [s for s, _ in got] == [s for s, _ in expected][: len(got)]
    assert len(got) >= len(expected) - 1 >= 0
    for (_, a), (_, b) in zip(got, expected, strict=False):
        assert a == np.float32(b)
    # the pose of each event is the odometry at the peak stamp
    for e in events:
        i = stamps.index(e.header.stamp.sec * 10**9 + e.header.stamp.nanosec)
        assert e.pose_valid and e.pose_source == "odometry" and e.header.frame_id == "odom"
        assert e.pose.position.x == i * 0.1
        assert e.decided.sec * 10**9 + e.decided.nanosec > stamps[i]
    counts = _counts(diag)
    assert counts["padded_skipped"] == "7"
    assert counts["rejected_embedding"] == "2"
    assert counts["rejected_duplicate_stamp"] == "1"
