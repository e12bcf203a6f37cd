"""Camera loss is never silent: each camera node's /diagnostics against a known loss (issue 20).

``encoder_node`` and ``memory_node`` (the split) and ``pipeline_node`` (in a namespace of
its own) run as processes.

* The split's camera publishes 200 frames one period apart of which every fifth is never
  sent, then 200 frames without a gap. The topic has a second (silent) publisher, so the
  publishers' sequence numbers cannot count (they would interleave) and the nodes count
  by the stamps, as where rclpy gives no sequence numbers (Humble). Over real DDS (the
  subscriptions reliable and deep, as in the other node tests, so that only the withheld
  frames are missing) each node must report what was lost in its own estimate from the
  stamps: the exact count, a WARN naming the share lost and the README section while it
  happens (and not the middleware's doing: 0% in transport), and no such WARN once the
  camera delivers again. The encoder also says that its windows spanned more than the
  input period allows.
* ``pipeline_node``'s camera is a driver process with Fast DDS's defaults, publishing
  640x480 rgb8 at 30 Hz best effort to the node's default (sensor-data) subscription:
  frames larger than the default shared-memory segment, most of them lost in transport.
  The node counts by the publisher's sequence numbers and must report the loss the test
  counts (published - taken in; the driver ends with a few small frames, which arrive,
  so that the loss before them is known), WARN, and put it down to transport (the
  middleware's sample-lost count).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import rclpy
import synthetic_frames as sf
import yaml
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
from rclpy.node import Node
from rclpy.qos import QoSProfile, ReliabilityPolicy
from ros_helpers import (
    FIXTURES,
    node_executable,
    peer_process,
    spin_until,
    wait_for_subscribers,
)
from sensor_msgs.msg import Image

from surprise_memory.middleware import PROFILE_VARIABLES
from surprise_memory.nodes.messages import image_msg_from_rgb

CAMERA = "/delivery_camera/image"
LARGE_CAMERA = "/delivery_large_camera/image"  # pipeline_node's: 640x480, best effort
LARGE_FRAMES = 240
SPLIT, ONE = "/delivery_split", "/delivery_one"
PERIOD_NS = 10**9 // sf.FPS
LOSSY, CLEAN = 200, 200
WITHHELD = [k for k in range(LOSSY) if k % 5 == 4]
# lost between the first and the last frame received: every fifth up to frame 198
LOST = len([k for k in WITHHELD if k < LOSSY + CLEAN - 1])
NODES = {"encoder_node": SPLIT, "memory_node": SPLIT, "pipeline_node": ONE}
SPLIT_NODES = ("encoder_node", "memory_node")


class _Monitor:
    """Every status each node published (the level and message of each, and its values)."""

    def __init__(self) -> None:
        self.history: dict[str, list[DiagnosticStatus]] = {}

    def on_diag(self, msg: DiagnosticArray) -> None:
        for status in msg.status:
            self.history.setdefault(status.name.rsplit(" ", 1)[-1], []).append(status)

    def latest(self, node: str) -> dict[str, str]:
        statuses = self.history.get(node, [])
        return {kv.key: kv.value for kv in statuses[-1].values} if statuses else {}

    def warned(self, node: str, text: str) -> bool:
        warn = DiagnosticStatus.WARN[0]
        return any(s.level[0] == warn and text in s.message for s in self.history.get(node, []))


def test_every_camera_node_reports_the_frames_it_lost(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fast = {"diagnostics_period_seconds": 0.5, "input_silent_seconds": 30.0}
    params = sf.node_params(str(tmp_path / "store_split"), CAMERA, **fast)
    # pipeline_node: the default camera QoS (sensor data), as on a robot
    one = sf.node_params(str(tmp_path / "store_one"), None, **fast)
    params["/**/pipeline_node"] = one["/**/pipeline_node"]
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(params))
    rclpy.init()
    node = Node("camera_delivery_test")
    monitor = _Monitor()
    node.create_subscription(DiagnosticArray, "/diagnostics", monitor.on_diag, 100)
    reliable = QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE)
    cam = node.create_publisher(Image, CAMERA, reliable)
    node.create_publisher(Image, CAMERA, reliable)  # silent: sequence numbers cannot count
    rgb = sf.scene_change_rgb()
    try:
        peers = [
            peer_process(
                [
                    node_executable(name),
                    "--ros-args",
                    "--params-file",
                    str(path),
                    "-r",
                    f"__ns:={ns}",
                    "-r",
                    f"image:={LARGE_CAMERA if name == 'pipeline_node' else CAMERA}",
                ],
                tmp_path,
                name,
            )
            for name, ns in NODES.items()
        ]
        with peers[0], peers[1], peers[2]:
            wait_for_subscribers(node, cam, len(SPLIT_NODES), timeout=120)
            for k in range(LOSSY + CLEAN):
                if k in WITHHELD:
                    continue
                stamp = sf.T0 + k * PERIOD_NS
                cam.publish(image_msg_from_rgb(rgb[k % len(rgb)], stamp, "camera"))
                spin_until(node, lambda: False, 0.02)
                if k == LOSSY - 1:  # the lossy part judged by every node before the clean
                    assert spin_until(
                        node,
                        lambda: all(
                            monitor.warned(n, "camera frames lost: 20%") for n in SPLIT_NODES
                        ),
                        30.0,
                    ), {n: [s.message for s in monitor.history.get(n, [])[-3:]] for n in NODES}
            received = LOSSY + CLEAN - len(WITHHELD)

            def all_counted() -> bool:
                return all(
                    monitor.latest(n).get("camera_frames_received") == str(received)
                    for n in SPLIT_NODES
                )

            assert spin_until(node, all_counted, 30.0), {n: monitor.latest(n) for n in SPLIT_NODES}
            spin_until(node, lambda: False, 1.5)  # a whole period after the last frame
            for name in SPLIT_NODES:
                values = monitor.latest(name)
                assert values["camera_frames_lost"] == str(LOST), (name, values)
                assert float(values["camera_rate_hz"]) == sf.FPS, (name, values)
                status = monitor.history[name][-1]
                assert "camera frames lost" not in status.message, (name, status.message)
                lossy = next(s for s in monitor.history[name] if "camera frames lost" in s.message)
                assert "doc/guides/large-frames.md" in lossy.message
                # not the middleware's loss: the camera never sent them
                assert "; 0% in transport, " in lossy.message, lossy.message
                assert "in this node's queue or never sent" in lossy.message
                assert values["camera_frames_lost_in_transport"] == "0", (name, values)
                assert values["camera_loss_counted_by"] == "stamps", (name, values)
            assert monitor.warned("encoder_node", "encoder windows span")
            assert int(monitor.latest("encoder_node")["window_frames_missing"]) > 0
            assert "encoder windows span" not in monitor.history["encoder_node"][-1].message

            # pipeline_node and a camera driver with Fast DDS's defaults (no profile)
            for variable in PROFILE_VARIABLES:
                monkeypatch.delenv(variable, raising=False)
            published = tmp_path / "published.json"
            driver = [str(FIXTURES / "camera_publisher.py"), LARGE_CAMERA, "640x480", "30"]
            driver += [str(LARGE_FRAMES), "1", str(published)]
            with peer_process(driver, tmp_path, "camera_publisher") as camera:
                camera.wait(timeout=120)
            sent = json.loads(published.read_text())["published"]  # 240 and 5 small ones
            spin_until(node, lambda: False, 1.5)  # a whole period after the last frame
            values = monitor.latest("pipeline_node")
            print({k: v for k, v in values.items() if k.startswith(("camera", "frames"))})
            taken = int(values["frames_in"])
            lost = int(values["camera_frames_lost"])
            # the node's count of the frames it lost is the test's, but for those before
            # its first frame (a node that joins a running camera must not count them)
            assert sent - taken - 10 <= lost <= sent - taken, values
            assert monitor.warned("pipeline_node", "camera frames lost"), values
            # Fast DDS's default 512 KiB segment loses many 921,600-byte frames in transport:
            # how many depends on the machine's load (a bare subscriber got 29-79 % of them
            # in RESULTS.md, issue 42; 120 of 240 lost in one CI run), so this asks only
            # that the run lost enough for the counts below to mean something
            assert lost > LARGE_FRAMES // 10, values
            in_transport = int(values["camera_frames_lost_in_transport"])
            assert in_transport > 0.8 * lost, values
            assert values["camera_loss_counted_by"] == "sequence numbers", values
            # no check ever failed (a period without frames included)
            failed = [s.message for n in NODES for s in monitor.history.get(n, [])]
            assert not [m for m in failed if "health check failed" in m], failed
    finally:
        node.destroy_node()
        rclpy.shutdown()


def test_sequence_numbers_count_the_loss_and_a_new_subscription_starts_afresh() -> None:
    """In one process, real rclpy objects: the counting by sequence numbers, exactly."""
    from surprise_memory.nodes.delivery import CameraDelivery
    from surprise_memory.nodes.diagnostics import NodeStats

    rclpy.init()
    node = Node("delivery_counts")
    try:
        stats = NodeStats(node)
        delivery = CameraDelivery(stats, 0.05)
        delivery.watch(node.create_subscription(Image, "counts_camera", lambda _: None, 5))
        for seq in (1, 2, 3, 5, 6, 10):  # 4, 7, 8, 9 lost
            delivery.delivered(seq)
        delivery.lost_in_transport(3)
        found = [f for f in stats.findings() if f is not None]
        assert [f.reason.split(" (")[0] for f in found] == [
            "camera frames lost: 40% in the last period"
        ]
        assert "30% in transport, 10% in this node's queue or never sent" in found[0].reason
        assert not [f for f in stats.findings() if f is not None]  # a period without frames
        # deactivated and activated again: the frames in between are not loss
        delivery.watch(node.create_subscription(Image, "counts_camera", lambda _: None, 5))
        for seq in (50, 51, 52):
            delivery.delivered(seq)
        assert not [f for f in stats.findings() if f is not None]
        values = delivery._values()
        assert values["camera_frames_received"] == 9
        assert values["camera_frames_lost"] == 4
        assert values["camera_frames_lost_in_transport"] == 3
        assert values["camera_loss_counted_by"] == "sequence numbers"
        delivery.delivered(None)  # a message without a number: the stamps count from here
        stats.findings()
        assert delivery._values()["camera_loss_counted_by"] == "stamps"
    finally:
        node.destroy_node()
        rclpy.shutdown()
