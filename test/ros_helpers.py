"""Helpers for tests that talk to real processes over DDS: spin with deadlines, run peers."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node

FIXTURES = Path(__file__).parent / "fixtures"


def spin_until(node: Node, done: Callable[[], bool], timeout: float) -> bool:
    """Spin ``node`` until ``done()`` is true or ``timeout`` seconds pass; return ``done()``."""
    executor = SingleThreadedExecutor(context=node.context)
    executor.add_node(node)
    try:
        deadline = time.monotonic() + timeout
        while not done() and time.monotonic() < deadline:
            executor.spin_once(timeout_sec=0.05)
        return done()
    finally:
        executor.remove_node(node)


@contextmanager
def peer_process(
    args: Sequence[str], cwd: Path, name: str = "peer", env: dict[str, str] | None = None
) -> Iterator[subprocess.Popen[str]]:
    """Run a Python program as a child process for the duration of a test.

    ``env`` replaces the environment (default: this process's).

    Its output goes to ``cwd/<name>.log``; on exit it gets SIGINT (clean rclpy shutdown),
    then SIGKILL if it lingers. The log is printed when the test fails, which pytest shows.
    """
    log_path = cwd / f"{name}.log"
    with open(log_path, "w") as log:
        proc = subprocess.Popen(
            [sys.executable, *args],
            cwd=cwd,  # never the repo root: `python -m` would import the source tree
            stdout=log,
            stderr=subprocess.STDOUT,
            text=True,
            env=os.environ.copy() if env is None else env,
        )
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        print(f"--- {name} output ---\n{log_path.read_text()}")


def memory_node_command(params: dict[str, Any], work: Path, namespace: str) -> list[str]:
    """The command of the installed memory_node with ``params`` (written to ``work``)."""
    import yaml

    (work / "params.yaml").write_text(yaml.safe_dump(params))
    args = [node_executable("memory_node"), "--ros-args", "--params-file"]
    return [*args, str(work / "params.yaml"), "-r", f"__ns:={namespace}"]


@contextmanager
def serving_memory_node(
    params: dict[str, Any], work: Path, namespace: str, test_node: str
) -> Iterator[Node]:
    """The installed memory_node with ``params`` in ``namespace``, answering retrievals.

    Initialises rclpy for a test node named ``test_node`` (yielded) and shuts it down after;
    fails the test if the memory node died while it was used.
    """
    import rclpy

    from surprise_memory.agents.ros_client import EpisodicMemoryClient

    command = memory_node_command(params, work, namespace)
    rclpy.init()
    node = Node(test_node)
    try:
        with peer_process(command, work, "memory_node") as proc:
            client = EpisodicMemoryClient(node, f"{namespace}/retrieve_episodes", timeout=60.0)
            client.retrieve(k=1)  # the node is up and serving
            client.destroy()
            yield node
            assert proc.poll() is None, "memory_node died during the tests"
    finally:
        node.destroy_node()
        rclpy.shutdown()


def node_executable(name: str) -> str:
    """Path of an installed node executable (``ros2 run surprise_memory <name>``)."""
    from ament_index_python.packages import get_package_prefix

    path = Path(get_package_prefix("surprise_memory")) / "lib" / "surprise_memory" / name
    assert path.is_file(), f"{path} is not installed: run colcon build"
    return str(path)


def wait_for_subscribers(
    node: Node, publisher: object, count: int = 1, timeout: float = 30.0
) -> None:
    """Spin until ``publisher`` is matched by ``count`` subscriptions, or fail."""
    ok = spin_until(node, lambda: publisher.get_subscription_count() >= count, timeout)  # type: ignore[attr-defined]
    assert ok, f"no subscriber matched {publisher.topic_name} within {timeout} s"  # type: ignore[attr-defined]


def wait_for_publishers(
    node: Node, subscriptions: Iterable[object], count: int = 1, timeout: float = 30.0
) -> None:
    """Spin until each subscription is matched by ``count`` publishers, or fail.

    A message published before its subscription matched is not delivered (volatile
    durability): wait for this before the input that makes the nodes publish.
    """
    subs = list(subscriptions)
    ok = spin_until(
        node,
        lambda: all(s.get_publisher_count() >= count for s in subs),  # type: ignore[attr-defined]
        timeout,
    )
    unmatched = [s.topic_name for s in subs if s.get_publisher_count() < count]  # type: ignore[attr-defined]
    assert ok, f"no publisher matched {unmatched} within {timeout} s"


def include_launch_file(
    work: Path, params: dict[str, Any], **arguments: str
) -> Any:  # launch.actions.IncludeLaunchDescription
    """The installed ``surprise_memory.launch.py``, as the launch_testing tests start it.

    ``params`` is written to ``work/params.yaml`` and passed as ``params_file``, the store
    goes to ``work/store``, the models to the CPU; ``arguments`` adds or overrides launch
    arguments. The launch packages are imported here, so this module stays importable
    where they are not installed.
    """
    import yaml
    from ament_index_python.packages import get_package_share_directory
    from launch.actions import IncludeLaunchDescription
    from launch.launch_description_sources import PythonLaunchDescriptionSource

    work.mkdir(parents=True)
    (work / "params.yaml").write_text(yaml.safe_dump(params))
    share = get_package_share_directory("surprise_memory")
    given = {
        "params_file": str(work / "params.yaml"),
        "store_path": str(work / "store"),
        "device": "cpu",
        **arguments,
    }
    return IncludeLaunchDescription(
        PythonLaunchDescriptionSource(os.path.join(share, "launch", "surprise_memory.launch.py")),
        launch_arguments=given.items(),
    )
