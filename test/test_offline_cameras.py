"""``process`` of a bag of several cameras (issue 42): every camera's topic, or those named.

A rosbag2 of two cameras (``/front/image_raw`` and ``/rear/image_raw``, each with a scene
change of its own) and ``/tf``: ``process --all-cameras`` and ``process --cameras
front:yaw=0,rear:yaw=180`` store each camera's episodes with that camera, a plain
``process`` says how to choose, and the topics resolve by name.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import synthetic_frames as sf
from test_cli import TINY, run
from test_sources import NS, BagBuilder

from surprise_memory.config import CameraSpec
from surprise_memory.errors import InputError
from surprise_memory.memory.store import EpisodeStore
from surprise_memory.offline.cameras import bag_cameras, camera_name_of_topic

CHANGE_AT = {"front": 50, "rear": 110}
SETTINGS = ["--window", "8", "--warmup", "16", "--gamma", "2.0", "--nms-seconds", "0.5"]
SETTINGS += ["--clip-frames", "8", "--episode-before-seconds", "0.5"]
SETTINGS += ["--episode-after-seconds", "0.5", "--episode-frames", "4"]


@pytest.fixture(scope="module")
def bag(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("two_cameras") / "rec"
    scenes = {n: sf.camera_scene(seed, CHANGE_AT[n]) for seed, n in enumerate(CHANGE_AT)}
    with BagBuilder(path) as b:
        for i, t in enumerate(sf.stamps()):
            b.write("/tf", t, b.tf(t, "map", "base_link", (0.05 * i, 0.0, 0.0)))
            for name, frames in scenes.items():
                msg = b.image(t, frames[i])
                msg.header.frame_id = f"{name}_optical"
                b.write(f"/{name}/image_raw", t + 1000, msg)
    return path


def test_camera_names_come_from_the_topics() -> None:
    assert camera_name_of_topic("/front/image_raw") == "front"
    assert camera_name_of_topic("/camera/left/image_raw/compressed") == "camera_left"
    assert camera_name_of_topic("/rear") == "rear"
    assert camera_name_of_topic("/image_raw") == "image_raw"  # nothing else to name it by
    assert camera_name_of_topic("/9/image") == ""  # not a camera name
    images = ["/front/image_raw", "/rear/image_raw"]
    assert bag_cameras(images, None) == [
        CameraSpec("front", "/front/image_raw"),
        CameraSpec("rear", "/rear/image_raw"),
    ]
    named = bag_cameras(images, [CameraSpec("back", "rear/image_raw", "r_opt", 180.0)])
    assert named == [CameraSpec("back", "/rear/image_raw", "r_opt", 180.0)]
    with pytest.raises(InputError, match="camera 'left': 0 image topics"):
        bag_cameras(images, [CameraSpec("left", "left/image")])
    with pytest.raises(InputError, match="topic /x is not an image topic"):
        bag_cameras(images, [CameraSpec("x", "/x")])
    with pytest.raises(InputError, match="two cameras with one topic: /front/image_raw"):
        bag_cameras(
            images, [CameraSpec("a", "/front/image_raw"), CameraSpec("front", "front/image")]
        )


def test_a_plain_process_says_how_to_take_several_cameras(bag: Path, tmp_path: Path) -> None:
    out = run(tmp_path, "process", str(bag), "--out", "s", *TINY, check=False)
    assert out.returncode != 0 and "--all-cameras" in out.stderr and "--cameras" in out.stderr
    many = run(tmp_path, "process", str(bag), str(bag), "--out", "m", "--all-cameras", check=False)
    assert many.returncode != 0 and "one recording" in many.stderr


@pytest.mark.parametrize(
    "cameras", [["--all-cameras"], ["--cameras", "front:yaw=0,rear:yaw=180"]], ids=["all", "named"]
)
def test_each_camera_is_processed_into_one_store(
    bag: Path, tmp_path: Path, cameras: list[str]
) -> None:
    out = run(
        tmp_path,
        "process",
        str(bag),
        "--out",
        "s",
        "--pose-topic",
        "/tf",
        *cameras,
        *TINY,
        *SETTINGS,
    )
    assert "camera front" in out.stdout and "camera rear" in out.stdout, out.stdout
    record = json.loads((tmp_path / "s" / "run.json").read_text())
    assert record["cameras"]["rear"]["topic"] == "/rear/image_raw"
    assert record["summary"]["frames"] == 2 * sf.N_FRAMES
    assert {e["camera"] for e in record["events"]} == {"front", "rear"}
    for name in CHANGE_AT:  # each camera's own run record and surprise curve
        assert (tmp_path / "s" / "cameras" / name / "scores.csv").is_file()
    named = cameras[0] == "--cameras"
    with EpisodeStore(tmp_path / "s", read_only=True) as store:
        for name, mount in (("front", 0.0), ("rear", 180.0)):
            hits = store.search(camera=name, max_results=50)
            change = sf.stamps()[CHANGE_AT[name]]
            near = [h.episode for h in hits if abs(h.episode.stamp_ns - change) <= 4 * NS // sf.FPS]
            assert near, (name, [h.episode.stamp_ns for h in hits])
            for ep in near:
                assert ep.camera.frame_id == f"{name}_optical" and ep.pose_valid
                if not named:  # no mounting given: where it looked is unknown
                    assert ep.camera.pose is None
                    continue
                yaw = ep.camera.yaw
                assert yaw is not None
                assert abs(math.remainder(yaw - math.radians(mount), 2 * math.pi)) < 1e-6
