"""memory_node on a full disk (issue 12): counted errors, no partial episode, then recovery.

The store lives on a real size-limited filesystem (a 16 MiB tmpfs mounted by the test,
which needs root, as CI has). While the disk is full, episodes fail with a counted error
and the node stays up; nothing half-written appears; once space is back, later episodes
are stored again.
"""

from __future__ import annotations

import contextlib
import errno
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import rclpy
import yaml
from diagnostic_msgs.msg import DiagnosticArray
from rclpy.node import Node
from rclpy.qos import QoSProfile, ReliabilityPolicy
from ros_helpers import node_executable, peer_process, spin_until, wait_for_subscribers
from sensor_msgs.msg import Image
from test_memory_node import CAMERA, FPS, NS, _event, _image, _Inbox, _params

from surprise_memory.memory.store import EpisodeStore
from surprise_memory.msg import Episode, SurpriseEvent
from surprise_memory.nodes.qos import LATCHED

RELIABLE = QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE)


@contextlib.contextmanager
def _small_disk(path: Path, size: str = "16m") -> Iterator[Path]:
    path.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a size-limited tmpfs needs root (CI runs as root)")
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], check=True)
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def _fill(disk: Path) -> Path:
    """Write a file until the disk is full (unbuffered: a partial last write is kept, none
    is left in a buffer for the close to fail on)."""
    filler = disk / "filler"
    with open(filler, "wb", buffering=0) as f:
        try:
            while True:
                f.write(b"\0" * 65536)
        except OSError as exc:
            assert exc.errno == errno.ENOSPC
    return filler


def test_full_disk_then_space_back(tmp_path: Path) -> None:
    with _small_disk(tmp_path / "disk") as disk:
        store = disk / "store"
        params = tmp_path / "params.yaml"
        params.write_text(yaml.safe_dump(_params(store, compressed=False)))
        args = [node_executable("memory_node"), "--ros-args", "--params-file", str(params)]
        args += ["-r", f"__ns:={NS}", "-r", f"image:={CAMERA}"]
        rclpy.init()
        node = Node("memory_disk_test")
        inbox = _Inbox()
        cam = node.create_publisher(Image, CAMERA, RELIABLE)
        events = node.create_publisher(SurpriseEvent, f"{NS}/events", LATCHED)  # as the scorer
        node.create_subscription(Episode, f"{NS}/episodes", inbox.episodes.append, RELIABLE)
        node.create_subscription(DiagnosticArray, "/diagnostics", inbox.on_diag, 50)
        frame = 0

        def camera(seconds: float, event_at: int | None = None) -> None:
            nonlocal frame
            for _ in range(round(seconds * FPS)):
                cam.publish(_image(frame, compressed=False))
                if frame == event_at:
                    events.publish(_event(frame - 10))
                frame += 1
                spin_until(node, lambda: False, 0.01)

        try:
            with peer_process(args, tmp_path, "memory_node") as proc:
                wait_for_subscribers(node, cam)
                wait_for_subscribers(node, events)
                camera(2.0, event_at=30)
                assert spin_until(node, lambda: len(inbox.episodes) == 1, 60.0), inbox.diag
                filler = _fill(disk)  # the disk is full now
                camera(2.0, event_at=frame + 20)
                failed = lambda: inbox.diag.get("rejected_store") == "1"  # noqa: E731
                assert spin_until(node, failed, 60.0), inbox.diag
                assert proc.poll() is None, "the node died on a full disk"
                assert len(inbox.episodes) == 1
                filler.unlink()  # space is back
                camera(2.0, event_at=frame + 20)
                assert spin_until(node, lambda: len(inbox.episodes) == 2, 60.0), inbox.diag
                assert proc.poll() is None
        finally:
            node.destroy_node()
            rclpy.shutdown()
        with EpisodeStore(store, read_only=True) as s:  # nothing half-written is visible
            assert s.episode_ids() == [e.id for e in inbox.episodes]
            for i in s.episode_ids():
                record = s.get(i)
                assert len(record.load_images()) == len(record.frame_stamps_ns)
        assert sorted(p.name for p in (store / "frames").iterdir()) == sorted(
            e.id for e in inbox.episodes
        )
