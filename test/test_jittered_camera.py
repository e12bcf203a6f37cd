"""A camera that stamps its frames when it publishes them, on a busy machine (issue 48).

``encoder_node`` runs as a process; the test is the camera driver: 320x240 at 12 Hz, each
frame taken on time and stamped with the clock when it is published, after the
scheduler's delay (a tenth of a period on average) and, one frame in 20, a stall of most
of a period; a frame held up that way comes out right before the next one. The machine's
own load (other tests, CPU burners) adds its own delays. The topic has a second, silent
publisher, so the sequence numbers cannot count (as where rclpy gives none): the node
judges the stamps.

* Every frame published: no frame counted lost, no WARN that frames were lost or that the
  encoder's windows span more than their frames (before issue 48, the period followed the
  smallest recent gap, a stall's few milliseconds: "encoder windows span 0.58 s instead of
  0.38 s (33-65 % of their frames missing)" though every frame arrived).
* The same driver then drops every fourth frame (taken, never published): counted, and
  the encoder's windows WARN that they span more than their frames.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest
import rclpy
import synthetic_frames as sf
import yaml
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.qos import QoSProfile, ReliabilityPolicy
from ros_helpers import node_executable, peer_process, spin_until, wait_for_subscribers
from sensor_msgs.msg import Image

from surprise_memory.nodes.messages import image_msg_from_rgb
from surprise_memory.perception.delivery import PAUSE_MEAN_GAPS, PAUSE_MIN_S, FrameLossEstimator

CAMERA = "/jitter_camera/image"
NS = "/jitter"
HZ = 12.0
PERIOD_S = 1.0 / HZ
CLEAN_S, LOSSY_S = 30.0, 15.0


class _Driver:
    """Publishes frames taken one period apart, each stamped when it goes out."""

    def __init__(self, node: Node) -> None:
        reliable = QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE)
        self.node = node
        self.pub = node.create_publisher(Image, CAMERA, reliable)
        node.create_publisher(Image, CAMERA, reliable)  # silent: the stamps count
        self.rng = np.random.default_rng(48)
        self.scene = self.rng.integers(0, 256, (240, 640, 3), dtype=np.uint8)
        self.frame = 0
        self.published = 0
        self.gaps: list[float] = []
        self.stamps: list[int] = []  # every published stamp, for the failure's account
        self.late: list[float] = []  # this run's publishing delays after taking, in periods
        self.last_sent = 0.0  # time.monotonic() of the last publish
        self._last_stamp: int | None = None
        self._start = 0.0  # when frame 0 was taken

    def _wait_until(self, due: float) -> None:
        """Spin until ``due``, waking then (spin_until's 50 ms steps would put every stamp
        on a 50 ms grid: gaps of 0.6 and 1.2 periods, a 20 Hz camera losing 40 % to the
        stamps, as the node once judged them)."""
        executor = SingleThreadedExecutor(context=self.node.context)
        executor.add_node(self.node)
        try:
            while (left := due - time.monotonic()) > 0:
                executor.spin_once(timeout_sec=left)
        finally:
            executor.remove_node(self.node)

    def run(self, seconds: float, drop_every: int = 0) -> None:
        """Take frames for ``seconds``; with ``drop_every``, every such frame is not sent."""
        end = self.frame + round(seconds * HZ)
        # the camera resumes now: frames due while the test waited are not taken late in a
        # burst (stamped together, the frames dropped among them would be uncountable)
        self._start = time.monotonic() - self.frame * PERIOD_S
        self.late = []
        while self.frame < end:
            i = self.frame
            self.frame += 1
            taken = self._start + i * PERIOD_S
            stall = self.rng.uniform(0.35, 0.85) * PERIOD_S if self.rng.random() < 0.05 else 0.0
            due = taken + self.rng.exponential(0.1 * PERIOD_S) + stall
            self._wait_until(due)
            if drop_every and i % drop_every == drop_every - 1:
                continue  # the driver dropped it
            stamp = time.time_ns()  # stamped when published
            off = (4 * i) % 320
            rgb = np.ascontiguousarray(self.scene[:, off : off + 320])
            self.pub.publish(image_msg_from_rgb(rgb, stamp, "camera"))
            self.last_sent = time.monotonic()
            self.late.append((self.last_sent - taken) / PERIOD_S)
            self.stamps.append(stamp)
            self.published += 1
            if self._last_stamp is not None:
                self.gaps.append((stamp - self._last_stamp) / 1e9 / PERIOD_S)
            self._last_stamp = stamp


def _account(driver: _Driver, dropped: int, lossy: dict[str, str]) -> str:
    """A miscount's account: the estimator replayed on the very stamps the node received,
    and how late the driver itself published (a late frame's stamp looks like loss)."""
    estimator = FrameLossEstimator()
    for stamp in driver.stamps:
        estimator.update(stamp)
    late = np.asarray(driver.late)
    return (
        f"dropped {dropped}, counted {lossy['camera_frames_lost']}, the estimator on the "
        f"driver's stamps {estimator.counts.lost}, rate {lossy.get('camera_rate_hz')} Hz; "
        f"the driver published {int((late > 1.0).sum())} of {late.size} frames over a period "
        f"after taking them (the latest {late.max():.1f} periods); {lossy}; the stamps, "
        f"microseconds after the first: {[(t - driver.stamps[0]) // 1000 for t in driver.stamps]}"
    )


def test_a_camera_stamped_when_published_under_load(tmp_path: Path) -> None:
    params = sf.node_params(
        str(tmp_path / "store"), CAMERA, diagnostics_period_seconds=1.0, input_silent_seconds=30.0
    )
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump({"/**/encoder_node": params["/**/encoder_node"]}))
    rclpy.init()
    node = Node("jittered_camera_test")
    statuses: list[DiagnosticStatus] = []

    def on_diag(msg: DiagnosticArray) -> None:
        statuses.extend(s for s in msg.status if s.name.endswith("encoder_node"))

    node.create_subscription(DiagnosticArray, "/diagnostics", on_diag, 100)
    driver = _Driver(node)
    command = [node_executable("encoder_node"), "--ros-args", "--params-file", str(path)]
    command += ["-r", f"__ns:={NS}", "-r", f"image:={CAMERA}"]
    warn = DiagnosticStatus.WARN[0]

    def values() -> dict[str, str]:
        return {kv.key: kv.value for kv in statuses[-1].values} if statuses else {}

    def received(count: int) -> bool:
        return values().get("camera_frames_received") == str(count)

    try:
        with peer_process(command, tmp_path, "encoder_node"):
            wait_for_subscribers(node, driver.pub, timeout=120)
            driver.run(CLEAN_S)
            assert spin_until(node, lambda: received(driver.published), 30.0), values()
            spin_until(node, lambda: False, 1.5)  # a whole period after the last frame
            gaps = np.asarray(driver.gaps)
            print(f"clean: {driver.published} frames, gaps {gaps.min():.2f}-{gaps.max():.2f}")
            assert gaps.min() < 0.2 and gaps.max() > 1.4  # the stamps did jitter
            clean = values()
            assert clean["camera_frames_lost"] == "0", clean
            assert clean.get("window_frames_missing", "0") == "0", clean
            assert float(clean["camera_rate_hz"]) == pytest.approx(HZ, rel=0.02), clean
            assert clean["camera_loss_counted_by"] == "stamps", clean
            warned = [s.message for s in statuses if s.level[0] >= warn]
            assert not [m for m in warned if "lost" in m or "windows span" in m], warned
            seen = len(statuses)

            # the camera pauses between the two runs, for longer than the node's rule for a
            # pause: 1.53 s (18 periods at 12 Hz, under 20 mean gaps) was once all the
            # waits above took, and the node rightly counted that silence as 17 frames lost
            quiet_s = max(PAUSE_MIN_S, PAUSE_MEAN_GAPS * PERIOD_S) + 0.5
            spin_until(
                node, lambda: False, max(0.0, quiet_s - (time.monotonic() - driver.last_sent))
            )
            driver.run(LOSSY_S, drop_every=4)
            assert spin_until(node, lambda: received(driver.published), 30.0), values()
            spin_until(node, lambda: False, 1.5)
            lossy = values()
            dropped = round(LOSSY_S * HZ) // 4
            lost = int(lossy["camera_frames_lost"])
            # the stamps cannot show the last dropped frame (no frame came after it) nor, yet,
            # one dropped within the last CONFIRM_FRAMES (a late frame may still land in it)
            print(f"lossy: {lost} of {dropped} dropped frames counted")
            assert dropped - 2 <= lost <= dropped, _account(driver, dropped, lossy)
            assert int(lossy["window_frames_missing"]) > 0, lossy
            later = [s.message for s in statuses[seen:] if s.level[0] >= warn]
            assert any("encoder windows span" in m for m in later), later
            assert any("camera frames lost" in m for m in later), later
    finally:
        node.destroy_node()
        rclpy.shutdown()
