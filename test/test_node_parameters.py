"""Live parameters over the real parameter services (issue 11, defect 4).

Each writable parameter of each node is set through ``<node>/set_parameters`` (what
``ros2 param set`` calls) and must reach the node's live objects: the nodes report the
values their objects use as ``applied.<name>`` on ``/diagnostics``, read back from those
objects, not from the parameter. The table below must name every writable setting of
``surprise_memory/config/``, so a new one cannot be added without a test. Bad values are
refused with a reason (range, a rule between settings, read-only), and a live cap changes
what the retrieval service accepts.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import rclpy
import synthetic_frames as sf
import yaml
from diagnostic_msgs.msg import DiagnosticArray
from rcl_interfaces.srv import SetParameters
from rclpy.node import Node
from rclpy.parameter import Parameter
from ros_helpers import node_executable, peer_process, spin_until
from test_memory_node import _params

from surprise_memory.config import NODE_CONFIGS, settings_of
from surprise_memory.srv import RetrieveEpisodes

NS = "/param_test"
FAST = {"diagnostics_period_seconds": 0.3}

NEW_VALUES: dict[str, dict[str, Any]] = {
    "encoder_node": {"input_silent_seconds": 3.0, "encoder_batch_interval_s": 0.2},
    "scorer_node": {
        "input_silent_seconds": 3.0,
        "gamma": 2.5,
        "habituation": True,
        "habituation_similarity": 0.7,
        "habituation_recovery_seconds": 100.0,
        "habituation_radius_m": 2.0,
        "max_episodes_per_minute": 6.0,
        "budget_window_seconds": 30.0,
        "budget_delay_seconds": 2.0,
        "pose_tolerance_seconds": 0.25,
    },
    "memory_node": {
        "input_silent_seconds": 3.0,
        "episode_frames": 4,
        "episode_before_seconds": 1.0,
        "episode_after_seconds": 1.5,
        "episode_timeout_seconds": 3.0,
        "embedder_batch": 4,
        "max_episodes": 5,
        "max_store_bytes": 10**9,
        "jpeg_quality": 50,
        "default_max_results": 3,
        "max_results_cap": 7,
        "ann_min_frames": 4000,  # PostgreSQL only; the folder store keeps and reports them
        "ann_candidates": 100,
        "ann_ef_search": 100,
        "store_timeout_seconds": 8.0,  # PostgreSQL only, as the three below
        "fleet_local_max_bytes": 10**8,
        "fleet_heartbeat_seconds": 2.0,
        "navigation_frame": "odom",
        "goal_standoff_meters": 1.0,
        "goal_facing": "robot",
        "goal_timeout_seconds": 2.0,
        "fixed_frames": "map,earth",
        "map_id": "lab-2",
        "max_goal_uncertainty_m": 0.5,
        "marker_max_episodes": 50,
        "marker_size_m": 1.0,
        "episode_preview_fps": 5.0,
        "snapshot_hold_seconds": 5.0,
        "snapshot_buffer_seconds": 60.0,
        "snapshot_aftermath_seconds": 2.0,
        "snapshot_timeout_seconds": 3.0,
        "place_history": 2,
        "pose_tolerance_seconds": 0.25,  # the place keyframes' odometry
        "place_revisit_seconds": 60.0,
        "place_min_interval_seconds": 1.0,
        "place_max_jump_m": 2.0,
        "place_max_speed_mps": 3.0,
        "place_settle_seconds": 4.0,
        "place_pose_max_age_seconds": 0.25,
        "place_status_radius_m": 3.0,
        "place_status_pass_seconds": 10.0,
        "place_still_there_similarity": 0.7,
    },
}
# the one-process pipeline declares the three nodes' settings and applies each the same way
NEW_VALUES["pipeline_node"] = {k: v for values in NEW_VALUES.values() for k, v in values.items()}
NAMESPACES = {"pipeline_node": "/param_test_one"}  # apart: it serves retrieve_episodes too


def test_the_table_names_every_writable_setting() -> None:
    for node, classes in NODE_CONFIGS.items():
        writable = {s.name for cls in classes for s in settings_of(cls) if not s.read_only}
        assert set(NEW_VALUES[node]) == writable, node


class _Peer:
    """A test node that talks to one node's parameter service and reads its diagnostics."""

    def __init__(self, node: Node, name: str) -> None:
        self.node = node
        self.name = name
        ns = NAMESPACES.get(name, NS)
        self.client = node.create_client(SetParameters, f"{ns}/{name}/set_parameters")
        self.values: dict[str, str] = {}
        node.create_subscription(DiagnosticArray, "/diagnostics", self._on_diag, 100)

    def _on_diag(self, msg: DiagnosticArray) -> None:
        for status in msg.status:
            if status.name.endswith(f" {self.name}"):
                self.values = {kv.key: kv.value for kv in status.values}

    def set(self, name: str, value: Any) -> tuple[bool, str]:
        request = SetParameters.Request(
            parameters=[Parameter(name, value=value).to_parameter_msg()]
        )
        future = self.client.call_async(request)
        assert spin_until(self.node, future.done, 30.0), f"{self.name}: no answer"
        (result,) = future.result().results  # type: ignore[union-attr]
        return result.successful, result.reason

    def applied(self, name: str) -> str | None:
        return self.values.get(f"applied.{name}")


def _expected(value: Any) -> str:
    return str(float(value)) if isinstance(value, float) else str(value)


def _start(tmp_path: Path) -> list[list[str]]:
    params = sf.node_params("/unused", None, **FAST)
    memory = _params(tmp_path / "store", compressed=False)["/**/memory_node"]
    memory["ros__parameters"].update(FAST)
    params["/**/memory_node"] = memory
    params["/**/pipeline_node"]["ros__parameters"]["store_path"] = str(tmp_path / "store_one")
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(params))
    common = ["--ros-args", "--params-file", str(path)]
    return [
        [node_executable(name), *common, "-r", f"__ns:={NAMESPACES.get(name, NS)}"]
        for name in NEW_VALUES
    ]


@pytest.fixture(scope="module")
def peers(tmp_path_factory: pytest.TempPathFactory) -> Any:
    tmp_path = tmp_path_factory.mktemp("params")
    encoder, scorer, memory, pipeline = _start(tmp_path)
    rclpy.init()
    node = Node("parameters_test")
    try:
        with (
            peer_process(encoder, tmp_path, "encoder_node"),
            peer_process(scorer, tmp_path, "scorer_node"),
            peer_process(memory, tmp_path, "memory_node"),
            peer_process(pipeline, tmp_path, "pipeline_node"),
        ):
            peers = {name: _Peer(node, name) for name in NEW_VALUES}
            for peer in peers.values():
                assert peer.client.wait_for_service(timeout_sec=90.0), peer.name
            yield node, peers
    finally:
        node.destroy_node()
        rclpy.shutdown()


@pytest.mark.parametrize(
    ("node_name", "name"),
    [(n, p) for n, values in NEW_VALUES.items() for p in values],
    ids=lambda v: v,
)
def test_each_writable_parameter_is_applied_live(peers: Any, node_name: str, name: str) -> None:
    node, all_peers = peers
    peer = all_peers[node_name]
    assert spin_until(node, lambda: peer.applied(name) is not None, 30.0), peer.values
    value = NEW_VALUES[node_name][name]
    assert peer.applied(name) != _expected(value), "pick a value other than the current one"
    ok, reason = peer.set(name, value)
    assert ok, reason
    assert spin_until(node, lambda: peer.applied(name) == _expected(value), 10.0), (
        name,
        peer.applied(name),
    )


def test_bad_values_are_refused_with_a_reason(peers: Any) -> None:
    _, all_peers = peers
    memory, scorer = all_peers["memory_node"], all_peers["scorer_node"]
    ok, reason = memory.set("jpeg_quality", 101)
    assert not ok and reason
    # a rule between two settings, which only the node's callback knows
    ok, reason = memory.set("default_max_results", 50)
    assert not ok and "max_results_cap" in reason, reason
    ok, reason = scorer.set("window", 16)  # read-only: the scorer's history means M frames
    assert not ok and reason
    ok, reason = scorer.set("gamma", float("nan"))
    assert not ok and reason
    ok, reason = scorer.set("gamma", "high")  # wrong type
    assert not ok and reason


def test_a_live_cap_changes_what_retrieval_accepts(peers: Any) -> None:
    node, all_peers = peers
    memory = all_peers["memory_node"]
    ok, reason = memory.set("max_results_cap", 7)
    assert ok, reason
    client = node.create_client(RetrieveEpisodes, f"{NS}/retrieve_episodes")
    assert client.wait_for_service(timeout_sec=30.0)
    results = {}
    for k in (7, 8):
        future = client.call_async(RetrieveEpisodes.Request(max_results=k))
        assert spin_until(node, future.done, 30.0)
        results[k] = future.result()
    assert results[7].success, results[7].message
    assert not results[8].success and "max_results_cap=7" in results[8].message
