"""``pytest --ros-free``: the part of the suite that needs no ROS 2 (the robot stage).

The robot stage (tools/test_robot.sh) runs the suite under a robot's own Python, where
neither rclpy nor the colcon install exists. With ``--ros-free`` a test module is left
out when it imports ROS 2 at module level (rclpy, the generated interfaces, the nodes,
launch, ros_helpers...: it could not even be imported there), and so is a test marked
``ros`` (it needs ROS 2 inside a module that otherwise does not). What is left out is
named in the run's header, so that a module that starts importing ROS by accident shows
up; test_ros_free.py checks that the core's test modules stay in.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROS_MODULES = frozenset(
    {
        "rclpy",
        "rosidl_runtime_py",
        "ament_index_python",
        "launch",
        "launch_ros",
        "launch_testing",
        "launch_testing_ros",
        "launch_pytest",
        "tf2_ros",
        "builtin_interfaces",
        "std_msgs",
        "sensor_msgs",
        "geometry_msgs",
        "nav_msgs",
        "diagnostic_msgs",
        "lifecycle_msgs",
        "rcl_interfaces",
        "ros_helpers",  # test/ros_helpers.py: rclpy
        "surprise_memory.msg",
        "surprise_memory.srv",
        "surprise_memory.action",  # the generated test action (issue 29)
        "surprise_memory.nodes",
        "surprise_memory.agents.ros_client",
        "surprise_memory.agents.ros_navigation",
    }
)
"""Imports that need ROS 2 (a module or any of its submodules)..."""

ROS_FREE_MODULES = frozenset({"surprise_memory.nodes.params_file"})
"""...except these (the launch file's params-file merge: YAML only)."""

_LEFT_OUT = pytest.StashKey[list[str]]()  # the modules left out, for the header


def _module_level_imports(tree: ast.Module) -> set[str]:
    """The modules a file imports when it is imported (not inside functions or classes)."""
    found: set[str] = set()
    stack: list[ast.stmt] = list(tree.body)
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            # if/try/with blocks at module level run at import too
            stack.extend(c for c in ast.iter_child_nodes(node) if isinstance(c, ast.stmt))
    return found


def ros_imports(path: Path) -> list[str]:
    """The ROS 2 modules ``path`` imports at module level (empty: it imports without ROS)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    return sorted(
        name
        for name in _module_level_imports(tree)
        if _under(name, ROS_MODULES) and not _under(name, ROS_FREE_MODULES)
    )


def _under(name: str, modules: frozenset[str]) -> bool:
    return any(name == m or name.startswith(m + ".") for m in modules)


def pytest_addoption(parser: pytest.Parser) -> None:
    """Add ``--ros-free``."""
    parser.addoption(
        "--ros-free",
        action="store_true",
        help="only the tests that need no ROS 2: leave out modules that import it and "
        "tests marked ros (the robot stage, tools/test_robot.sh)",
    )


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """Under ``--ros-free``, leave out the test modules that import ROS 2."""
    if not config.getoption("ros_free"):
        return None
    if collection_path.suffix != ".py" or not collection_path.name.startswith("test_"):
        return None
    needs = ros_imports(collection_path)
    if needs:
        config.stash.setdefault(_LEFT_OUT, []).append(f"{collection_path.name} ({needs[0]})")
        return True
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under ``--ros-free``, deselect the tests marked ``ros``."""
    if not config.getoption("ros_free"):
        return
    ros = [item for item in items if item.get_closest_marker("ros") is not None]
    if ros:
        config.hook.pytest_deselected(items=ros)
        items[:] = [item for item in items if item.get_closest_marker("ros") is None]


def pytest_report_collectionfinish(config: pytest.Config) -> list[str] | None:
    """Under ``--ros-free``, name the modules left to the main stage."""
    if not config.getoption("ros_free"):
        return None
    left = config.stash.get(_LEFT_OUT, [])
    return [
        f"--ros-free: {len(left)} modules need ROS 2, left out: {', '.join(sorted(left)) or '-'}"
    ]
