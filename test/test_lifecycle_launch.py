"""launch_testing: ``autostart:=false`` leaves the managed nodes to a lifecycle manager.

The launch file starts the nodes unconfigured (no model loaded, no subscription); the
test, as the robot's manager, finds each one ``unconfigured`` through
``<node>/get_state``, then configures and activates one through ``<node>/change_state``:
the scorer of the three-node split, or ``pipeline_node`` (``pipeline:=one_process``), which
then takes the camera. ``autostart:=true`` (the default) is covered by
test_pipeline_launch.py, where frames go in and events come out. Runs where
launch_testing is installed; elsewhere it skips with that reason.
"""

from __future__ import annotations

import tempfile
import time
import unittest
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip(
    "launch_testing", reason="launch_testing is not installed (it comes with an apt ROS 2)"
)

import launch_testing.actions
import launch_testing.asserts
import rclpy
from lifecycle_msgs.msg import Transition
from lifecycle_msgs.srv import ChangeState, GetState
from ros_helpers import include_launch_file
from sensor_msgs.msg import Image
from synthetic_frames import TEST_PARAMS

from launch import LaunchDescription

WORK = Path(tempfile.mkdtemp(prefix="surprise_memory_lifecycle_launch_"))
NS = "/surprise_memory"


SHAPES = {
    "split": ("encoder_node", "scorer_node", "memory_node"),
    "one_process": ("pipeline_node",),
}


@pytest.mark.launch_test
@launch_testing.parametrize("shape", list(SHAPES))
def generate_test_description(shape: str) -> tuple[LaunchDescription, dict[str, Any]]:
    pipeline = include_launch_file(
        WORK / shape,
        TEST_PARAMS,
        image_topic="/lifecycle_camera/image_raw",
        autostart="false",
        pipeline=shape,
    )
    nodes = SHAPES[shape]
    return LaunchDescription([pipeline, launch_testing.actions.ReadyToTest()]), {
        "nodes": nodes,
        "managed": nodes[-1] if shape == "one_process" else "scorer_node",
    }


def _call(node: Any, client: Any, request: Any) -> Any:
    assert client.wait_for_service(timeout_sec=60.0), client.srv_name
    future = client.call_async(request)
    deadline = time.monotonic() + 60
    while not future.done() and time.monotonic() < deadline:
        rclpy.spin_once(node, timeout_sec=0.1)
    assert future.done(), client.srv_name
    return future.result()


class TestManagedByAManager(unittest.TestCase):
    def test_nodes_wait_unconfigured_then_obey_the_manager(
        self, nodes: tuple[str, ...], managed: str
    ) -> None:
        rclpy.init()
        node = rclpy.create_node("lifecycle_launch_manager")
        try:
            for name in nodes:
                get = node.create_client(GetState, f"{NS}/{name}/get_state")
                state = _call(node, get, GetState.Request()).current_state.label
                self.assertEqual(state, "unconfigured", name)
            camera = node.create_publisher(Image, "/lifecycle_camera/image_raw", 10)
            for _ in range(10):
                rclpy.spin_once(node, timeout_sec=0.1)
            self.assertEqual(camera.get_subscription_count(), 0)  # nobody takes frames
            change = node.create_client(ChangeState, f"{NS}/{managed}/change_state")
            for transition in (Transition.TRANSITION_CONFIGURE, Transition.TRANSITION_ACTIVATE):
                request = ChangeState.Request()
                request.transition.id = transition
                self.assertTrue(_call(node, change, request).success, transition)
            get = node.create_client(GetState, f"{NS}/{managed}/get_state")
            self.assertEqual(_call(node, get, GetState.Request()).current_state.label, "active")
            if managed == "pipeline_node":  # active: it takes the camera, once
                for _ in range(50):
                    rclpy.spin_once(node, timeout_sec=0.1)
                    if camera.get_subscription_count():
                        break
                self.assertEqual(camera.get_subscription_count(), 1)
        finally:
            node.destroy_node()
            rclpy.shutdown()


@launch_testing.post_shutdown_test()
class TestShutdown(unittest.TestCase):
    def test_exit_codes(self, proc_info: object) -> None:
        launch_testing.asserts.assertExitCodes(proc_info, allowable_exit_codes=[0, -2, -15])
