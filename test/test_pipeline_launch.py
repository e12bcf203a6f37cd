"""launch_testing: the launch file starts the pipeline; frames in, scores and an event out.

Both shapes: ``pipeline:=split`` (three nodes, two camera subscriptions) and
``pipeline:=one_process`` (``pipeline_node``, one camera subscription). Runs where
launch_testing is installed (an apt ROS 2: `colcon test` or `pytest` in a sourced
workspace, pytest < 8.4); elsewhere it skips with that reason. test_pipeline_nodes.py and
test_pipeline_node.py cover the same ground everywhere by starting the node executables
directly.
"""

from __future__ import annotations

import tempfile
import time
import unittest
from pathlib import Path

import pytest

pytest.importorskip(
    "launch_testing", reason="launch_testing is not installed (it comes with an apt ROS 2)"
)

import launch_testing.actions
import launch_testing.asserts
import rclpy
from rclpy.qos import QoSProfile, ReliabilityPolicy
from ros_helpers import include_launch_file
from sensor_msgs.msg import Image
from synthetic_frames import TEST_PARAMS, scene_change_frames

from launch import LaunchDescription
from surprise_memory.msg import SurpriseEvent, SurpriseScore
from surprise_memory.nodes.messages import ns_to_time

WORK = Path(tempfile.mkdtemp(prefix="surprise_memory_launch_"))


@pytest.mark.launch_test
@launch_testing.parametrize("shape", ["split", "one_process"])
def generate_test_description(shape: str) -> tuple[LaunchDescription, dict[str, int]]:
    # a params file written for the split, no pipeline_node section: one_process must get
    # the three nodes' settings (tiny presets; the defaults would ask the hub) from launch
    split_only = {k: v for k, v in TEST_PARAMS.items() if not k.endswith("/pipeline_node")}
    pipeline = include_launch_file(
        WORK / shape, split_only, image_topic="/test_camera/image_raw", pipeline=shape
    )
    cameras = 2 if shape == "split" else 1  # camera subscriptions: encoder + memory, or one
    return LaunchDescription([pipeline, launch_testing.actions.ReadyToTest()]), {"cameras": cameras}


class TestPipeline(unittest.TestCase):
    def test_scores_and_an_event(self, cameras: int) -> None:
        rclpy.init()
        node = rclpy.create_node("launch_test_driver")
        try:
            reliable = QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE)
            scores: list[SurpriseScore] = []
            events: list[SurpriseEvent] = []
            ns = "/surprise_memory"
            node.create_subscription(SurpriseScore, f"{ns}/surprise", scores.append, reliable)
            node.create_subscription(SurpriseEvent, f"{ns}/events", events.append, reliable)
            pub = node.create_publisher(Image, "/test_camera/image_raw", reliable)
            deadline = time.monotonic() + 60
            while pub.get_subscription_count() < cameras and time.monotonic() < deadline:
                rclpy.spin_once(node, timeout_sec=0.1)
            self.assertEqual(pub.get_subscription_count(), cameras)
            for stamp_ns, msg in scene_change_frames():
                msg.header.stamp = ns_to_time(stamp_ns)
                pub.publish(msg)
                rclpy.spin_once(node, timeout_sec=0.05)
            deadline = time.monotonic() + 60
            while not events and time.monotonic() < deadline:
                rclpy.spin_once(node, timeout_sec=0.1)
            self.assertTrue(scores, "no SurpriseScore arrived")
            self.assertTrue(events, "no SurpriseEvent arrived")
        finally:
            node.destroy_node()
            rclpy.shutdown()


@launch_testing.post_shutdown_test()
class TestShutdown(unittest.TestCase):
    def test_exit_codes(self, proc_info: object) -> None:
        launch_testing.asserts.assertExitCodes(proc_info, allowable_exit_codes=[0, -2, -15])
