"""The memory node as the trigger of a snapshot-mode bag recorder (issue 30), over DDS.

A stand-in recorder (test/fixtures/snapshot_recorder.py) serves
rosbag2_interfaces/srv/Snapshot (rosbag2's own type where rosbag2 is installed, else a
stand-in of the same shape built by colcon, see snapshot_helpers). A burst of three events
makes one snapshot call and one aftermath call, and each of the three episodes records
both answers; with the recorder gone, the next episode is stored all the same, records
that no snapshot was taken, and /diagnostics says WARN.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import rclpy
import synthetic_frames as sf
import yaml
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
from rcl_interfaces.srv import SetParameters
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.qos import QoSProfile, ReliabilityPolicy
from ros_helpers import FIXTURES, node_executable, peer_process, spin_until, wait_for_subscribers
from sensor_msgs.msg import Image
from snapshot_helpers import snapshot_env

from surprise_memory.memory.snapshot import SnapshotNote
from surprise_memory.memory.store import EpisodeStore
from surprise_memory.msg import Episode, SurpriseEvent
from surprise_memory.nodes.messages import image_msg_from_rgb, ns_to_time
from surprise_memory.nodes.qos import LATCHED

NS = "/snap"
CAMERA = "/snap_camera/image"
SERVICE = "/test_recorder/snapshot"
RELIABLE = QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE)
FPS = 20
T0 = 500 * 10**9


def _image(i: int) -> Image:
    rgb = np.full((48, 64, 3), (i * 7) % 256, np.uint8)
    return image_msg_from_rgb(rgb, T0 + i * 10**9 // FPS, "camera")


def _event(i: int) -> SurpriseEvent:
    msg = SurpriseEvent(score=5.0, kl=1.0, threshold=1.0, pose_valid=False, pose_source="none")
    msg.header.stamp = ns_to_time(T0 + i * 10**9 // FPS)
    msg.decided = msg.header.stamp
    msg.pose.orientation.w = 1.0
    return msg


class _Inbox:
    def __init__(self) -> None:
        self.episodes: list[Episode] = []
        self.status: DiagnosticStatus | None = None

    def on_diag(self, msg: DiagnosticArray) -> None:
        for status in msg.status:
            if "memory_node" in status.name:
                self.status = status

    def value(self, key: str) -> str | None:
        values = {kv.key: kv.value for kv in self.status.values} if self.status else {}
        return values.get(key)


def _params(store: Path) -> dict[str, Any]:
    params = {
        **sf.EPISODE,
        **sf.EMBEDDER,
        "store_path": str(store),
        "diagnostics_period_seconds": 0.5,
        "snapshot_service": SERVICE,
        "snapshot_hold_seconds": 20.0,  # the burst below is stored well within it
        "snapshot_aftermath_seconds": 1.0,
        "qos_overrides": {CAMERA: {"subscription": {"reliability": "reliable", "depth": 1000}}},
    }
    return {"/**/memory_node": {"ros__parameters": params}}


def _notes(store: Path, ids: list[str]) -> dict[str, list[SnapshotNote]]:
    with EpisodeStore(store, read_only=True) as s:
        return s.snapshot_notes(ids)


def test_one_snapshot_per_burst_and_a_missing_recorder_warns(tmp_path: Path) -> None:
    env = snapshot_env()
    store = tmp_path / "store"
    calls = tmp_path / "calls.txt"
    params = tmp_path / "params.yaml"
    params.write_text(yaml.safe_dump(_params(store)))
    args = [node_executable("memory_node"), "--ros-args", "--params-file", str(params)]
    args += ["-r", f"__ns:={NS}", "-r", f"image:={CAMERA}"]
    recorder = [str(FIXTURES / "snapshot_recorder.py"), SERVICE, str(calls)]
    rclpy.init()
    node = Node("snapshot_trigger_test")
    inbox = _Inbox()
    cam = node.create_publisher(Image, CAMERA, RELIABLE)
    events = node.create_publisher(SurpriseEvent, f"{NS}/events", LATCHED)
    node.create_subscription(Episode, f"{NS}/episodes", inbox.episodes.append, RELIABLE)
    node.create_subscription(DiagnosticArray, "/diagnostics", inbox.on_diag, 50)

    def camera(frames: range) -> None:
        for i in frames:
            cam.publish(_image(i))
            spin_until(node, lambda: False, 0.01)

    def n_calls() -> int:
        return len(calls.read_text().split()) if calls.exists() else 0

    try:
        with peer_process(args, tmp_path, "memory_node", env=env) as proc:
            with peer_process(recorder, tmp_path, "recorder", env=env):
                # configured (the models loaded): then the subscriptions follow at once
                assert spin_until(node, lambda: inbox.value("snapshot_service") == SERVICE, 90)
                wait_for_subscribers(node, cam)
                wait_for_subscribers(node, events)
                camera(range(30))
                for i in (30, 33, 36):  # a burst: three events within 0.3 s
                    events.publish(_event(i))
                camera(range(30, 60))
                assert spin_until(node, lambda: len(inbox.episodes) == 3, 60.0)
                # the event call (20 s after the first episode), then the aftermath (1 s on)
                assert spin_until(node, lambda: n_calls() == 2, 60.0), inbox.status
                spin_until(node, lambda: n_calls() > 2, 2.0)
                assert n_calls() == 2
                assert spin_until(node, lambda: inbox.value("snapshots_saved") == "2", 10.0)
                burst = [e.id for e in inbox.episodes]

                def noted() -> bool:
                    notes = _notes(store, burst)
                    return all(len(notes.get(i, [])) == 2 for i in burst)

                assert spin_until(node, noted, 10.0)
            # the recorder is gone: the next episode is stored, its snapshot is not taken;
            # a short hold now (a live parameter), so that the test need not wait 20 s
            set_hold = node.create_client(SetParameters, f"{NS}/memory_node/set_parameters")
            hold = Parameter("snapshot_hold_seconds", value=0.5).to_parameter_msg()
            future = set_hold.call_async(SetParameters.Request(parameters=[hold]))
            assert spin_until(node, future.done, 30.0)
            assert future.result().results[0].successful  # type: ignore[union-attr]
            camera(range(60, 80))
            events.publish(_event(70))
            camera(range(80, 100))
            assert spin_until(node, lambda: len(inbox.episodes) == 4, 60.0)
            lone = inbox.episodes[3].id
            assert spin_until(node, lambda: lone in _notes(store, [lone]), 30.0)
            assert spin_until(node, lambda: inbox.value("snapshots_requested") == "3", 10.0)
            assert inbox.status is not None
            assert inbox.status.level == DiagnosticStatus.WARN, inbox.status.message
            assert "snapshot" in inbox.status.message
            assert proc.poll() is None
    finally:
        node.destroy_node()
        rclpy.shutdown()

    notes = _notes(store, [*burst, lone])
    call_times = sorted(int(t) for t in calls.read_text().split())
    for eid in burst:  # all three share the same two calls
        event, aftermath = sorted(notes[eid], key=lambda n: n.requested_ns)
        assert (event.kind, aftermath.kind) == ("event", "aftermath")
        assert event.success and aftermath.success and not event.message
        assert event.requested_ns <= call_times[0] <= event.answered_ns
        assert aftermath.requested_ns <= call_times[1] <= aftermath.answered_ns
        assert aftermath.requested_ns - event.requested_ns >= 10**9  # the aftermath delay
    assert notes[burst[0]] == notes[burst[2]]
    (lone_note, *_) = notes[lone]
    assert lone_note.kind == "event" and not lone_note.success
    assert SERVICE in lone_note.message  # no recorder serves it (or it did not answer)
