"""The launch file read as source (no launch package needed): what it passes is declared.

rclpy ignores a parameter that a node does not declare, so a misspelt or renamed parameter in
the launch file silently does nothing (``device`` never reached the encoder, which declares
``encoder_device``). These tests parse ``launch/surprise_memory.launch.py`` with :mod:`ast`
and check every parameter name it passes against the settings each node declares, for both
shapes (``pipeline:=split`` and ``pipeline:=one_process``).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from surprise_memory.config import NODE_CONFIGS, ConfigError, settings_of
from surprise_memory.nodes.params_file import camera_remappings

LAUNCH_FILE = Path(__file__).resolve().parents[1] / "launch" / "surprise_memory.launch.py"
ROS_PARAMETERS = {"use_sim_time"}  # declared by rclpy itself on every node


def _declared(node: str) -> set[str]:
    return {s.name for cls in NODE_CONFIGS[node] for s in settings_of(cls)} | ROS_PARAMETERS


def _tree() -> ast.Module:
    return ast.parse(LAUNCH_FILE.read_text(), filename=str(LAUNCH_FILE))


def _module_constant(name: str) -> object:
    for stmt in _tree().body:
        target = stmt.target if isinstance(stmt, ast.AnnAssign) else None
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
            target = stmt.targets[0]
        if isinstance(target, ast.Name) and target.id == name and stmt.value is not None:  # type: ignore[attr-defined]
            return ast.literal_eval(stmt.value)  # type: ignore[attr-defined]
    raise AssertionError(f"{LAUNCH_FILE.name} defines no {name}")


def _calls(name: str) -> list[ast.Call]:
    return [
        n
        for n in ast.walk(_tree())
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == name
    ]


def _keyword(call: ast.Call, name: str) -> ast.expr | None:
    return next((k.value for k in call.keywords if k.arg == name), None)


def _dicts_in(expr: ast.expr) -> list[ast.Dict]:
    """The dict literals in ``expr``, and those assigned to the names it uses."""
    names = {n.id for n in ast.walk(expr) if isinstance(n, ast.Name)}
    found = [n for n in ast.walk(expr) if isinstance(n, ast.Dict)]
    for stmt in ast.walk(_tree()):
        if isinstance(stmt, ast.AnnAssign | ast.Assign) and stmt.value is not None:
            targets = [stmt.target] if isinstance(stmt, ast.AnnAssign) else stmt.targets
            if any(isinstance(t, ast.Name) and t.id in names for t in targets):
                found += [n for n in ast.walk(stmt.value) if isinstance(n, ast.Dict)]
    return found


def _ours(call: ast.Call) -> bool:
    """Whether a Node action starts one of our nodes (not rviz2)."""
    package = _keyword(call, "package")
    return isinstance(package, ast.Constant) and package.value == "surprise_memory"


def test_every_parameter_in_a_node_action_is_declared_by_that_node() -> None:
    nodes = [c for c in _calls("Node") + _calls("LifecycleNode") if _ours(c)]
    assert nodes, "no launch_ros Node action found"
    checked = 0
    for call in nodes:
        executable = _keyword(call, "executable")
        if isinstance(executable, ast.Constant):
            targets = [str(executable.value)]
        else:  # one Node action built per node in a loop: a name must suit every node
            targets = list(NODE_CONFIGS)
        params = _keyword(call, "parameters")
        for d in _dicts_in(params) if params is not None else []:
            if not isinstance(d, ast.Dict):
                continue
            for key in d.keys:
                assert isinstance(key, ast.Constant), "parameter names must be literals"
                for node in targets:
                    assert key.value in _declared(node), (
                        f"{LAUNCH_FILE.name} passes '{key.value}' to {node}, which does not "
                        "declare it (rclpy would ignore it)"
                    )
                checked += 1
    assert checked, "no parameter dict found in the Node actions"


def test_every_launch_argument_shortcut_names_a_declared_parameter() -> None:
    mapping = _module_constant("ARGUMENT_PARAMETERS")
    assert isinstance(mapping, dict)
    assert mapping["device"] == {
        "encoder_node": ("encoder_device",),
        "memory_node": ("embedder_device",),
        "pipeline_node": ("encoder_device", "embedder_device"),
    }
    for arg, targets in mapping.items():
        for node, parameters in targets.items():
            for parameter in parameters:
                assert parameter in _declared(node), f"{arg} -> {node}.{parameter} is not declared"


def test_the_one_process_shape_gets_what_the_split_gets() -> None:
    """pipeline:=one_process starts pipeline_node; every shortcut and the camera reach it."""
    shapes = _module_constant("SHAPES")
    assert shapes == {
        "split": ("encoder_node", "scorer_node", "memory_node"),
        "one_process": ("pipeline_node",),
    }
    assert set(NODE_CONFIGS) == {node for nodes in shapes.values() for node in nodes}  # type: ignore[union-attr]
    mapping = _module_constant("ARGUMENT_PARAMETERS")
    assert isinstance(mapping, dict)
    for arg, targets in mapping.items():
        split = {p for node in shapes["split"] for p in targets.get(node, ())}  # type: ignore[index]
        assert set(targets["pipeline_node"]) == split, arg
    assert "pipeline_node" in _module_constant("CAMERA_NODES")  # type: ignore[operator]
    timeouts = _module_constant("SIGTERM_TIMEOUT_S")
    assert isinstance(timeouts, dict)
    assert timeouts["pipeline_node"] == timeouts["memory_node"]  # it stores pending episodes
    # the argument's choices are the shapes, and split stays the default
    (call,) = [
        c for c in _calls("DeclareLaunchArgument") if ast.literal_eval(c.args[0]) == "pipeline"
    ]
    default = _keyword(call, "default_value")
    assert default is not None and ast.literal_eval(default) == "split"
    choices = _keyword(call, "choices")
    assert choices is not None and ast.unparse(choices) == "list(SHAPES)"


def test_the_pipeline_node_declares_the_union_of_the_three() -> None:
    union = set().union(*(_declared(n) for n in ("encoder_node", "scorer_node", "memory_node")))
    assert _declared("pipeline_node") == union


def test_shortcut_arguments_default_to_the_params_file() -> None:
    """An argument left at its default must not override the params file's value."""
    mapping = _module_constant("ARGUMENT_PARAMETERS")
    assert isinstance(mapping, dict)
    defaults = {}
    for call in _calls("DeclareLaunchArgument"):
        name = call.args[0]
        assert isinstance(name, ast.Constant)
        default = _keyword(call, "default_value")
        if name.value in mapping and default is not None:
            defaults[name.value] = ast.literal_eval(default)
    assert set(mapping) <= set(defaults)
    for arg in mapping:
        assert defaults[arg] == "", f"{arg} defaults to {defaults[arg]!r}, not the params file's"


def test_rviz_is_optional_and_opens_the_shipped_config() -> None:
    """``rviz:=true`` opens config/surprise_memory.rviz; off by default (a robot is headless)."""
    defaults = {
        ast.literal_eval(c.args[0]): _keyword(c, "default_value")
        for c in _calls("DeclareLaunchArgument")
    }
    for name, value in (("rviz", "false"), ("rviz_fixed_frame", "map")):
        default = defaults[name]
        assert default is not None and ast.literal_eval(default) == value, name
    config = _module_constant("RVIZ_CONFIG")
    assert isinstance(config, str) and (LAUNCH_FILE.parents[1] / "config" / config).is_file()
    (rviz,) = [c for c in _calls("Node") if not _ours(c)]
    assert ast.literal_eval(_keyword(rviz, "executable")) == "rviz2"  # type: ignore[arg-type]
    arguments = ast.unparse(_keyword(rviz, "arguments"))  # type: ignore[arg-type]
    assert arguments == "['-d', config, '-f', fixed_frame]"


def test_camera_inputs_are_remapped_per_camera() -> None:
    """One unnamed camera: `image` onto image_topic, as ever; named cameras: each one's
    `<name>/image` onto `<name>_image_topic` (default /<name>/image_raw); a camera that
    names its own topic is left alone."""
    given = {"front": "/cam0/image_raw"}
    assert camera_remappings("", "/camera/image_raw", given.get) == [("image", "/camera/image_raw")]
    assert camera_remappings("front,left,rear:topic=/r/img", "/camera/image_raw", given.get) == [
        ("front/image", "/cam0/image_raw"),
        ("left/image", "/left/image_raw"),
    ]
    with pytest.raises(ConfigError, match="camera name"):
        camera_remappings("front,9", "/camera/image_raw", given.get)
    # the launch file reads the cameras from the argument, else from the params file
    source = LAUNCH_FILE.read_text()
    assert 'given["cameras"] or str(one_process_parameters(params_file).get("cameras"' in source
    assert 'f"{name}_image_topic"' in source
