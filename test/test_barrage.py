"""A barrage of malformed input against the three live nodes (issue 12).

10,000 malformed messages over every subscribed topic (camera images with unknown or depth
encodings, zero sizes, wrong ``step``, short data; embeddings with NaN, inf or the wrong
dimension; events with non-finite scores; odometry with NaN poses), interleaved with the
good camera stream, then 1,000 malformed service requests, then stamps going backwards and
jumping: zero crashes, every rejection counted by reason, and the good messages give the
same embeddings and events as the core objects run on them alone.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import rclpy
import synthetic_frames as sf
from nav_msgs.msg import Odometry
from rclpy.node import Node
from ros_helpers import peer_process, spin_until, wait_for_subscribers
from sensor_msgs.msg import Image
from test_pipeline_nodes import (
    CAMERA,
    NS,
    RELIABLE,
    Received,
    _start_nodes,
    _subscribe,
    _wait_and_check,
    core_reference,  # noqa: F401 - the module fixture, used by name
)

from surprise_memory.msg import FrameEmbedding, SurpriseEvent
from surprise_memory.nodes.messages import image_msg_from_rgb, ns_to_time
from surprise_memory.nodes.qos import LATCHED
from surprise_memory.srv import RetrieveEpisodes

BAD_IMAGES_PER_FRAME = 41
BAD_EMBEDDINGS_PER_FRAME = 12
BAD_EVENTS_PER_FRAME = 6
BAD_ODOMETRY_PER_FRAME = 4
BAD_REQUESTS = 1000
FUTURE = sf.stamps()[-1] + 3600 * 10**9  # bad embeddings' stamps: never a time jump back


def _bad_image(k: int, stamp: int) -> Image:
    msg = image_msg_from_rgb(np.zeros((sf.SIZE, sf.SIZE, 3), np.uint8), stamp, "camera")
    kind = k % 5
    if kind == 0:
        msg.encoding = "weird16"
    elif kind == 1:
        msg.width = msg.height = 0
        msg.data = b""
    elif kind == 2:
        msg.step = 7
    elif kind == 3:
        msg.data = bytes(msg.data[:100])
    else:
        msg.encoding = "16UC1"  # a depth image on the colour topic
    return msg


def _bad_embedding(k: int) -> FrameEmbedding:
    z = np.ones(64, np.float32)
    kind = k % 4
    if kind == 0:
        z[3] = math.nan
    elif kind == 1:
        z[0] = math.inf
    elif kind == 2:
        z = z[:5]
    else:
        z = z[:0]
    msg = FrameEmbedding(model="bad", pretrained=False, window_frames=8)
    msg.header.stamp = ns_to_time(FUTURE + k)
    msg.embedding = z.tolist()
    return msg


def _bad_event(k: int, stamp: int) -> SurpriseEvent:
    msg = SurpriseEvent(score=(math.nan, math.inf, -math.inf)[k % 3], threshold=1.0)
    msg.header.stamp = ns_to_time(stamp)
    msg.pose.orientation.w = 1.0
    return msg


def _bad_odometry(k: int, stamp: int) -> Odometry:
    msg = Odometry()
    msg.header.stamp, msg.header.frame_id = ns_to_time(stamp), "odom"
    msg.pose.pose.position.x = math.nan if k % 2 else 0.0
    msg.pose.pose.orientation.w = math.inf if k % 2 == 0 else 1.0
    return msg


def _bad_request(k: int) -> RetrieveEpisodes.Request:
    req = RetrieveEpisodes.Request()
    kind = k % 6
    if kind == 0:  # text and image at once
        req.text = "a door"
        req.image = image_msg_from_rgb(np.zeros((8, 8, 3), np.uint8))
    elif kind == 1:
        req.max_results = 10**6  # above the cap
    elif kind == 2:
        req.use_location, req.radius = True, -1.0
    elif kind == 3:
        req.image = _bad_image(0, 0)  # unknown encoding
    elif kind == 4:
        req.start, req.end = ns_to_time(2 * 10**18), ns_to_time(10**18)  # end before start
    else:
        req.use_location, req.location.x = True, math.nan
    return req


def test_barrage_of_malformed_input(tmp_path: Path, core_reference: dict[str, Any]) -> None:  # noqa: F811
    store = tmp_path / "store"
    rclpy.init()
    node = Node("barrage_test")
    got = Received()
    _subscribe(node, got)
    camera = node.create_publisher(Image, CAMERA, RELIABLE)
    embeddings = node.create_publisher(FrameEmbedding, f"{NS}/embedding", RELIABLE)
    events = node.create_publisher(SurpriseEvent, f"{NS}/events", LATCHED)
    odom = node.create_publisher(Odometry, "/odom", RELIABLE)
    service = node.create_client(RetrieveEpisodes, f"{NS}/retrieve_episodes")
    reliable = {"reliability": "reliable", "history": "keep_last", "depth": 1000}
    overrides = {
        "qos_overrides": {CAMERA: {"subscription": reliable}, "/odom": {"subscription": reliable}}
    }
    commands = _start_nodes(tmp_path, store, overrides)
    sent = {"image": 0, "embedding": 0, "event": 0, "odometry": 0}
    try:
        with (
            peer_process(commands[0], tmp_path, "encoder_node") as enc,
            peer_process(commands[1], tmp_path, "scorer_node") as sco,
            peer_process(commands[2], tmp_path, "memory_node") as mem,
        ):
            # model loading on a loaded 2-core machine can take minutes
            wait_for_subscribers(node, camera, 2, timeout=240)
            for pub in (embeddings, events, odom):
                wait_for_subscribers(node, pub, 1, timeout=240)
            for t, msg in sf.scene_change_frames():
                for k in range(BAD_IMAGES_PER_FRAME):
                    camera.publish(_bad_image(k, t + k + 1))
                for k in range(BAD_EMBEDDINGS_PER_FRAME):
                    embeddings.publish(_bad_embedding(sent["embedding"] + k))
                for k in range(BAD_EVENTS_PER_FRAME):
                    events.publish(_bad_event(k, t - 10**6 * (k + 1)))
                for k in range(BAD_ODOMETRY_PER_FRAME):
                    odom.publish(_bad_odometry(k, t + k))
                sent["image"] += BAD_IMAGES_PER_FRAME
                sent["embedding"] += BAD_EMBEDDINGS_PER_FRAME
                sent["event"] += BAD_EVENTS_PER_FRAME
                sent["odometry"] += BAD_ODOMETRY_PER_FRAME
                camera.publish(msg)
                # paced so the nodes' reliable keep-last queues (depth 1000) never overflow:
                # a rejection costs a node about 3 ms on this 2-core machine under load
                spin_until(node, lambda: False, 0.25)
            assert sum(sent.values()) >= 10_000

            # the good messages give the core's results, as without the barrage (the nodes
            # work through 10,000 rejections first: give them time)
            def all_windows() -> bool:
                done = len([m for m in got.embeddings if m.model != "bad"])
                dropped = got.count("encoder_node", "windows_dropped")
                return done + dropped >= len(core_reference["embeddings"])

            assert spin_until(node, all_windows, 240.0), got.diagnostics.get("encoder_node")
            good = Received(
                embeddings=[m for m in got.embeddings if m.model != "bad"],
                scores=got.scores,
                events=[e for e in got.events if math.isfinite(e.score)],
                episodes=got.episodes,
                diagnostics=got.diagnostics,
            )
            _wait_and_check(node, good, core_reference)

            # every rejection counted by reason
            def counted() -> bool:
                return (
                    got.count("encoder_node", "rejected_image") == sent["image"]
                    and got.count("memory_node", "rejected_image") == sent["image"]
                    and got.count("scorer_node", "rejected_embedding") == sent["embedding"]
                    and got.count("memory_node", "rejected_event") == sent["event"]
                    and got.count("scorer_node", "rejected_odometry") == sent["odometry"]
                )

            assert spin_until(node, counted, 60.0), (sent, got.diagnostics)

            # 1,000 malformed service requests: each answered success=false with a reason
            assert service.wait_for_service(timeout_sec=30.0)
            answers = []
            for start in range(0, BAD_REQUESTS, 10):  # services keep the last 10 requests
                futures = [service.call_async(_bad_request(k)) for k in range(start, start + 10)]
                assert spin_until(node, lambda fs=futures: all(f.done() for f in fs), 120.0)
                answers += [f.result() for f in futures]
            assert len(answers) == BAD_REQUESTS
            assert all(not a.success and a.message for a in answers)

            def refused() -> bool:
                return got.count("memory_node", "retrievals_refused") == BAD_REQUESTS

            assert spin_until(node, refused, 30.0), got.diagnostics.get("memory_node")

            # stamps going backwards (a looped bag) and jumping ahead: resets, no crash
            frames = sf.scene_change_frames()
            for t, msg in frames[:20] + [(t + 10**12, m) for t, m in frames[20:40]]:
                msg.header.stamp = ns_to_time(t)
                camera.publish(msg)
                spin_until(node, lambda: False, 1.0 / sf.FPS)
            assert spin_until(node, lambda: got.count("encoder_node", "resets") >= 1, 30.0)
            assert spin_until(node, lambda: got.count("memory_node", "resets") >= 1, 30.0)
            assert all(p.poll() is None for p in (enc, sco, mem)), "a node died"
    finally:
        node.destroy_node()
        rclpy.shutdown()
