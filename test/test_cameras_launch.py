"""launch_testing: ``cameras:=front,left,rear`` runs one encoder for three cameras (issue 42).

Both shapes, started by the installed launch file with ``cameras`` as a launch argument:
each camera's input is remapped onto ``/<name>/image_raw``, or onto its
``<name>_image_topic`` argument (``left`` here). Three synthetic cameras publish at once,
each with a scene change of its own, while odometry says where the robot is; each change
comes back as an episode of its camera, with its optical frame and a camera pose looking
where that camera is mounted, and the one encoder reports windows of several cameras in
one forward. Runs where launch_testing is installed (an apt ROS 2, pytest < 8.4);
elsewhere it skips with that reason. test_cameras_live.py covers the same ground
everywhere by starting the node executables directly.
"""

from __future__ import annotations

import json
import math
import tempfile
import unittest
from pathlib import Path

import pytest

pytest.importorskip(
    "launch_testing", reason="launch_testing is not installed (it comes with an apt ROS 2)"
)

import launch_testing.actions
import launch_testing.asserts
import rclpy
import synthetic_frames as sf
from diagnostic_msgs.msg import DiagnosticArray
from nav_msgs.msg import Odometry
from rclpy.qos import QoSProfile, ReliabilityPolicy
from ros_helpers import include_launch_file, spin_until, wait_for_subscribers
from sensor_msgs.msg import Image

from launch import LaunchDescription
from surprise_memory.memory.camera_view import viewing_yaw
from surprise_memory.msg import Episode
from surprise_memory.nodes.messages import (
    image_msg_from_rgb,
    ns_to_time,
    pose_from_msg,
    time_to_ns,
)

WORK = Path(tempfile.mkdtemp(prefix="surprise_memory_cameras_launch_"))
NS = "/surprise_memory"
MOUNTS = {"front": 0.0, "left": 90.0, "rear": 180.0}  # the cameras' yaw on the robot
TOPICS = {"front": "/front/image_raw", "left": "/left_camera/image", "rear": "/rear/image_raw"}
CHANGE_AT = {"front": 45, "left": 75, "rear": 105}  # each camera's own scene change
ROBOT_YAW = math.radians(30.0)
ENCODER = {"split": "encoder_node", "one_process": "pipeline_node"}


@pytest.mark.launch_test
@launch_testing.parametrize("shape", list(ENCODER))
def generate_test_description(shape: str) -> tuple[LaunchDescription, dict[str, str]]:
    # reliable camera inputs and a deep encoder queue: nothing is dropped on a loaded machine
    qos = {
        topic: {"subscription": {"reliability": "reliable", "history": "keep_last", "depth": 1000}}
        for topic in TOPICS.values()
    }
    params = sf.node_params(
        str(WORK / shape / "store"),
        encoder_queue=256,
        diagnostics_period_seconds=1.0,
        qos_overrides=qos,
    )
    params = json.loads(json.dumps(params))  # every node its own copies: rcl refuses aliases
    cameras = ",".join(f"{name}:yaw={yaw:g}" for name, yaw in MOUNTS.items())
    pipeline = include_launch_file(
        WORK / shape, params, cameras=cameras, left_image_topic=TOPICS["left"], pipeline=shape
    )
    return LaunchDescription([pipeline, launch_testing.actions.ReadyToTest()]), {
        "encoder": ENCODER[shape]
    }


class TestThreeCameras(unittest.TestCase):
    def test_one_encoder_and_an_episode_per_camera(self, encoder: str) -> None:
        rclpy.init()
        node = rclpy.create_node("cameras_launch_test_driver")
        try:
            reliable = QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE)
            episodes: list[Episode] = []
            values: dict[str, str] = {}

            def on_diag(msg: DiagnosticArray) -> None:
                for status in msg.status:
                    if status.name.split(": ")[-1] == encoder:
                        values.update({kv.key: kv.value for kv in status.values})

            node.create_subscription(Episode, f"{NS}/episodes", episodes.append, reliable)
            node.create_subscription(DiagnosticArray, "/diagnostics", on_diag, 50)
            cameras = {n: node.create_publisher(Image, t, reliable) for n, t in TOPICS.items()}
            odom = node.create_publisher(Odometry, "/odom", reliable)
            for publisher in [*cameras.values(), odom]:
                wait_for_subscribers(node, publisher, timeout=90)
            # one encoder in the graph, for the three cameras
            names = [n for n, _ in node.get_node_names_and_namespaces()]
            self.assertEqual([n for n in names if n in ENCODER.values()], [encoder])
            scenes = {n: sf.camera_scene(seed, CHANGE_AT[n]) for seed, n in enumerate(MOUNTS)}
            for i, t in enumerate(sf.stamps()):
                o = Odometry()
                o.header.stamp, o.header.frame_id = ns_to_time(t), "odom"
                o.pose.pose.orientation.z = math.sin(ROBOT_YAW / 2)
                o.pose.pose.orientation.w = math.cos(ROBOT_YAW / 2)
                odom.publish(o)
                for name, publisher in cameras.items():
                    publisher.publish(image_msg_from_rgb(scenes[name][i], t, f"{name}_optical"))
                spin_until(node, lambda: False, 1.0 / sf.FPS)
            spin_until(
                node,
                lambda: (
                    {e.camera for e in episodes} >= set(MOUNTS) and "batch_cameras_max" in values
                ),
                60.0,
            )
            self.assertGreaterEqual(int(values["batch_cameras_max"]), 2)
            for name, mount in MOUNTS.items():
                self.assertGreater(int(values[f"{name}.windows_encoded"]), 0)
                change = sf.stamps()[CHANGE_AT[name]]
                mine = [
                    e
                    for e in episodes
                    if e.camera == name
                    and abs(time_to_ns(e.header.stamp) - change) <= 4 * 10**9 // sf.FPS
                ]
                self.assertTrue(mine, (name, [(e.camera, e.header.stamp) for e in episodes]))
                for e in mine:
                    self.assertEqual(e.camera_frame_id, f"{name}_optical")
                    self.assertTrue(e.camera_pose_valid)
                    yaw = viewing_yaw(pose_from_msg(e.camera_pose, e.header.frame_id))
                    assert yaw is not None
                    want = ROBOT_YAW + math.radians(mount)
                    self.assertLess(abs(math.remainder(yaw - want, 2 * math.pi)), 1e-3)
        finally:
            node.destroy_node()
            rclpy.shutdown()


@launch_testing.post_shutdown_test()
class TestShutdown(unittest.TestCase):
    def test_exit_codes(self, proc_info: object) -> None:
        launch_testing.asserts.assertExitCodes(proc_info, allowable_exit_codes=[0, -2, -15])
