"""memory_node killed with SIGKILL mid-ingest, then restarted on the same store (issue 12).

Every episode announced on ``episodes`` before the kill is in the store afterwards, with
all its frames readable; nothing half-written is visible; the store opens without repair
and the restarted node goes on storing.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import rclpy
import yaml
from rclpy.node import Node
from rclpy.qos import QoSProfile, ReliabilityPolicy
from ros_helpers import node_executable, spin_until, wait_for_subscribers
from sensor_msgs.msg import Image
from test_memory_node import CAMERA, FPS, NS, T_CAM, _event, _image, _params

from surprise_memory.memory.store import EpisodeStore
from surprise_memory.msg import Episode, SurpriseEvent
from surprise_memory.nodes.qos import LATCHED

RELIABLE = QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE)


def _start(args: list[str], log: Path) -> subprocess.Popen[bytes]:
    with open(log, "ab") as out:
        return subprocess.Popen(
            [sys.executable, *args], stdout=out, stderr=subprocess.STDOUT, cwd=log.parent
        )


def test_kill_9_mid_ingest_loses_no_announced_episode(tmp_path: Path) -> None:
    store = tmp_path / "store"
    params = tmp_path / "params.yaml"
    params.write_text(yaml.safe_dump(_params(store, compressed=False)))
    args = [node_executable("memory_node"), "--ros-args", "--params-file", str(params)]
    args += ["-r", f"__ns:={NS}", "-r", f"image:={CAMERA}"]
    rclpy.init()
    node = Node("memory_kill_test")
    announced: list[Episode] = []
    cam = node.create_publisher(Image, CAMERA, RELIABLE)
    events = node.create_publisher(SurpriseEvent, f"{NS}/events", LATCHED)  # as the scorer
    node.create_subscription(Episode, f"{NS}/episodes", announced.append, RELIABLE)
    log = tmp_path / "memory_node.log"
    proc = _start(args, log)
    frame = 0
    try:
        wait_for_subscribers(node, cam)
        wait_for_subscribers(node, events)
        # a camera at 20 Hz and an event every second, until a few episodes are announced
        while len(announced) < 3 and frame < 2000:
            cam.publish(_image(frame, compressed=False))
            if frame % FPS == 10 and frame > 20:
                events.publish(_event(frame - 10))
            frame += 1
            spin_until(node, lambda: False, 0.01)
        assert len(announced) >= 3, log.read_text()
        for _ in range(2 * FPS):  # more events in flight while it dies
            cam.publish(_image(frame, compressed=False))
            if frame % FPS == 10:
                events.publish(_event(frame - 10))
            frame += 1
            spin_until(node, lambda: False, 0.01)
        proc.send_signal(signal.SIGKILL)
        assert proc.wait(timeout=30) == -signal.SIGKILL
        before_kill = {e.id for e in announced}

        with EpisodeStore(store, read_only=True) as s:  # opens as it was left: no repair
            ids = set(s.episode_ids())
            assert before_kill <= ids
            for i in ids:  # nothing half-written: every stored episode has all its frames
                record = s.get(i)
                assert len(record.load_images()) == len(record.frame_stamps_ns) > 0

        proc = _start(args, log)  # restarted on the same store: it goes on storing

        def restarted() -> bool:  # the killed node's subscriptions may still look matched
            return log.read_text().count("episode store at") == 2

        assert spin_until(node, restarted, 120.0), log.read_text()
        spin_until(node, lambda: False, 2.0)  # discovery of the new subscriptions
        start = len(announced)
        t_restart = frame + 100  # a new stretch of camera time after the restart
        for k in range(3 * FPS):
            cam.publish(_image(t_restart + k, compressed=False))
            if k == FPS:
                events.publish(_event(t_restart + k - 10))
            spin_until(node, lambda: False, 0.01)
        assert spin_until(node, lambda: len(announced) > start, 60.0), log.read_text()
        assert proc.poll() is None
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
        node.destroy_node()
        rclpy.shutdown()
    with EpisodeStore(store, read_only=True) as s:
        assert {e.id for e in announced} <= set(s.episode_ids())
        assert s.origin_ns == T_CAM
