"""Episodes on the robot's displays over real DDS: ``episode_markers`` and the preview.

The node executables run as processes on a store that already holds three episodes (one
in ``map``, one in ``odom``, one without a pose). The test subscribes only after the node
has configured, as a display opened late would, and must still receive:

* the markers of the episodes with a pose, at their poses in their frames, and none for
  the one without (``memory_node`` and ``pipeline_node``);
* the newest episode's stored frames on ``episode_preview/compressed``, valid JPEGs,
  replayed while the display subscribes.

Then (``memory_node``) an event with a pose makes a new episode: its arrow appears at the
event's pose, and the store's budget (``max_episodes: 3``) evicts the lowest-surprise
episode, whose marker is gone from the next message; a display that subscribes after
that receives the new state at once; the new episode's frames arrive on the preview.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import pytest
import rclpy
import synthetic_frames as sf
import yaml
from rclpy.node import Node
from ros_helpers import (
    node_executable,
    peer_process,
    spin_until,
    wait_for_publishers,
    wait_for_subscribers,
)
from sensor_msgs.msg import CompressedImage, Image
from test_display_configs import EXPORT_ONLY, TYPES, launch_defaults, referenced_topics
from test_memory_node import CAMERA, FPS, RELIABLE, T_CAM, _image, _params
from visualization_msgs.msg import Marker, MarkerArray

from surprise_memory.memory.episode_markers import short_id
from surprise_memory.memory.episodes import trigger_frame_index
from surprise_memory.memory.pose import Pose
from surprise_memory.memory.store import EpisodeStore
from surprise_memory.msg import SurpriseEvent
from surprise_memory.nodes.episode_display import ARROWS_NS, LABELS_NS
from surprise_memory.nodes.messages import ns_to_time, time_to_ns
from surprise_memory.nodes.qos import LATCHED, MARKERS, PREVIEW
from surprise_memory.perception.encoders import SYNTHETIC_EMBEDDER_MODEL, ImageTextEmbedder
from surprise_memory.perception.frames import Frame

NS = "/surprise_memory"
S = 10**9
# episodes already in the store: (pose, surprise, threshold, trigger stamp)
STORED = {
    "low": (Pose(1.0, 2.0, 0.0, 0.0, 0.0, 0.0, 1.0, "map"), 2.0, 1.0, 100 * S),
    "odom": (Pose(3.0, 4.0, 0.0, 0.0, 0.0, 0.7071, 0.7071, "odom"), 6.0, 2.0, 200 * S),
    "no_pose": (None, 5.0, 1.0, 300 * S),
}
SHORT = {name: short_id(f"ep-{name}") for name in STORED}  # as the labels give them
EVENT_POSE = (5.0, 6.0, 0.0)
TRIGGER = 30  # camera frame of the live event


@pytest.fixture(scope="module")
def filled_store(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, list[int]]]:
    """A store with the three episodes, made once; name -> frame stamps.

    Embedded once by the nodes' tiny embedder (the nodes refuse a store of another
    embedder); every episode keeps those embeddings, which the displays do not use.
    """
    store = tmp_path_factory.mktemp("filled") / "store"
    embedder = ImageTextEmbedder(SYNTHETIC_EMBEDDER_MODEL, "random", device="cpu")
    pixels = [np.full((48, 64, 3), 40 * i, np.uint8) for i in range(4)]
    embeddings = embedder.embed_images(pixels)
    stamps = {}
    with EpisodeStore(store) as db:
        for name, (pose, surprise, threshold, t) in STORED.items():
            frames = [Frame(rgb, t + i * S // 4) for i, rgb in enumerate(pixels)]
            db.add(
                frames,
                embeddings,
                stamp_ns=t,
                surprise=surprise,
                threshold=threshold,
                pose=pose,
                embedder_model=embedder.model_name,
                embedder_pretrained=embedder.pretrained,
                episode_id=f"ep-{name}",
            )
            stamps[name] = [f.stamp_ns for f in frames]
    return store, stamps


def _copy(filled: tuple[Path, dict[str, list[int]]], tmp_path: Path) -> Path:
    store = tmp_path / "store"
    shutil.copytree(filled[0], store)
    return store


class _Display:
    """What a display (RViz, Foxglove) subscribed late receives."""

    def __init__(self, node: Node) -> None:
        self.arrays: list[MarkerArray] = []
        self.frames: list[CompressedImage] = []
        self.subs = [
            node.create_subscription(
                MarkerArray, f"{NS}/episode_markers", self.arrays.append, MARKERS
            ),
            node.create_subscription(
                CompressedImage, f"{NS}/episode_preview/compressed", self.frames.append, PREVIEW
            ),
        ]

    def arrows(self) -> dict[str, Marker]:
        """The arrows of the last message, by the short id in their labels."""
        (delete_all, *markers) = self.arrays[-1].markers
        assert delete_all.action == Marker.DELETEALL  # every message replaces the whole set
        labels = {m.id: m.text for m in markers if m.ns == LABELS_NS}
        arrows = [m for m in markers if m.ns == ARROWS_NS]
        assert len(labels) == len(arrows) and {m.id for m in arrows} == set(labels)
        return {labels[m.id].split("\n")[0].split()[-1]: m for m in arrows}

    def shows(self, names: set[str]) -> bool:
        return bool(self.arrays) and set(self.arrows()) == {SHORT[n] for n in names}

    def preview_of(self, stamps: list[int]) -> list[CompressedImage]:
        return [f for f in self.frames if time_to_ns(f.header.stamp) in stamps]


def _check_arrow(arrow: Marker, frame: str, xyz: tuple[float, float, float]) -> None:
    assert arrow.header.frame_id == frame
    p = arrow.pose.position
    assert (p.x, p.y, p.z) == xyz
    assert arrow.type == Marker.ARROW and arrow.action == Marker.ADD
    assert time_to_ns(arrow.header.stamp) == 0  # placed with the latest transform


def _check_jpegs(frames: list[CompressedImage], stamps: list[int]) -> None:
    assert {time_to_ns(f.header.stamp) for f in frames} == set(stamps)
    for f in frames:
        assert f.format == "jpeg"
        rgb = cv2.imdecode(np.frombuffer(bytes(f.data), np.uint8), cv2.IMREAD_COLOR)
        assert rgb is not None and rgb.shape == (48, 64, 3)


def _event(i: int) -> SurpriseEvent:
    msg = SurpriseEvent(score=9.0, kl=1.0, threshold=3.0, pose_valid=True, pose_source="tf")
    msg.header.stamp = ns_to_time(T_CAM + i * S // FPS)
    msg.header.frame_id = "map"
    msg.decided = msg.header.stamp
    msg.pose.position.x, msg.pose.position.y, msg.pose.position.z = EVENT_POSE
    msg.pose.orientation.w = 1.0
    return msg


def _start(name: str, params: dict[str, Any], tmp_path: Path) -> Any:
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(params))
    args = [node_executable(name), "--ros-args", "--params-file", str(path)]
    return peer_process([*args, "-r", f"__ns:={NS}", "-r", f"image:={CAMERA}"], tmp_path, name)


def test_markers_follow_the_store_add_evict_and_late_joiners(
    filled_store: tuple[Path, dict[str, list[int]]], tmp_path: Path
) -> None:
    store, stamps = _copy(filled_store, tmp_path), filled_store[1]
    params = _params(store, compressed=False)
    params["/**/memory_node"]["ros__parameters"]["max_episodes"] = 3
    rclpy.init()
    node = Node("episode_display_test")
    cam = node.create_publisher(Image, CAMERA, RELIABLE)
    events = node.create_publisher(SurpriseEvent, f"{NS}/events", LATCHED)
    try:
        with _start("memory_node", params, tmp_path) as proc:
            wait_for_subscribers(node, events, timeout=90)  # configured and active
            display = _Display(node)  # joins after the node published what it holds
            wait_for_publishers(node, display.subs)
            assert spin_until(node, lambda: display.shows({"low", "odom"}), 20.0), display.arrays
            arrows = display.arrows()
            _check_arrow(arrows[SHORT["low"]], "map", (1.0, 2.0, 0.0))
            _check_arrow(arrows[SHORT["odom"]], "odom", (3.0, 4.0, 0.0))
            # the newest episode's frames (it has no pose: a preview, no marker)
            newest = stamps["no_pose"]
            assert spin_until(node, lambda: len(display.preview_of(newest)) >= 4, 20.0)
            _check_jpegs(display.preview_of(newest), newest)

            wait_for_subscribers(node, cam)
            for i in range(40):
                cam.publish(_image(i, compressed=False))
                spin_until(node, lambda: False, 0.01)
            events.publish(_event(TRIGGER))
            for i in range(40, 60):  # the frames after the trigger: the episode completes
                cam.publish(_image(i, compressed=False))
                spin_until(node, lambda: False, 0.01)
            # stored, then the budget evicts the lowest-surprise episode of the four

            def evicted() -> bool:
                shown = display.arrows()
                return len(shown) == 2 and SHORT["low"] not in shown

            assert spin_until(node, evicted, 60.0), [m.text for m in display.arrays[-1].markers]
            (new_id,) = set(display.arrows()) - {SHORT["odom"]}
            _check_arrow(display.arrows()[new_id], "map", EVENT_POSE)
            assert display.arrows()[new_id].color.g == 0.0  # 9 / 3 = thrice tau: red
            late = _Display(node)
            assert spin_until(node, lambda: bool(late.arrays), 20.0)
            assert set(late.arrows()) == set(display.arrows())
            with EpisodeStore(store, read_only=True) as db:
                assert "ep-low" not in db and len(db) == 3
                (record,) = [db.get(i) for i in db.episode_ids() if i.endswith(new_id)]
            fresh = list(record.frame_stamps_ns)
            assert spin_until(node, lambda: len(display.preview_of(fresh)) > len(fresh), 20.0)
            _check_jpegs(display.preview_of(fresh), fresh)
            # sent in order, then the trigger's frame again: a display rests on it
            trigger = trigger_frame_index(fresh, record.stamp_ns)
            assert fresh[trigger] == record.stamp_ns and trigger < len(fresh) - 1
            sent = [time_to_ns(f.header.stamp) for f in display.preview_of(fresh)]
            assert sent[: len(fresh) + 1] == [*fresh, record.stamp_ns]
            assert proc.poll() is None
    finally:
        node.destroy_node()
        rclpy.shutdown()


def test_pipeline_node_shows_what_the_store_holds(
    filled_store: tuple[Path, dict[str, list[int]]], tmp_path: Path
) -> None:
    store, stamps = _copy(filled_store, tmp_path), filled_store[1]
    params = sf.node_params(str(store), CAMERA)
    rclpy.init()
    node = Node("pipeline_display_test")
    cam = node.create_publisher(Image, CAMERA, RELIABLE)
    try:
        with _start("pipeline_node", params, tmp_path) as proc:
            wait_for_subscribers(node, cam, timeout=90)  # configured and active
            display = _Display(node)
            assert spin_until(node, lambda: display.shows({"low", "odom"}), 20.0), display.arrays
            _check_arrow(display.arrows()[SHORT["odom"]], "odom", (3.0, 4.0, 0.0))
            newest = stamps["no_pose"]
            # its 4 frames from the transient-local history, then replayed (2 fps) while
            # this display subscribes
            assert spin_until(node, lambda: len(display.preview_of(newest)) >= 6, 20.0)
            _check_jpegs(display.preview_of(newest), newest)
            # every topic of the shipped RViz config and Foxglove layout but the camera (an
            # input) is published by the node, with the type its display reads
            camera = launch_defaults()["camera"]
            want = {t: {TYPES[k] for k in kinds} for t, kinds in referenced_topics().items()}
            want.pop(camera)
            for topic in EXPORT_ONLY:  # an exported file's, not the node's
                want.pop(topic)

            def published() -> dict[str, set[str]]:
                found = node.get_publisher_names_and_types_by_node("pipeline_node", NS)
                return {topic: set(types) for topic, types in found if topic in want}

            assert spin_until(node, lambda: published() == want, 10.0), (published(), want)
            assert proc.poll() is None
    finally:
        node.destroy_node()
        rclpy.shutdown()
