"""Camera loss is never silent: each camera node's /diagnostics against a known loss (issue 20).

``encoder_node`` and ``memory_node`` (the split) and ``pipeline_node`` (in a namespace of
its own) run as processes and subscribe to one camera at once. The camera publishes 200
frames one period apart of which every fifth is never sent (a camera whose frames get
lost), then 200 frames without a gap. Over real DDS (the subscriptions reliable and deep,
as in the other node tests, so that only the withheld frames are missing) each node must
report what was lost, in its own estimate from the stamps: the exact count, a WARN naming
the share lost and the README section while it happens, and no such WARN once the camera
delivers again. The encoder also says that its windows spanned more than the input
period allows (its window of 8 frames then holds fewer than 8 periods' worth).
"""

from __future__ import annotations

from pathlib import Path

import rclpy
import synthetic_frames as sf
import yaml
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
from rclpy.node import Node
from rclpy.qos import QoSProfile, ReliabilityPolicy
from ros_helpers import node_executable, peer_process, spin_until, wait_for_subscribers
from sensor_msgs.msg import Image

from surprise_memory.nodes.messages import image_msg_from_rgb

CAMERA = "/delivery_camera/image"
SPLIT, ONE = "/delivery_split", "/delivery_one"
PERIOD_NS = 10**9 // sf.FPS
LOSSY, CLEAN = 200, 200
WITHHELD = [k for k in range(LOSSY) if k % 5 == 4]
# lost between the first and the last frame received: every fifth up to frame 198
LOST = len([k for k in WITHHELD if k < LOSSY + CLEAN - 1])
NODES = {"encoder_node": SPLIT, "memory_node": SPLIT, "pipeline_node": ONE}


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


def test_every_camera_node_reports_the_frames_it_lost(tmp_path: Path) -> None:
    params = sf.node_params(
        str(tmp_path / "store_split"),
        CAMERA,
        diagnostics_period_seconds=0.5,
        input_silent_seconds=30.0,
    )
    params["/**/pipeline_node"]["ros__parameters"]["store_path"] = str(tmp_path / "store_one")
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(params))
    rclpy.init()
    node = Node("camera_delivery_test")
    monitor = _Monitor()
    node.create_subscription(DiagnosticArray, "/diagnostics", monitor.on_diag, 100)
    cam = node.create_publisher(
        Image, CAMERA, QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE)
    )
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
                    f"image:={CAMERA}",
                ],
                tmp_path,
                name,
            )
            for name, ns in NODES.items()
        ]
        with peers[0], peers[1], peers[2]:
            wait_for_subscribers(node, cam, len(NODES), timeout=120)
            for k in range(LOSSY + CLEAN):
                if k in WITHHELD:
                    continue
                stamp = sf.T0 + k * PERIOD_NS
                cam.publish(image_msg_from_rgb(rgb[k % len(rgb)], stamp, "camera"))
                spin_until(node, lambda: False, 0.02)
                if k == LOSSY - 1:  # the lossy part judged by every node before the clean
                    assert spin_until(
                        node,
                        lambda: all(monitor.warned(n, "camera frames lost: 20%") for n in NODES),
                        30.0,
                    ), {n: [s.message for s in monitor.history.get(n, [])[-3:]] for n in NODES}
            received = LOSSY + CLEAN - len(WITHHELD)

            def all_counted() -> bool:
                return all(
                    monitor.latest(n).get("camera_frames_received") == str(received) for n in NODES
                )

            assert spin_until(node, all_counted, 30.0), {n: monitor.latest(n) for n in NODES}
            spin_until(node, lambda: False, 1.5)  # a whole period after the last frame
            for name in NODES:
                values = monitor.latest(name)
                assert values["camera_frames_lost"] == str(LOST), (name, values)
                assert float(values["camera_rate_hz"]) == sf.FPS, (name, values)
                status = monitor.history[name][-1]
                assert "camera frames lost" not in status.message, (name, status.message)
                lossy = next(s for s in monitor.history[name] if "camera frames lost" in s.message)
                assert "README 'Large camera frames: middleware settings'" in lossy.message
            for name in ("encoder_node", "pipeline_node"):
                assert monitor.warned(name, "encoder windows span"), name
                missing = int(monitor.latest(name)["window_frames_missing"])
                assert missing > 0, name
                assert "encoder windows span" not in monitor.history[name][-1].message
    finally:
        node.destroy_node()
        rclpy.shutdown()
