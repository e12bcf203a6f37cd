"""The one configuration schema: validation, unique names, and the YAML that mirrors it."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import yaml

from surprise_memory.config import (
    ALL_CONFIGS,
    NODE_CONFIGS,
    SPLIT_NODE_CONFIGS,
    CamerasConfig,
    CameraSpec,
    ConfigError,
    GateConfig,
    ScorerConfig,
    iter_settings,
    parse_cameras,
    settings_of,
)
from surprise_memory.nodes.params_file import one_process_parameters

YAML = Path(__file__).resolve().parents[1] / "config" / "surprise_memory.yaml"


def test_setting_names_are_unique_across_components() -> None:
    names = [spec.name for _, spec in iter_settings()]
    assert len(names) == len(set(names)), sorted(n for n in names if names.count(n) > 1)


def test_every_setting_has_a_description_and_its_default_is_valid() -> None:
    for cls in ALL_CONFIGS:
        cls()  # defaults pass their own validation
        for spec in settings_of(cls):
            assert len(spec.description) > 20, spec.name


def test_yaml_lists_every_node_setting_with_the_same_default() -> None:
    params = yaml.safe_load(YAML.read_text())
    assert set(params) == {f"/**/{node}" for node in SPLIT_NODE_CONFIGS}
    for node, classes in NODE_CONFIGS.items():
        if node in SPLIT_NODE_CONFIGS:
            section = params[f"/**/{node}"]["ros__parameters"]
        else:  # pipeline_node: what the launch file gives it from the three sections
            section = one_process_parameters(YAML)
        expected = {s.name: s.default for cls in classes for s in settings_of(cls)}
        assert section == expected, node


def test_pipeline_node_takes_the_split_sections_of_a_params_file(tmp_path: Path) -> None:
    params = yaml.safe_load(YAML.read_text())
    params["/**/encoder_node"]["ros__parameters"]["clip_frames"] = 8
    params["/**/encoder_node"]["ros__parameters"]["input_silent_seconds"] = 3.0
    params["/**/scorer_node"]["ros__parameters"]["gamma"] = 2.5
    params["/**/memory_node"]["ros__parameters"]["input_silent_seconds"] = 7.0
    params["/**/memory_node"]["ros__parameters"]["qos_overrides"] = {
        "/surprise_memory/image": {"subscription": {"depth": 2}}
    }
    params["/**/scorer_node"]["ros__parameters"]["qos_overrides"] = {
        "/odom": {"subscription": {"reliability": "reliable"}}
    }
    params["/**"] = {"ros__parameters": {"use_sim_time": True, "gamma": 9.0}}
    params["/surprise_memory/pipeline_node"] = {"ros__parameters": {"jpeg_quality": 70}}
    params["/**/other_node"] = {"ros__parameters": {"gamma": 4.0}}
    path = tmp_path / "robot.yaml"
    path.write_text(yaml.safe_dump(params))
    merged = one_process_parameters(path)
    assert merged["clip_frames"] == 8 and merged["gamma"] == 2.5  # the scorer's, not /**'s
    assert merged["input_silent_seconds"] == 7.0  # the later section: memory_node
    assert merged["use_sim_time"] is True and merged["jpeg_quality"] == 70
    assert merged["qos_overrides./surprise_memory/image.subscription.depth"] == 2
    assert merged["qos_overrides./odom.subscription.reliability"] == "reliable"


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("- a list", r"expected sections by node name"),
        ("/**/memory_node: {gamma: 2.0}", r"section '/\*\*/memory_node' has no ros__parameters"),
        ("a: [unclosed", r"params file"),
    ],
)
def test_a_bad_params_file_is_named(tmp_path: Path, text: str, match: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=match):
        one_process_parameters(path)
    with pytest.raises(ConfigError, match="No such file"):
        one_process_parameters(tmp_path / "missing.yaml")


@pytest.mark.parametrize(
    ("cls", "values", "match"),
    [
        (ScorerConfig, {"window": 1}, r"window=1: must be >= 2"),
        (ScorerConfig, {"window": 2.5}, r"window=2.5: must be an integer"),
        (ScorerConfig, {"window": True}, r"must be an integer"),
        (GateConfig, {"gamma": "high"}, r"gamma='high': must be a number"),
        (GateConfig, {"nms_seconds": float("nan")}, r"finite"),
        (GateConfig, {"warmup": 10, "history": 5}, r"warmup=10: must be <= history=5"),
    ],
)
def test_invalid_values_name_the_rule(cls: type, values: dict[str, object], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        cls(**values)


def test_from_mapping_takes_its_own_keys_and_coerces() -> None:
    cfg = GateConfig.from_mapping({"gamma": 2, "window": 8, "history": 100.0})
    assert cfg.gamma == 2.0 and isinstance(cfg.gamma, float)
    assert cfg.history == 100 and isinstance(cfg.history, int)
    with pytest.raises(ConfigError, match="unknown gate settings: window"):
        GateConfig.from_mapping({"window": 8}, strict=True)
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.gamma = 3.0  # type: ignore[misc]


def test_cameras_default_to_one_unnamed_camera_on_the_image_input() -> None:
    (only,) = CamerasConfig().specs
    assert only == CameraSpec(name="", topic="image", frame="", yaw_deg=None)
    assert only.prefix == "" and only.label == "the camera"


def test_cameras_by_name_and_with_their_topic_frame_and_yaw() -> None:
    names = CamerasConfig(cameras="front, left,rear").specs
    assert [(s.name, s.topic, s.frame, s.yaw_deg) for s in names] == [
        ("front", "front/image", "", None),
        ("left", "left/image", "", None),
        ("rear", "rear/image", "", None),
    ]
    full = parse_cameras(
        "front:topic=/front/image_raw:frame=front_optical:yaw=0, rear:yaw=-180:topic=/rear/img"
    )
    assert full == (
        CameraSpec("front", "/front/image_raw", "front_optical", 0.0),
        CameraSpec("rear", "/rear/img", "", -180.0),
    )
    assert full[1].prefix == "rear." and full[1].label == "camera 'rear'"
    assert CamerasConfig(cameras="a,b").spec("b") == CameraSpec("b", "b/image")
    assert CamerasConfig(cameras="a,b").spec("c") is None


@pytest.mark.parametrize(
    ("value", "match"),
    [
        ("front,,rear", r"empty entry"),
        ("9front", r"camera name '9front'"),
        ("front-left", r"camera name 'front-left'"),
        ("front,front", r"name front given twice"),
        ("a:topic=/x,b:topic=/x", r"topic /x given twice"),
        ("front:topc=/x", r"'topc=/x' is not one of topic, frame, yaw"),
        ("front:yaw", r"'yaw' is not one of"),
        ("front:yaw=1:yaw=2", r"gives yaw twice"),
        ("front:yaw=left", r"yaw='left': degrees"),
        ("front:yaw=400", r"yaw='400': degrees"),
        ("front:topic=/a b", r"is not a ROS topic name"),
        ("front:topic=/a//b", r"is not a ROS topic name"),
        ("front:frame=a b", r"frame 'a b'"),
    ],
)
def test_a_bad_cameras_value_names_the_rule(value: str, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        CamerasConfig(cameras=value)


def test_every_node_that_takes_camera_frames_or_scores_them_knows_the_cameras() -> None:
    for node in ("encoder_node", "scorer_node", "memory_node", "pipeline_node"):
        assert CamerasConfig in NODE_CONFIGS[node], node
