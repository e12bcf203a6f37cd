"""The shipped RViz config and Foxglove layout parse, and show exactly our topics.

``config/surprise_memory.rviz`` (YAML) and ``config/foxglove_layout.json`` must name the
topics the nodes publish under the launch file's namespace, and the launch file's default
camera topic, and (the Foxglove layout) the topics of ``surprise-memory export``, nothing
else: a topic renamed in the code (or the config) fails here. That
the running nodes publish these topics, with the types the displays expect, is checked
over DDS in test_episode_display.py, with :func:`referenced_topics`.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path

import yaml

from surprise_memory.msg import SurpriseScore
from surprise_memory.nodes.episode_display import (
    ARROWS_NS,
    LABELS_NS,
    MARKERS_TOPIC,
    PREVIEW_TOPIC,
)
from surprise_memory.offline.export import EXPORT_TOPICS

ROOT = Path(__file__).resolve().parents[1]
RVIZ = ROOT / "config" / "surprise_memory.rviz"
FOXGLOVE = ROOT / "config" / "foxglove_layout.json"
LAUNCH_FILE = ROOT / "launch" / "surprise_memory.launch.py"
NS = "/surprise_memory"
# what only an exported file has (its frames and markers are on the nodes' own topics)
EXPORT_ONLY = {
    topic
    for role, (topic, _) in EXPORT_TOPICS.items()
    if role in ("pose", "score", "threshold", "info")
}

# what each display needs on the topics the nodes publish (ROS type names, as DDS gives
# them); the Image displays show the preview (the camera is the nodes' input)
TYPES = {
    "rviz_default_plugins/MarkerArray": "visualization_msgs/msg/MarkerArray",
    "3D": "visualization_msgs/msg/MarkerArray",
    "rviz_default_plugins/Image": "sensor_msgs/msg/CompressedImage",
    "Image": "sensor_msgs/msg/CompressedImage",
    "Plot": "surprise_memory/msg/SurpriseScore",
    "RawMessages": "surprise_memory/msg/Episode",
}
"""(the live topics'; the panels of an exported file read :data:`EXPORT_TOPICS`' types)"""


def launch_defaults() -> dict[str, str]:
    """The launch file's namespace and default camera topic, read from its source."""
    tree = ast.parse(LAUNCH_FILE.read_text())
    out = {}
    for call in ast.walk(tree):
        if not isinstance(call, ast.Call) or not isinstance(call.func, ast.Name):
            continue
        words = {k.arg: k.value for k in call.keywords}
        if (
            call.func.id == "DeclareLaunchArgument"
            and ast.literal_eval(call.args[0]) == "image_topic"
        ):
            out["camera"] = ast.literal_eval(words["default_value"])
        if call.func.id == "LifecycleNode":
            out["namespace"] = "/" + ast.literal_eval(words["namespace"])
    return out


def rviz_displays() -> list[dict[str, object]]:
    """The displays of the RViz config."""
    config = yaml.safe_load(RVIZ.read_text())
    return list(config["Visualization Manager"]["Displays"])


def foxglove_layout() -> dict[str, object]:
    """The Foxglove layout, as Foxglove imports it."""
    return dict(json.loads(FOXGLOVE.read_text()))


def referenced_topics() -> dict[str, set[str]]:
    """Every topic the two configs subscribe, and the display kinds that read it."""
    out: dict[str, set[str]] = {}
    for display in rviz_displays():
        topic = display.get("Topic")
        if isinstance(topic, dict):
            out.setdefault(str(topic["Value"]), set()).add(str(display["Class"]))
    for panel_id, config in foxglove_layout()["configById"].items():  # type: ignore[attr-defined]
        kind = panel_id.split("!")[0]
        topics = list(config.get("topics", {}))
        topics += [config["imageMode"]["imageTopic"]] if "imageMode" in config else []
        topics += [p["value"].split(".")[0] for p in config.get("paths", [])]
        topics += [config["topicPath"].split(".")[0]] if "topicPath" in config else []
        for topic in topics:
            out.setdefault(topic, set()).add(kind)
    return out


def test_both_configs_show_exactly_our_topics() -> None:
    launch = launch_defaults()
    assert launch == {"camera": "/camera/image_raw", "namespace": NS}
    ns = launch["namespace"]
    ours = {f"{ns}/{MARKERS_TOPIC}", f"{ns}/{PREVIEW_TOPIC}", f"{ns}/surprise", f"{ns}/episodes"}
    topics = referenced_topics()
    assert set(topics) == ours | {launch["camera"]} | EXPORT_ONLY
    assert topics[f"{ns}/{MARKERS_TOPIC}"] == {"rviz_default_plugins/MarkerArray", "3D"}
    assert topics[f"{ns}/{PREVIEW_TOPIC}"] == {"rviz_default_plugins/Image", "Image"}
    assert topics[launch["camera"]] == {"rviz_default_plugins/Image", "Image"}
    assert topics[f"{ns}/surprise"] == {"Plot"}  # RViz has no plot: rqt_plot, PlotJuggler
    exported = {topic: role for role, (topic, _) in EXPORT_TOPICS.items()}
    assert exported[f"{ns}/{MARKERS_TOPIC}"] == "markers"  # live and exported alike
    assert exported[f"{ns}/{PREVIEW_TOPIC}"] == "frames"


def test_rviz_config_subscribes_as_the_nodes_publish() -> None:
    config = yaml.safe_load(RVIZ.read_text())
    assert config["Visualization Manager"]["Global Options"]["Fixed Frame"] == "map"
    by_name = {d["Name"]: d for d in rviz_displays()}
    markers = by_name["Episodes"]
    assert markers["Class"] == "rviz_default_plugins/MarkerArray"
    # transient local, or a display opened after the episodes were stored sees none
    assert markers["Topic"]["Durability Policy"] == "Transient Local"
    assert markers["Topic"]["Reliability Policy"] == "Reliable"
    assert set(markers["Namespaces"]) == {ARROWS_NS, LABELS_NS}
    preview = by_name["Newest episode"]["Topic"]
    # RViz's Image display picks the transport from the last name: compressed
    assert preview["Value"].rsplit("/", 1)[1] == "compressed"
    assert preview["Durability Policy"] == "Transient Local"
    assert by_name["Camera"]["Topic"]["Reliability Policy"] == "Best Effort"  # sensor data
    for display in rviz_displays():
        assert str(display["Class"]).startswith("rviz_default_plugins/"), display["Name"]
        assert display["Enabled"] is True


def test_foxglove_layout_is_complete_and_plots_score_against_threshold() -> None:
    layout = foxglove_layout()
    panels = layout["configById"]
    assert isinstance(panels, dict)

    def leaves(node: object) -> list[str]:
        if isinstance(node, str):
            return [node]
        assert isinstance(node, dict) and node["direction"] in ("row", "column"), node
        assert 0 < node["splitPercentage"] < 100
        return leaves(node["first"]) + leaves(node["second"])

    assert sorted(leaves(layout["layout"])) == sorted(panels)  # every panel placed, once
    assert {p.split("!")[0] for p in panels} <= set(TYPES)
    plot = panels["Plot!surprise"]
    fields = SurpriseScore.get_fields_and_field_types()
    plotted = {p["value"].split(".", 1)[1] for p in plot["paths"]}
    assert plotted == {"score", "threshold"} and plotted <= set(fields)
    assert all(p["enabled"] is True for p in plot["paths"])  # a path without it draws nothing
    # an exported file: std_msgs/Float64 (its field: data), by log time (no header)
    exported = panels["Plot!episode_surprise"]["paths"]
    want = {f"{EXPORT_TOPICS[r][0]}.data" for r in ("score", "threshold")}
    assert {p["value"] for p in exported} == want
    assert all(p["enabled"] is True and p["timestampMethod"] == "receiveTime" for p in exported)
    assert panels["RawMessages!episode_info"]["topicPath"] == EXPORT_TOPICS["info"][0]
    scene = panels["3D!episodes"]["topics"]
    assert all(t["visible"] is True for t in scene.values())  # only visible topics subscribe
