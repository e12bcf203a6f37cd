"""Managed (lifecycle) nodes over the real lifecycle services (issue 11).

The nodes start with ``autostart: false`` and a test node drives them through
``<node>/change_state`` and reads ``<node>/get_state``, as a robot's lifecycle manager
does: configure builds (publishers appear, no input yet), activate subscribes (scores come
out), deactivate pauses (no subscription, no output), cleanup frees, configure again
works, shutdown finalizes. A configure that fails (the store's folder is blocked by a
file) leaves the node unconfigured with its process up and one error line, and succeeds
when retried once the folder can be made. With ``autostart`` (the default) a failed
configure ends the process with status 2, as a plain node that cannot start.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import rclpy
import yaml
from lifecycle_msgs.msg import Transition
from lifecycle_msgs.srv import ChangeState, GetState
from rclpy.node import Node
from rclpy.qos import QoSProfile, ReliabilityPolicy
from ros_helpers import node_executable, peer_process, spin_until, wait_for_subscribers
from test_memory_node import _params
from test_scorer_node import PARAMS, T0, _embedding, _stream

from surprise_memory.msg import FrameEmbedding, SurpriseScore
from surprise_memory.srv import RetrieveEpisodes

NS = "/lifecycle_test"
RELIABLE = QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE)


class _Manager:
    """What a lifecycle manager does with one node: change its state and read it."""

    def __init__(self, node: Node, name: str) -> None:
        self.node = node
        self.change = node.create_client(ChangeState, f"{NS}/{name}/change_state")
        self.get = node.create_client(GetState, f"{NS}/{name}/get_state")

    def wait(self) -> None:
        assert self.change.wait_for_service(timeout_sec=60.0)
        assert self.get.wait_for_service(timeout_sec=60.0)

    def _call(self, client: Any, request: Any) -> Any:
        future = client.call_async(request)
        assert spin_until(self.node, future.done, 120.0), "no answer"
        return future.result()

    def state(self) -> str:
        return str(self._call(self.get, GetState.Request()).current_state.label)

    def transition(self, transition_id: int) -> bool:
        request = ChangeState.Request()
        request.transition.id = transition_id
        return bool(self._call(self.change, request).success)

    def configure_then_activate(self, output: str, inputs: Callable[[], int]) -> None:
        """Unconfigured; configure: ``output`` published, no input taken; activate."""
        assert self.state() == "unconfigured"
        assert self.node.count_publishers(output) == 0
        assert self.transition(Transition.TRANSITION_CONFIGURE)
        assert self.state() == "inactive"
        assert spin_until(self.node, lambda: self.node.count_publishers(output) == 1, 10.0)
        assert inputs() == 0  # configured, not yet taking input
        assert self.transition(Transition.TRANSITION_ACTIVATE)
        assert self.state() == "active"

    def cleanup_configure_shutdown(self, output: str) -> None:
        """From inactive: cleanup (``output`` gone), configure again, shutdown."""
        assert self.transition(Transition.TRANSITION_CLEANUP)
        assert self.state() == "unconfigured"
        assert spin_until(self.node, lambda: self.node.count_publishers(output) == 0, 10.0)
        assert self.transition(Transition.TRANSITION_CONFIGURE)  # again after cleanup
        assert self.state() == "inactive"
        assert self.transition(Transition.TRANSITION_INACTIVE_SHUTDOWN)
        assert self.state() == "finalized"


def test_scorer_transitions_over_the_lifecycle_services(tmp_path: Path) -> None:
    params = tmp_path / "params.yaml"
    params.write_text(
        yaml.safe_dump({"/**/scorer_node": {"ros__parameters": {**PARAMS, "autostart": False}}})
    )
    args = [node_executable("scorer_node"), "--ros-args", "--params-file", str(params)]
    args += ["-r", f"__ns:={NS}"]
    rclpy.init()
    node = Node("lifecycle_test")
    scores: list[SurpriseScore] = []
    node.create_subscription(SurpriseScore, f"{NS}/surprise", scores.append, RELIABLE)
    embeddings = node.create_publisher(FrameEmbedding, f"{NS}/embedding", RELIABLE)
    z = _stream(60, change_at=1000)
    sent = 0

    def send(n: int) -> None:
        nonlocal sent
        for _ in range(n):
            embeddings.publish(_embedding(T0 + sent * 50_000_000, z[sent % len(z)]))
            sent += 1
            spin_until(node, lambda: False, 0.01)

    def subscribers() -> int:
        return embeddings.get_subscription_count()

    try:
        with peer_process(args, tmp_path, "scorer_node") as proc:
            manager = _Manager(node, "scorer_node")
            manager.wait()
            manager.configure_then_activate(f"{NS}/surprise", subscribers)
            wait_for_subscribers(node, embeddings)
            send(30)  # window 8: scores from the 9th embedding on
            assert spin_until(node, lambda: len(scores) == 30 - PARAMS["window"], 30.0)
            assert manager.transition(Transition.TRANSITION_DEACTIVATE)
            assert manager.state() == "inactive"
            assert spin_until(node, lambda: subscribers() == 0, 10.0)
            before = len(scores)
            send(10)
            spin_until(node, lambda: False, 1.0)
            assert len(scores) == before  # paused: nothing taken, nothing out
            assert manager.transition(Transition.TRANSITION_ACTIVATE)  # resumes where it was
            wait_for_subscribers(node, embeddings)
            send(5)
            assert spin_until(node, lambda: len(scores) == before + 5, 30.0)
            assert manager.transition(Transition.TRANSITION_DEACTIVATE)
            manager.cleanup_configure_shutdown(f"{NS}/surprise")
            assert proc.poll() is None
    finally:
        node.destroy_node()
        rclpy.shutdown()
    stamps = [s.header.stamp.sec * 10**9 + s.header.stamp.nanosec for s in scores]
    assert stamps == sorted(stamps)
    assert np.isfinite([s.score for s in scores]).all()


def _memory_args(tmp_path: Path, store: Path, autostart: bool) -> list[str]:
    params = _params(store, compressed=False)
    params["/**/memory_node"]["ros__parameters"]["autostart"] = autostart
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(params))
    args = [node_executable("memory_node"), "--ros-args", "--params-file", str(path)]
    return [*args, "-r", f"__ns:={NS}"]


def test_a_failed_configure_leaves_the_node_unconfigured_and_can_be_retried(
    tmp_path: Path,
) -> None:
    blocked = tmp_path / "disk"
    blocked.write_text("not a folder yet")  # e.g. a disk not mounted yet
    rclpy.init()
    node = Node("lifecycle_retry_test")
    try:
        args = _memory_args(tmp_path, blocked / "store", autostart=False)
        with peer_process(args, tmp_path, "memory_node") as proc:
            manager = _Manager(node, "memory_node")
            manager.wait()
            assert not manager.transition(Transition.TRANSITION_CONFIGURE)
            assert manager.state() == "unconfigured"
            assert proc.poll() is None
            blocked.unlink()
            assert manager.transition(Transition.TRANSITION_CONFIGURE)
            assert manager.transition(Transition.TRANSITION_ACTIVATE)
            client = node.create_client(RetrieveEpisodes, f"{NS}/retrieve_episodes")
            assert client.wait_for_service(timeout_sec=30.0)
            future = client.call_async(RetrieveEpisodes.Request(max_results=3))
            assert spin_until(node, future.done, 30.0)
            assert future.result().success  # type: ignore[union-attr]
            assert manager.transition(Transition.TRANSITION_ACTIVE_SHUTDOWN)
            assert manager.state() == "finalized"
        log = (tmp_path / "memory_node.log").read_text()
        assert log.count("configure failed:") == 1, log
    finally:
        node.destroy_node()
        rclpy.shutdown()
    assert (blocked / "store").is_dir()


def test_autostart_with_a_failed_configure_exits_with_status_2(tmp_path: Path) -> None:
    blocked = tmp_path / "disk"
    blocked.write_text("not a folder")
    args = _memory_args(tmp_path, blocked / "store", autostart=True)
    done = subprocess.run(
        [sys.executable, *args],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    assert "cannot start memory_node" in done.stderr
