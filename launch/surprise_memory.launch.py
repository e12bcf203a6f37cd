"""Launch surprise_memory: encoder_node, scorer_node and memory_node, or pipeline_node.

    ros2 launch surprise_memory surprise_memory.launch.py image_topic:=/camera/image_raw \
        use_sim_time:=false params_file:=<yaml> device:=cpu store_path:=/data/episodes \
        pipeline:=split

    ros2 launch surprise_memory surprise_memory.launch.py cameras:=front,left,rear \
        front_image_topic:=/front/image_raw left_image_topic:=/left/image_raw pipeline:=one_process

``pipeline:=split`` (the default) starts the three nodes, which may run on different
machines; ``pipeline:=one_process`` starts ``pipeline_node``, the same work in one process
with one camera subscription. One params file serves both: ``pipeline_node`` gets the
sections the three nodes would read, merged (``surprise_memory.nodes.params_file``), then a
``pipeline_node`` section if the file has one. The nodes run
in the /surprise_memory namespace; their topics (embedding, surprise, events, episodes) and
the retrieve_episodes service are relative to it. The camera topic is remapped onto the
`image` input of the nodes that take it.

Several cameras: ``cameras:=front,left,rear`` (or the params file's ``cameras``) gives every
node the cameras; each camera's input ``<name>/image`` is remapped onto the launch argument
``<name>_image_topic`` (given on the command line like any other; default
``/<name>/image_raw``), unless its ``cameras`` entry names its topic itself
(``front:topic=/cam0/image_raw``). ``image_topic`` then has no use. One encoder encodes
every camera's windows (``surprise_memory.nodes.params_file.camera_remappings``).

The params file is the one place of every setting. The launch arguments in
:data:`ARGUMENT_PARAMETERS` (``device``, ``store_path``) are shortcuts onto parameters of the
params file: left empty (their default) they change nothing, so the params file's value
stands; given, they override it on the nodes named there.

``rviz:=true`` also starts ``rviz2`` with the shipped ``config/surprise_memory.rviz`` (camera,
episode markers, the newest episode's frames) and ``rviz_fixed_frame`` as its fixed frame,
where rviz2 is installed; where it is not, one log line says so and the nodes run alone.

Large camera frames: ``fastdds_profile`` (default ``auto``) gives the nodes the Fast DDS
profile the environment names, else the shipped ``config/fastdds_large_frames.xml``
(``surprise_memory.middleware``); the camera driver needs it too (README "Large camera
frames: middleware settings").

The nodes are managed (lifecycle) nodes. With ``autostart:=true`` (the default) this file
drives each one through configure and activate with lifecycle launch events; with
``autostart:=false`` it starts them unconfigured and leaves the transitions to the robot's
lifecycle manager (``<node>/change_state``). Either way the nodes' own ``autostart``
parameter is set false here: launch, not the node, decides.
"""

from __future__ import annotations

import os

from ament_index_python.packages import PackageNotFoundError, get_package_share_directory
from launch.actions import (
    DeclareLaunchArgument,
    EmitEvent,
    LogInfo,
    OpaqueFunction,
    RegisterEventHandler,
)
from launch.events import matches_action
from launch.launch_context import LaunchContext
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import LifecycleNode, Node
from launch_ros.event_handlers import OnStateTransition
from launch_ros.events.lifecycle import ChangeState
from launch_ros.parameter_descriptions import ParameterValue
from lifecycle_msgs.msg import Transition

from launch import LaunchDescription
from surprise_memory.middleware import profile_environment
from surprise_memory.nodes.params_file import camera_remappings, one_process_parameters

SHAPES = {
    "split": ("encoder_node", "scorer_node", "memory_node"),
    "one_process": ("pipeline_node",),
}
"""The ``pipeline`` launch argument -> the nodes it starts, by executable (= node name)."""

ARGUMENT_PARAMETERS: dict[str, dict[str, tuple[str, ...]]] = {
    "device": {
        "encoder_node": ("encoder_device",),
        "memory_node": ("embedder_device",),
        "pipeline_node": ("encoder_device", "embedder_device"),
    },
    "store_path": {"memory_node": ("store_path",), "pipeline_node": ("store_path",)},
    "cameras": {
        "encoder_node": ("cameras",),
        "scorer_node": ("cameras",),
        "memory_node": ("cameras",),
        "pipeline_node": ("cameras",),
    },
}
"""Launch argument -> {node: the parameters it sets}; an empty argument sets nothing."""

CAMERA_NODES = ("encoder_node", "memory_node", "pipeline_node")
"""The nodes whose camera inputs are remapped (``image_topic``, ``<name>_image_topic``)."""

SIGTERM_TIMEOUT_S = {
    "encoder_node": "10",
    "scorer_node": "10",
    "memory_node": "60",
    "pipeline_node": "60",
}
"""Seconds between launch's SIGINT and its SIGTERM. The memory node (and pipeline_node)
embeds and stores the episodes still pending at shutdown (at most 32, bounded by its
queue), which takes longer than launch's default of 5 s with the full-size embedder on a
CPU."""


RVIZ_CONFIG = "surprise_memory.rviz"
"""The RViz config in the package's ``config/`` that ``rviz:=true`` opens."""


def _transition(node: LifecycleNode, transition_id: int) -> EmitEvent:
    return EmitEvent(
        event=ChangeState(lifecycle_node_matcher=matches_action(node), transition_id=transition_id)
    )


def _nodes(context: LaunchContext) -> list[object]:
    """The nodes of the chosen shape, with the launch arguments given applied (and autostart)."""
    sim_time = ParameterValue(LaunchConfiguration("use_sim_time"), value_type=bool)
    given = {arg: LaunchConfiguration(arg).perform(context).strip() for arg in ARGUMENT_PARAMETERS}
    autostart = LaunchConfiguration("autostart").perform(context).strip().lower() == "true"
    shape = LaunchConfiguration("pipeline").perform(context).strip()
    params_file = LaunchConfiguration("params_file").perform(context)
    # large camera frames: the Fast DDS profile (README "Large camera frames: middleware settings")
    profile = LaunchConfiguration("fastdds_profile").perform(context)
    config_dir = os.path.join(get_package_share_directory("surprise_memory"), "config")
    environment = profile_environment(profile, config_dir, os.environ)
    # the cameras: the argument, else the params file's (their inputs are remapped here)
    cameras = given["cameras"] or str(one_process_parameters(params_file).get("cameras", ""))
    arguments = context.launch_configurations
    remaps = camera_remappings(
        cameras,
        LaunchConfiguration("image_topic").perform(context),
        lambda name: arguments.get(f"{name}_image_topic"),
    )
    nodes: list[object] = []
    for name in SHAPES[shape]:  # the argument's choices are the keys
        overrides: dict[str, object] = {"use_sim_time": sim_time, "autostart": False}
        for arg, targets in ARGUMENT_PARAMETERS.items():
            for parameter in targets.get(name, ()) if given[arg] else ():
                overrides[parameter] = given[arg]
        image = remaps if name in CAMERA_NODES else []
        node = LifecycleNode(
            package="surprise_memory",
            executable=name,
            name=name,
            namespace="surprise_memory",
            # rcl gives a node only its own sections: pipeline_node gets the three nodes'
            parameters=[
                one_process_parameters(params_file) if name == "pipeline_node" else params_file,
                overrides,
            ],
            remappings=image,
            arguments=["--ros-args", "--log-level", LaunchConfiguration("log_level")],
            output="screen",
            emulate_tty=True,
            sigterm_timeout=SIGTERM_TIMEOUT_S[name],
            additional_env=environment,
        )
        nodes.append(node)
        if autostart:  # configure now; activate once it is inactive (configured)
            nodes.append(
                RegisterEventHandler(
                    OnStateTransition(
                        target_lifecycle_node=node,
                        goal_state="inactive",
                        entities=[_transition(node, Transition.TRANSITION_ACTIVATE)],
                        handle_once=True,
                    )
                )
            )
            nodes.append(_transition(node, Transition.TRANSITION_CONFIGURE))
    return nodes


def _rviz(context: LaunchContext) -> list[object]:
    """rviz2 with the shipped config (``rviz:=true``), where rviz2 is installed."""
    if LaunchConfiguration("rviz").perform(context).strip().lower() != "true":
        return []
    try:
        get_package_share_directory("rviz2")
    except PackageNotFoundError:
        return [LogInfo(msg="rviz:=true, but rviz2 is not installed: the nodes run without it")]
    config = os.path.join(get_package_share_directory("surprise_memory"), "config", RVIZ_CONFIG)
    fixed_frame = LaunchConfiguration("rviz_fixed_frame").perform(context)
    sim_time = ParameterValue(LaunchConfiguration("use_sim_time"), value_type=bool)
    return [
        Node(
            package="rviz2",
            executable="rviz2",
            name="rviz2",
            arguments=["-d", config, "-f", fixed_frame],
            parameters=[{"use_sim_time": sim_time}],
            output="screen",
        )
    ]


def generate_launch_description() -> LaunchDescription:
    """The launch arguments and the nodes (three, or one with ``pipeline:=one_process``)."""
    share = get_package_share_directory("surprise_memory")
    args = [
        DeclareLaunchArgument(
            "image_topic", default_value="/camera/image_raw", description="Camera topic"
        ),
        DeclareLaunchArgument(
            "cameras",
            default_value="",
            description="The robot's cameras, e.g. front,left,rear (each read from "
            "<name>_image_topic, default /<name>/image_raw; one encoder for all); empty = the "
            "params file's cameras (one camera on image_topic by default)",
        ),
        DeclareLaunchArgument(
            "use_sim_time",
            default_value="false",
            description="Use /clock (true when replaying a bag with `ros2 bag play --clock`)",
        ),
        DeclareLaunchArgument(
            "params_file",
            default_value=os.path.join(share, "config", "surprise_memory.yaml"),
            description="Parameters of the nodes (a section per node)",
        ),
        DeclareLaunchArgument(
            "pipeline",
            default_value="split",
            choices=list(SHAPES),
            description="split: encoder_node, scorer_node, memory_node (distributed setups); "
            "one_process: pipeline_node, the same work in one process with one camera "
            "subscription (one GPU)",
        ),
        DeclareLaunchArgument(
            "device",
            default_value="",
            description="Model device of encoder and embedder (auto, cpu, cuda, cuda:N); "
            "empty = the params file's encoder_device / embedder_device",
        ),
        DeclareLaunchArgument(
            "store_path",
            default_value="",
            description="Folder of the episode store; empty = the params file's store_path",
        ),
        DeclareLaunchArgument(
            "log_level", default_value="info", description="Log level of the nodes"
        ),
        DeclareLaunchArgument(
            "fastdds_profile",
            default_value="auto",
            description="Fast DDS profile of the nodes: auto = the one the environment names "
            "(FASTDDS_/FASTRTPS_DEFAULT_PROFILES_FILE), else the shipped "
            "config/fastdds_large_frames.xml (16 MiB shared memory: large frames); a path; "
            "none = leave the environment as it is. The camera driver needs it too (README)",
        ),
        DeclareLaunchArgument(
            "autostart",
            default_value="true",
            description="Configure and activate the (lifecycle) nodes; false = leave them "
            "unconfigured for a lifecycle manager",
        ),
        DeclareLaunchArgument(
            "rviz",
            default_value="false",
            description="Also start rviz2 with config/surprise_memory.rviz (camera, episode "
            "markers, the newest episode's frames) where rviz2 is installed",
        ),
        DeclareLaunchArgument(
            "rviz_fixed_frame",
            default_value="map",
            description="RViz's fixed frame: the frame of the episode poses (map with tf; "
            "odom when poses come from odometry)",
        ),
    ]
    return LaunchDescription(
        [*args, OpaqueFunction(function=_nodes), OpaqueFunction(function=_rviz)]
    )
