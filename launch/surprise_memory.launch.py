"""Launch the surprise_memory pipeline: encoder_node, scorer_node and memory_node.

    ros2 launch surprise_memory surprise_memory.launch.py image_topic:=/camera/image_raw \
        use_sim_time:=false params_file:=<yaml> device:=auto store_path:=~/.ros/surprise_memory

All three nodes run in the /surprise_memory namespace; their topics (embedding, surprise,
events, episodes) and the retrieve_episodes service are relative to it. The camera topic is
remapped onto the encoder's and the memory node's `image` input.
"""

from __future__ import annotations

import os

from ament_index_python.packages import get_package_share_directory
from launch.actions import DeclareLaunchArgument
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node
from launch_ros.parameter_descriptions import ParameterValue

from launch import LaunchDescription


def generate_launch_description() -> LaunchDescription:
    """The three nodes with their launch arguments."""
    share = get_package_share_directory("surprise_memory")
    args = [
        DeclareLaunchArgument(
            "image_topic", default_value="/camera/image_raw", description="Camera topic"
        ),
        DeclareLaunchArgument(
            "use_sim_time",
            default_value="false",
            description="Use /clock (true when replaying a bag with `ros2 bag play --clock`)",
        ),
        DeclareLaunchArgument(
            "params_file",
            default_value=os.path.join(share, "config", "surprise_memory.yaml"),
            description="Parameters of the three nodes",
        ),
        DeclareLaunchArgument(
            "device", default_value="auto", description="Model device: auto, cuda or cpu"
        ),
        DeclareLaunchArgument(
            "store_path",
            default_value=os.path.join(os.path.expanduser("~"), ".ros", "surprise_memory"),
            description="Folder of the episode store",
        ),
        DeclareLaunchArgument(
            "log_level", default_value="info", description="Log level of the three nodes"
        ),
    ]
    sim_time = ParameterValue(LaunchConfiguration("use_sim_time"), value_type=bool)
    common = {
        "namespace": "surprise_memory",
        "output": "screen",
        "emulate_tty": True,
        "arguments": ["--ros-args", "--log-level", LaunchConfiguration("log_level")],
    }
    params = LaunchConfiguration("params_file")
    image = [("image", LaunchConfiguration("image_topic"))]
    device = LaunchConfiguration("device")
    nodes = [
        Node(
            package="surprise_memory",
            executable="encoder_node",
            name="encoder_node",
            parameters=[params, {"use_sim_time": sim_time, "device": device}],
            remappings=image,
            **common,
        ),
        Node(
            package="surprise_memory",
            executable="scorer_node",
            name="scorer_node",
            parameters=[params, {"use_sim_time": sim_time}],
            **common,
        ),
        Node(
            package="surprise_memory",
            executable="memory_node",
            name="memory_node",
            parameters=[
                params,
                {
                    "use_sim_time": sim_time,
                    "embedder_device": device,
                    "store_path": LaunchConfiguration("store_path"),
                },
            ],
            remappings=image,
            **common,
        ),
    ]
    return LaunchDescription([*args, *nodes])
