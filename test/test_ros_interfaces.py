"""The generated interfaces, from the colcon install, exchanged over real DDS."""

from __future__ import annotations

import math
from pathlib import Path

import rclpy
from rclpy.node import Node
from rclpy.qos import QoSProfile, ReliabilityPolicy
from ros_helpers import FIXTURES, peer_process, spin_until

import surprise_memory
from surprise_memory.msg import Episode, FrameEmbedding, SurpriseEvent, SurpriseScore
from surprise_memory.srv import RetrieveEpisodes


def test_interfaces_come_from_the_install() -> None:
    # the hand-written package was installed over the generated one; both are importable
    path = Path(surprise_memory.__file__).resolve()
    assert "install" in path.parts, path
    assert (path.parent / "msg").is_dir() and (path.parent / "surprise" / "scorer.py").is_file()


def test_the_installed_package_is_the_source_tree() -> None:
    # rosidl installs an empty __init__.py of the same name; ours must be the one that stays
    # (CMake skips a file whose destination's time matches to the second; CI once kept
    # the empty one, and every run record then failed on the missing __version__)
    installed = Path(surprise_memory.__file__).resolve().parent
    source = Path(__file__).resolve().parents[1] / "surprise_memory"
    differ = [
        str(py.relative_to(source))
        for py in sorted(source.rglob("*.py"))
        if "__pycache__" not in py.parts and not _same_file(installed / py.relative_to(source), py)
    ]
    assert not differ, f"the colcon install differs from the source (rebuild): {differ}"
    assert surprise_memory.__version__ and surprise_memory.__doc__


def _same_file(installed: Path, source: Path) -> bool:
    return installed.is_file() and installed.read_bytes() == source.read_bytes()


def test_contract_fields() -> None:
    assert Episode.get_fields_and_field_types() == {
        "id": "string",
        "robot_id": "string",
        "header": "std_msgs/Header",
        "start": "builtin_interfaces/Time",
        "end": "builtin_interfaces/Time",
        "pose": "geometry_msgs/Pose",
        "pose_valid": "boolean",
        "surprise": "float",
        "threshold": "float",
        "frame_stamps": "sequence<builtin_interfaces/Time>",
        "frame_uris": "sequence<string>",
        # interface version 2: the stored JPEGs, not decoded rgb8 (issue 12, item 7)
        "frames": "sequence<sensor_msgs/CompressedImage>",
        # interface version 5: the camera that saw it and where it looked (issue 42)
        "camera": "string",
        "camera_frame_id": "string",
        "camera_pose": "geometry_msgs/Pose",
        "camera_pose_valid": "boolean",
        # interface version 6: how far its pose can be trusted (issue 48)
        "pose_sigma_m": "float",
        "pose_sigma_valid": "boolean",
        "map_id": "string",
        # interface version 7: the record's kind, and whether its place still looks so
        "kind": "string",
        "place_key": "string",
        "place_status_valid": "boolean",
        "place_status_key": "string",
        "last_seen": "builtin_interfaces/Time",
        "view_id": "string",
        "view_similarity": "float",
        "still_there": "uint8",
    }
    assert (Episode.STILL_THERE_UNKNOWN, Episode.STILL_THERE_YES, Episode.STILL_THERE_NO) == (
        0,
        1,
        2,
    )
    req = RetrieveEpisodes.Request.get_fields_and_field_types()
    assert req == {
        "text": "string",
        "embedding": "sequence<float>",
        "embedding_model": "string",
        "embedding_pretrained": "uint8",
        "image": "sensor_msgs/Image",
        "start": "builtin_interfaces/Time",
        "end": "builtin_interfaces/Time",
        "use_location": "boolean",
        "location": "geometry_msgs/Point",
        "location_frame": "string",
        "radius": "float",
        "robot_id": "string",
        "camera": "string",
        "max_results": "uint32",
        "include_images": "boolean",
        "kinds": "sequence<string>",
        "include_place_status": "boolean",
    }
    assert RetrieveEpisodes.Response.get_fields_and_field_types() == {
        "success": "boolean",
        "message": "string",
        "episodes": "sequence<surprise_memory/Episode>",
        "scores": "sequence<float>",
        "interface_version": "uint32",
        "origin": "builtin_interfaces/Time",
        "partial": "string",
    }
    assert RetrieveEpisodes.Request.INTERFACE_VERSION == 7
    assert FrameEmbedding.get_fields_and_field_types()["embedding"] == "sequence<float>"
    assert {"score", "kl", "threshold", "header"} <= set(SurpriseScore.get_fields_and_field_types())
    assert {"pose", "pose_valid", "decided", "pose_sigma_m", "pose_sigma_valid"} <= set(
        SurpriseEvent.get_fields_and_field_types()
    )
    # each camera scored apart, each event with its camera's pose (issue 42)
    assert FrameEmbedding.get_fields_and_field_types()["camera"] == "string"
    assert SurpriseScore.get_fields_and_field_types()["camera"] == "string"
    event = SurpriseEvent.get_fields_and_field_types()
    assert {k: event[k] for k in event if k.startswith("camera")} == {
        "camera": "string",
        "camera_frame_id": "string",
        "camera_pose": "geometry_msgs/Pose",
        "camera_pose_valid": "boolean",
        "camera_pose_source": "string",
    }


def test_score_topic_and_retrieve_service_over_dds(tmp_path: Path) -> None:
    rclpy.init()
    node = Node("interface_test")
    try:
        received: list[SurpriseScore] = []
        node.create_subscription(
            SurpriseScore,
            "surprise",
            received.append,
            QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE),
        )
        client = node.create_client(RetrieveEpisodes, "retrieve_episodes")
        with peer_process([str(FIXTURES / "interface_peer.py")], tmp_path) as peer:
            assert spin_until(node, lambda: len(received) >= 3, timeout=30.0), "no SurpriseScore"
            assert peer.poll() is None
            msg = received[-1]
            assert msg.header.frame_id == "camera"
            assert msg.score == 0.5 + msg.history
            assert msg.kl == 0.25
            assert math.isnan(received[0].threshold) or received[0].history > 0

            assert client.wait_for_service(timeout_sec=30.0), "service never appeared"
            request = RetrieveEpisodes.Request()
            request.text = "the golf cart stopped"
            request.start.sec = 10
            request.end.sec = 20
            request.use_location = True
            request.location.x = 3.5
            request.radius = 2.0
            request.max_results = 4
            future = client.call_async(request)
            assert spin_until(node, future.done, timeout=30.0), "no response"
            response = future.result()
            assert response is not None and response.success
            assert response.message == "4 requested"
            (episode,) = response.episodes
            assert episode.id == "echo:the golf cart stopped"
            assert episode.pose.position.x == 3.5 and episode.pose_valid
            assert [t.sec for t in episode.frame_stamps] == [10, 20]
            assert list(episode.frame_uris) == ["frames/a.jpg", "frames/b.jpg"]
            assert list(response.scores) == [0.75]

            bad = RetrieveEpisodes.Request()
            bad.start.sec, bad.end.sec = 20, 10
            future = client.call_async(bad)
            assert spin_until(node, future.done, timeout=30.0)
            response = future.result()
            assert response is not None
            assert not response.success and "before start" in response.message
    finally:
        node.destroy_node()
        rclpy.shutdown()
